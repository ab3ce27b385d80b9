//! `LOAD DATA` / `LOAD XML`: sqlparser does not read them, so they are
//! read here from the tokens MariaDB's lexer agreed on.
//!
//! Only `LOCAL` (the client's file, relayed by the proxy) into one table of
//! one explicit shard database (`db03429.pins`, or `pins` under `USE`) is
//! planned, as a write whose text is sent as written (the table qualified
//! under `USE`); the plan carries the file name, the only one the server
//! may then ask the client for. A server-side `INFILE` (a file on the
//! server's host) is refused, as is anything after the table that could
//! reach beyond it: a qualified name, a subquery, a lock or sequence
//! function.

use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::tokens::{is_private_schema, private_schema_error};
use super::{apply, is_system_schema, unsupported, Env};
use crate::router::hints::Hints;
use crate::router::lex::PLACEHOLDER;
use crate::router::plan::{Plan, RouteError, ShardQuery, StatementKind};
use crate::router::text::Edits;

/// Functions whose effect outlives the statement or reaches another object
/// (locks held on a pooled connection, sequences).
const REFUSED_FUNCTIONS: [&str; 8] = [
    "GET_LOCK",
    "RELEASE_LOCK",
    "RELEASE_ALL_LOCKS",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "NEXTVAL",
    "SETVAL",
    "LASTVAL",
];

/// Words that start a query or name another table after the target table.
const REFUSED_WORDS: [&str; 6] = ["SELECT", "WITH", "VALUES", "TABLE", "NEXT", "PREVIOUS"];

fn load_refused(what: impl std::fmt::Display) -> RouteError {
    unsupported(format!(
        "{what}; shardgate relays LOAD DATA LOCAL INFILE 'file' INTO TABLE dbNNNNN.table (or the table under USE dbNNNNN) with column lists, FIELDS/LINES options and SET col = expression"
    ))
}

/// Plans a statement starting with `LOAD`.
pub(super) fn plan(
    env: Env<'_>,
    tokens: &[TokenWithSpan],
    mut edits: Edits,
    hints: &Hints,
) -> Result<Plan, RouteError> {
    if env.prepare {
        return Err(unsupported(
            "LOAD DATA as a prepared statement (the server does not prepare it either); send it as a query",
        ));
    }
    if !hints.hints.is_empty() {
        return Err(load_refused(
            "a hint on LOAD DATA; name the shard database instead",
        ));
    }
    let significant: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let word = |i: usize| match significant.get(i).map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let mut at = 1;
    if !matches!(word(at).as_deref(), Some("DATA" | "XML")) {
        return Err(load_refused("LOAD without DATA or XML"));
    }
    at += 1;
    if matches!(word(at).as_deref(), Some("LOW_PRIORITY" | "CONCURRENT")) {
        at += 1;
    }
    if word(at).as_deref() != Some("LOCAL") {
        return Err(unsupported(
            "LOAD DATA INFILE without LOCAL reads a file on the server's host; send LOAD DATA LOCAL INFILE, which reads the client's file",
        ));
    }
    at += 1;
    if word(at).as_deref() != Some("INFILE") {
        return Err(load_refused("LOAD DATA LOCAL without INFILE"));
    }
    at += 1;
    let file = match significant.get(at).map(|t| &t.token) {
        Some(Token::SingleQuotedString(s)) => s.clone(),
        Some(Token::DoubleQuotedString(s)) if !env.ctx.lex.ansi_quotes => s.clone(),
        _ => {
            return Err(load_refused(
                "LOAD DATA LOCAL INFILE without a quoted file name",
            ))
        }
    };
    if file.as_bytes().contains(&PLACEHOLDER) {
        return Err(unsupported(
            "a LOAD DATA file name with bytes shardgate cannot read as text of the connection's character set; name the file in ASCII or use a utf8mb4 connection",
        ));
    }
    at += 1;
    if matches!(word(at).as_deref(), Some("REPLACE" | "IGNORE")) {
        at += 1;
    }
    if word(at).as_deref() != Some("INTO") || word(at + 1).as_deref() != Some("TABLE") {
        return Err(load_refused("LOAD DATA without INTO TABLE"));
    }
    at += 2;
    let name = |i: usize| match significant.get(i) {
        Some(TokenWithSpan {
            token: Token::Word(w),
            span,
        }) => Some((w.value.clone(), *span)),
        _ => None,
    };
    let (first, first_span) =
        name(at).ok_or_else(|| load_refused("LOAD DATA without a table name"))?;
    let qualified = matches!(
        significant.get(at + 1).map(|t| &t.token),
        Some(Token::Period)
    );
    let (database, table) = if qualified {
        let (table, _) =
            name(at + 2).ok_or_else(|| load_refused("a table name after the period"))?;
        at += 3;
        (Some(first), table)
    } else {
        at += 1;
        (None, first)
    };
    check_rest(&significant[at..])?;

    let (fleet, shard) = match &database {
        Some(db) if is_private_schema(db) || is_system_schema(db) => {
            return Err(private_schema_error("LOAD", db, &table))
        }
        Some(db) => env
            .topo
            .parse_database(db)
            .ok_or_else(|| RouteError::UnknownDatabase(db.clone()))?,
        None => match env.ctx.current_db {
            Some(current) => current,
            None => {
                return Err(match env.topo.table(&table) {
                    Some(rule) => RouteError::NoShardKey {
                        table: rule.name.clone(),
                        expected: format!(
                            "a shard database: LOAD DATA LOCAL INFILE ... INTO TABLE {}.{}, or USE {} first",
                            env.database_pattern(rule.fleet),
                            rule.name,
                            env.database_pattern(rule.fleet)
                        ),
                    },
                    None => RouteError::UnknownTable(table),
                })
            }
        },
    };
    if let Some(rule) = env.topo.table(&table) {
        env.check_fleet(rule, fleet, shard, |db| format!("LOAD DATA names {db}"))?;
    }
    if database.is_none() {
        let start = env.range(first_span)?.start;
        edits.insert(start, format!("{}.", env.database_name(fleet, shard)));
    }
    Ok(Plan::Shard(ShardQuery {
        target: env.target(fleet, shard)?,
        sql: apply(edits, env.src.original)?,
        kind: StatementKind::Write,
        compose_insert_id: None,
        writes_through_function: false,
        // Its SET clause may assign user variables.
        leaves_session_state: true,
        local_infile: Some(file.into_bytes()),
    }))
}

/// Refuses what may follow the table but reach beyond it: another
/// statement, a qualified name, a subquery, a lock or sequence function.
fn check_rest(rest: &[&TokenWithSpan]) -> Result<(), RouteError> {
    for (i, token) in rest.iter().enumerate() {
        match &token.token {
            Token::SemiColon if i + 1 < rest.len() => {
                return Err(RouteError::Syntax(
                    "several statements in one query; send them one at a time".to_owned(),
                ))
            }
            Token::Period => {
                return Err(load_refused(
                    "a qualified name after the table of LOAD DATA (it would reach beyond the table's shard database)",
                ))
            }
            Token::Word(w) if w.quote_style.is_none() => {
                let upper = w.value.to_ascii_uppercase();
                if REFUSED_WORDS.contains(&upper.as_str()) {
                    return Err(load_refused(format!(
                        "{upper} after the table of LOAD DATA (a subquery or another table)"
                    )));
                }
                let call = matches!(rest.get(i + 1).map(|t| &t.token), Some(Token::LParen));
                if call && REFUSED_FUNCTIONS.contains(&upper.as_str()) {
                    return Err(load_refused(format!(
                        "{upper}() in LOAD DATA (a lock or a sequence outlives the statement)"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}
