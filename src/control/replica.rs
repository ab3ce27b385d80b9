//! How the control plane talks to a fleet's hosts during a promotion or a
//! shard move: connections as the operations account, GTID positions, a
//! replica's catch-up and its replication status, and fencing an old
//! master with `read_only`.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tracing::warn;

use crate::backend::health::connect;
pub use crate::backend::replication::{replication, same_server, Replication};
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

    /// Whether the old master `master` of a promotion is up, down, or
    /// alive though this proxy cannot use it. A server that answers with
    /// an error (too many connections, access denied) is alive; so is one
    /// whose replica (one of `replicas`) has its IO thread connected: this
    /// proxy may be cut off from a master the rest of the fleet still
    /// writes to, and promoting would split the writes.
    pub async fn old_master(&self, master: &str, replicas: &mut [(String, Conn)]) -> OldMaster {
        let reason = match self.open(master).await {
            Ok(conn) => return OldMaster::Up(conn),
            Err(reason) => reason,
        };
        if let Some(code) = server_error_code(&reason) {
            return OldMaster::Alive(format!(
                "{master} answered this proxy with an error ({reason}): the server runs (error {code} is no outage)"
            ));
        }
        for (replica, conn) in replicas.iter_mut() {
            if let Ok(Some(status)) = replication(conn).await {
                if status.io_running == "Yes" && status.last_error.is_empty() {
                    return OldMaster::Alive(format!(
                        "{master} does not answer this proxy ({reason}), but its replica {replica} is connected to its master \
                         {} (Slave_IO_Running = Yes): the master is alive (a network partition between this proxy and it?)",
                        status.master
                    ));
                }
            }
        }
        OldMaster::Down(reason)
    }
}

/// What [`Access::old_master`] found.
pub enum OldMaster {
    /// It answers: the connection.
    Up(Conn),
    /// It does not answer anyone: why.
    Down(String),
    /// It runs, but this proxy cannot use it: the evidence.
    Alive(String),
}

/// The MySQL error code in a connect error's text (`ERROR 1040 (...)`):
/// the server answered.
fn server_error_code(reason: &str) -> Option<u16> {
    let rest = &reason[reason.find("ERROR ")? + 6..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
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

/// Makes the server read-only (`on`) for accounts without `READ_ONLY
/// ADMIN` (the data path's account), so a writer still pointed at it
/// fails; or writable again.
pub async fn set_read_only(access: &Access, addr: &str, on: bool) -> Result<(), String> {
    let mut conn = access.open(addr).await?;
    let done = conn
        .query_drop(format!("SET GLOBAL read_only = {}", u8::from(on)))
        .await
        .map_err(|e| e.to_string());
    let _ = conn.disconnect().await;
    done
}

/// Fences an old master on `conn` before its GTID position is read:
/// `read_only = 1`. `true` when it was writable (then a promotion that
/// fails before the map is written sets it back to 0).
pub async fn fence(conn: &mut Conn) -> Result<bool, String> {
    if read_only(conn).await? {
        return Ok(false);
    }
    conn.query_drop("SET GLOBAL read_only = 1")
        .await
        .map_err(|e| e.to_string())?;
    Ok(true)
}

/// `@@read_only` of the server on `conn`.
pub async fn read_only(conn: &mut Conn) -> Result<bool, String> {
    conn.query_first::<Option<u8>, _>("SELECT @@read_only")
        .await
        .map(|v| v.flatten() == Some(1))
        .map_err(|e| e.to_string())
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
            filters: Vec::new(),
            gtid_io_pos: String::new(),
        }
    }

    #[test]
    fn a_server_error_means_the_server_runs() {
        assert_eq!(
            server_error_code("cannot connect: ERROR 1040 (08004): Too many connections"),
            Some(1040)
        );
        assert_eq!(
            server_error_code(
                "cannot connect: Input/output error: Connection refused (os error 111)"
            ),
            None
        );
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
        let mut filtered = running("127.0.0.1:3307");
        filtered.filters = vec!["Replicate_Ignore_DB = db00011".into()];
        assert!(filtered
            .problem_for("127.0.0.1:3307")
            .is_some_and(|p| p.contains("replication filters (Replicate_Ignore_DB = db00011)")));
        assert!(!same_server("127.0.0.1:3307", "127.0.0.1:33070"));
        assert!(same_server("LOCALHOST:3307", "127.0.0.1:3307"));
    }
}
