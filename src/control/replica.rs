//! How the control plane talks to a fleet's hosts during a promotion or a
//! shard move: connections as the operations account, GTID positions, a
//! replica's catch-up and its replication status, and fencing an old
//! master with `read_only`.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use tracing::warn;

use crate::backend::health::connect;
use crate::topology::rewrite::same_address;
use crate::topology::Topology;

/// Longest wait for a replica to apply the master's last transaction.
pub const CATCH_UP_WAIT: Duration = Duration::from_secs(5);

/// What a replica runs when `STOP REPLICATION` is asked for (MariaDB).
pub const STOP_REPLICATION: [&str; 3] =
    ["STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0"];

/// Why a replica did not catch up.
#[derive(Debug, thiserror::Error)]
pub enum CatchUpError {
    /// The replica has not applied the master's position in time.
    #[error(
        "replica {replica} has not caught up with master {master}: the master is at GTID {master_pos}, \
         the replica at {replica_pos} after waiting {}s",
        waited.as_secs()
    )]
    Behind {
        /// The old master.
        master: String,
        /// The replica.
        replica: String,
        /// `@@gtid_binlog_pos` of the master.
        master_pos: String,
        /// `@@gtid_slave_pos` of the replica.
        replica_pos: String,
        /// How long we waited.
        waited: Duration,
    },
    /// The wait itself failed.
    #[error("replica {replica}: {what} failed: {reason}")]
    Statement {
        /// The replica.
        replica: String,
        /// The statement.
        what: String,
        /// The error.
        reason: String,
    },
}

/// How the control plane reaches the hosts: the operations account,
/// bounded by the health check timeout.
#[derive(Debug, Clone)]
pub struct Access {
    user: String,
    password: String,
    timeout: Duration,
}

impl Access {
    /// The operations account and timeout of `topology`'s config.
    pub fn of(topology: &Topology) -> Self {
        let account = topology.config.operations_account();
        Self {
            user: account.user,
            password: account.password,
            timeout: Duration::from_millis(topology.config.health.timeout_ms.max(1)),
        }
    }

    /// A connection to `addr` that answered a ping.
    pub async fn open(&self, addr: &str) -> Result<Conn, String> {
        let mut conn = connect(addr, &self.user, &self.password, self.timeout).await?;
        match tokio::time::timeout(self.timeout, conn.ping()).await {
            Ok(Ok(())) => Ok(conn),
            Ok(Err(e)) => Err(format!("ping failed: {e}")),
            Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
        }
    }
}

/// A GTID position variable of the server.
pub async fn gtid(conn: &mut Conn, variable: &str) -> Result<String, String> {
    conn.query_first::<Option<String>, _>(format!("SELECT {variable}"))
        .await
        .map(|v| v.flatten().unwrap_or_default())
        .map_err(|e| e.to_string())
}

/// Waits (at most [`CATCH_UP_WAIT`]) until `replica` has applied `position`.
pub async fn wait_for(
    conn: &mut Conn,
    replica: &str,
    master: &str,
    position: &str,
) -> Result<(), CatchUpError> {
    let waited: Option<i64> = conn
        .exec_first(
            "SELECT MASTER_GTID_WAIT(?, ?)",
            (position, CATCH_UP_WAIT.as_secs_f64()),
        )
        .await
        .map_err(|e| CatchUpError::Statement {
            replica: replica.to_owned(),
            what: format!("MASTER_GTID_WAIT('{position}')"),
            reason: e.to_string(),
        })?
        .flatten();
    if waited == Some(0) {
        return Ok(());
    }
    let replica_pos = gtid(conn, "@@gtid_slave_pos")
        .await
        .unwrap_or_else(|e| format!("unknown ({e})"));
    warn!(%master, %replica, %position, %replica_pos, "replica behind its master");
    Err(CatchUpError::Behind {
        master: master.to_owned(),
        replica: replica.to_owned(),
        master_pos: position.to_owned(),
        replica_pos,
        waited: CATCH_UP_WAIT,
    })
}

/// A server's replication as `SHOW SLAVE STATUS` shows it (the default
/// connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// `Master_Host:Master_Port`.
    pub master: String,
    /// `Slave_IO_Running` (`Yes`, `No`, `Connecting`).
    pub io_running: String,
    /// `Slave_SQL_Running`.
    pub sql_running: String,
    /// `Using_Gtid` (`No`, `Slave_Pos`, `Current_Pos`).
    pub using_gtid: String,
    /// `Seconds_Behind_Master` (none while a thread is stopped).
    pub seconds_behind: Option<u64>,
    /// `Last_IO_Error` or `Last_SQL_Error`, whichever is set.
    pub last_error: String,
}

impl Replication {
    /// Why this is not a running GTID replica of `master` (none: it is).
    pub fn problem_for(&self, master: &str) -> Option<String> {
        if !same_server(&self.master, master) {
            return Some(format!(
                "it replicates from {}, not from {master}",
                self.master
            ));
        }
        if self.io_running != "Yes" || self.sql_running != "Yes" {
            return Some(format!(
                "replication threads are not both running (IO {}, SQL {}){}",
                self.io_running,
                self.sql_running,
                if self.last_error.is_empty() {
                    String::new()
                } else {
                    format!(": {}", self.last_error)
                }
            ));
        }
        if self.using_gtid.eq_ignore_ascii_case("No") || self.using_gtid.is_empty() {
            return Some(
                "it does not replicate with GTIDs (Using_Gtid = No): CHANGE MASTER TO MASTER_USE_GTID=slave_pos"
                    .to_owned(),
            );
        }
        None
    }

    /// `IO Yes, SQL Yes, from host:port, Using_Gtid X, N s behind`.
    pub fn describe(&self) -> String {
        format!(
            "IO {}, SQL {}, from {}, Using_Gtid {}, {} behind",
            self.io_running,
            self.sql_running,
            self.master,
            self.using_gtid,
            self.seconds_behind
                .map_or_else(|| "unknown s".to_owned(), |s| format!("{s} s"))
        )
    }
}

/// Whether two `host:port` addresses name the same server: as the config
/// compares them ([`same_address`]), with `localhost` taken as `127.0.0.1`.
pub fn same_server(a: &str, b: &str) -> bool {
    let plain = |addr: &str| {
        let addr = addr.trim();
        match addr.get(..10) {
            Some(host) if host.eq_ignore_ascii_case("localhost:") => {
                format!("127.0.0.1:{}", &addr[10..])
            }
            _ => addr.to_owned(),
        }
    };
    same_address(&plain(a), &plain(b))
}

/// `SHOW SLAVE STATUS` on `conn`; `None` when the server is no replica.
pub async fn replication(conn: &mut Conn) -> Result<Option<Replication>, String> {
    let row: Option<Row> = conn
        .query_first("SHOW SLAVE STATUS")
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.map(|row| {
        let field = |name: &str| {
            row.get_opt::<Option<String>, _>(name)
                .and_then(Result::ok)
                .flatten()
                .unwrap_or_default()
        };
        let io_error = field("Last_IO_Error");
        Replication {
            master: format!("{}:{}", field("Master_Host"), field("Master_Port")),
            io_running: field("Slave_IO_Running"),
            sql_running: field("Slave_SQL_Running"),
            using_gtid: field("Using_Gtid"),
            seconds_behind: field("Seconds_Behind_Master").parse().ok(),
            last_error: if io_error.is_empty() {
                field("Last_SQL_Error")
            } else {
                io_error
            },
        }
    }))
}

/// Makes the server read-only for accounts without `READ_ONLY ADMIN`
/// (the data path's account), so a writer still pointed at it fails.
pub async fn set_read_only(access: &Access, addr: &str) -> Result<(), String> {
    let mut conn = access.open(addr).await?;
    let done = conn
        .query_drop("SET GLOBAL read_only = 1")
        .await
        .map_err(|e| e.to_string());
    let _ = conn.disconnect().await;
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(master: &str) -> Replication {
        Replication {
            master: master.to_owned(),
            io_running: "Yes".into(),
            sql_running: "Yes".into(),
            using_gtid: "Slave_Pos".into(),
            seconds_behind: Some(0),
            last_error: String::new(),
        }
    }

    #[test]
    fn a_replica_is_checked_against_its_master() {
        assert_eq!(
            running("127.0.0.1:3307").problem_for("127.0.0.1:3307"),
            None
        );
        assert_eq!(
            running("localhost:3307").problem_for("127.0.0.1:3307"),
            None
        );
        assert!(running("127.0.0.1:3307")
            .problem_for("127.0.0.1:3308")
            .is_some_and(|p| p.contains("not from 127.0.0.1:3308")));
        let mut stopped = running("127.0.0.1:3307");
        stopped.sql_running = "No".into();
        stopped.last_error = "duplicate key".into();
        assert!(stopped
            .problem_for("127.0.0.1:3307")
            .is_some_and(|p| p.contains("SQL No") && p.ends_with("duplicate key")));
        let mut positional = running("127.0.0.1:3307");
        positional.using_gtid = "No".into();
        assert!(positional
            .problem_for("127.0.0.1:3307")
            .is_some_and(|p| p.contains("GTID")));
        assert!(!same_server("127.0.0.1:3307", "127.0.0.1:33070"));
        assert!(same_server("LOCALHOST:3307", "127.0.0.1:3307"));
    }
}
