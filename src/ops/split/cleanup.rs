//! The cleanup phase: the target stops replicating the source and forgets
//! it, then drops the copied databases it does not own; the source drops
//! the range's databases (or, with `--keep-moved`, keeps them renamed to
//! `_moved_<name>`). Replication goes first: a drop on the source must not
//! reach the target. Every step is idempotent (`IF EXISTS`).

use std::fmt;

use mysql_async::prelude::Queryable;

use super::state::SplitState;
use super::{copy::replication_problem, databases, failed, run, Login, SplitError};
use crate::ops::quote_ident;

/// The prefix `--keep-moved` gives the range's databases on the source.
pub const MOVED_PREFIX: &str = "_moved_";

/// One database the cleanup removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The server.
    pub host: String,
    /// The database.
    pub database: String,
    /// Renamed to `_moved_<database>` instead of dropped.
    pub keep: bool,
}

impl fmt::Display for Removal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.keep {
            write!(
                f,
                "rename\t{}\t{} -> {MOVED_PREFIX}{}",
                self.host, self.database, self.database
            )
        } else {
            write!(f, "drop\t{}\t{}", self.host, self.database)
        }
    }
}

/// Every removal, in order: on the target the copied databases outside the
/// range, on the source the range's.
pub fn cleanup_plan(state: &SplitState, keep_moved: bool) -> Vec<Removal> {
    let on_target = state
        .copied
        .iter()
        .filter(|d| !state.moved.contains(d))
        .map(|d| Removal {
            host: state.target.clone(),
            database: d.clone(),
            keep: false,
        });
    let on_source = state.moved.iter().map(|d| Removal {
        host: state.source.clone(),
        database: d.clone(),
        keep: keep_moved,
    });
    on_target.chain(on_source).collect()
}

/// Runs the cleanup; `log` hears of each step as it is done.
pub async fn cleanup(
    login: &Login,
    state: &SplitState,
    keep_moved: bool,
    log: &(dyn Fn(String) + Sync),
) -> Result<Vec<Removal>, SplitError> {
    let (s, t) = (state.source.as_str(), state.target.as_str());
    let mut target = login.connect(t).await?;
    let mut source = login.connect(s).await?;
    let result = async {
        let problem = replication_problem(&mut target, t).await?;
        let configured = !problem
            .as_deref()
            .is_some_and(|p| p.starts_with("replication is not configured"));
        if configured {
            run(&mut target, t, "STOP SLAVE").await?;
            run(&mut target, t, "RESET SLAVE ALL").await?;
            log(format!(
                "{t}: STOP SLAVE; RESET SLAVE ALL (no longer replicates {s})"
            ));
        }
        let plan = cleanup_plan(state, keep_moved);
        let on_source = databases(&mut source, s).await?;
        for removal in &plan {
            let (conn, host) = if removal.host == t {
                (&mut target, t)
            } else {
                (&mut source, s)
            };
            let db = quote_ident(&removal.database);
            if removal.keep && on_source.contains(&removal.database) {
                let kept = quote_ident(&format!("{MOVED_PREFIX}{}", removal.database));
                run(conn, host, &format!("CREATE DATABASE IF NOT EXISTS {kept}")).await?;
                let tables: Vec<String> = conn
                    .exec(
                        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?",
                        (&removal.database,),
                    )
                    .await
                    .map_err(failed(host, format!("listing the tables of {db}")))?;
                if !tables.is_empty() {
                    let renames: Vec<String> = tables
                        .iter()
                        .map(|table| {
                            let table = quote_ident(table);
                            format!("{db}.{table} TO {kept}.{table}")
                        })
                        .collect();
                    run(conn, host, &format!("RENAME TABLE {}", renames.join(", "))).await?;
                }
            }
            run(conn, host, &format!("DROP DATABASE IF EXISTS {db}")).await?;
            log(removal.to_string());
        }
        Ok(plan)
    }
    .await;
    let _ = source.disconnect().await;
    let _ = target.disconnect().await;
    result
}

#[cfg(test)]
mod tests {
    use super::super::state::Phase;
    use super::*;

    #[test]
    fn the_target_drops_what_it_does_not_own_and_the_source_the_range() {
        let state = SplitState {
            fleet: "main".into(),
            first: 2,
            last: 3,
            source: "s:1".into(),
            target: "t:2".into(),
            phase: Phase::CutOver,
            moved: vec!["sp02".into(), "sp03".into()],
            copied: vec![
                "other".into(),
                "sp00".into(),
                "sp01".into(),
                "sp02".into(),
                "sp03".into(),
            ],
            gtid: None,
            cut_over_at: Some(0),
        };
        let lines: Vec<String> = cleanup_plan(&state, false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            vec![
                "drop\tt:2\tother",
                "drop\tt:2\tsp00",
                "drop\tt:2\tsp01",
                "drop\ts:1\tsp02",
                "drop\ts:1\tsp03"
            ]
        );
        let kept: Vec<String> = cleanup_plan(&state, true)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(kept[3], "rename\ts:1\tsp02 -> _moved_sp02");
    }
}
