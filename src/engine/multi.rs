//! Multi-shard reads: runs a [`MultiShardQuery`]'s parts concurrently
//! (bounded), merges their rows (concatenated, ordered k-way merge, or
//! aggregated) and answers with one result set.

use tokio::io::AsyncWrite;

use super::execute::Failure;
use super::{Engine, SessionState};
use crate::error::ClientError;
use crate::protocol::FrameWriter;
use crate::router::{MultiShardQuery, RouteError};
use crate::topology::Topology;

impl Engine {
    /// Runs a multi-shard read and writes the merged result.
    pub(crate) async fn run_multi_shard<W: AsyncWrite + Unpin>(
        &self,
        _topology: &Topology,
        _state: &mut SessionState,
        _query: MultiShardQuery,
        _client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        Err(Failure::Client(ClientError::Route(RouteError::Unsupported(
            "multi-shard reads are being built".to_owned(),
        ))))
    }
}
