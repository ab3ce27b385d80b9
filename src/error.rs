//! Errors that reach a client, with the MySQL code and SQLSTATE they carry
//! at the edge.

use crate::router::RouteError;

/// An error answered to a client as a MySQL ERR packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The statement could not be routed.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// A backend answered with an error; relayed as it came.
    #[error("{message}")]
    Backend {
        /// MySQL error code from the server.
        code: u16,
        /// SQLSTATE from the server.
        sql_state: String,
        /// Message from the server.
        message: String,
    },
    /// The host serving a shard cannot be used.
    #[error("shardgate: shard {shard} of fleet {fleet} is on host {host}, which is unavailable: {reason}")]
    HostUnavailable {
        /// Fleet name.
        fleet: String,
        /// Shard number.
        shard: u32,
        /// Host address.
        host: String,
        /// What went wrong (connect refused, timed out, pool exhausted ...).
        reason: String,
    },
    /// A backend connection failed while serving a statement.
    #[error("shardgate: lost the connection to host {host} while running the statement: {reason}")]
    BackendLost {
        /// Host address.
        host: String,
        /// The I/O error.
        reason: String,
    },
    /// A transaction rule was broken (a second shard in one transaction).
    #[error("shardgate: {0}")]
    Transaction(String),
    /// Bad credentials (1045).
    #[error("Access denied for user '{user}' (using password: {using_password})")]
    AccessDenied {
        /// Account name the client gave.
        user: String,
        /// `YES` or `NO`, as MySQL reports it.
        using_password: &'static str,
    },
    /// A command the proxy does not implement, or a malformed command
    /// packet (1047).
    #[error("shardgate: {0}")]
    UnsupportedCommand(String),
    /// A fault inside the proxy, not the client's doing (1105): a task
    /// that died, a shape the proxy cannot encode.
    #[error("shardgate: internal error: {0}")]
    Internal(String),
    /// A client packet over the proxy's limit, or long data or a prepared
    /// statement past `limits.max_allowed_packet` (1153).
    #[error("Got a packet bigger than 'max_allowed_packet' bytes: {0}")]
    PacketTooLarge(String),
    /// A command that needs `USE dbNNNNN` first (1046).
    #[error("No database selected")]
    NoDatabaseSelected,
    /// COM_STMT_EXECUTE for a statement id the session does not have (1243).
    #[error("Unknown prepared statement handler ({0}) given to mysqld_stmt_execute")]
    UnknownStatement(u32),
    /// A malformed COM_STMT_EXECUTE (1210).
    #[error("Incorrect arguments to mysqld_stmt_execute: {0}")]
    BadExecute(String),
    /// The session's prepared-statement limit (1461).
    #[error("Can't create more than max_prepared_stmt_count statements (shardgate: limits.max_prepared_statements is {0} per session; close some with COM_STMT_CLOSE)")]
    TooManyPrepared(usize),
    /// A per-session bound of the `limits` section (recorded SETs, prepared
    /// statement text held) (1105); the message names the limit.
    #[error("shardgate: {0}")]
    SessionLimit(String),
    /// A multi-shard merge that would hold too much (1105).
    #[error("shardgate: a multi-shard read needs more than limits.max_merge_bytes ({0} bytes) to merge its parts (rows, column definitions, per-part overhead); add a LIMIT, select fewer columns or narrow the IN list")]
    MergeTooLarge(u64),
    /// The process's multi-shard reads together hold
    /// `limits.max_merge_bytes_total` (1105).
    #[error("shardgate: the multi-shard reads running in this proxy together hold limits.max_merge_bytes_total ({0} bytes); this read was stopped rather than exhaust the proxy's memory. Retry shortly, add a LIMIT, select fewer columns or narrow the IN list")]
    MergeBudgetExhausted(u64),
    /// A healthy shard's part of a multi-shard read that ran past
    /// `limits.multi_shard_part_timeout_ms` (1969, as MariaDB's statement
    /// timeout); the whole statement failed.
    #[error("shardgate: shard {shard} of fleet {fleet} (host {host}) did not finish its part of a multi-shard read within limits.multi_shard_part_timeout_ms ({timeout_ms} ms); the statement was cancelled on every shard. Raise limits.multi_shard_part_timeout_ms, or narrow or speed up the read")]
    PartTimeout {
        /// Fleet name.
        fleet: String,
        /// The slow part's shard.
        shard: u32,
        /// Its host.
        host: String,
        /// `limits.multi_shard_part_timeout_ms`.
        timeout_ms: u64,
    },
    /// A statement longer than the router analyses (1105).
    #[error("shardgate: the statement is {bytes} bytes, more than limits.max_statement_analysis_bytes ({limit}); send it in smaller statements")]
    StatementTooLarge {
        /// Its length.
        bytes: u64,
        /// `limits.max_statement_analysis_bytes`.
        limit: u64,
    },
    /// A session idle inside an open transaction for longer than
    /// `limits.idle_in_transaction_timeout_ms` (1205); the connection closes.
    #[error("shardgate: the session was idle in an open transaction for more than limits.idle_in_transaction_timeout_ms ({0} ms); the transaction was rolled back and the connection closed")]
    IdleInTransaction(u64),
    /// A healthy host's pool had no connection free for the whole checkout
    /// timeout (1105): other sessions (or this one, past its share) hold
    /// them all.
    #[error("shardgate: the connection pool of host {host}{place} is exhausted; the host itself is healthy: {reason}")]
    PoolExhausted {
        /// Host address.
        host: String,
        /// ` (shard N of fleet F)`, or empty for a statement any master
        /// may answer.
        place: String,
        /// Which limit was reached and how long the checkout waited.
        reason: String,
    },
    /// No backend host is usable for a statement that may run anywhere.
    #[error("shardgate: no healthy master is available: {0}")]
    NoHealthyHost(String),
    /// The statement's shard stayed paused for a cutover longer than
    /// `pause.timeout_ms`; it never ran (1205).
    #[error("shardgate: shard {shard} of fleet {fleet} is paused for a cutover; waited {waited_ms} ms; the statement did not run, retry it")]
    ShardPaused {
        /// Fleet name.
        fleet: String,
        /// The paused shard.
        shard: u32,
        /// How long the statement waited.
        waited_ms: u128,
    },
    /// The shard of the session's open transaction moved to another master
    /// (a reload); the transaction was rolled back on the old one (1213).
    #[error("shardgate: shard {shard} of fleet {fleet} moved from {from} to {to} while this transaction was open; it was rolled back on {from}; try restarting transaction")]
    ShardMoved {
        /// Fleet name.
        fleet: String,
        /// The transaction's shard.
        shard: u32,
        /// The master the transaction ran on.
        from: String,
        /// The shard's master now (or why there is none).
        to: String,
    },
    /// The session's transaction sat idle on a shard being paused (for a
    /// cutover, move or promotion) for 3/4 of `pause.drain_timeout_ms`;
    /// the proxy rolled it back so the pause could complete (1213,
    /// answered to the session's next statement).
    #[error("shardgate: this transaction was rolled back: it sat idle on shard {shard} of fleet {fleet} while the shard was being paused for a cutover (for 3/4 of pause.drain_timeout_ms, {idle_ms} ms); try restarting transaction")]
    IdleDuringPause {
        /// Fleet name.
        fleet: String,
        /// The transaction's shard.
        shard: u32,
        /// How long the transaction may sit idle on a shard being paused.
        idle_ms: u64,
    },
    /// A write, locking read, write through a function (sequence, user
    /// lock, stored function), or a statement that would commit a bound
    /// transaction while this proxy is fenced: it lost its ZooKeeper
    /// session (1105).
    #[error(
        "shardgate: this proxy lost its ZooKeeper session at {}; writes, locking reads, functions that write \
         (sequences, GET_LOCK/RELEASE_LOCK, stored functions) and every statement that would commit a transaction \
         that wrote (COMMIT, BEGIN, SET autocommit=1, schema changes) are refused until it reconnects and reloads \
         the config, because another proxy may have moved shards meanwhile; plain reads are served on the last \
         config. The statement did not run (an open transaction stays open: ROLLBACK it); retry it later or on \
         another proxy",
        crate::clock::format_time(*lost_at)
    )]
    Fenced {
        /// When the session was last known live.
        lost_at: std::time::SystemTime,
    },
    /// `KILL` of a session id the proxy does not have (1094).
    #[error("Unknown thread id: {0}")]
    UnknownThread(u64),
    /// `KILL` of another account's session (1095).
    #[error("You are not owner of thread {0}")]
    NotOwner(u64),
    /// The session's own statement was cancelled by `KILL QUERY` (1317).
    #[error("Query execution was interrupted")]
    QueryInterrupted,
    /// The session was ended by `KILL` (1927); the connection closes.
    #[error("Connection was killed")]
    ConnectionKilled,
    /// The proxy is stopping (SIGTERM): an idle session is closed at a
    /// statement boundary (1053, as a server that shuts down).
    #[error("Server shutdown in progress (shardgate is stopping; connect again to be served by another proxy)")]
    ServerShutdown,
    /// `LOAD DATA LOCAL INFILE` from a client that did not announce
    /// `CLIENT_LOCAL_FILES` (4166, as a server answers).
    #[error("The used command is not allowed because the MariaDB server or client has disabled the local infile capability (shardgate: the client did not enable LOCAL INFILE; enable it in the client, e.g. mariadb --local-infile=1)")]
    LocalInfileDisabled,
}

impl ClientError {
    /// The MySQL error code sent to the client.
    pub fn code(&self) -> u16 {
        match self {
            ClientError::Route(route) => route.code(),
            ClientError::Backend { code, .. } => *code,
            ClientError::AccessDenied { .. } => 1045,
            ClientError::UnsupportedCommand(_) => 1047,
            ClientError::PacketTooLarge(_) => 1153,
            ClientError::NoDatabaseSelected => 1046,
            ClientError::UnknownStatement(_) => 1243,
            ClientError::BadExecute(_) => 1210,
            ClientError::TooManyPrepared(_) => 1461,
            ClientError::ShardPaused { .. } | ClientError::IdleInTransaction(_) => 1205,
            ClientError::ShardMoved { .. } | ClientError::IdleDuringPause { .. } => 1213,
            ClientError::UnknownThread(_) => 1094,
            ClientError::NotOwner(_) => 1095,
            ClientError::QueryInterrupted => 1317,
            ClientError::ConnectionKilled => 1927,
            ClientError::ServerShutdown => 1053,
            ClientError::PartTimeout { .. } => 1969,
            ClientError::LocalInfileDisabled => 4166,
            _ => 1105,
        }
    }

    /// The SQLSTATE sent to the client.
    pub fn sql_state(&self) -> &str {
        match self {
            ClientError::Route(route) => route.sql_state(),
            ClientError::Backend { sql_state, .. } => sql_state,
            ClientError::AccessDenied { .. } => "28000",
            ClientError::NoDatabaseSelected => "3D000",
            ClientError::UnsupportedCommand(_)
            | ClientError::PacketTooLarge(_)
            | ClientError::ServerShutdown => "08S01",
            ClientError::ShardMoved { .. } | ClientError::IdleDuringPause { .. } => "40001",
            ClientError::QueryInterrupted
            | ClientError::ConnectionKilled
            | ClientError::PartTimeout { .. } => "70100",
            _ => "HY000",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_faults_are_1105_and_unsupported_commands_1047() {
        let internal = ClientError::Internal("a task died".to_owned());
        assert_eq!((internal.code(), internal.sql_state()), (1105, "HY000"));
        assert_eq!(
            internal.to_string(),
            "shardgate: internal error: a task died"
        );
        let unsupported = ClientError::UnsupportedCommand("command 0x1f".to_owned());
        assert_eq!(
            (unsupported.code(), unsupported.sql_state()),
            (1047, "08S01")
        );
    }

    #[test]
    fn a_slow_multi_shard_part_is_a_statement_timeout_naming_its_setting() {
        let slow = ClientError::PartTimeout {
            fleet: "main".to_owned(),
            shard: 5,
            host: "127.0.0.1:3307".to_owned(),
            timeout_ms: 1000,
        };
        assert_eq!((slow.code(), slow.sql_state()), (1969, "70100"));
        let message = slow.to_string();
        assert!(
            message.contains("limits.multi_shard_part_timeout_ms (1000 ms)")
                && !message.contains("unavailable"),
            "{message}"
        );
    }
}
