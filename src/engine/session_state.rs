//! What the proxy remembers about one client session between statements.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use mysql_common::constants::StatusFlags;

use super::diagnostics_copy::DiagnosticsCopy;
use super::local_infile::ClientFileLink;
use super::transaction_state::Transaction;
use crate::backend::{ConnKey, PoolShare, PooledConn};
use crate::error::ClientError;
use crate::protocol::charset::Charset;
use crate::router::{ClientCharset, LexMode, RouteContext};
use crate::topology::config::LimitsConfig;
use crate::topology::{FleetId, Topology};

/// The collation a session whose handshake names one MariaDB does not have
/// (or one of ucs2/utf16/utf32, which MariaDB refuses) is served with:
/// utf8mb4_general_ci.
const FALLBACK_COLLATION: u8 = 45;

/// Session settings (`SET NAMES`, `SET sql_mode` ...) in the order the
/// client gave them, replayed on every backend connection the session uses.
/// Cloning shares the list (each multi-shard part holds a clone).
#[derive(Debug, Clone, Default)]
pub struct SessionSettings {
    entries: Arc<Vec<(Vec<String>, String)>>,
    fingerprint: u64,
}

/// How many recorded `SET`s a session may hold, and how many bytes of
/// their text (`limits.max_session_settings`, `limits.max_session_settings_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingsLimits {
    /// Most statements.
    pub count: usize,
    /// Most bytes of statement text.
    pub bytes: usize,
}

impl SettingsLimits {
    /// The limits of the `limits` config section.
    pub fn from_config(limits: &LimitsConfig) -> Self {
        Self {
            count: usize::try_from(limits.max_session_settings).unwrap_or(usize::MAX),
            bytes: usize::try_from(limits.max_session_settings_bytes).unwrap_or(usize::MAX),
        }
    }
}

impl SessionSettings {
    /// Records a SET statement; an earlier SET of the same variables is
    /// replaced.
    pub fn record(&mut self, variables: Vec<String>, sql: String) {
        let entries = Arc::make_mut(&mut self.entries);
        entries.retain(|(vars, _)| vars != &variables);
        entries.push((variables, sql));
        let mut hasher = DefaultHasher::new();
        entries.hash(&mut hasher);
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

    /// Bytes of statement text recorded.
    pub fn text_bytes(&self) -> usize {
        self.entries.iter().map(|(_, sql)| sql.len()).sum()
    }

    /// A copy with one more SET recorded, or the error for a list past
    /// `limits` (nothing is recorded then).
    pub fn with(
        &self,
        variables: Vec<String>,
        sql: String,
        limits: SettingsLimits,
    ) -> Result<SessionSettings, ClientError> {
        let mut next = self.clone();
        next.record(variables, sql);
        if next.entries.len() > limits.count {
            return Err(ClientError::SessionLimit(format!(
                "the session already has {} recorded SET statements (limits.max_session_settings); SET variables already set again instead of new ones, or use COM_RESET_CONNECTION",
                limits.count
            )));
        }
        let bytes = next.text_bytes();
        if bytes > limits.bytes {
            return Err(ClientError::SessionLimit(format!(
                "recording this SET would hold {bytes} bytes of SET statements, more than limits.max_session_settings_bytes ({})",
                limits.bytes
            )));
        }
        Ok(next)
    }
}

/// What a session carries to another process at a boundary outside any
/// transaction (`serve --takeover`): everything the statement path keeps
/// between statements, as plain data. Backend connections are not carried:
/// the new process opens its own and replays `settings` on them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CarriedState {
    /// The database selected with `USE` or at login, by name.
    pub database: Option<String>,
    /// The recorded `SET` statements (user variables among them), in
    /// order: (variables, text).
    pub settings: Vec<(Vec<String>, String)>,
    /// `character_set_client` as the server reported it.
    pub charset: String,
    /// The lexer's reading of `sql_mode`.
    pub no_backslash_escapes: bool,
    /// Whether `sql_mode` has ANSI_QUOTES.
    pub ansi_quotes: bool,
    /// `autocommit` as the client set it.
    pub autocommit: bool,
    /// A `SET TRANSACTION` waiting for the next transaction.
    pub next_transaction: Option<String>,
    /// SAVEPOINTs given (autocommit off) before the next transaction.
    pub savepoints: Vec<String>,
    /// What `LAST_INSERT_ID()` reads.
    pub last_insert_id: u64,
    /// What `ROW_COUNT()` reads.
    pub row_count: i64,
    /// The `wait_timeout` the client set, in milliseconds.
    pub wait_timeout_ms: Option<u64>,
    /// Whether the client may send several statements in one COM_QUERY.
    pub multi_statements: bool,
    /// The prepared statements.
    pub prepared: super::prepared::CarriedStatements,
    /// The previous statement's diagnostics (`SHOW WARNINGS` right after
    /// the move), copied off its held connection; absent from a process
    /// that did not carry them (then the move shows none).
    #[serde(default)]
    pub diagnostics: Option<DiagnosticsCopy>,
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
    /// The way to the client's file for `LOAD DATA LOCAL INFILE`; present
    /// when the client announced `CLIENT_LOCAL_FILES`.
    pub client_file: Option<ClientFileLink>,
    /// The session's transaction: autocommit, whether one is open and how,
    /// and the one shard connection it is bound to.
    pub transaction: Transaction,
    /// Sequence id of the first packet of the answer to the current
    /// command (one past the command's last frame).
    pub response_seq: u8,
    /// The pooled connection that ran the previous statement, kept (instead
    /// of returned) when that statement left warnings or an error, so
    /// `SHOW WARNINGS` sees them.
    pub held: Option<PooledConn>,
    /// The previous statement's diagnostics, copied when its held
    /// connection was given back to a pool another session waited on
    /// ([`Engine::give_up_held`](super::Engine::give_up_held)).
    pub diagnostics_copy: Option<DiagnosticsCopy>,
    /// Why the proxy ended the session's transaction while the client was
    /// silent: answered to its next statement (a plain `ROLLBACK` is
    /// answered OK).
    pub ended_while_idle: Option<ClientError>,
    /// Whether more results of a multi-statement follow the current one.
    pub more_results: bool,
    /// Whether the client may send several statements in one COM_QUERY.
    pub multi_statements: bool,
    /// Whether the current statement is a prepared statement's execution,
    /// answered with binary-protocol rows.
    pub binary_rows: bool,
    /// The session's prepared statements.
    pub prepared: super::prepared::PreparedStatements,
    /// `character_set_client` as the server has it: from the handshake
    /// collation, then as the server reports it after each `SET`. String
    /// values bound to prepared statements are written in it.
    pub charset: Charset,
    /// The session's share of each host's pool (`limits.max_host_share_percent`).
    pub share: Arc<PoolShare>,
    /// The session's entry in the registry of sessions (what it is doing,
    /// the backend connections it uses, whether it was killed).
    pub entry: Arc<super::sessions::SessionEntry>,
    /// The `wait_timeout` the client set (read back from the server after
    /// its `SET`); `None`: the one the session started with.
    pub wait_timeout: Option<std::time::Duration>,
    /// The name of the database selected with `USE` (or at login), so the
    /// selection is resolved again when a reload renumbers the fleets.
    current_db_name: Option<String>,
    /// [`Topology::generation`] that `route.current_db` was resolved in.
    route_generation: u64,
    /// Result-set rows sent to the client by the statement running
    /// (the statement digests' `rows_sent`).
    pub statement_rows_sent: u64,
}

impl SessionState {
    /// A fresh session: autocommit on, no database, no settings; the
    /// character set of the handshake collation (a collation MariaDB does
    /// not have becomes utf8mb4_general_ci, for the client's side and the
    /// backend connections alike), the server's default `sql_mode` flags
    /// as far as the lexer cares (neither NO_BACKSLASH_ESCAPES nor
    /// ANSI_QUOTES), the backends' version if one was seen.
    pub fn new(connection_id: u32, mut conn_key: ConnKey, deprecate_eof: bool) -> Self {
        let charset = match Charset::from_collation_id(conn_key.collation) {
            Some(charset) => charset,
            None => {
                conn_key.collation = FALLBACK_COLLATION;
                Charset::UTF8MB4
            }
        };
        let lex = LexMode {
            no_backslash_escapes: crate::backend::conn::backend_default_no_backslash_escapes(),
            charset: lexer_charset(charset),
            server_version: crate::backend::conn::backend_version()
                .unwrap_or(crate::router::DEFAULT_SERVER_VERSION),
            ..LexMode::default()
        };
        Self {
            connection_id,
            conn_key,
            deprecate_eof,
            route: RouteContext {
                current_db: None,
                lex,
                connection_id,
                ..RouteContext::default()
            },
            settings: SessionSettings::default(),
            client_file: None,
            transaction: Transaction::default(),
            response_seq: 1,
            held: None,
            diagnostics_copy: None,
            ended_while_idle: None,
            more_results: false,
            multi_statements: false,
            binary_rows: false,
            prepared: Default::default(),
            charset,
            share: Arc::default(),
            entry: super::sessions::SessionEntry::detached(connection_id),
            wait_timeout: None,
            current_db_name: None,
            route_generation: 0,
            statement_rows_sent: 0,
        }
    }

    /// The state to carry to another process, when the session is at a
    /// boundary it may move at: no transaction open, no answer owed to a
    /// silent client, no long data pending. The previous statement's
    /// diagnostics go along only as copied off its held connection
    /// ([`Engine::give_up_held`](super::Engine::give_up_held) first).
    pub fn carry(&self) -> Option<CarriedState> {
        if self.ended_while_idle.is_some() || self.more_results {
            return None;
        }
        let (next, savepoints) = self.transaction.idle_pending()?;
        Some(CarriedState {
            database: self.database_name().map(str::to_owned),
            settings: self.settings.entries.iter().cloned().collect(),
            charset: self.charset.name().to_owned(),
            no_backslash_escapes: self.route.lex.no_backslash_escapes,
            ansi_quotes: self.route.lex.ansi_quotes,
            autocommit: self.transaction.autocommit(),
            next_transaction: next.map(str::to_owned),
            savepoints: savepoints.to_vec(),
            last_insert_id: self.route.last_insert_id,
            row_count: self.route.row_count,
            wait_timeout_ms: self
                .wait_timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            multi_statements: self.multi_statements,
            prepared: self.prepared.carry()?,
            diagnostics: self.diagnostics_copy.clone(),
        })
    }

    /// Takes over `carried` (from [`SessionState::carry`] in another
    /// process) into a fresh state of the same connection, its database
    /// resolved in `topology`; `Err` says what could not be taken.
    pub fn take_carried(
        &mut self,
        carried: CarriedState,
        topology: &Topology,
    ) -> Result<(), String> {
        if let Some(name) = &carried.database {
            let (fleet, shard) = topology
                .parse_database(name)
                .ok_or_else(|| format!("the database {name} is not in this config"))?;
            self.select_database(topology, fleet, shard);
        }
        for (variables, sql) in carried.settings {
            self.settings.record(variables, sql);
        }
        let sql_mode = match (carried.no_backslash_escapes, carried.ansi_quotes) {
            (true, true) => "NO_BACKSLASH_ESCAPES,ANSI_QUOTES",
            (true, false) => "NO_BACKSLASH_ESCAPES",
            (false, true) => "ANSI_QUOTES",
            (false, false) => "",
        };
        self.set_server_lex_state(sql_mode, &carried.charset);
        self.transaction = Transaction::restored(
            carried.autocommit,
            carried.next_transaction,
            carried.savepoints,
        );
        self.route.autocommit = carried.autocommit;
        self.route.last_insert_id = carried.last_insert_id;
        self.route.row_count = carried.row_count;
        self.wait_timeout = carried
            .wait_timeout_ms
            .map(std::time::Duration::from_millis);
        self.multi_statements = carried.multi_statements;
        self.prepared = super::prepared::PreparedStatements::from_carried(carried.prepared)?;
        self.diagnostics_copy = carried.diagnostics;
        Ok(())
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
        if let Some(version) = crate::backend::conn::backend_version() {
            self.route.lex.server_version = version;
        }
        if self.route_generation == topology.generation {
            return;
        }
        self.route_generation = topology.generation;
        if let Some(name) = &self.current_db_name {
            self.route.current_db = topology.parse_database(name);
        }
    }

    /// Back to a fresh session (COM_RESET_CONNECTION): an open transaction
    /// is dropped with its connection (the server rolls it back), settings,
    /// savepoints and the held connection go; the selected database stays,
    /// as on a server.
    pub fn reset(&mut self) {
        let fresh = SessionState::new(self.connection_id, self.conn_key, self.deprecate_eof);
        let multi_statements = self.multi_statements;
        let entry = Arc::clone(&self.entry);
        let client_file = self.client_file.take();
        let database = (
            self.route.current_db,
            self.current_db_name.take(),
            self.route_generation,
        );
        *self = fresh;
        self.multi_statements = multi_statements;
        self.entry = entry;
        self.client_file = client_file;
        (
            self.route.current_db,
            self.current_db_name,
            self.route_generation,
        ) = database;
    }

    /// The name of the database selected with `USE` (or at login).
    pub fn database_name(&self) -> Option<&str> {
        self.current_db_name
            .as_deref()
            .filter(|_| self.route.current_db.is_some())
    }

    /// Takes the lexical state the server reports for the session
    /// (`@@session.sql_mode`, `@@session.character_set_client`).
    pub fn set_server_lex_state(&mut self, sql_mode: &str, character_set_client: &str) {
        let has = |flag: &str| {
            sql_mode
                .split(',')
                .any(|mode| mode.trim().eq_ignore_ascii_case(flag))
        };
        self.route.lex.no_backslash_escapes = has("NO_BACKSLASH_ESCAPES");
        self.route.lex.ansi_quotes = has("ANSI_QUOTES");
        // The server refuses character sets a client cannot use, so an
        // unknown name is one shardgate does not know: its bound strings are
        // then written as `_binary` literals, and the lexer reads the text
        // the most cautious way.
        match Charset::from_name(character_set_client) {
            Some(charset) => {
                self.charset = charset;
                self.route.lex.charset = lexer_charset(charset);
            }
            None => {
                self.charset = Charset::BINARY;
                self.route.lex.charset =
                    ClientCharset::AsciiTrail(crate::router::TrailCharset::Gbk);
            }
        }
    }

    /// Takes NO_BACKSLASH_ESCAPES from the status flags of an answer the
    /// server gave on one of the session's connections.
    pub fn note_status(&mut self, status: StatusFlags) {
        self.route.lex.no_backslash_escapes =
            status.contains(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES);
    }

    /// Rolls back the bound transaction of a client that sat idle on a
    /// shard being paused (its connection is closed, so the server rolls
    /// back, and its registration leaves the pause gate); the client's
    /// next statement gets `error`.
    pub fn end_idle_for_pause(&mut self, error: ClientError) {
        if self.transaction.end().is_some() {
            self.ended_while_idle = Some(error);
        }
    }

    /// The session's status flags: those of the answers the proxy gives
    /// itself, and the autocommit and transaction state of every answer it
    /// relays.
    pub fn status_flags(&self) -> StatusFlags {
        let mut flags = StatusFlags::empty();
        if self.transaction.autocommit() {
            flags |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        }
        if self.transaction.is_open() {
            flags |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        if self.route.lex.no_backslash_escapes {
            flags |= StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES;
        }
        if self.more_results {
            flags |= StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        }
        flags
    }
}

/// How the router's lexer reads text in `charset`.
fn lexer_charset(charset: Charset) -> ClientCharset {
    ClientCharset::from_name(charset.name()).unwrap_or_default()
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

    #[test]
    fn settings_past_their_limits_are_refused() {
        let limits = SettingsLimits {
            count: 2,
            bytes: 40,
        };
        let one = SessionSettings::default()
            .with(vec!["a".into()], "SET @a=1".into(), limits)
            .unwrap();
        let two = one
            .with(vec!["b".into()], "SET @b=1".into(), limits)
            .unwrap();
        // Setting a recorded variable again replaces it.
        let again = two
            .with(vec!["b".into()], "SET @b=2".into(), limits)
            .unwrap();
        assert_eq!(again.statements().count(), 2);
        let refused = two.with(vec!["c".into()], "SET @c=1".into(), limits);
        assert!(
            matches!(refused, Err(ClientError::SessionLimit(m)) if m.contains("max_session_settings"))
        );
        let long = format!("SET @a='{}'", "x".repeat(40));
        let refused = two.with(vec!["a".into()], long, limits);
        assert!(
            matches!(refused, Err(ClientError::SessionLimit(m)) if m.contains("max_session_settings_bytes"))
        );
        // A clone shares the list.
        let shared = two.clone();
        assert!(Arc::ptr_eq(&shared.entries, &two.entries));
    }

    #[test]
    fn status_flags_are_the_sessions_transaction_state() {
        let key = ConnKey {
            framing: mysql_common::constants::CapabilityFlags::empty(),
            collation: 45,
        };
        let mut state = SessionState::new(1, key, false);
        assert_eq!(state.status_flags(), StatusFlags::SERVER_STATUS_AUTOCOMMIT);
        let _ = state.transaction.set_autocommit(false);
        assert_eq!(state.status_flags(), StatusFlags::empty());
        state.transaction.statement_on_shards();
        assert_eq!(state.status_flags(), StatusFlags::SERVER_STATUS_IN_TRANS);
        state.route.lex.no_backslash_escapes = true;
        state.more_results = true;
        assert_eq!(
            state.status_flags(),
            StatusFlags::SERVER_STATUS_IN_TRANS
                | StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES
                | StatusFlags::SERVER_MORE_RESULTS_EXISTS
        );
        state.reset();
        assert!(!state.transaction.is_open() && state.transaction.next_for_autocommit().is_none());
    }

    /// What a session carries to another process comes back whole: the
    /// state taken from its serialized form carries the same again.
    #[test]
    fn a_carried_state_is_taken_back_whole() {
        let topology = crate::topology::tests::load(crate::topology::tests::SPEC_YAML);
        let key = ConnKey {
            framing: mysql_common::constants::CapabilityFlags::empty(),
            collation: 45,
        };
        let mut state = SessionState::new(7, key, true);
        let (fleet, shard) = topology.parse_database("db00014").unwrap();
        state.select_database(&topology, fleet, shard);
        state
            .settings
            .record(vec!["@a".into()], "SET @a = 1".into());
        state.settings.record(
            vec!["sql_mode".into()],
            "SET sql_mode = 'ANSI_QUOTES'".into(),
        );
        state.set_server_lex_state("ANSI_QUOTES", "latin1");
        let _ = state.transaction.set_autocommit(false);
        state
            .transaction
            .set_next("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE".into())
            .unwrap();
        state.route.last_insert_id = 99;
        state.route.row_count = 3;
        state.wait_timeout = Some(std::time::Duration::from_secs(5));
        state.multi_statements = true;
        state.diagnostics_copy = Some(DiagnosticsCopy::default());
        let carried = state.carry().expect("at a boundary");
        let text = serde_json::to_string(&carried).unwrap();
        let mut taken = SessionState::new(7, key, true);
        taken
            .take_carried(serde_json::from_str(&text).unwrap(), &topology)
            .unwrap();
        assert_eq!(taken.carry(), Some(carried));
        assert_eq!(taken.database_name(), Some("db00014"));
        assert_eq!(taken.settings.fingerprint(), state.settings.fingerprint());
        assert!(taken.route.lex.ansi_quotes && !taken.transaction.autocommit());
        // Inside a transaction the session does not move.
        taken.transaction.statement_on_shards();
        assert_eq!(taken.carry(), None);
        // A database the new config lacks refuses the session.
        let mut lost = state.carry().unwrap();
        lost.database = Some("nodb".into());
        assert!(SessionState::new(7, key, true)
            .take_carried(lost, &topology)
            .is_err());
    }

    #[test]
    fn lexical_state_from_the_server() {
        let key = |collation| ConnKey {
            framing: mysql_common::constants::CapabilityFlags::empty(),
            collation,
        };
        let mut state = SessionState::new(1, key(28), false);
        assert_eq!(state.charset.name(), "gbk");
        assert_eq!(
            state.route.lex.charset,
            ClientCharset::AsciiTrail(crate::router::TrailCharset::Gbk)
        );
        state.set_server_lex_state(
            "STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES,ANSI_QUOTES",
            "latin1",
        );
        assert!(state.route.lex.no_backslash_escapes && state.route.lex.ansi_quotes);
        assert_eq!(state.charset.name(), "latin1");
        assert_eq!(state.route.lex.charset, ClientCharset::AsciiSafe);
        state.note_status(StatusFlags::SERVER_STATUS_AUTOCOMMIT);
        assert!(!state.route.lex.no_backslash_escapes);
        state.reset();
        assert_eq!(state.charset.name(), "gbk");
        assert!(!state.route.lex.ansi_quotes);
        // Collations MariaDB does not have are served as utf8mb4_general_ci.
        let state = SessionState::new(1, key(255), false);
        assert_eq!(
            (state.charset, state.conn_key.collation),
            (Charset::UTF8MB4, 45)
        );
    }
}
