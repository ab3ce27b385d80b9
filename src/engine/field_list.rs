//! COM_FIELD_LIST (deprecated, still sent by some clients for completion):
//! the column definitions of a table in the session's `USE` database.

use std::io;

use tokio::io::AsyncWrite;

use super::execute::write_error;
use super::{Engine, SessionState};
use crate::backend::conn::{COM_FIELD_LIST, COM_INIT_DB};
use crate::error::ClientError;
use crate::protocol::packets::{EOF_HEADER, ERR_HEADER};
use crate::protocol::FrameWriter;
use crate::router::RouteError;
use crate::topology::Topology;

impl Engine {
    /// Answers COM_FIELD_LIST (`body`: table name, NUL, wildcard) from the
    /// master of the session's `USE` shard. The backend connection used is
    /// closed afterwards, since it was switched to that database.
    pub async fn field_list<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        body: &[u8],
        client: &mut FrameWriter<W>,
    ) -> io::Result<()> {
        let result = self.field_list_inner(topology, state, body, client).await;
        if let Err(error) = result {
            write_error(client, state.response_seq, &error).await?;
        }
        client.flush().await
    }

    async fn field_list_inner<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        body: &[u8],
        client: &mut FrameWriter<W>,
    ) -> Result<(), ClientError> {
        let Some((fleet, shard)) = state.route.current_db else {
            return Err(ClientError::NoDatabaseSelected);
        };
        let (Some(fleet_info), Some(host)) =
            (topology.fleets.get(fleet), topology.master_of(fleet, shard))
        else {
            return Err(ClientError::Route(RouteError::UnknownDatabase(format!(
                "shard {shard}"
            ))));
        };
        let addr = topology.hosts[host].addr.clone();
        let pool = self.backends.pool(&addr);
        let mut conn = pool
            .checkout(
                state.conn_key,
                Some((&state.share, topology.config.limits.max_host_share_percent)),
            )
            .await
            .map_err(|reason| ClientError::HostUnavailable {
                fleet: fleet_info.name.clone(),
                shard,
                host: addr.clone(),
                reason,
            })?;
        let lost = |error: io::Error| ClientError::BackendLost {
            host: addr.clone(),
            reason: error.to_string(),
        };
        let database = fleet_info.database_name(shard);
        let answer = conn
            .conn()
            .simple_command(COM_INIT_DB, database.as_bytes())
            .await
            .map_err(lost)?;
        if answer.first() == Some(&ERR_HEADER) {
            return Err(super::execute::backend_error(&answer));
        }
        let backend = conn.conn();
        backend
            .send_command(COM_FIELD_LIST, body)
            .await
            .map_err(lost)?;
        let mut seq = state.response_seq;
        loop {
            let mut frame = backend.reader.next_frame().await.map_err(lost)?;
            frame.set_seq(seq);
            seq = seq.wrapping_add(1);
            let header = frame.payload().first().copied();
            let end = header == Some(ERR_HEADER)
                || (header == Some(EOF_HEADER) && frame.payload().len() < 0xFF_FFFF);
            client
                .write_raw(frame.raw())
                .await
                .map_err(|error| ClientError::BackendLost {
                    host: "client".to_owned(),
                    reason: error.to_string(),
                })?;
            if end {
                return Ok(());
            }
        }
    }
}
