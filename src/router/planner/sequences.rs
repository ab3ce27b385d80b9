//! Objects of a shard database named inside expressions: sequences
//! (`NEXTVAL(db.s)`, `LASTVAL(db.s)`, `SETVAL(db.s, n)`, `NEXT VALUE FOR
//! db.s`, `PREVIOUS VALUE FOR db.s`, Oracle-mode `db.s.NEXTVAL` /
//! `CURRVAL`) and stored functions (`db.f(...)`), in any statement,
//! column `DEFAULT`s, generated columns and `CHECK`s of a schema change
//! included. Their database is one more name of the statement: a
//! statement runs on one shard, so a statement of shard 1 may not advance
//! or set a sequence of shard 2 (past the single-shard, pause and fence
//! rules of shard 2), and a table-less `SELECT NEXTVAL(db.s)` goes to the
//! sequence's shard, not to any master. Read from the token stream.

use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::is_system_schema;
use crate::router::plan::{Plan, RouteError, ShardQuery, StatementKind, Target};
use crate::topology::{FleetId, Topology};

/// A shard database named by a sequence or function in the statement.
pub(super) struct Named {
    /// The object as written (`db00002.s`).
    written: String,
    fleet: FleetId,
    shard: u32,
}

/// The shard databases the statement's sequences and qualified function
/// calls name (databases that are not shard databases are left alone).
pub(super) fn named(tokens: &[TokenWithSpan], topo: &Topology) -> Vec<Named> {
    let significant: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let word = |at: usize| match significant.get(at) {
        Some(Token::Word(w)) => Some(w),
        _ => None,
    };
    let keyword = |at: usize, expected: &str| {
        word(at).is_some_and(|w| w.quote_style.is_none() && w.value.eq_ignore_ascii_case(expected))
    };
    let period = |at: usize| matches!(significant.get(at), Some(Token::Period));
    // The database of a `db.name` starting at `at`.
    let qualified = |at: usize| match (word(at), period(at + 1), word(at + 2)) {
        (Some(db), true, Some(name)) => Some((db.value.as_str(), name.value.as_str())),
        _ => None,
    };
    let mut found = Vec::new();
    for i in 0..significant.len() {
        let after_period = i > 0 && period(i - 1);
        let object = if !after_period
            && ["NEXTVAL", "LASTVAL", "SETVAL"]
                .iter()
                .any(|f| keyword(i, f))
            && matches!(significant.get(i + 1), Some(Token::LParen))
        {
            qualified(i + 2)
        } else if (keyword(i, "NEXT") || keyword(i, "PREVIOUS"))
            && keyword(i + 1, "VALUE")
            && keyword(i + 2, "FOR")
        {
            qualified(i + 3)
        } else if after_period
            && (keyword(i, "NEXTVAL") || keyword(i, "CURRVAL"))
            && i >= 4
            && period(i - 3)
        {
            qualified(i - 4)
        } else if matches!(significant.get(i + 3), Some(Token::LParen)) && !after_period {
            // `db.f(`: a stored function (or a table and its column list,
            // named by the statement anyway).
            qualified(i)
        } else {
            None
        };
        let Some((db, name)) = object else {
            continue;
        };
        if is_system_schema(db) {
            continue;
        }
        if let Some((fleet, shard)) = topo.parse_database(db) {
            found.push(Named {
                written: format!("{db}.{name}"),
                fleet,
                shard,
            });
        }
    }
    found
}

/// `plan` with the shard databases `named` by its sequences and functions
/// as names of the statement: a statement on a shard must be on theirs; a
/// table-less one goes to theirs; a read over several shards is refused.
pub(super) fn place(plan: Plan, named: &[Named], topo: &Topology) -> Result<Plan, RouteError> {
    let Some(first) = named.first() else {
        return Ok(plan);
    };
    let db = |fleet: FleetId, shard: u32| {
        topo.fleet(fleet)
            .map(|f| f.database_name(shard))
            .unwrap_or_default()
    };
    match plan {
        Plan::Shard(query) => {
            let target = (query.target.fleet, query.target.shard);
            if let Some(other) = named.iter().find(|n| (n.fleet, n.shard) != target) {
                return Err(RouteError::CrossShard(format!(
                    "{} is in {}, but the statement goes to {}",
                    other.written,
                    db(other.fleet, other.shard),
                    db(target.0, target.1)
                )));
            }
            Ok(Plan::Shard(query))
        }
        Plan::MultiShard(_) => Err(RouteError::CrossShard(format!(
            "{} is in {}, but the read runs on several shards",
            first.written,
            db(first.fleet, first.shard)
        ))),
        Plan::AnyHost {
            sql,
            writes_through_function,
        } => {
            if let Some(other) = named
                .iter()
                .find(|n| (n.fleet, n.shard) != (first.fleet, first.shard))
            {
                return Err(RouteError::CrossShard(format!(
                    "{} is in {}, but {} is in {}",
                    first.written,
                    db(first.fleet, first.shard),
                    other.written,
                    db(other.fleet, other.shard)
                )));
            }
            let host = topo.master_of(first.fleet, first.shard).ok_or_else(|| {
                RouteError::Unsupported(format!("no host serves {}", db(first.fleet, first.shard)))
            })?;
            Ok(Plan::Shard(ShardQuery {
                target: Target {
                    fleet: first.fleet,
                    shard: first.shard,
                    host,
                },
                sql,
                kind: StatementKind::Read,
                compose_insert_id: None,
                writes_through_function,
                local_infile: None,
                leaves_session_state: false,
            }))
        }
        other => Ok(other),
    }
}
