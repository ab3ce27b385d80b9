//! `KILL [CONNECTION | QUERY] n`: the proxy's sessions are killed by the
//! proxy. A statement is cancelled on the servers that run it: for each
//! backend connection session `n` uses at that moment, a control
//! connection to its host runs `KILL QUERY <its thread id>` (with the data
//! account, which owns those threads); the cancelled statement's client
//! gets the server's error (1317) and its session goes on; a statement of
//! it that has not reached a backend yet (waiting for a connection) fails
//! with the same error before it is sent. `KILL
//! CONNECTION` also ends the session once its statement is over, at once
//! when it is idle.

use std::sync::Arc;

use mysql_common::constants::Command;
use tokio::io::AsyncWrite;
use tokio::task::JoinSet;
use tracing::debug;

use super::answer::write_ok;
use super::failure::Failure;
use super::server_info::on_control_connection;
use super::session_state::SessionState;
use super::sessions::SessionEntry;
use super::Engine;
use crate::backend::{BackendConn, HostPool};
use crate::error::ClientError;
use crate::protocol::packets::{parse_err, ERR_HEADER};
use crate::protocol::FrameWriter;
use crate::topology::config::BackendConfig;
use crate::topology::Topology;

/// MariaDB's ER_NO_SUCH_THREAD: the thread ended before the KILL came.
const NO_SUCH_THREAD: u16 = 1094;

impl Engine {
    /// `KILL [QUERY] id` from the session `state`: only the same account's
    /// sessions (1095), known ids (1094). Killing oneself answers as a
    /// server does: 1317 for `KILL QUERY`, 1927 and the connection closes
    /// for `KILL`.
    pub(super) async fn run_kill<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        query: bool,
        id: u64,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let target = self
            .sessions
            .get(id)
            .ok_or(Failure::Client(ClientError::UnknownThread(id)))?;
        if !target.owned_by(&state.entry.user()) {
            return Err(Failure::Client(ClientError::NotOwner(id)));
        }
        if Arc::ptr_eq(&target, &state.entry) {
            if query {
                return Err(Failure::Client(ClientError::QueryInterrupted));
            }
            target.kill();
            return Err(Failure::Client(ClientError::ConnectionKilled));
        }
        target.cancel();
        if !query {
            target.kill();
        }
        self.cancel_statement(topology, &target).await;
        write_ok(client, state).await
    }

    /// Runs `KILL QUERY` for every backend connection `target` uses now,
    /// all at once, each on a control connection of its own to that host,
    /// checking just before that the statement still runs there. A thread that ended
    /// meanwhile is no error; other failures are logged (the statement
    /// then runs to its end).
    pub async fn cancel_statement(&self, topology: &Topology, target: &Arc<SessionEntry>) {
        let mut kills = JoinSet::new();
        for thread in target.backends() {
            let backend = topology.config.backend.clone();
            let target = Arc::clone(target);
            kills.spawn(async move {
                let addr = thread.pool.addr.clone();
                let dialer = thread.pool.dialer();
                let result = on_control_connection(dialer, &backend, &addr, async |conn| {
                    // The statement may have ended while the control
                    // connection was opened, and its connection may serve
                    // someone else now; otherwise the connection is closed,
                    // not pooled, after it.
                    if !target.aim_kill(&thread) {
                        return Ok(());
                    }
                    kill_query(conn, thread.thread_id).await
                })
                .await;
                match result {
                    Ok(()) => debug!(
                        session = target.id,
                        host = addr,
                        thread = thread.thread_id,
                        "killed the session's backend statement"
                    ),
                    Err(error) => {
                        debug!(session = target.id, host = addr, thread = thread.thread_id, %error, "KILL QUERY failed")
                    }
                }
            });
        }
        while kills.join_next().await.is_some() {}
    }
}

/// Kills, in the background, the statement still running on backend
/// `thread` of `addr` whose connection the proxy gave up on (closed): a
/// server goes on running a statement whose client left.
pub(super) fn kill_abandoned(backend: Arc<BackendConfig>, pool: &Arc<HostPool>, thread: u32) {
    let pool = Arc::clone(pool);
    tokio::spawn(async move {
        let addr = &pool.addr;
        let result = on_control_connection(pool.dialer(), &backend, addr, async |conn| {
            kill_query(conn, thread).await
        })
        .await;
        if let Err(error) = result {
            debug!(host = addr, thread, %error, "KILL QUERY of an abandoned statement failed");
        }
    });
}

/// Runs `KILL QUERY thread` on a control connection; a thread that ended
/// meanwhile is no error.
async fn kill_query(conn: &mut BackendConn, thread: u32) -> Result<(), String> {
    let sql = format!("KILL QUERY {thread}");
    let answer = conn
        .simple_command(Command::COM_QUERY, sql.as_bytes())
        .await
        .map_err(|error| error.to_string())?;
    match answer.first() {
        Some(&ERR_HEADER) => match parse_err(&answer) {
            Some((NO_SUCH_THREAD, _, _)) => Ok(()),
            Some((code, _, message)) => Err(format!("{code} {message}")),
            None => Err("malformed error packet".to_owned()),
        },
        _ => Ok(()),
    }
}
