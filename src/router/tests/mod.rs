//! Table-driven router tests: statement → plan, target and SQL text. The
//! fixtures and checkers are here; the cases are split by statement family.

use super::*;
use crate::id::mod_shard;
use crate::topology::tests::{load, SPEC_YAML};
use std::sync::Arc;

use crate::topology::columns::{SharedColumns, TableColumns};
use crate::topology::Topology;

mod documented;
mod fast_path;
mod function_writes;
mod insert;
mod keys;
mod lexing;
mod load_data;
mod locking;
mod marked;
mod multi_shard;
mod multi_shard_refusals;
mod prepared;
mod proxy_info;
mod robustness;
mod scatter;
mod schema_changes;
mod session;
mod star;
mod time_ids;
mod unparsed_schema_changes;

/// A fleet with no open range, for placement errors.
const CLOSED_FLEET: &str = r#"  closed:
    shards: 16
    database: "cl{:03}"
    hosts:
      - { range: [0, 15], master: 127.0.0.1:3311 }
"#;

/// The example configuration (the topology tests' fixture), plus fleet
/// `closed` with no open range and object table `notes` (type `note`) on it;
/// the columns of `pins`, `boards` and `users` are known (`local_id, data,
/// ts`), those of `notes` are not.
fn topo() -> Topology {
    let yaml = SPEC_YAML
        .replacen("user: 3 }", "user: 3, note: 4 }", 1)
        .replacen("\ntables:\n", &format!("\n{CLOSED_FLEET}tables:\n"), 1)
        + "  notes:           { fleet: closed, object: note }\n";
    assert!(
        yaml.contains("note: 4") && yaml.contains(CLOSED_FLEET),
        "SPEC_YAML no longer has the shape this extends:\n{yaml}"
    );
    with_object_columns(load(&yaml))
}

/// `topology` with the columns of `pins`, `boards` and `users` of fleet
/// `main` known (`local_id, data, ts`), as the proxy reads them at start.
fn with_object_columns(mut topology: Topology) -> Topology {
    let mut columns = TableColumns::default();
    for table in ["pins", "boards", "users"] {
        columns.insert(
            "main",
            table,
            vec!["local_id".into(), "data".into(), "ts".into()],
        );
    }
    topology.columns = Arc::new(SharedColumns::with(columns));
    topology
}

const fn id(shard: u64, type_id: u64, local: u64) -> u64 {
    crate::id::compose(shard as u32, type_id as u16, local)
}

/// The reference ID: shard 3429, type 1 (pin), local 7075733.
const PIN: u64 = 241294492511762325;
const PIN_B: u64 = id(3429, 1, 5);
const PIN_FAR: u64 = id(12, 1, 9);
const BOARD: u64 = id(3429, 2, 77);
const BOARD_FAR: u64 = id(100, 2, 1);
/// A board on shard 3429, the COLOCATE hint's example.
const COLOCATE: u64 = 241294561224164665;

/// Always chooses the same shard (clamped to the range).
struct Fixed(u32);

impl Placement for Fixed {
    fn choose(&mut self, first: u32, last: u32) -> u32 {
        self.0.clamp(first, last)
    }
}

#[derive(Debug)]
enum Expect {
    /// Runs on the shard whose database is named, with this text and kind.
    Shard(&'static str, String, StatementKind),
    /// Runs anywhere with this text.
    Any(String),
    /// Handled by the proxy.
    Session(SessionAction),
    /// About the previous statement, with this text.
    Diagnostics(String),
    /// Refused with this variant, the message containing the text.
    Reject(&'static str, String),
    /// Runs on several shards: each part's database and text (kind Read),
    /// in order, and the merge.
    Multi(Vec<(String, String)>, Merge),
}

fn variant(e: &RouteError) -> &'static str {
    match e {
        RouteError::Syntax(_) => "Syntax",
        RouteError::EmptyQuery => "EmptyQuery",
        RouteError::UnknownTable(_) => "UnknownTable",
        RouteError::UnknownDatabase(_) => "UnknownDatabase",
        RouteError::NoShardKey { .. } => "NoShardKey",
        RouteError::BadId { .. } => "BadId",
        RouteError::BadHint { .. } => "BadHint",
        RouteError::CrossShard(_) => "CrossShard",
        RouteError::Unsupported(_) => "Unsupported",
        RouteError::TooDeep(_) => "TooDeep",
        RouteError::SystemSchema { .. } => "SystemSchema",
        RouteError::Unreadable(_) => "Unreadable",
    }
}

fn shard(db: &'static str, sql: impl Into<String>) -> Expect {
    Expect::Shard(db, sql.into(), StatementKind::Read)
}
fn write(db: &'static str, sql: impl Into<String>) -> Expect {
    Expect::Shard(db, sql.into(), StatementKind::Write)
}
fn ddl(db: &'static str, sql: impl Into<String>) -> Expect {
    Expect::Shard(db, sql.into(), StatementKind::SchemaChange)
}
fn locking(db: &'static str, sql: impl Into<String>) -> Expect {
    Expect::Shard(db, sql.into(), StatementKind::LockingRead)
}
/// A SET the session records: `vars` named, the text kept, replayed by
/// value when `computed`.
fn set_session(vars: &[&str], sql: &str, computed: bool) -> (String, Option<&'static str>, Expect) {
    c(
        sql,
        Expect::Session(SessionAction::SetSession {
            variables: vars.iter().map(|v| v.to_string()).collect(),
            sql: sql.into(),
            autocommit: None,
            writes_through_function: false,
            computed,
            evaluates: crate::router::SetEvaluation {
                calls: sql.contains('('),
                ..Default::default()
            },
        }),
    )
}

fn any(sql: impl Into<String>) -> Expect {
    Expect::Any(sql.into())
}
fn reject(kind: &'static str, contains: impl Into<String>) -> Expect {
    Expect::Reject(kind, contains.into())
}

/// Checks one case; returns a description of the mismatch, if any.
fn check(t: &Topology, sql: &str, use_db: Option<&str>, expect: &Expect) -> Option<String> {
    check_plan(t, sql, use_db, expect, false)
}

/// [`check`] with [`route`], or with [`route_prepare`] when `prepare`.
fn check_plan(
    t: &Topology,
    sql: &str,
    use_db: Option<&str>,
    expect: &Expect,
    prepare: bool,
) -> Option<String> {
    let ctx = RouteContext {
        current_db: use_db.map(|db| t.parse_database(db).expect("test USE database")),
        ..RouteContext::default()
    };
    let plan = if prepare {
        route_prepare(sql, t, &ctx)
    } else {
        route(sql, t, &ctx, &mut Fixed(3429))
    };
    let ok = match (expect, &plan) {
        (Expect::Shard(db, text, kind), Plan::Shard(q)) => {
            let (fleet, shard) = t.parse_database(db).expect("test database name");
            q.target.fleet == fleet
                && q.target.shard == shard
                && Some(q.target.host) == t.master_of(fleet, shard)
                && &q.sql == text
                && q.kind == *kind
        }
        (Expect::Any(text), Plan::AnyHost { sql, .. }) => sql == text,
        (Expect::Session(action), Plan::Session(got)) => action == got,
        (Expect::Diagnostics(text), Plan::Diagnostics { sql, .. }) => sql == text,
        (Expect::Reject(kind, contains), Plan::Reject(e)) => {
            variant(e) == *kind && e.to_string().contains(contains.as_str())
        }
        (Expect::Multi(parts, merge), Plan::MultiShard(m)) => {
            m.merge == *merge
                && m.parts.len() == parts.len()
                && m.parts.iter().zip(parts).all(|(q, (db, text))| {
                    let (fleet, shard) = t.parse_database(db).expect("test database name");
                    q.target.fleet == fleet
                        && q.target.shard == shard
                        && Some(q.target.host) == t.master_of(fleet, shard)
                        && &q.sql == text
                        && q.kind == StatementKind::Read
                        && q.compose_insert_id.is_none()
                })
        }
        _ => false,
    };
    if !ok {
        return Some(format!(
            "{sql:?} (USE {use_db:?})\n  expected {expect:?}\n  got      {}",
            short(&plan)
        ));
    }
    // Every case also through the fast path, with other literals.
    if prepare {
        None
    } else {
        fast_path::equivalent(t, sql, use_db, false)
    }
}

/// A plan for failure messages: a scatter's thousands of parts cut short.
fn short(plan: &Plan) -> String {
    match plan {
        Plan::MultiShard(m) if m.parts.len() > 6 => format!(
            "MultiShard({} parts; first {:?}; last {:?}; merge {:?})",
            m.parts.len(),
            m.parts.first(),
            m.parts.last(),
            m.merge
        ),
        _ => format!("{plan:?}"),
    }
}

fn run(cases: Vec<(String, Option<&str>, Expect)>) {
    run_cases(&topo(), cases, false);
}

fn c(sql: impl Into<String>, expect: Expect) -> (String, Option<&'static str>, Expect) {
    (sql.into(), None, expect)
}

fn u(
    db: &'static str,
    sql: impl Into<String>,
    expect: Expect,
) -> (String, Option<&'static str>, Expect) {
    (sql.into(), Some(db), expect)
}

const COMPOSED: &str = "((3429<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615))";

/// The composed ID of a pin (type 1) on `shard`.
fn composed(shard: u32) -> String {
    format!("(({shard}<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615))")
}

/// Like [`run`], with [`route_prepare`].
fn run_prepare(t: &Topology, cases: Vec<(String, Option<&str>, Expect)>) {
    run_cases(t, cases, true);
}

/// Checks every case with [`check_plan`] and fails listing all that differ.
fn run_cases(t: &Topology, cases: Vec<(String, Option<&str>, Expect)>, prepare: bool) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(sql, db, expect)| check_plan(t, sql, *db, expect, prepare))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Substitutes `values` (SQL literals) into the `?` markers of `sql`.
fn bind(sql: &str, values: &[&str]) -> String {
    let ranges = placeholders(sql, &LexMode::default()).expect("markers found");
    assert_eq!(ranges.len(), values.len(), "{sql}: marker count");
    let mut out = String::new();
    let mut pos = 0;
    for (range, value) in ranges.into_iter().zip(values) {
        out.push_str(&sql[pos..range.start]);
        out.push_str(value);
        pos = range.end;
    }
    out.push_str(&sql[pos..]);
    out
}

fn multi(parts: Vec<(&str, String)>, merge: Merge) -> Expect {
    Expect::Multi(
        parts
            .into_iter()
            .map(|(db, sql)| (db.to_owned(), sql))
            .collect(),
        merge,
    )
}

/// Parts concatenated, no merge rules.
fn concat() -> Merge {
    Merge::default()
}

fn asc(column: usize) -> SortKey {
    SortKey {
        column,
        descending: false,
    }
}

/// Routes with the session's lexical state set directly.
fn route_lex(sql: &str, lex: LexMode) -> Plan {
    let ctx = RouteContext {
        lex,
        ..RouteContext::default()
    };
    route(sql, &topo(), &ctx, &mut Fixed(3429))
}

fn rejected_with(plan: &Plan, kind: &str, contains: &str) -> bool {
    matches!(plan, Plan::Reject(e) if variant(e) == kind && e.to_string().contains(contains))
}
