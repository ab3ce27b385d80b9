//! The plan: plain data saying where a statement goes and what text to send.

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

use crate::topology::{FleetId, HostId};

/// Statement text as bytes: the client's bytes with only the router's
/// edits, forwarded as they are (never re-encoded). `Display` shows it
/// (lossily) for messages, logs and EXPLAIN ROUTE. Shared, not copied,
/// with the client's statement when no edit was made ([`route_shared`]).
///
/// [`route_shared`]: crate::router::route_shared
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct SqlText(pub Bytes);

impl SqlText {
    /// The bytes to send.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Deref for SqlText {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for SqlText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Debug for SqlText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&String::from_utf8_lossy(&self.0), f)
    }
}

impl From<Vec<u8>> for SqlText {
    fn from(bytes: Vec<u8>) -> Self {
        SqlText(bytes.into())
    }
}

impl From<&[u8]> for SqlText {
    fn from(bytes: &[u8]) -> Self {
        SqlText(Bytes::copy_from_slice(bytes))
    }
}

impl From<&str> for SqlText {
    fn from(text: &str) -> Self {
        SqlText(Bytes::copy_from_slice(text.as_bytes()))
    }
}

impl From<String> for SqlText {
    fn from(text: String) -> Self {
        SqlText(text.into_bytes().into())
    }
}

impl PartialEq<str> for SqlText {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for SqlText {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<String> for SqlText {
    fn eq(&self, other: &String) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<SqlText> for String {
    fn eq(&self, other: &SqlText) -> bool {
        self.as_bytes() == other.0
    }
}

impl PartialEq<SqlText> for &str {
    fn eq(&self, other: &SqlText) -> bool {
        self.as_bytes() == other.0
    }
}

/// Where a single-shard statement is executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    /// Fleet of the shard.
    pub fleet: FleetId,
    /// Virtual shard number.
    pub shard: u32,
    /// Master host serving the shard (resolved from the topology snapshot).
    pub host: HostId,
}

/// What a statement does, for the transaction rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
    /// A plain read: may be served outside a transaction.
    Read,
    /// `SELECT ... FOR UPDATE` / `FOR SHARE` / `LOCK IN SHARE MODE`.
    LockingRead,
    /// INSERT, UPDATE, DELETE, REPLACE.
    Write,
    /// CREATE/DROP/ALTER TABLE, CREATE/DROP INDEX, TRUNCATE, RENAME TABLE,
    /// DROP VIEW: the server commits implicitly around it, so it never
    /// runs inside a transaction.
    SchemaChange,
}

/// A statement for one shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardQuery {
    /// The shard it runs on.
    pub target: Target,
    /// The text to send to the shard's master.
    pub sql: SqlText,
    /// Read, locking read or write.
    pub kind: StatementKind,
    /// For an INSERT into an object table: the type id used to compose the
    /// 64-bit ID from the OK packet's last-insert-id.
    pub compose_insert_id: Option<u16>,
    /// It calls a function that writes, or may (a sequence, a user lock,
    /// a stored function): a read in form, a write in effect.
    pub writes_through_function: bool,
    /// For `LOAD DATA LOCAL INFILE`: the file name the statement names, the
    /// only one the server may ask the client for.
    pub local_infile: Option<Vec<u8>>,
    /// It leaves session state on the connection that runs it: a user
    /// variable assigned (`@v := ...`, `INTO @v`) or a function that
    /// writes (a user lock, a sequence): the connection is reset before
    /// another session uses it.
    pub leaves_session_state: bool,
}

/// A read that runs on several shards, merged by the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiShardQuery {
    /// One statement per shard (kind `Read`), each with only its own keys.
    pub parts: Vec<ShardQuery>,
    /// How the parts' rows become one result.
    pub merge: Merge,
}

/// What evaluating a `SET`'s values reaches beyond the session's own
/// variables ([`SessionAction::SetSession`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetEvaluation {
    /// The one shard whose database a value reads (`(SELECT ... FROM
    /// db00001.t)`): the SET runs there. A SET naming several shard
    /// databases is refused.
    pub shard: Option<Target>,
    /// A value's subquery takes row locks (`FOR UPDATE`, `FOR SHARE`,
    /// `LOCK IN SHARE MODE`).
    pub locking: bool,
    /// A value calls a function or runs a subquery: the SET must be
    /// replayed by value (re-running it could read or do something else),
    /// or refused.
    pub calls: bool,
}

/// How the rows of several shards are combined. Column numbers are
/// 0-based positions in the select list, which every part shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merge {
    /// `ORDER BY` on selected columns: each part is sorted the same way and
    /// the proxy merges the sorted streams. Empty: parts are concatenated.
    pub order_by: Vec<SortKey>,
    /// Rows to skip after merging (`OFFSET`); each part was asked for
    /// `offset + limit` rows.
    pub offset: u64,
    /// Rows to return after the offset (`LIMIT`), if any.
    pub limit: Option<u64>,
    /// Aggregates merged across shards, if the select list has any.
    pub aggregation: Option<Aggregation>,
    /// Columns appended to every part's select list only so the proxy can
    /// sort or group by them; they are dropped before rows reach the client
    /// (the last `hidden_columns` columns).
    pub hidden_columns: usize,
}

/// One `ORDER BY` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    /// Select-list position of the column.
    pub column: usize,
    /// `DESC`.
    pub descending: bool,
}

/// How each select-list column is merged across shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aggregation {
    /// One entry per select-list column (hidden columns included).
    pub columns: Vec<MergeColumn>,
}

/// The merge rule of one select-list column in an aggregate query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeColumn {
    /// A `GROUP BY` column (or a constant): part of the group key.
    GroupKey,
    /// `COUNT(...)`: the parts' counts are added.
    Count,
    /// `SUM(...)`: the parts' sums are added (NULL when every part is NULL).
    Sum,
    /// `MIN(...)`: the smallest of the parts' values.
    Min,
    /// `MAX(...)`: the largest of the parts' values.
    Max,
}

/// Session-level actions the proxy handles itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionAction {
    /// `USE dbNNNNN`: later unqualified statements go to that shard.
    Use {
        /// Fleet whose database format matched.
        fleet: FleetId,
        /// Shard number from the database name.
        shard: u32,
    },
    /// `BEGIN` / `START TRANSACTION` (with its original text for the backend).
    Begin {
        /// The statement text, forwarded to the bound backend on first use.
        sql: SqlText,
    },
    /// `COMMIT`.
    Commit,
    /// `ROLLBACK`.
    Rollback,
    /// `SET autocommit = 0|1`.
    SetAutocommit(bool),
    /// Any other `SET` of session state (`SET NAMES`, `SET sql_mode`, ...):
    /// replayed on every backend connection the session uses.
    SetSession {
        /// Lower-case variable names it sets (`names`, `sql_mode`, ...),
        /// so a later SET of the same variable replaces it.
        variables: Vec<String>,
        /// The statement text: the original, or, when the SET also set
        /// `autocommit`, `SET` with the other assignments as written.
        sql: SqlText,
        /// The `autocommit` value the same SET gave, applied by the proxy
        /// once the rest succeeded.
        autocommit: Option<bool>,
        /// A value calls a function that writes, or may
        /// ([`ShardQuery::writes_through_function`]).
        writes_through_function: bool,
        /// Whether a value is computed from the session or the server
        /// (`CONCAT(@@sql_mode, ...)`, `@@x + 1`, `DEFAULT`, a function):
        /// replayed as the value the first server computed, read back,
        /// never by re-evaluating the text. Literal values replay as text.
        computed: bool,
        /// What evaluating the values does beyond the session: a subquery
        /// of a shard database, a function call.
        evaluates: SetEvaluation,
    },
    /// `SET TRANSACTION ISOLATION LEVEL ... | READ ONLY | READ WRITE`
    /// without `SESSION`: the characteristics of the session's next
    /// transaction only, sent right before its BEGIN on its connection.
    SetNextTransaction {
        /// The original statement text.
        sql: SqlText,
    },
    /// `SELECT DATABASE()` (and `SCHEMA()`).
    SelectDatabase {
        /// Column name the client sees (the alias, or the expression).
        column: String,
    },
    /// A table-less `SELECT` of session variables only the proxy knows
    /// (`@@autocommit`, `@@session.autocommit`, `@@in_transaction`).
    SelectSessionValues {
        /// Each column: the name the client sees and the value it reads.
        columns: Vec<(String, SessionValue)>,
    },
    /// `SELECT LAST_INSERT_ID()`.
    SelectLastInsertId {
        /// Column name the client sees (the alias, or the expression).
        column: String,
    },
    /// `SELECT CONNECTION_ID()`: the session's id in the proxy.
    SelectConnectionId {
        /// Column name the client sees (the alias, or the expression).
        column: String,
    },
    /// `SELECT VERSION()`, `SELECT @@version`: the proxy's version.
    SelectVersion {
        /// Column name the client sees (the alias, or the expression).
        column: String,
    },
    /// `SHOW [FULL] PROCESSLIST`, `SELECT * FROM
    /// information_schema.PROCESSLIST [WHERE ID = n]`: the proxy's sessions
    /// of the same account.
    ProcessList {
        /// FULL: the whole statement text, not its first 100 characters.
        full: bool,
        /// The information_schema table's columns (else SHOW's).
        table: bool,
        /// Only the session with this id.
        id: Option<u64>,
    },
    /// `KILL [CONNECTION | QUERY] n`: cancels session `n`'s statement, or
    /// ends the session.
    Kill {
        /// QUERY: only the statement.
        query: bool,
        /// The session id.
        id: u64,
    },
    /// `SAVEPOINT x`, `ROLLBACK TO [SAVEPOINT] x`, `RELEASE SAVEPOINT x`:
    /// sent to the transaction's bound connection (kept until it binds).
    Savepoint {
        /// The original statement text.
        sql: SqlText,
    },
}

impl SessionAction {
    /// Whether the proxy answers it with a result set (else with an OK).
    pub fn answers_rows(&self) -> bool {
        matches!(
            self,
            SessionAction::SelectDatabase { .. }
                | SessionAction::SelectSessionValues { .. }
                | SessionAction::SelectLastInsertId { .. }
                | SessionAction::SelectConnectionId { .. }
                | SessionAction::SelectVersion { .. }
                | SessionAction::ProcessList { .. }
        )
    }
}

/// A session variable the proxy answers from the session's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionValue {
    /// `@@autocommit`: 1 or 0.
    Autocommit,
    /// `@@in_transaction`: whether a transaction is open, 1 or 0.
    InTransaction,
}

/// The routing decision for one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Run on one shard.
    Shard(ShardQuery),
    /// A read over several shards (an IN list spanning shards, or an
    /// explicit `/*+ SCATTER */`), merged by the proxy.
    MultiShard(MultiShardQuery),
    /// A statement that touches no sharded table (`SELECT 1`, `SELECT
    /// @@version`, `SHOW VARIABLES`): run unchanged on any healthy master.
    AnyHost {
        /// Text to send (the original).
        sql: SqlText,
        /// It calls a function that writes, or may
        /// ([`ShardQuery::writes_through_function`]).
        writes_through_function: bool,
    },
    /// Handled by the proxy itself.
    Session(SessionAction),
    /// `SHOW WARNINGS`, `SHOW ERRORS`, `SHOW COUNT(*) WARNINGS`,
    /// `SELECT @@warning_count` / `@@error_count`: about the previous
    /// statement, so run on the connection that ran it.
    Diagnostics {
        /// Text to send (the original).
        sql: SqlText,
        /// What it asks, for the answer the proxy gives itself when the
        /// previous statement left nothing to show.
        asked: Diagnostics,
    },
    /// Refused, with the error the client will see.
    Reject(RouteError),
}

impl Plan {
    /// Marks a plan whose statement calls a function that writes, or may
    /// (every part of a multi-shard read; a `SET`'s value).
    pub fn with_function_writes(mut self) -> Plan {
        match &mut self {
            Plan::Shard(query) => query.writes_through_function = true,
            Plan::MultiShard(query) => {
                for part in &mut query.parts {
                    part.writes_through_function = true;
                }
            }
            Plan::AnyHost {
                writes_through_function,
                ..
            }
            | Plan::Session(SessionAction::SetSession {
                writes_through_function,
                ..
            }) => *writes_through_function = true,
            _ => {}
        }
        self
    }

    /// The plan with its shard statements marked as leaving session state
    /// on their connection ([`ShardQuery::leaves_session_state`]).
    pub fn with_session_state(mut self) -> Plan {
        match &mut self {
            Plan::Shard(query) => query.leaves_session_state = true,
            Plan::MultiShard(query) => {
                for part in &mut query.parts {
                    part.leaves_session_state = true;
                }
            }
            _ => {}
        }
        self
    }

    /// Whether it calls a function that writes, or may: a sequence
    /// (`NEXTVAL`, `SETVAL`, `NEXT VALUE FOR`), a user lock (`GET_LOCK`,
    /// `RELEASE_LOCK`, `RELEASE_ALL_LOCKS`), a stored function or UDF.
    pub fn writes_through_function(&self) -> bool {
        match self {
            Plan::Shard(query) => query.writes_through_function,
            Plan::MultiShard(query) => query.parts.iter().any(|p| p.writes_through_function),
            Plan::AnyHost {
                writes_through_function,
                ..
            }
            | Plan::Session(SessionAction::SetSession {
                writes_through_function,
                ..
            }) => *writes_through_function,
            _ => false,
        }
    }

    /// Whether the server would commit an open transaction to run it:
    /// `COMMIT`, `BEGIN` / `START TRANSACTION` (any characteristics),
    /// `SET autocommit = 1` (alone or with other variables), a schema
    /// change. With a transaction bound to a shard, each ends it with a
    /// commit.
    pub fn commits_transaction(&self) -> bool {
        match self {
            Plan::Shard(query) => query.kind == StatementKind::SchemaChange,
            Plan::Session(
                SessionAction::Commit
                | SessionAction::Begin { .. }
                | SessionAction::SetAutocommit(true)
                | SessionAction::SetSession {
                    autocommit: Some(true),
                    ..
                },
            ) => true,
            _ => false,
        }
    }
}

/// Which list of the previous statement's diagnostics a statement reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticsArea {
    /// Its warnings (`SHOW WARNINGS`, which lists errors and notes too).
    Warnings,
    /// Its errors only (`SHOW ERRORS`).
    Errors,
}

/// What a diagnostics statement asks about the previous statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diagnostics {
    /// `SHOW WARNINGS` / `SHOW ERRORS` (with or without `LIMIT`): the rows
    /// (Level, Code, Message).
    List(DiagnosticsArea),
    /// `SHOW COUNT(*) WARNINGS` / `SHOW COUNT(*) ERRORS`: the count, in a
    /// column named `@@session.warning_count` / `@@session.error_count`.
    Count(DiagnosticsArea),
    /// A table-less `SELECT` of `@@warning_count` / `@@error_count` and
    /// literals: one column per item.
    Select {
        /// The select list's columns, in order.
        columns: Vec<DiagnosticsColumn>,
        /// When the list also reads other system variables: the statement
        /// with each count written as `0` (named as before), for any
        /// server to answer when the previous statement left nothing.
        fallback: Option<SqlText>,
    },
}

/// One item of a table-less `SELECT` of the diagnostics counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagnosticsColumn {
    /// The column's name as a server gives it: the alias, the item as
    /// written, or a string literal's value.
    pub name: String,
    /// What the column holds.
    pub value: DiagnosticsValue,
}

/// The value of a [`DiagnosticsColumn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiagnosticsValue {
    /// `@@warning_count` (`Warnings`) or `@@error_count` (`Errors`).
    Count(DiagnosticsArea),
    /// A number literal, as written.
    Number(String),
    /// A string literal's value.
    Text(String),
    /// `NULL`.
    Null,
    /// Another session system variable, a server's to answer.
    Variable,
}

/// Why a statement cannot be routed. Becomes a MySQL error packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The SQL does not parse (MySQL code 1064).
    #[error("You have an error in your SQL syntax: {0}")]
    Syntax(String),
    /// Nothing but blanks and `;` (1065, as a server answers).
    #[error("Query was empty")]
    EmptyQuery,
    /// The table is not a logical table and not a shard database table (1146).
    #[error("Table '{0}' doesn't exist in shardgate's config")]
    UnknownTable(String),
    /// The database named is not a shard database of any fleet (1049).
    #[error("Unknown database '{0}'")]
    UnknownDatabase(String),
    /// A sharded table without a usable shard key (1105).
    #[error("shardgate: no shard key for table '{table}': expected {expected}")]
    NoShardKey {
        /// Logical table name.
        table: String,
        /// What would have routed it (`WHERE id = <id>`, a hint, ...).
        expected: String,
    },
    /// An ID that is malformed or does not belong to the table (1105).
    #[error("shardgate: bad id {id}: {reason}")]
    BadId {
        /// The ID as written.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A malformed or out-of-range shardgate hint (`SHARD(n)` with no such
    /// shard, `SCATTER(1)`, ...) (1105).
    #[error("shardgate: bad hint {hint}: {reason}")]
    BadHint {
        /// The hint as written.
        hint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A statement whose parts resolve to different shards (1105).
    #[error("shardgate: statement spans several shards ({0}); writes and single-shard reads must name one shard")]
    CrossShard(String),
    /// A statement shardgate understands but does not support (1105).
    #[error("shardgate: unsupported statement: {0}")]
    Unsupported(String),
    /// A statement nested deeper than the router analyses (1105).
    #[error("shardgate: statement nested too deeply: {0}")]
    TooDeep(String),
    /// A statement on a schema clients may not reach through the proxy
    /// (`mysql`, `performance_schema`, `sys`; writes to
    /// `information_schema`) (1142, as the server's table access error).
    #[error("{command} command denied for table '{table}' (shardgate: {reason})")]
    SystemSchema {
        /// What the statement does (`SELECT`, `INSERT`, ...).
        command: String,
        /// The table as named (`mysql.user`).
        table: String,
        /// Why it is refused.
        reason: String,
    },
    /// A construct whose reading by the server shardgate cannot be sure
    /// of (1105): refused rather than guessed.
    #[error("shardgate: {0}; refused because the server could read it differently than shardgate")]
    Unreadable(String),
}

impl RouteError {
    /// The MySQL error code the client gets.
    pub fn code(&self) -> u16 {
        match self {
            RouteError::Syntax(_) => 1064,
            RouteError::EmptyQuery => 1065,
            RouteError::UnknownTable(_) => 1146,
            RouteError::UnknownDatabase(_) => 1049,
            RouteError::SystemSchema { .. } => 1142,
            _ => 1105,
        }
    }

    /// The SQLSTATE the client gets.
    pub fn sql_state(&self) -> &'static str {
        match self {
            RouteError::Syntax(_) | RouteError::EmptyQuery => "42000",
            RouteError::UnknownTable(_) => "42S02",
            RouteError::UnknownDatabase(_) | RouteError::SystemSchema { .. } => "42000",
            _ => "HY000",
        }
    }
}

/// Chooses a shard for an INSERT with no hint (the placement policy).
pub trait Placement {
    /// A shard in `first..=last`.
    fn choose(&mut self, first: u32, last: u32) -> u32;
}

/// What the router needs to know about the client session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteContext {
    /// The shard database selected with `USE`, if any.
    pub current_db: Option<(FleetId, u32)>,
    /// How the server will read the statement's text.
    pub lex: LexMode,
    /// Most tokens a statement may have (`limits.max_statement_tokens`):
    /// past it the statement is refused before it is parsed, so analysis
    /// time and memory stay linear in a bounded size.
    pub max_tokens: u64,
    /// The session's last insert ID (the composed 64-bit ID): what
    /// `LAST_INSERT_ID()` in a statement sent to a backend stands for.
    pub last_insert_id: u64,
    /// What the session's previous statement did, as `ROW_COUNT()` reads
    /// it: the affected rows of its OK, -1 after a result set or an error.
    pub row_count: i64,
    /// The session's autocommit: what `@@autocommit` reads.
    pub autocommit: bool,
    /// Whether the session has an open transaction: what
    /// `@@in_transaction` reads.
    pub in_transaction: bool,
    /// The session's proxy-owned id: what `CONNECTION_ID()` reads.
    pub connection_id: u32,
}

impl Default for RouteContext {
    fn default() -> Self {
        Self {
            current_db: None,
            lex: LexMode::default(),
            max_tokens: crate::topology::config::DEFAULT_MAX_STATEMENT_TOKENS,
            last_insert_id: 0,
            row_count: -1,
            autocommit: true,
            in_transaction: false,
            connection_id: 0,
        }
    }
}

/// The session state that decides how MariaDB's lexer reads a statement:
/// the server's real `sql_mode` flags (as the server reports them, never as
/// guessed from `SET` text), the connection's character set and the
/// server's version (for `/*!NNNNN ... */` comments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LexMode {
    /// `sql_mode` has NO_BACKSLASH_ESCAPES: `\` is an ordinary character
    /// inside string literals.
    pub no_backslash_escapes: bool,
    /// `sql_mode` has ANSI_QUOTES: `"..."` is an identifier, not a string.
    pub ansi_quotes: bool,
    /// `character_set_client`.
    pub charset: ClientCharset,
    /// The backends' version as MariaDB compares it in `/*!NNNNN` and
    /// `/*M!NNNNNN` comments (10.11.19 is 101119).
    pub server_version: u32,
}

/// The version number of a handshake's server version string:
/// `10.11.19-MariaDB-log` and `5.5.5-10.11.19-MariaDB` (the prefix MariaDB
/// sends for old clients) are both 101119.
pub fn version_number(text: &str) -> Option<u32> {
    let text = match text.strip_prefix("5.5.5-") {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => text,
    };
    let mut parts = text.splitn(3, '.');
    let mut number = |max: u32| -> Option<u32> {
        let part = parts.next()?;
        let end = part
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(part.len());
        part.get(..end)?.parse().ok().filter(|n| *n <= max)
    };
    let (major, minor, patch) = (number(99)?, number(99)?, number(99)?);
    Some(major * 10_000 + minor * 100 + patch)
}

impl Default for LexMode {
    fn default() -> Self {
        Self {
            no_backslash_escapes: false,
            ansi_quotes: false,
            charset: ClientCharset::Utf8,
            server_version: DEFAULT_SERVER_VERSION,
        }
    }
}

/// Storage engines a table created or changed through the proxy may use
/// (named in the statement or as the session's default engine): the
/// others reach other tables or servers (MERGE, CONNECT, FEDERATED,
/// SPIDER, ...).
pub const SCHEMA_ENGINES: [&str; 5] = ["InnoDB", "Aria", "MyISAM", "MEMORY", "HEAP"];

/// The version assumed for `/*!NNNNN` comments until the backends' real
/// version is known (MariaDB 10.11.0).
pub const DEFAULT_SERVER_VERSION: u32 = 101100;

/// `character_set_client`, as far as the lexer cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientCharset {
    /// utf8mb3 / utf8mb4: text is read as UTF-8.
    #[default]
    Utf8,
    /// Any other character set in which no byte of a multibyte character
    /// is below 0x80 (latin1, binary, ascii, ujis, euckr, ...): every
    /// ASCII byte is that character.
    AsciiSafe,
    /// A character set whose multibyte characters may have a trail byte in
    /// the ASCII range, `\` (0x5C) and `` ` `` among them: the lexer must
    /// step over whole characters.
    AsciiTrail(TrailCharset),
}

/// The character sets whose trail bytes may be ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrailCharset {
    /// big5: lead 0xA1-0xF9, trail 0x40-0x7E or 0xA1-0xFE.
    Big5,
    /// gbk: lead 0x81-0xFE, trail 0x40-0x7E or 0x80-0xFE.
    Gbk,
    /// sjis and cp932: lead 0x81-0x9F or 0xE0-0xFC, trail 0x40-0x7E or 0x80-0xFC.
    Sjis,
}

impl ClientCharset {
    /// The lexer class of a MariaDB character set name (`utf8mb4`, `gbk`,
    /// ...); `None` for one a client cannot use as `character_set_client`
    /// (ucs2, utf16, utf32) or that shardgate does not know.
    pub fn from_name(name: &str) -> Option<ClientCharset> {
        let name = name.to_ascii_lowercase();
        Some(match name.as_str() {
            "utf8" | "utf8mb3" | "utf8mb4" => ClientCharset::Utf8,
            "big5" => ClientCharset::AsciiTrail(TrailCharset::Big5),
            "gbk" => ClientCharset::AsciiTrail(TrailCharset::Gbk),
            "sjis" | "cp932" => ClientCharset::AsciiTrail(TrailCharset::Sjis),
            "latin1" | "latin2" | "latin5" | "latin7" | "binary" | "ascii" | "cp1250"
            | "cp1251" | "cp1256" | "cp1257" | "cp850" | "cp852" | "cp866" | "dec8" | "greek"
            | "hebrew" | "hp8" | "keybcs2" | "koi8r" | "koi8u" | "macce" | "macroman" | "swe7"
            | "tis620" | "armscii8" | "geostd8" | "ujis" | "eucjpms" | "euckr" | "gb2312" => {
                ClientCharset::AsciiSafe
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::version_number;

    #[test]
    fn version_numbers() {
        assert_eq!(version_number("10.11.19-MariaDB-log"), Some(101119));
        assert_eq!(version_number("5.5.5-10.11.19-MariaDB"), Some(101119));
        assert_eq!(version_number("8.0.36"), Some(80036));
        assert_eq!(version_number("5.5.5"), Some(50505));
        assert_eq!(version_number("junk"), None);
        assert_eq!(version_number("10.11"), None);
    }
}
