//! The manual's example tables, routed: every row of the "Examples the
//! tests check" section of `docs/reference/statements.md` and
//! `docs/reference/refused.md` is a case of this file, so a routing change
//! that the manual does not follow fails here.
//!
//! A row is `| statement | session | result |`: the statement as a code
//! span; the session as `USE dbNNNNN` or empty; the result as one of
//! - `` dbNNNNN on host:port: `SQL` `` (one shard, the text sent),
//! - `` dbA, dbB, ... merged `` (a read over several shards, in shard order),
//! - `` any master: `SQL` ``,
//! - `the proxy` (a session statement the proxy answers itself),
//! - `` `CODE message` `` (refused; a message ending in `...` is a prefix).

use super::*;
use std::path::PathBuf;

/// The section of each page that holds the checked examples.
const SECTION: &str = "## Examples the tests check";
/// The pages with such a section.
const PAGES: [&str; 2] = ["docs/reference/statements.md", "docs/reference/refused.md"];

/// What the manual writes for `plan`.
fn describe(t: &Topology, plan: &Plan) -> String {
    let database = |target: &Target| {
        t.fleet(target.fleet)
            .map(|fleet| fleet.database_name(target.shard))
            .unwrap_or_else(|| format!("fleet {} shard {}", target.fleet, target.shard))
    };
    match plan {
        Plan::Shard(q) => {
            let host = t.host(q.target.host).map_or("?", |h| h.addr.as_str());
            format!("{} on {host}: `{}`", database(&q.target), q.sql)
        }
        Plan::MultiShard(m) => {
            let parts: Vec<String> = m.parts.iter().map(|p| database(&p.target)).collect();
            format!("{} merged", parts.join(", "))
        }
        Plan::AnyHost { sql, .. } => format!("any master: `{sql}`"),
        Plan::Session(_) => "the proxy".to_owned(),
        Plan::Diagnostics { .. } => "the previous statement's connection".to_owned(),
        Plan::Reject(e) => format!("`{} {e}`", e.code()),
    }
}

/// Whether the manual's `documented` result stands for `actual`.
fn agrees(documented: &str, actual: &str) -> bool {
    match documented
        .strip_suffix("...`")
        .and_then(|prefix| prefix.strip_prefix('`'))
    {
        Some(prefix) => actual
            .strip_prefix('`')
            .is_some_and(|rest| rest.starts_with(prefix)),
        None => documented == actual,
    }
}

/// The cell's code span without its backticks (a span of one or more
/// backticks, as Markdown allows, so a statement may hold one).
fn code_span(cell: &str) -> Option<&str> {
    let ticks = cell.chars().take_while(|c| *c == '`').count();
    if ticks == 0 {
        return None;
    }
    let fence = &cell[..ticks];
    cell[ticks..]
        .strip_suffix(fence)
        .map(|inner| inner.strip_prefix(' ').unwrap_or(inner))
        .map(|inner| inner.strip_suffix(' ').unwrap_or(inner))
}

/// The example rows of `page`: (statement, `USE` database, result).
fn examples(page: &str) -> Vec<(String, Option<String>, String)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            inside = line == SECTION;
            continue;
        }
        if !inside || !line.starts_with('|') || line.starts_with("| ---") {
            continue;
        }
        let cells: Vec<String> = line
            .trim()
            .trim_matches('|')
            .replace("\\|", "\u{0}")
            .split('|')
            .map(|cell| cell.trim().replace('\u{0}', "|"))
            .collect();
        let [statement, session, result] = cells.as_slice() else {
            panic!("{page}: an example row has not three cells: {line}");
        };
        let Some(sql) = code_span(statement) else {
            continue; // the header row
        };
        let use_db = code_span(session)
            .map(|s| s.strip_prefix("USE ").unwrap_or(s).to_owned())
            .filter(|db| !db.is_empty());
        rows.push((sql.to_owned(), use_db, result.clone()));
    }
    rows
}

/// The routing table of `config/shardgate.yaml`, the manual's example,
/// with the columns of `pins`, `boards` and `users` known.
fn example_topology() -> Topology {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/shardgate.yaml");
    match Topology::load(&path) {
        Ok(topology) => with_object_columns(topology),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

#[test]
fn the_manuals_examples_route_as_written() {
    let t = example_topology();
    let mut failures = Vec::new();
    let mut count = 0;
    for page in PAGES {
        let rows = examples(page);
        assert!(rows.len() >= 5, "{page}: no `{SECTION}` table found");
        for (sql, use_db, documented) in rows {
            count += 1;
            let ctx = RouteContext {
                current_db: use_db
                    .as_deref()
                    .map(|db| t.parse_database(db).expect("example USE database")),
                ..RouteContext::default()
            };
            let actual = describe(&t, &route(sql.as_str(), &t, &ctx, &mut Fixed(3429)));
            if !agrees(&documented, &actual) {
                failures.push(format!(
                    "{page}: `{sql}`\n  documented: {documented}\n  routed:     {actual}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} examples of the manual no longer route as written:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_documented_prefix_agrees_only_with_what_it_begins() {
    assert!(agrees(
        "`1105 shardgate: no...`",
        "`1105 shardgate: no shard key`"
    ));
    assert!(!agrees(
        "`1105 shardgate: yes...`",
        "`1105 shardgate: no shard key`"
    ));
    assert!(!agrees("`1105 x`", "`1105 xy`"));
    assert!(agrees("the proxy", "the proxy"));
    assert_eq!(code_span("`` a`b ``"), Some("a`b"));
    assert_eq!(code_span("plain"), None);
}
