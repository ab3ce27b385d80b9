//! How a promotion talks to the hosts: connections as the operations
//! account, GTID positions and the replica's catch-up.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tracing::warn;

use super::{FailoverError, CATCH_UP_WAIT};
use crate::backend::health::connect;
use crate::topology::Topology;

/// How the promotion reaches the hosts: the operations account, bounded by
/// the health check timeout.
pub(super) struct Access {
    user: String,
    password: String,
    timeout: Duration,
}

impl Access {
    pub(super) fn of(topology: &Topology) -> Self {
        let account = topology.config.operations_account();
        Self {
            user: account.user,
            password: account.password,
            timeout: Duration::from_millis(topology.config.health.timeout_ms.max(1)),
        }
    }

    /// A connection to `addr` that answered a ping.
    pub(super) async fn open(&self, addr: &str) -> Result<Conn, String> {
        let mut conn = connect(addr, &self.user, &self.password, self.timeout).await?;
        match tokio::time::timeout(self.timeout, conn.ping()).await {
            Ok(Ok(())) => Ok(conn),
            Ok(Err(e)) => Err(format!("ping failed: {e}")),
            Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
        }
    }
}

/// A GTID position variable of the server.
pub(super) async fn gtid(conn: &mut Conn, variable: &str) -> Result<String, String> {
    conn.query_first::<Option<String>, _>(format!("SELECT {variable}"))
        .await
        .map(|v| v.flatten().unwrap_or_default())
        .map_err(|e| e.to_string())
}

/// Waits (at most [`CATCH_UP_WAIT`]) until `replica` has applied `position`.
pub(super) async fn wait_for(
    conn: &mut Conn,
    replica: &str,
    master: &str,
    position: &str,
) -> Result<(), FailoverError> {
    let waited: Option<i64> = conn
        .exec_first(
            "SELECT MASTER_GTID_WAIT(?, ?)",
            (position, CATCH_UP_WAIT.as_secs_f64()),
        )
        .await
        .map_err(|e| FailoverError::Replica {
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
    warn!(%master, %replica, %position, %replica_pos, "promotion refused: replica behind");
    Err(FailoverError::ReplicaBehind {
        master: master.to_owned(),
        replica: replica.to_owned(),
        master_pos: position.to_owned(),
        replica_pos,
        waited: CATCH_UP_WAIT,
    })
}
