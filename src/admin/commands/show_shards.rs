//! `SHOW SHARDS [LIKE 'pattern']` and `SHOW SHARD n [IN fleet]`: a row per
//! shard with its database, host range, master (and its health), replica,
//! and whether it is paused.

use crate::admin::{AdminError, Answer, Cell};
use crate::engine::pause::PausedRange;
use crate::engine::Engine;
use crate::topology::{Fleet, Topology};

const COLUMNS: &[&str] = &[
    "fleet",
    "shard",
    "database",
    "range",
    "master",
    "replica",
    "master_health",
    "paused",
];

/// Every shard of every fleet, or those whose number or database name
/// matches the SQL `LIKE` pattern (case-insensitive).
pub fn all(engine: &Engine, like: Option<&str>) -> Answer {
    let topology = engine.topology.load();
    let pattern = like.map(LikePattern::new);
    let state = State::new(engine, &topology);
    let mut answer = Answer::new(COLUMNS);
    for fleet in &topology.fleets {
        for shard in 0..fleet.shard_count {
            let database = fleet.database_name(shard);
            if let Some(pattern) = &pattern {
                if !pattern.matches(&shard.to_string()) && !pattern.matches(&database) {
                    continue;
                }
            }
            answer.push(state.row(fleet, shard, database));
        }
    }
    answer
}

/// One shard: a row per fleet that has it (or only `fleet`'s).
pub fn one(engine: &Engine, shard: u32, fleet: Option<&str>) -> Result<Answer, AdminError> {
    let topology = engine.topology.load();
    if let Some(name) = fleet {
        if topology.fleet_by_name(name).is_none() {
            return Err(unknown_fleet(&topology, name));
        }
    }
    let state = State::new(engine, &topology);
    let mut answer = Answer::new(COLUMNS);
    for candidate in &topology.fleets {
        if fleet.is_some_and(|name| name != candidate.name) || shard >= candidate.shard_count {
            continue;
        }
        answer.push(state.row(candidate, shard, candidate.database_name(shard)));
    }
    if answer.rows.is_empty() {
        let counts: Vec<String> = topology
            .fleets
            .iter()
            .filter(|f| fleet.is_none_or(|name| name == f.name))
            .map(|f| {
                format!(
                    "{} has shards 0-{}",
                    f.name,
                    f.shard_count.saturating_sub(1)
                )
            })
            .collect();
        return Err(AdminError::Argument(format!(
            "no fleet has shard {shard} ({})",
            counts.join(", ")
        )));
    }
    Ok(answer)
}

/// The error for a fleet name the config does not have.
pub fn unknown_fleet(topology: &Topology, name: &str) -> AdminError {
    let names: Vec<&str> = topology.fleets.iter().map(|f| f.name.as_str()).collect();
    AdminError::Argument(format!(
        "no fleet named '{name}'; the fleets are: {}",
        names.join(", ")
    ))
}

/// What the rows need besides the topology: each host's health and the
/// paused ranges, read once per command.
struct State<'t> {
    topology: &'t Topology,
    health: Vec<String>,
    paused: Vec<PausedRange>,
}

impl<'t> State<'t> {
    fn new(engine: &Engine, topology: &'t Topology) -> Self {
        let health = topology
            .hosts
            .iter()
            .map(|host| engine.backends.pool(&host.addr).health().state.to_string())
            .collect();
        Self {
            topology,
            health,
            paused: engine.pauses.paused(),
        }
    }

    fn row(&self, fleet: &Fleet, shard: u32, database: String) -> Vec<Cell> {
        let topology = self.topology;
        let range = fleet.range_of(shard);
        let addr = |host| topology.host(host).map(|h| h.addr.clone());
        let paused = self
            .paused
            .iter()
            .find(|p| p.fleet == fleet.name && p.first <= shard && shard <= p.last)
            .map_or_else(
                || "no".to_owned(),
                |p| format!("yes ({} waiting)", p.waiting),
            );
        vec![
            fleet.name.as_str().into(),
            shard.into(),
            database.into(),
            range.map(|r| format!("{}-{}", r.first, r.last)).into(),
            range.and_then(|r| addr(r.master)).into(),
            range.and_then(|r| r.replica).and_then(addr).into(),
            range
                .and_then(|r| self.health.get(r.master))
                .map(String::as_str)
                .into(),
            paused.into(),
        ]
    }
}

/// A SQL `LIKE` pattern: `%` any run, `_` one character, `\` escapes;
/// compared case-insensitively.
struct LikePattern {
    parts: Vec<LikePart>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LikePart {
    AnyRun,
    AnyOne,
    Literal(char),
}

impl LikePattern {
    fn new(pattern: &str) -> Self {
        let mut parts = Vec::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            parts.push(match c {
                '%' => LikePart::AnyRun,
                '_' => LikePart::AnyOne,
                '\\' => LikePart::Literal(chars.next().unwrap_or('\\').to_ascii_lowercase()),
                other => LikePart::Literal(other.to_ascii_lowercase()),
            });
        }
        Self { parts }
    }

    /// Greedy matching with backtracking to the last `%`.
    fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
        let (mut p, mut t) = (0, 0);
        let mut resume: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.parts.get(p) {
                Some(LikePart::AnyRun) => {
                    resume = Some((p, t));
                    p += 1;
                }
                Some(LikePart::AnyOne) => {
                    p += 1;
                    t += 1;
                }
                Some(LikePart::Literal(c)) if *c == text[t] => {
                    p += 1;
                    t += 1;
                }
                _ => match resume {
                    Some((star, from)) => {
                        p = star + 1;
                        t = from + 1;
                        resume = Some((star, from + 1));
                    }
                    None => return false,
                },
            }
        }
        self.parts[p..].iter().all(|part| *part == LikePart::AnyRun)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn like(pattern: &str, text: &str) -> bool {
        LikePattern::new(pattern).matches(text)
    }

    #[test]
    fn like_patterns() {
        assert!(like("db0342%", "db03429"));
        assert!(like("db0342%", "db0342"));
        assert!(like("DB0342%", "db03421"));
        assert!(!like("db0342%", "msdb03429"));
        assert!(like("%db0342_", "msdb03429"));
        assert!(like("3429", "3429"));
        assert!(!like("3429", "34290"));
        assert!(like("34_9", "3419"));
        assert!(like("%", ""));
        assert!(!like("_", ""));
        assert!(like("%9%9", "3999"));
        assert!(like("a\\%b", "a%b"));
        assert!(!like("a\\%b", "axb"));
        assert!(like("a\\_", "a_"));
        assert!(!like("a\\_", "ab"));
    }
}
