//! Relays a backend's response to a client frame by frame, parsing only
//! what decides where the response ends (first packet, OK/ERR/EOF, status
//! flags) and the OK packet of an object INSERT.

use std::io;

use mysql_common::constants::StatusFlags;
use tokio::io::AsyncWrite;

use crate::backend::BackendConn;
use crate::protocol::packets::{
    parse_eof_status, parse_ok, rewrite_ok_insert_id, EOF_HEADER, ERR_HEADER, LOCAL_INFILE_HEADER,
    OK_HEADER,
};
use crate::protocol::{FrameWriter, MAX_FRAME_PAYLOAD};

/// How a relayed response ended.
#[derive(Debug, Clone, Copy)]
pub struct RelayOutcome {
    /// Status flags of the last OK/EOF (in-transaction, autocommit ...).
    pub status: StatusFlags,
    /// Whether the response ended with an ERR packet.
    pub failed: bool,
    /// Last-insert-id reported to the client (already composed), if an OK
    /// packet carried one.
    pub last_insert_id: Option<u64>,
    /// Sequence id for the next packet to the client.
    pub next_seq: u8,
}

/// Why a relay stopped before the response was complete.
#[derive(Debug)]
pub enum RelayFailure {
    /// The backend connection failed. `forwarded` tells whether part of the
    /// response already reached the client.
    Backend {
        /// The I/O error.
        error: io::Error,
        /// Whether any frame was already written to the client.
        forwarded: bool,
        /// Sequence id for the next packet to the client.
        next_seq: u8,
    },
    /// Writing to the client failed; the client is gone.
    Client(io::Error),
}

/// Composes the 64-bit ID for an object INSERT's OK packet.
#[derive(Debug, Clone, Copy)]
pub struct InsertIdComposer {
    /// Shard the row went to.
    pub shard: u32,
    /// Type id of the object table.
    pub type_id: u16,
}

impl InsertIdComposer {
    fn compose(&self, local_id: u64) -> u64 {
        (u64::from(self.shard) << 46) | (u64::from(self.type_id) << 36) | local_id
    }
}

enum Stage {
    FirstPacket,
    Columns(u64),
    ColumnsEof,
    Rows,
}

/// Reads the response to the command just sent on `backend` and writes it
/// to `client`, numbering frames from `first_seq`. Does not flush.
pub async fn relay_response<W: AsyncWrite + Unpin>(
    backend: &mut BackendConn,
    client: &mut FrameWriter<W>,
    first_seq: u8,
    deprecate_eof: bool,
    composer: Option<InsertIdComposer>,
) -> Result<RelayOutcome, RelayFailure> {
    let mut seq = first_seq;
    let mut stage = Stage::FirstPacket;
    let mut continued = false;
    let mut forwarded = false;
    let mut last_insert_id = None;
    loop {
        let mut frame = match backend.reader.next_frame().await {
            Ok(frame) => frame,
            Err(error) => {
                return Err(RelayFailure::Backend {
                    error,
                    forwarded,
                    next_seq: seq,
                })
            }
        };
        frame.set_seq(seq);
        seq = seq.wrapping_add(1);
        let starts_packet = !continued;
        continued = frame.is_continued();
        let payload = frame.payload();
        let header = payload.first().copied();

        let mut end: Option<(StatusFlags, bool)> = None;
        if starts_packet {
            match (&stage, header) {
                (Stage::FirstPacket, Some(OK_HEADER)) => {
                    let info = parse_ok(payload).ok_or_else(|| malformed(forwarded, seq))?;
                    if let (Some(composer), true) = (composer, info.last_insert_id != 0) {
                        let id = composer.compose(info.last_insert_id);
                        last_insert_id = Some(id);
                        let rewritten = rewrite_ok_insert_id(payload, &info, id);
                        client
                            .write_packet(frame.seq(), &rewritten)
                            .await
                            .map_err(RelayFailure::Client)?;
                        forwarded = true;
                        if info
                            .status
                            .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
                        {
                            continue;
                        }
                        return Ok(RelayOutcome {
                            status: info.status,
                            failed: false,
                            last_insert_id,
                            next_seq: seq,
                        });
                    }
                    end = Some((info.status, false));
                }
                (_, Some(ERR_HEADER)) => end = Some((StatusFlags::empty(), true)),
                (Stage::FirstPacket, Some(LOCAL_INFILE_HEADER)) => {
                    return Err(RelayFailure::Backend {
                        error: io::Error::new(
                            io::ErrorKind::InvalidData,
                            "backend asked for LOCAL INFILE, which shardgate does not relay",
                        ),
                        forwarded,
                        next_seq: seq,
                    });
                }
                (Stage::FirstPacket, _) => {
                    let mut rest = payload;
                    let count = crate::protocol::frame::read_lenenc_int(&mut rest)
                        .ok_or_else(|| malformed(forwarded, seq))?;
                    stage = Stage::Columns(count);
                }
                (Stage::Columns(left), _) => {
                    stage = match left - 1 {
                        0 if deprecate_eof => Stage::Rows,
                        0 => Stage::ColumnsEof,
                        n => Stage::Columns(n),
                    };
                }
                (Stage::ColumnsEof, _) => stage = Stage::Rows,
                (Stage::Rows, Some(EOF_HEADER))
                    if deprecate_eof && payload.len() < MAX_FRAME_PAYLOAD =>
                {
                    let info = parse_ok(payload).ok_or_else(|| malformed(forwarded, seq))?;
                    end = Some((info.status, false));
                }
                (Stage::Rows, Some(EOF_HEADER)) if !deprecate_eof && payload.len() < 9 => {
                    let status =
                        parse_eof_status(payload).ok_or_else(|| malformed(forwarded, seq))?;
                    end = Some((status, false));
                }
                (Stage::Rows, _) => {}
            }
        }
        client
            .write_raw(frame.raw())
            .await
            .map_err(RelayFailure::Client)?;
        forwarded = true;
        if let Some((status, failed)) = end {
            if !failed && status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS) {
                stage = Stage::FirstPacket;
                continue;
            }
            return Ok(RelayOutcome {
                status,
                failed,
                last_insert_id,
                next_seq: seq,
            });
        }
    }
}

fn malformed(forwarded: bool, next_seq: u8) -> RelayFailure {
    RelayFailure::Backend {
        error: io::Error::new(io::ErrorKind::InvalidData, "malformed packet from backend"),
        forwarded,
        next_seq,
    }
}
