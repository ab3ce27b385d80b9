//! What the proxy remembers about one client session between statements.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use mysql_common::constants::StatusFlags;

use super::pause::ShardGuard;
use crate::backend::{ConnKey, PoolShare, PooledConn};
use crate::router::{RouteContext, Target};
use crate::topology::{FleetId, Topology};

/// Session settings (`SET NAMES`, `SET sql_mode` ...) in the order the
/// client gave them, replayed on every backend connection the session uses.
#[derive(Debug, Clone, Default)]
pub struct SessionSettings {
    entries: Vec<(Vec<String>, String)>,
    fingerprint: u64,
}

impl SessionSettings {
    /// Records a SET statement; an earlier SET of the same variables is
    /// replaced.
    pub fn record(&mut self, variables: Vec<String>, sql: String) {
        self.entries.retain(|(vars, _)| vars != &variables);
        self.entries.push((variables, sql));
        let mut hasher = DefaultHasher::new();
        self.entries.hash(&mut hasher);
        self.fingerprint = hasher.finish().clamp(1, u64::MAX - 1);
    }

    /// The statements to replay, in order.
    pub fn statements(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(_, sql)| sql.as_str())
    }

    /// Identifies this set of settings (0 when empty), so a backend
    /// connection that already has them is not set up again.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Whether a recorded `sql_mode` includes NO_BACKSLASH_ESCAPES (string
    /// literals the proxy writes must then not escape with backslashes).
    pub fn no_backslash_escapes(&self) -> bool {
        self.entries
            .iter()
            .rfind(|(vars, _)| vars.iter().any(|v| v.ends_with("sql_mode")))
            .is_some_and(|(_, sql)| sql.to_ascii_uppercase().contains("NO_BACKSLASH_ESCAPES"))
    }

    /// A copy with one more SET recorded.
    pub fn with(&self, variables: Vec<String>, sql: String) -> SessionSettings {
        let mut next = self.clone();
        next.record(variables, sql);
        next
    }
}

/// The backend connection a transaction is bound to.
pub struct BoundTransaction {
    /// The shard the transaction's first write or locking read went to
    /// (ids of the topology it bound on).
    pub target: Target,
    /// Name of the shard's fleet (ids may change across reloads).
    pub fleet: String,
    /// The connection holding the open transaction.
    pub conn: PooledConn,
    /// The transaction's registration on its shard at the pause gate:
    /// `PAUSE SHARDS` waits for the transaction to end.
    pub guard: ShardGuard,
}

/// Per-client state.
pub struct SessionState {
    /// Connection id given to the client.
    pub connection_id: u32,
    /// Framing capabilities and collation backend connections must share.
    pub conn_key: ConnKey,
    /// Whether the client set `CLIENT_DEPRECATE_EOF`.
    pub deprecate_eof: bool,
    /// The shard database chosen with `USE`, and the rest the router needs.
    pub route: RouteContext,
    /// `SET` statements to replay on backend connections.
    pub settings: SessionSettings,
    /// `autocommit` as the client set it.
    pub autocommit: bool,
    /// Inside `BEGIN` ... `COMMIT`/`ROLLBACK`.
    pub explicit_transaction: bool,
    /// Text of the BEGIN that opened the transaction, sent to the backend
    /// when the transaction binds.
    pub begin_sql: String,
    /// The bound connection, after the first write or locking read.
    pub bound: Option<BoundTransaction>,
    /// Last composed 64-bit ID from an object INSERT.
    pub last_insert_id: u64,
    /// Sequence id of the first packet of the answer to the current
    /// command (one past the command's last frame).
    pub response_seq: u8,
    /// The pooled connection that ran the previous statement, kept (instead
    /// of returned) when that statement left warnings or an error, so
    /// `SHOW WARNINGS` sees them.
    pub held: Option<PooledConn>,
    /// Whether the previous statement ran on the bound connection.
    pub last_on_bound: bool,
    /// SAVEPOINT statements given before the transaction bound; replayed on
    /// the bound connection right after its BEGIN.
    pub pending_savepoints: Vec<String>,
    /// Whether more results of a multi-statement follow the current one.
    pub more_results: bool,
    /// Whether the client may send several statements in one COM_QUERY.
    pub multi_statements: bool,
    /// Whether the current statement is a prepared statement's execution,
    /// answered with binary-protocol rows.
    pub binary_rows: bool,
    /// The session's prepared statements.
    pub prepared: super::prepared::PreparedStatements,
    /// The session's share of each host's pool (`limits.max_host_share_percent`).
    pub share: Arc<PoolShare>,
    /// The name of the database selected with `USE` (or at login), so the
    /// selection is resolved again when a reload renumbers the fleets.
    current_db_name: Option<String>,
    /// [`Topology::generation`] that `route.current_db` was resolved in.
    route_generation: u64,
}

impl SessionState {
    /// A fresh session: autocommit on, no database, no settings.
    pub fn new(connection_id: u32, conn_key: ConnKey, deprecate_eof: bool) -> Self {
        Self {
            connection_id,
            conn_key,
            deprecate_eof,
            route: RouteContext::default(),
            settings: SessionSettings::default(),
            autocommit: true,
            explicit_transaction: false,
            begin_sql: String::new(),
            bound: None,
            last_insert_id: 0,
            response_seq: 1,
            held: None,
            last_on_bound: false,
            pending_savepoints: Vec::new(),
            more_results: false,
            multi_statements: false,
            binary_rows: false,
            prepared: Default::default(),
            share: Arc::default(),
            current_db_name: None,
            route_generation: 0,
        }
    }

    /// Selects shard database `shard` of `fleet` (`USE`, COM_INIT_DB, the
    /// database named at login).
    pub fn select_database(&mut self, topology: &Topology, fleet: FleetId, shard: u32) {
        self.route.current_db = Some((fleet, shard));
        self.current_db_name = topology.fleet(fleet).map(|f| f.database_name(shard));
        self.route_generation = topology.generation;
    }

    /// Re-resolves the selected database in `topology` if it is not the
    /// table the selection was made in (a reload may add, drop or reorder
    /// fleets, which renumbers them); a database no fleet has any more is
    /// deselected.
    pub fn follow_topology(&mut self, topology: &Topology) {
        if self.route_generation == topology.generation {
            return;
        }
        self.route_generation = topology.generation;
        if let Some(name) = &self.current_db_name {
            self.route.current_db = topology.parse_database(name);
        }
    }

    /// Back to a fresh session (COM_RESET_CONNECTION, COM_CHANGE_USER): an
    /// open transaction is dropped with its connection (the server rolls it
    /// back), settings, `USE`, savepoints and the held connection go.
    pub fn reset(&mut self) {
        let fresh = SessionState::new(self.connection_id, self.conn_key, self.deprecate_eof);
        let multi_statements = self.multi_statements;
        *self = fresh;
        self.multi_statements = multi_statements;
    }

    /// Whether statements are inside a transaction (explicit, or implicit
    /// with autocommit off).
    pub fn in_transaction(&self) -> bool {
        self.explicit_transaction || !self.autocommit
    }

    /// Status flags for answers the proxy gives itself.
    pub fn status_flags(&self) -> StatusFlags {
        let mut flags = StatusFlags::empty();
        if self.autocommit {
            flags |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        }
        if self.explicit_transaction || self.bound.is_some() {
            flags |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        if self.more_results {
            flags |= StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        }
        flags
    }

    /// The statement that opens a transaction on the bound backend.
    pub fn begin_statement(&self) -> &str {
        if self.explicit_transaction && !self.begin_sql.is_empty() {
            &self.begin_sql
        } else {
            "START TRANSACTION"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_replace_same_variable_and_fingerprint_changes() {
        let mut settings = SessionSettings::default();
        assert_eq!(settings.fingerprint(), 0);
        settings.record(vec!["names".into()], "SET NAMES utf8mb4".into());
        let first = settings.fingerprint();
        settings.record(vec!["sql_mode".into()], "SET sql_mode=''".into());
        settings.record(vec!["names".into()], "SET NAMES latin1".into());
        let statements: Vec<_> = settings.statements().collect();
        assert_eq!(statements, vec!["SET sql_mode=''", "SET NAMES latin1"]);
        assert_ne!(settings.fingerprint(), first);
    }
}
