//! Statement statistics: per statement kind and per host, a count, an error
//! count and a latency histogram, kept in atomics so recording costs a few
//! relaxed increments on the hot path. Read by `SHOW STATS` and `/metrics`.

pub mod histogram;
pub mod http;
mod prometheus;

use std::time::Duration;

pub use histogram::{Histogram, HistogramSummary, Snapshot};
pub use prometheus::prometheus;

/// What kind of command a client sent, as counted in the statistics.
/// Decided from the command byte and the first keyword of the text, with
/// no parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
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

impl StatementKind {
    /// Every kind, in the order they are reported.
    pub const ALL: [StatementKind; 13] = [
        StatementKind::Select,
        StatementKind::Insert,
        StatementKind::Update,
        StatementKind::Delete,
        StatementKind::Replace,
        StatementKind::Set,
        StatementKind::Use,
        StatementKind::Transaction,
        StatementKind::Show,
        StatementKind::Other,
        StatementKind::Prepare,
        StatementKind::Execute,
        StatementKind::Command,
    ];

    /// The label used in `SHOW STATS` and `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            StatementKind::Select => "select",
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
            StatementKind::Replace => "replace",
            StatementKind::Set => "set",
            StatementKind::Use => "use",
            StatementKind::Transaction => "transaction",
            StatementKind::Show => "show",
            StatementKind::Other => "other",
            StatementKind::Prepare => "prepare",
            StatementKind::Execute => "execute",
            StatementKind::Command => "command",
        }
    }

    /// The kind of a client command packet (`command` byte, `body` after
    /// it); `None` for commands that get no answer (COM_QUIT,
    /// COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA), which are not counted.
    pub fn of(command: u8, body: &[u8]) -> Option<StatementKind> {
        Some(match command {
            0x03 => Self::of_text(body),
            0x02 => StatementKind::Use,
            0x04 => StatementKind::Show,
            0x16 => StatementKind::Prepare,
            0x17 => StatementKind::Execute,
            0x01 | 0x18 | 0x19 => return None,
            _ => StatementKind::Command,
        })
    }

    /// The kind of an SQL text, from its first keyword (after blanks and
    /// comments).
    pub fn of_text(sql: &[u8]) -> StatementKind {
        let rest = skip_blanks_and_comments(sql);
        let end = rest
            .iter()
            .position(|b| !b.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let word = &rest[..end];
        KEYWORDS
            .iter()
            .find(|(keyword, _)| word.eq_ignore_ascii_case(keyword.as_bytes()))
            .map_or(StatementKind::Other, |&(_, kind)| kind)
    }
}

/// First keywords and the kind they start.
const KEYWORDS: [(&str, StatementKind); 20] = [
    ("select", StatementKind::Select),
    ("insert", StatementKind::Insert),
    ("update", StatementKind::Update),
    ("delete", StatementKind::Delete),
    ("replace", StatementKind::Replace),
    ("set", StatementKind::Set),
    ("use", StatementKind::Use),
    ("begin", StatementKind::Transaction),
    ("start", StatementKind::Transaction),
    ("commit", StatementKind::Transaction),
    ("rollback", StatementKind::Transaction),
    ("savepoint", StatementKind::Transaction),
    ("release", StatementKind::Transaction),
    ("show", StatementKind::Show),
    ("describe", StatementKind::Show),
    ("desc", StatementKind::Show),
    ("explain", StatementKind::Show),
    ("with", StatementKind::Select),
    ("values", StatementKind::Select),
    ("table", StatementKind::Select),
];

/// `sql` without leading blanks, `/* */` comments (hints included), `-- `
/// and `#` line comments, and opening parentheses.
fn skip_blanks_and_comments(mut sql: &[u8]) -> &[u8] {
    loop {
        match sql {
            [b' ' | b'\t' | b'\r' | b'\n' | b'(', rest @ ..] => sql = rest,
            [b'/', b'*', rest @ ..] => {
                sql = match rest.windows(2).position(|w| w == b"*/") {
                    Some(end) => &rest[end + 2..],
                    None => &[],
                }
            }
            [b'#', rest @ ..] | [b'-', b'-', rest @ ..] => {
                sql = match rest.iter().position(|&b| b == b'\n') {
                    Some(end) => &rest[end + 1..],
                    None => &[],
                }
            }
            _ => return sql,
        }
    }
}

/// Counters for the whole proxy: one histogram per statement kind. Per-host
/// histograms live in each host's state (`backend::pool::HostState`), which
/// outlives the host's pools.
#[derive(Debug, Default)]
pub struct Stats {
    statements: [Histogram; StatementKind::ALL.len()],
}

impl Stats {
    /// Empty counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one answered command: from receipt to answer written, and
    /// whether the answer was an error.
    #[inline]
    pub fn record(&self, kind: StatementKind, elapsed: Duration, error: bool) {
        self.statements[kind as usize].record(elapsed, error);
    }

    /// The histogram of one kind.
    pub fn statement(&self, kind: StatementKind) -> &Histogram {
        &self.statements[kind as usize]
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
    /// Connections checked out of the host's pool to run a statement.
    pub checkouts: u64,
    /// Failed connects and broken connections.
    pub errors: u64,
    /// Connections checked out now.
    pub in_use: usize,
    /// Idle connections in the pool.
    pub idle: usize,
}

/// Every statement kind seen so far in `stats`, then every host of `hosts`
/// (the hosts with a pool, sorted by address).
pub fn snapshot(stats: &Stats, hosts: &[HostFigures]) -> Vec<StatsRow> {
    let statements = StatementKind::ALL.into_iter().filter_map(|kind| {
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
        let cases: &[(&str, StatementKind)] = &[
            ("SELECT 1", StatementKind::Select),
            ("  select * from pins", StatementKind::Select),
            (
                "/*+ SHARD(3) */ insert INTO pins VALUES (1)",
                StatementKind::Insert,
            ),
            ("(SELECT 1) UNION (SELECT 2)", StatementKind::Select),
            ("-- note\nUPDATE pins SET data = 'x'", StatementKind::Update),
            ("# note\nDelete FROM pins", StatementKind::Delete),
            ("REPLACE INTO pins VALUES (1)", StatementKind::Replace),
            ("SET autocommit = 0", StatementKind::Set),
            ("use db00001", StatementKind::Use),
            ("BEGIN", StatementKind::Transaction),
            ("START TRANSACTION", StatementKind::Transaction),
            ("rollback", StatementKind::Transaction),
            ("SAVEPOINT a", StatementKind::Transaction),
            ("RELEASE SAVEPOINT a", StatementKind::Transaction),
            ("commit", StatementKind::Transaction),
            ("SHOW TABLES", StatementKind::Show),
            ("describe pins", StatementKind::Show),
            ("EXPLAIN SELECT 1", StatementKind::Show),
            (
                "WITH a AS (SELECT 1) SELECT * FROM a",
                StatementKind::Select,
            ),
            ("DO 1", StatementKind::Other),
            ("selected", StatementKind::Other),
            ("", StatementKind::Other),
            ("/* unterminated", StatementKind::Other),
        ];
        for (sql, kind) in cases {
            assert_eq!(
                StatementKind::of(0x03, sql.as_bytes()),
                Some(*kind),
                "{sql}"
            );
        }
    }

    #[test]
    fn kinds_of_other_commands() {
        assert_eq!(StatementKind::of(0x02, b"db1"), Some(StatementKind::Use));
        assert_eq!(
            StatementKind::of(0x16, b"SELECT ?"),
            Some(StatementKind::Prepare)
        );
        assert_eq!(StatementKind::of(0x17, b""), Some(StatementKind::Execute));
        assert_eq!(StatementKind::of(0x0E, b""), Some(StatementKind::Command));
        assert_eq!(StatementKind::of(0x01, b""), None);
        assert_eq!(StatementKind::of(0x19, b""), None);
    }

    #[test]
    fn kinds_index_their_own_histogram() {
        let stats = Stats::new();
        for (index, kind) in StatementKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, index);
            stats.record(kind, Duration::from_micros(10), false);
        }
        stats.record(StatementKind::Delete, Duration::from_micros(10), true);
        assert_eq!(stats.statement(StatementKind::Delete).summary().count, 2);
        assert_eq!(stats.statement(StatementKind::Delete).summary().errors, 1);
        assert_eq!(stats.statement(StatementKind::Insert).summary().errors, 0);
    }
}
