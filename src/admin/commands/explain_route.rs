//! `EXPLAIN ROUTE <statement>`: what the router decides for a statement,
//! on the topology in force and a fresh session (no `USE`, no
//! transaction). A row per target: fleet, shard, database, host, the kind
//! of statement, the SQL that host would get, and a note.

use crate::admin::{AdminError, Answer, Cell};
use crate::engine::Engine;
use crate::router::{
    route, Merge, MergeColumn, Placement, Plan, RandomPlacement, RouteContext, SessionAction,
    ShardQuery, StatementKind,
};
use crate::topology::{FleetId, HostId, Topology};

const COLUMNS: &[&str] = &["fleet", "shard", "database", "host", "kind", "sql", "note"];

/// The plan of `statement`, one row per target.
pub fn answer(engine: &Engine, statement: &str) -> Result<Answer, AdminError> {
    let topology = engine.topology.load();
    let mut placement = WatchedPlacement::default();
    let plan = route(
        statement,
        &topology,
        &RouteContext::default(),
        &mut placement,
    );
    let mut answer = Answer::new(COLUMNS);
    match plan {
        Plan::Shard(query) => {
            let mut note = insert_note(&query);
            if let Some((first, last)) = placement.chose_from {
                note.push(format!(
                    "no shard named: placed on a random open shard ({first}-{last}); this is one such choice"
                ));
            }
            answer.push(shard_row(&topology, &query, note.join("; ")));
        }
        Plan::MultiShard(multi) => {
            let count = multi.parts.len();
            let merge = describe_merge(&multi.merge);
            for (index, part) in multi.parts.iter().enumerate() {
                let note = format!(
                    "part {} of {count} of a multi-shard read, run concurrently; {merge}",
                    index + 1
                );
                answer.push(shard_row(&topology, part, note));
            }
        }
        Plan::AnyHost { sql, .. } => answer.push(other_row(
            "any healthy master",
            &sql.to_string(),
            "names no sharded table: runs unchanged on any healthy master",
        )),
        Plan::Diagnostics { sql, .. } => answer.push(other_row(
            "the connection that ran the previous statement",
            &sql.to_string(),
            "about the previous statement: runs on its connection, or answered by the proxy if it left nothing",
        )),
        Plan::Session(action) => answer.push(session_row(&topology, action, statement)),
        Plan::Reject(error) => return Err(AdminError::Route(error)),
    }
    Ok(answer)
}

/// Records whether the router had to place an INSERT that named no shard.
#[derive(Default)]
struct WatchedPlacement {
    inner: RandomPlacement,
    chose_from: Option<(u32, u32)>,
}

impl Placement for WatchedPlacement {
    fn choose(&mut self, first: u32, last: u32) -> u32 {
        self.chose_from = Some((first, last));
        self.inner.choose(first, last)
    }
}

fn shard_row(topology: &Topology, query: &ShardQuery, note: String) -> Vec<Cell> {
    let target = query.target;
    located_row(
        topology,
        target.fleet,
        target.shard,
        Some(target.host),
        [
            kind_name(query.kind).into(),
            query.sql.to_string().into(),
            Some(note).filter(|n| !n.is_empty()).into(),
        ],
    )
}

/// A row about shard `shard` of `fleet`: the fleet's name, the shard, its
/// database and `host`'s address, then `rest` (kind, sql, note).
fn located_row(
    topology: &Topology,
    fleet: FleetId,
    shard: u32,
    host: Option<HostId>,
    rest: [Cell; 3],
) -> Vec<Cell> {
    let fleet = topology.fleet(fleet);
    let mut row = vec![
        fleet.map(|f| f.name.as_str()).into(),
        shard.into(),
        fleet.map(|f| f.database_name(shard)).into(),
        host.and_then(|h| topology.host(h))
            .map(|h| h.addr.as_str())
            .into(),
    ];
    row.extend(rest);
    row
}

/// A row about no particular shard: only where it runs, the SQL and a note.
fn other_row(host: &str, sql: &str, note: &str) -> Vec<Cell> {
    vec![
        Cell::Null,
        Cell::Null,
        Cell::Null,
        host.into(),
        Cell::Null,
        sql.into(),
        note.into(),
    ]
}

fn session_row(topology: &Topology, action: SessionAction, statement: &str) -> Vec<Cell> {
    let by_proxy = "answered by the proxy";
    let (host, sql, note): (&str, String, String) = match &action {
        SessionAction::Use { fleet, shard } => {
            let note = format!("{by_proxy}: later statements without a database go to this shard");
            return located_row(
                topology,
                *fleet,
                *shard,
                topology.master_of(*fleet, *shard),
                [Cell::Null, Cell::Null, note.into()],
            );
        }
        SessionAction::Begin { sql } => (
            by_proxy,
            sql.to_string(),
            "the transaction starts on a backend when its first write or locking read binds it to a shard".into(),
        ),
        SessionAction::Commit | SessionAction::Rollback => (
            "the transaction's bound connection",
            statement.to_owned(),
            "sent to the connection the transaction is bound to; answered by the proxy if none is".into(),
        ),
        SessionAction::SetAutocommit(on) => (
            by_proxy,
            statement.to_owned(),
            format!("{by_proxy}: autocommit {}", if *on { "on" } else { "off" }),
        ),
        SessionAction::SetSession { variables, sql, .. } => (
            "any healthy master, then every backend connection of the session",
            sql.to_string(),
            format!(
                "checked on a master, then replayed on each connection the session uses (sets {})",
                variables.join(", ")
            ),
        ),
        SessionAction::SetNextTransaction { sql } => (
            "the next transaction's bound connection",
            sql.to_string(),
            "kept by the proxy and sent right before the next transaction's BEGIN".into(),
        ),
        SessionAction::SelectSessionValues { .. } => (
            by_proxy,
            statement.to_owned(),
            format!("{by_proxy}: the session's autocommit and transaction state"),
        ),
        SessionAction::SelectDatabase { .. } => (
            by_proxy,
            statement.to_owned(),
            format!("{by_proxy}: the session's current shard database"),
        ),
        SessionAction::SelectLastInsertId { .. } => (
            by_proxy,
            statement.to_owned(),
            format!("{by_proxy}: the session's last 64-bit insert ID"),
        ),
        SessionAction::SelectConnectionId { .. } | SessionAction::SelectVersion { .. } => (
            by_proxy,
            statement.to_owned(),
            format!("{by_proxy}: the session's id or the proxy's version"),
        ),
        SessionAction::ProcessList { .. } => (
            by_proxy,
            statement.to_owned(),
            format!("{by_proxy}: the proxy's sessions of the same account"),
        ),
        SessionAction::Kill { .. } => (
            "the hosts the session's statement runs on",
            statement.to_owned(),
            format!("{by_proxy}: KILL QUERY of the session's backend threads; KILL CONNECTION also ends the session"),
        ),
        SessionAction::Savepoint { sql } => (
            "the transaction's bound connection",
            sql.to_string(),
            "sent to the transaction's connection (kept until the transaction binds)".into(),
        ),
    };
    other_row(host, &sql, &note)
}

fn kind_name(kind: StatementKind) -> &'static str {
    match kind {
        StatementKind::Read => "read",
        StatementKind::LockingRead => "locking read",
        StatementKind::Write => "write",
        StatementKind::SchemaChange => "schema change",
    }
}

fn insert_note(query: &ShardQuery) -> Vec<String> {
    query
        .compose_insert_id
        .map(|type_id| {
            format!("the insert's last-insert-id becomes the 64-bit ID (type {type_id})")
        })
        .into_iter()
        .collect()
}

/// How the proxy combines the parts, in words.
fn describe_merge(merge: &Merge) -> String {
    let mut steps = Vec::new();
    match &merge.aggregation {
        Some(aggregation) => {
            let merged: Vec<&str> = aggregation
                .columns
                .iter()
                .filter_map(|column| match column {
                    MergeColumn::GroupKey => None,
                    MergeColumn::Count => Some("COUNT added"),
                    MergeColumn::Sum => Some("SUM added"),
                    MergeColumn::Min => Some("MIN of the parts"),
                    MergeColumn::Max => Some("MAX of the parts"),
                })
                .collect();
            steps.push(format!("groups merged ({})", merged.join(", ")));
        }
        None if merge.order_by.is_empty() => steps.push("rows concatenated".to_owned()),
        None => {}
    }
    if !merge.order_by.is_empty() {
        let keys: Vec<String> = merge
            .order_by
            .iter()
            .map(|key| {
                format!(
                    "column {}{}",
                    key.column + 1,
                    if key.descending { " DESC" } else { "" }
                )
            })
            .collect();
        steps.push(format!("sorted parts merged on {}", keys.join(", ")));
    }
    if merge.offset > 0 {
        steps.push(format!("first {} rows skipped", merge.offset));
    }
    if let Some(limit) = merge.limit {
        steps.push(format!("at most {limit} rows kept"));
    }
    if merge.hidden_columns > 0 {
        steps.push(format!(
            "{} sort column(s) added for the merge and dropped",
            merge.hidden_columns
        ));
    }
    format!("merged by the proxy: {}", steps.join(", "))
}
