//! Statement statistics: per statement kind and per host, a count, an error
//! count and a latency histogram, kept in atomics so recording costs a few
//! relaxed increments on the hot path. Read by `SHOW STATS` and `/metrics`.
//! Also per statement digest (`digest`), per virtual shard (`shards`) and
//! the slow-statement log's rate limit (`slow`).

pub mod digest;
pub mod histogram;
pub mod http;
pub mod operator;
mod prometheus;
pub mod shards;
pub mod slow;

use std::time::Duration;

pub use histogram::{Histogram, HistogramSummary, Snapshot};
pub use prometheus::prometheus;

/// What kind of command a client sent, as counted in the statistics.
/// Decided from the command byte and the first keyword of the text, with
/// no parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandClass {
    /// `SELECT`, `WITH`, `VALUES`, `TABLE` (including multi-shard reads).
    Select,
    /// `INSERT`.
    Insert,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// `REPLACE`.
    Replace,
    /// `SET`.
    Set,
    /// `USE` and COM_INIT_DB.
    Use,
    /// `BEGIN`, `START`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`, `RELEASE`.
    Transaction,
    /// `SHOW`, `DESCRIBE`/`DESC`, `EXPLAIN`, COM_FIELD_LIST.
    Show,
    /// Any other text statement.
    Other,
    /// COM_STMT_PREPARE.
    Prepare,
    /// COM_STMT_EXECUTE.
    Execute,
    /// Commands the proxy answers itself: COM_PING, COM_STATISTICS,
    /// COM_RESET_CONNECTION, COM_SET_OPTION, COM_CHANGE_USER,
    /// COM_STMT_RESET, and unsupported commands.
    Command,
}

impl CommandClass {
    /// Every kind, in the order they are reported.
    pub const ALL: [CommandClass; 13] = [
        CommandClass::Select,
        CommandClass::Insert,
        CommandClass::Update,
        CommandClass::Delete,
        CommandClass::Replace,
        CommandClass::Set,
        CommandClass::Use,
        CommandClass::Transaction,
        CommandClass::Show,
        CommandClass::Other,
        CommandClass::Prepare,
        CommandClass::Execute,
        CommandClass::Command,
    ];

    /// The label used in `SHOW STATS` and `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            CommandClass::Select => "select",
            CommandClass::Insert => "insert",
            CommandClass::Update => "update",
            CommandClass::Delete => "delete",
            CommandClass::Replace => "replace",
            CommandClass::Set => "set",
            CommandClass::Use => "use",
            CommandClass::Transaction => "transaction",
            CommandClass::Show => "show",
            CommandClass::Other => "other",
            CommandClass::Prepare => "prepare",
            CommandClass::Execute => "execute",
            CommandClass::Command => "command",
        }
    }

    /// The kind of a client command packet (`command` byte, `body` after
    /// it); `None` for commands that get no answer (COM_QUIT,
    /// COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA), which are not counted.
    pub fn of(command: u8, body: &[u8]) -> Option<CommandClass> {
        use mysql_common::constants::Command;
        const QUERY: u8 = Command::COM_QUERY as u8;
        const INIT_DB: u8 = Command::COM_INIT_DB as u8;
        const FIELD_LIST: u8 = Command::COM_FIELD_LIST as u8;
        const STMT_PREPARE: u8 = Command::COM_STMT_PREPARE as u8;
        const STMT_EXECUTE: u8 = Command::COM_STMT_EXECUTE as u8;
        const QUIT: u8 = Command::COM_QUIT as u8;
        const STMT_SEND_LONG_DATA: u8 = Command::COM_STMT_SEND_LONG_DATA as u8;
        const STMT_CLOSE: u8 = Command::COM_STMT_CLOSE as u8;
        Some(match command {
            QUERY => Self::of_text(body),
            INIT_DB => CommandClass::Use,
            FIELD_LIST => CommandClass::Show,
            STMT_PREPARE => CommandClass::Prepare,
            STMT_EXECUTE => CommandClass::Execute,
            QUIT | STMT_SEND_LONG_DATA | STMT_CLOSE => return None,
            _ => CommandClass::Command,
        })
    }

    /// The kind of an SQL text, from its first keyword (after blanks and
    /// comments).
    pub fn of_text(sql: &[u8]) -> CommandClass {
        let rest = skip_blanks_and_comments(sql);
        let end = rest
            .iter()
            .position(|b| !b.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        // Lowered once (no keyword is longer than the buffer), then
        // compared byte for byte.
        let mut lowered = [0u8; 9];
        let Some(word) = lowered.get_mut(..end) else {
            return CommandClass::Other;
        };
        for (low, &b) in word.iter_mut().zip(rest) {
            *low = b.to_ascii_lowercase();
        }
        let word = &*word;
        KEYWORDS
            .iter()
            .find(|(keyword, _)| keyword.as_bytes() == word)
            .map_or(CommandClass::Other, |&(_, kind)| kind)
    }
}

/// First keywords and the kind they start (lower case, at most 9 letters).
const KEYWORDS: [(&str, CommandClass); 20] = [
    ("select", CommandClass::Select),
    ("insert", CommandClass::Insert),
    ("update", CommandClass::Update),
    ("delete", CommandClass::Delete),
    ("replace", CommandClass::Replace),
    ("set", CommandClass::Set),
    ("use", CommandClass::Use),
    ("begin", CommandClass::Transaction),
    ("start", CommandClass::Transaction),
    ("commit", CommandClass::Transaction),
    ("rollback", CommandClass::Transaction),
    ("savepoint", CommandClass::Transaction),
    ("release", CommandClass::Transaction),
    ("show", CommandClass::Show),
    ("describe", CommandClass::Show),
    ("desc", CommandClass::Show),
    ("explain", CommandClass::Show),
    ("with", CommandClass::Select),
    ("values", CommandClass::Select),
    ("table", CommandClass::Select),
];

/// `sql` without leading blanks, comments (hints included) and opening
/// parentheses.
fn skip_blanks_and_comments(mut sql: &[u8]) -> &[u8] {
    loop {
        sql = match crate::router::skip_blanks_and_comments(sql) {
            [b'(', rest @ ..] => rest,
            rest => return rest,
        }
    }
}

/// Counters for the whole proxy: one histogram per statement kind. Per-host
/// histograms live in each host's state (`backend::pool::HostState`), which
/// outlives the host's pools.
#[derive(Debug, Default)]
pub struct Stats {
    statements: [Histogram; CommandClass::ALL.len()],
    routes: [Histogram; digest::RouteKind::ALL.len()],
    /// Per statement digest (`SHOW DIGESTS`).
    pub digests: digest::Digests,
    /// Per virtual shard (`SHOW SHARD STATS`).
    pub shards: shards::ShardStats,
    /// The slow-statement log's rate limit.
    pub slow_log: slow::SlowLogLimit,
    /// Events outside the statement path (refused clients, promotions).
    pub operator: operator::OperatorCounters,
}

impl Stats {
    /// Empty counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one answered command: from receipt to answer written, and
    /// whether the answer was an error.
    #[inline]
    pub fn record(&self, kind: CommandClass, elapsed: Duration, error: bool) {
        self.statements[kind as usize].record(elapsed, error);
    }

    /// The histogram of one kind.
    pub fn statement(&self, kind: CommandClass) -> &Histogram {
        &self.statements[kind as usize]
    }

    /// Records one statement the router saw (a multi-statement's parts one
    /// by one), under how it was routed.
    #[inline]
    pub fn record_route(&self, route: digest::RouteKind, elapsed: Duration, error: bool) {
        self.routes[route as usize].record(elapsed, error);
    }

    /// The histogram of one route kind.
    pub fn route(&self, route: digest::RouteKind) -> &Histogram {
        &self.routes[route as usize]
    }
}

/// One line of `SHOW STATS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsRow {
    /// `"statement"` (a statement kind) or `"host"` (statements sent to a
    /// backend host).
    pub scope: &'static str,
    /// The kind (`select`, ...) or the host address.
    pub name: String,
    /// Statements counted.
    pub count: u64,
    /// Of which answered with an error (for a host: the server's error or a
    /// lost connection).
    pub errors: u64,
    /// Median latency, microseconds.
    pub p50_us: u64,
    /// 99th percentile latency, microseconds.
    pub p99_us: u64,
}

impl StatsRow {
    fn new(scope: &'static str, name: String, summary: HistogramSummary) -> Self {
        Self {
            scope,
            name,
            count: summary.count,
            errors: summary.errors,
            p50_us: summary.p50_us,
            p99_us: summary.p99_us,
        }
    }
}

/// What the statistics show of one backend host: its statement
/// histogram, its last health checks and its pool, copied by the owner of
/// the host pools (`backend::Backends::figures`).
#[derive(Debug, Clone)]
pub struct HostFigures {
    /// The host's address.
    pub addr: String,
    /// Statements sent to the host.
    pub statements: Snapshot,
    /// Whether the last health checks found the host up.
    pub up: bool,
    /// How long the last good health check took.
    pub check_latency: Option<Duration>,
    /// Health checks run.
    pub checks: u64,
    /// Health checks that failed.
    pub check_failures: u64,
    /// The fleets the host serves (comma-separated; empty once retired).
    pub fleet: String,
    /// `master`, `replica`, `master,replica` or `retired`.
    pub role: &'static str,
    /// Connections checked out of the host's pool to run a statement.
    pub checkouts: u64,
    /// How long checkouts waited for a place in the pool.
    pub pool_wait: Snapshot,
    /// Checkouts that found no connection free within
    /// `backend.checkout_timeout_ms` (the pool's or the session's share).
    pub checkout_timeouts: u64,
    /// For a replica: its lag as the health checker last read it.
    pub lag: Option<LagFigures>,
    /// Failed connects and broken connections.
    pub errors: u64,
    /// Connections checked out now.
    pub in_use: usize,
    /// Idle connections in the pool.
    pub idle: usize,
}

impl HostFigures {
    /// A host as a pool shows it before any statement or check.
    pub fn unchecked(addr: &str) -> Self {
        Self {
            addr: addr.to_owned(),
            statements: Histogram::new().snapshot(),
            up: false,
            check_latency: None,
            checks: 0,
            check_failures: 0,
            fleet: String::new(),
            role: "retired",
            checkouts: 0,
            pool_wait: Histogram::new().snapshot(),
            checkout_timeouts: 0,
            errors: 0,
            in_use: 0,
            idle: 0,
            lag: None,
        }
    }
}

/// A replica's lag as `/metrics` exports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LagFigures {
    /// How long it has been missing a transaction its master had (none:
    /// not read).
    pub lag: Option<Duration>,
    /// `Seconds_Behind_Master` (none when NULL or not read).
    pub seconds_behind_master: Option<u64>,
    /// Transactions of the master's GTID position it has not applied.
    pub gtid_behind: Option<u64>,
    /// Whether its SQL thread runs.
    pub sql_running: bool,
}

/// Every statement kind seen so far in `stats`, then every host of `hosts`
/// (the hosts with a pool, sorted by address).
pub fn snapshot(stats: &Stats, hosts: &[HostFigures]) -> Vec<StatsRow> {
    let statements = CommandClass::ALL.into_iter().filter_map(|kind| {
        let summary = stats.statement(kind).summary();
        (summary.count > 0).then(|| StatsRow::new("statement", kind.name().to_owned(), summary))
    });
    let hosts = hosts
        .iter()
        .map(|host| StatsRow::new("host", host.addr.clone(), host.statements.summary()));
    statements.chain(hosts).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_first_keyword() {
        let cases: &[(&str, CommandClass)] = &[
            ("SELECT 1", CommandClass::Select),
            ("  select * from pins", CommandClass::Select),
            (
                "/*+ SHARD(3) */ insert INTO pins VALUES (1)",
                CommandClass::Insert,
            ),
            ("(SELECT 1) UNION (SELECT 2)", CommandClass::Select),
            ("-- note\nUPDATE pins SET data = 'x'", CommandClass::Update),
            ("# note\nDelete FROM pins", CommandClass::Delete),
            ("REPLACE INTO pins VALUES (1)", CommandClass::Replace),
            ("SET autocommit = 0", CommandClass::Set),
            ("use db00001", CommandClass::Use),
            ("BEGIN", CommandClass::Transaction),
            ("START TRANSACTION", CommandClass::Transaction),
            ("rollback", CommandClass::Transaction),
            ("SAVEPOINT a", CommandClass::Transaction),
            ("RELEASE SAVEPOINT a", CommandClass::Transaction),
            ("commit", CommandClass::Transaction),
            ("SHOW TABLES", CommandClass::Show),
            ("describe pins", CommandClass::Show),
            ("EXPLAIN SELECT 1", CommandClass::Show),
            ("WITH a AS (SELECT 1) SELECT * FROM a", CommandClass::Select),
            ("DO 1", CommandClass::Other),
            ("selected", CommandClass::Other),
            ("SeLeCt 1", CommandClass::Select),
            ("SAVEPOINTS a", CommandClass::Other),
            ("savepointsx", CommandClass::Other),
            ("DESC pins", CommandClass::Show),
            ("sel", CommandClass::Other),
            ("", CommandClass::Other),
            ("/* unterminated", CommandClass::Other),
        ];
        for (sql, kind) in cases {
            assert_eq!(CommandClass::of(0x03, sql.as_bytes()), Some(*kind), "{sql}");
        }
    }

    #[test]
    fn every_keyword_fits_the_lowered_word() {
        for (keyword, _) in KEYWORDS {
            assert!(keyword.len() <= 9, "{keyword}");
            assert_eq!(keyword, keyword.to_ascii_lowercase());
            let upper = keyword.to_ascii_uppercase();
            assert_ne!(CommandClass::of_text(upper.as_bytes()), CommandClass::Other);
        }
    }

    #[test]
    fn kinds_of_other_commands() {
        assert_eq!(CommandClass::of(0x02, b"db1"), Some(CommandClass::Use));
        assert_eq!(
            CommandClass::of(0x16, b"SELECT ?"),
            Some(CommandClass::Prepare)
        );
        assert_eq!(CommandClass::of(0x17, b""), Some(CommandClass::Execute));
        assert_eq!(CommandClass::of(0x0E, b""), Some(CommandClass::Command));
        assert_eq!(CommandClass::of(0x01, b""), None);
        assert_eq!(CommandClass::of(0x19, b""), None);
    }

    #[test]
    fn kinds_index_their_own_histogram() {
        let stats = Stats::new();
        for (index, kind) in CommandClass::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, index);
            stats.record(kind, Duration::from_micros(10), false);
        }
        stats.record(CommandClass::Delete, Duration::from_micros(10), true);
        assert_eq!(stats.statement(CommandClass::Delete).summary().count, 2);
        assert_eq!(stats.statement(CommandClass::Delete).summary().errors, 1);
        assert_eq!(stats.statement(CommandClass::Insert).summary().errors, 0);
    }
}
