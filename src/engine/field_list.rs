//! COM_FIELD_LIST (deprecated, still sent by some clients for completion):
//! the column definitions of a table in the session's `USE` database.

use std::io;

use tokio::io::AsyncWrite;

use super::failure::{answer_failure, backend_error, lost_connection, Failure};
use super::pause::Blocked;
use super::session_state::SessionState;
use super::Engine;
use crate::error::ClientError;
use crate::protocol::packets::{ends_result_set, rewrite_status, status_offset, ERR_HEADER};
use crate::protocol::FrameWriter;
use crate::router::{RouteError, Target};
use crate::topology::{FleetId, Topology};
use mysql_common::constants::Command;

impl Engine {
    /// Answers COM_FIELD_LIST (`body`: table name, NUL, wildcard) from the
    /// master of the session's `USE` shard, on the topology in force. Like
    /// a statement, it waits at the pause gate while the shard is paused,
    /// and its connection comes through the session's checkout (its share
    /// of the pool, settings replayed). The backend connection used is
    /// closed afterwards, since it was switched to that database.
    pub async fn field_list<W: AsyncWrite + Unpin>(
        &self,
        state: &mut SessionState,
        body: &[u8],
        client: &mut FrameWriter<W>,
    ) -> io::Result<()> {
        let mut waiting_since = None;
        let result = loop {
            // The epoch is read before the topology (see PauseGate::enter).
            let epoch = self.pauses.epoch();
            let topology = self.topology_for(state);
            let Some((fleet, shard)) = state.route.current_db else {
                break Err(Failure::Client(ClientError::NoDatabaseSelected));
            };
            match self.admit_shards(&topology, state, [(fleet, shard)], epoch) {
                Ok(_guard) => {
                    break self
                        .field_list_on(&topology, state, (fleet, shard), body, client)
                        .await
                }
                Err(Blocked::Stale) => {}
                Err(Blocked::Paused(paused)) => {
                    let resumed = self
                        .wait_for_resume(&topology, &paused, &mut waiting_since, &state.entry)
                        .await;
                    if let Err(error) = resumed {
                        break Err(Failure::Client(error));
                    }
                }
            }
        };
        answer_failure(client, state.response_seq, result).await?;
        client.flush().await
    }

    async fn field_list_on<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        (fleet, shard): (FleetId, u32),
        body: &[u8],
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let (Some(fleet_info), Some(host)) =
            (topology.fleets.get(fleet), topology.master_of(fleet, shard))
        else {
            return Err(Failure::Client(ClientError::Route(
                RouteError::UnknownDatabase(format!("shard {shard}")),
            )));
        };
        let addr = topology.hosts[host].addr.clone();
        let pool = self.backends.pool(&addr);
        let target = Target { fleet, shard, host };
        let mut conn = self.checkout(topology, &pool, Some(target), state).await?;
        let lost = lost_connection(&addr);
        let database = fleet_info.database_name(shard);
        let answer = conn
            .conn()
            .simple_command(Command::COM_INIT_DB, database.as_bytes())
            .await
            .map_err(&lost)?;
        if answer.first() == Some(&ERR_HEADER) {
            return Err(Failure::Client(backend_error(&answer)));
        }
        let backend = conn.conn();
        backend
            .send_command(Command::COM_FIELD_LIST, body)
            .await
            .map_err(&lost)?;
        let mut seq = state.response_seq;
        loop {
            let mut frame = backend.reader.next_frame().await.map_err(&lost)?;
            frame.set_seq(seq);
            seq = seq.wrapping_add(1);
            // A column definition starts with the length of "def", never
            // with 0xFE: any 0xFE packet ends the list (an EOF, or an OK
            // under CLIENT_DEPRECATE_EOF).
            let end = ends_result_set(frame.payload(), true);
            // An ERR packet also ends the list; it carries no status flags
            // (its bytes 3-4 are the SQLSTATE marker and the first SQLSTATE
            // character), so only an EOF/OK is rewritten.
            if end && frame.payload().first() != Some(&ERR_HEADER) {
                // The session's autocommit and transaction state, not the
                // pooled connection's.
                let eof = !state.deprecate_eof;
                if let Some(at) = status_offset(frame.payload(), eof) {
                    rewrite_status(frame.payload_mut(), at, state.status_flags(), false);
                }
            }
            client.write_raw(frame.raw()).await.map_err(|error| {
                Failure::Client(ClientError::BackendLost {
                    host: "client".to_owned(),
                    reason: error.to_string(),
                })
            })?;
            if end {
                return Ok(());
            }
        }
    }
}
