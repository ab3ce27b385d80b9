//! Relays a backend's response to a client frame by frame, parsing only
//! what decides where the response ends (first packet, OK/ERR/EOF, status
//! flags) and the OK packet of an object INSERT.

use std::io;

use mysql_common::constants::StatusFlags;
use tokio::io::AsyncWrite;

use crate::backend::BackendConn;
use crate::protocol::binary::{parse_column_definition, text_row_to_binary, ColumnInfo};
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
    /// Warning count of the last OK/EOF.
    pub warnings: u16,
    /// Sequence id for the next packet to the client.
    pub next_seq: u8,
}

/// Why a relay stopped before the response was complete.
#[derive(Debug)]
pub enum RelayFailure {
    /// Sending the statement failed: the server did not get all of it, so
    /// it did not run, and it may be sent again on another connection.
    NotSent(io::Error),
    /// The backend connection failed after the statement was sent: it may
    /// have run. `forwarded` tells whether part of the response already
    /// reached the client.
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

/// How to relay one response.
#[derive(Debug, Clone, Copy)]
pub struct RelayOptions {
    /// Sequence id of the first frame to the client.
    pub first_seq: u8,
    /// Whether the client set `CLIENT_DEPRECATE_EOF`.
    pub deprecate_eof: bool,
    /// Rewrites an object INSERT's last-insert-id into the 64-bit ID.
    pub composer: Option<InsertIdComposer>,
    /// More results of a multi-statement follow this response: its final
    /// OK/EOF gets `SERVER_MORE_RESULTS_EXISTS`.
    pub more_results: bool,
    /// The client executed a prepared statement: text rows from the backend
    /// are converted to binary-protocol rows.
    pub binary_rows: bool,
}

/// Reads the response to the command just sent on `backend` and writes it
/// to `client`. Does not flush.
pub async fn relay_response<W: AsyncWrite + Unpin>(
    backend: &mut BackendConn,
    client: &mut FrameWriter<W>,
    options: RelayOptions,
) -> Result<RelayOutcome, RelayFailure> {
    let RelayOptions {
        first_seq,
        deprecate_eof,
        composer,
        more_results,
        binary_rows,
    } = options;
    let mut seq = first_seq;
    let mut stage = Stage::FirstPacket;
    let mut continued = false;
    let mut forwarded = false;
    let mut last_insert_id = None;
    let mut columns: Vec<ColumnInfo> = Vec::new();
    let mut row = Vec::new();
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
        let starts_packet = !continued;
        continued = frame.is_continued();
        let payload = frame.payload();
        let header = payload.first().copied();

        let is_row = matches!(stage, Stage::Rows)
            && (!starts_packet || !is_row_end(header, payload.len(), deprecate_eof));
        if binary_rows && is_row {
            row.extend_from_slice(payload);
            if continued {
                continue;
            }
            let mut converted = Vec::with_capacity(row.len() + 8);
            text_row_to_binary(&row, &columns, &mut converted).map_err(|error| {
                RelayFailure::Backend {
                    error: io::Error::new(io::ErrorKind::InvalidData, error.to_string()),
                    forwarded,
                    next_seq: seq,
                }
            })?;
            row.clear();
            seq = client
                .write_packet(seq, &converted)
                .await
                .map_err(RelayFailure::Client)?;
            forwarded = true;
            continue;
        }
        frame.set_seq(seq);
        seq = seq.wrapping_add(1);
        let payload = frame.payload();

        let mut end: Option<(StatusFlags, u16, bool)> = None;
        if starts_packet {
            match (&stage, header) {
                (Stage::FirstPacket, Some(OK_HEADER)) => {
                    let info = parse_ok(payload).ok_or_else(|| malformed(forwarded, seq))?;
                    let composed = composer
                        .filter(|_| info.last_insert_id != 0)
                        .map(|composer| composer.compose(info.last_insert_id));
                    let last = !info
                        .status
                        .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                    if composed.is_some() || (last && more_results) {
                        let id = composed.unwrap_or(info.last_insert_id);
                        last_insert_id = composed.or(last_insert_id);
                        let mut rewritten = rewrite_ok_insert_id(payload, &info, id);
                        if last && more_results {
                            set_more_results_in_ok(&mut rewritten);
                        }
                        client
                            .write_packet(frame.seq(), &rewritten)
                            .await
                            .map_err(RelayFailure::Client)?;
                        forwarded = true;
                        if !last {
                            continue;
                        }
                        return Ok(RelayOutcome {
                            status: info.status,
                            failed: false,
                            last_insert_id,
                            warnings: info.warnings,
                            next_seq: seq,
                        });
                    }
                    end = Some((info.status, info.warnings, false));
                }
                (_, Some(ERR_HEADER)) => end = Some((StatusFlags::empty(), 0, true)),
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
                    columns.clear();
                    stage = Stage::Columns(count);
                }
                (Stage::Columns(left), _) => {
                    if binary_rows {
                        columns.push(
                            parse_column_definition(payload)
                                .ok_or_else(|| malformed(forwarded, seq))?,
                        );
                    }
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
                    end = Some((info.status, info.warnings, false));
                }
                (Stage::Rows, Some(EOF_HEADER)) if !deprecate_eof && payload.len() < 9 => {
                    let status =
                        parse_eof_status(payload).ok_or_else(|| malformed(forwarded, seq))?;
                    let warnings = u16::from_le_bytes([payload[1], payload[2]]);
                    end = Some((status, warnings, false));
                }
                (Stage::Rows, _) => {}
            }
        }
        let finished = match end {
            Some((status, _, failed)) => {
                failed || !status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
            }
            None => false,
        };
        if finished && more_results {
            set_more_results_in_terminator(&mut frame, stage_is_rows(&stage), deprecate_eof);
        }
        client
            .write_raw(frame.raw())
            .await
            .map_err(RelayFailure::Client)?;
        forwarded = true;
        if let Some((status, warnings, failed)) = end {
            if !finished {
                stage = Stage::FirstPacket;
                continue;
            }
            return Ok(RelayOutcome {
                status,
                failed,
                last_insert_id,
                warnings,
                next_seq: seq,
            });
        }
    }
}

/// Whether a packet in the rows stage ends the result set (EOF/OK with the
/// 0xFE header, or ERR) rather than being a row.
fn is_row_end(header: Option<u8>, len: usize, deprecate_eof: bool) -> bool {
    match header {
        Some(ERR_HEADER) => true,
        Some(EOF_HEADER) if deprecate_eof => len < MAX_FRAME_PAYLOAD,
        Some(EOF_HEADER) => len < 9,
        _ => false,
    }
}

fn stage_is_rows(stage: &Stage) -> bool {
    matches!(stage, Stage::Rows)
}

/// Sets `SERVER_MORE_RESULTS_EXISTS` in an OK packet payload built by
/// [`rewrite_ok_insert_id`] (status flags follow the two length-encoded
/// integers).
fn set_more_results_in_ok(payload: &mut [u8]) {
    let mut rest = &payload[1..];
    let skipped = crate::protocol::frame::read_lenenc_int(&mut rest)
        .and_then(|_| crate::protocol::frame::read_lenenc_int(&mut rest))
        .is_some();
    let at = payload.len() - rest.len();
    if skipped && payload.len() > at {
        payload[at] |= StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits() as u8;
    }
}

/// Sets `SERVER_MORE_RESULTS_EXISTS` in the final OK/EOF frame of a result
/// (an ERR frame is left alone: an error ends a multi-statement).
fn set_more_results_in_terminator(
    frame: &mut crate::protocol::Frame,
    rows: bool,
    deprecate_eof: bool,
) {
    let payload = frame.payload_mut();
    match payload.first() {
        Some(&EOF_HEADER) if rows && !deprecate_eof => {
            if let Some(byte) = payload.get_mut(3) {
                *byte |= StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits() as u8;
            }
        }
        Some(&OK_HEADER) | Some(&EOF_HEADER) => set_more_results_in_ok(payload),
        _ => {}
    }
}

fn malformed(forwarded: bool, next_seq: u8) -> RelayFailure {
    RelayFailure::Backend {
        error: io::Error::new(io::ErrorKind::InvalidData, "malformed packet from backend"),
        forwarded,
        next_seq,
    }
}
