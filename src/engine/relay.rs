//! Relays a backend's response to a client frame by frame, parsing only
//! what decides where the response ends (first packet, OK/ERR/EOF, status
//! flags) and the OK packet of an object INSERT.

use std::io;

use mysql_common::constants::{Command, StatusFlags};
use tokio::io::AsyncWrite;

use super::local_infile::{ClientFileLink, FILE_PACKET_TIMEOUT};
use crate::backend::BackendConn;
use crate::error::ClientError;
use crate::id::{COMPOSE_OVERFLOW_MARK, MAX_LOCAL};
use crate::protocol::binary::{parse_column_definition, text_row_to_binary, ColumnInfo};
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::{
    ends_result_set, err_packet, parse_eof_status, parse_err, parse_ok, rewrite_ok_insert_id,
    rewrite_status, status_offset, EOF_HEADER, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER,
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
    /// Affected rows of the OK packet that ended the response, when it
    /// ended with one (no result set): what `ROW_COUNT()` reads next.
    pub affected_rows: Option<u64>,
    /// Warning count of the last OK/EOF.
    pub warnings: u16,
    /// The server's error code when the response ended with its ERR packet.
    pub error_code: Option<u16>,
    /// Sequence id for the next packet to the client.
    pub next_seq: u8,
    /// Result-set rows relayed.
    pub rows: u64,
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
pub struct InsertIdComposer<'a> {
    /// Shard the row went to.
    pub shard: u32,
    /// Type id of the object table.
    pub type_id: u16,
    /// The logical table, named when the server's `local_id` does not fit.
    pub table: &'a str,
}

impl InsertIdComposer<'_> {
    /// The 64-bit ID of `local_id`, the first of `rows` consecutive rows an
    /// INSERT created, or the refusal when one of them does not fit the
    /// ID's 36-bit local field (OR-ing it in would name another row; a
    /// client may derive the IDs of a multi-row INSERT's other rows by
    /// adding 1).
    fn compose(&self, local_id: u64, rows: u64) -> Result<u64, LocalIdOverflow> {
        let last_row = local_id.saturating_add(rows.saturating_sub(1));
        if last_row > MAX_LOCAL {
            return Err(LocalIdOverflow {
                table: self.table.to_owned(),
                shard: Some(self.shard),
                local_id: Some(local_id.max(MAX_LOCAL + 1)),
                inserted: true,
            });
        }
        Ok(crate::id::compose(self.shard, self.type_id, local_id))
    }
}

/// A row whose `local_id` does not fit the 36-bit local field of an ID: no
/// 64-bit ID can name it, so the statement that would return one is refused
/// (1105) rather than answered with the ID of another row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "shardgate: table {table}{} {}local_id {}, above the 36 bits of an ID's local part \
     (at most {MAX_LOCAL}), so no 64-bit ID can name {}; {}",
    shard.map(|s| format!(" on shard {s}")).unwrap_or_default(),
    if *inserted { "gave a new row " } else { "holds a row with " },
    local_id.map_or_else(|| "(value not found)".to_owned(), |v| v.to_string()),
    if *inserted { "it" } else { "that row" },
    if *inserted {
        "the INSERT ran but its ID is refused (roll back, or delete the row by local_id on \
         the shard), and the table's AUTO_INCREMENT must be brought back below 2^36"
    } else {
        "the statement was refused"
    }
)]
pub struct LocalIdOverflow {
    /// The table (logical name for an INSERT, `database.table` as the
    /// server named it for a read).
    pub table: String,
    /// The shard the statement ran on, when known.
    pub shard: Option<u32>,
    /// The offending `local_id`, when it could be read.
    pub local_id: Option<u64>,
    /// Whether an INSERT created the row (its OK packet carried the value).
    pub inserted: bool,
}

impl LocalIdOverflow {
    /// The error a client receives.
    pub fn to_client_error(&self) -> ClientError {
        ClientError::Backend {
            code: 1105,
            sql_state: "HY000".to_owned(),
            message: self.to_string(),
        }
    }
}

/// If `code` and `message` are the server's overflow error raised by
/// [`crate::id::compose_sql`] (a composed ID over a `local_id` above 36
/// bits), the refusal naming the table and shard, with the smallest such
/// `local_id` of that table read on `backend` (the connection that ran the
/// statement; a primary-key range read, only on this error path).
pub(crate) async fn local_id_overflow(
    backend: &mut BackendConn,
    code: u16,
    message: &str,
    shard: Option<u32>,
) -> Option<LocalIdOverflow> {
    if !is_local_id_overflow(code, message) {
        return None;
    }
    Some(explain_local_id_overflow(backend, message, shard).await)
}

/// The refusal for the overflow error `message` ([`local_id_overflow`],
/// once [`is_local_id_overflow`] said it is one).
async fn explain_local_id_overflow(
    backend: &mut BackendConn,
    message: &str,
    shard: Option<u32>,
) -> LocalIdOverflow {
    let table = overflowing_table(message);
    let local_id = match &table {
        Some((database, name)) => smallest_overflowing_local_id(backend, database, name)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    LocalIdOverflow {
        table: table.map_or_else(|| "?".to_owned(), |(d, t)| format!("{d}.{t}")),
        shard,
        local_id,
        inserted: false,
    }
}

/// Whether the server's error `code` and `message` are the overflow error
/// [`local_id_overflow`] explains.
fn is_local_id_overflow(code: u16, message: &str) -> bool {
    code == 1690 && message.contains(COMPOSE_OVERFLOW_MARK)
}

/// [`local_id_overflow`] for an error already read into a [`ClientError`]
/// (a multi-shard part): the refusal, or the error unchanged.
pub(crate) async fn explain_backend_error(
    backend: &mut BackendConn,
    error: ClientError,
    shard: u32,
) -> ClientError {
    if let ClientError::Backend { code, message, .. } = &error {
        if let Some(overflow) = local_id_overflow(backend, *code, message, Some(shard)).await {
            return overflow.to_client_error();
        }
    }
    error
}

/// The `(database, table)` of the first `` `db`.`table`.`local_id` `` the
/// server printed in its overflow message.
fn overflowing_table(message: &str) -> Option<(String, String)> {
    let end = message.find("`.`local_id`")?;
    let head = message.get(..end)?;
    let (qualifier, table) = head.rsplit_once("`.`")?;
    let database = qualifier.rsplit_once('`')?.1;
    let plain = |name: &str| !name.is_empty() && !name.contains('`');
    (plain(database) && plain(table)).then(|| (database.to_owned(), table.to_owned()))
}

/// `SELECT MIN(local_id) ... WHERE local_id > MAX_LOCAL` on `backend`.
async fn smallest_overflowing_local_id(
    backend: &mut BackendConn,
    database: &str,
    table: &str,
) -> io::Result<Option<u64>> {
    let sql =
        format!("SELECT MIN(local_id) FROM `{database}`.`{table}` WHERE local_id > {MAX_LOCAL}");
    backend
        .send_command(Command::COM_QUERY, sql.as_bytes())
        .await?;
    let deprecate_eof = backend
        .key
        .framing
        .contains(mysql_common::constants::CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let (_, first) = backend.reader.next_packet().await?;
    if matches!(first.first(), Some(&ERR_HEADER) | Some(&OK_HEADER) | None) {
        return Ok(None);
    }
    let columns = read_lenenc_int(&mut first.as_slice()).unwrap_or(0);
    for _ in 0..columns {
        backend.reader.next_packet().await?;
    }
    if !deprecate_eof {
        backend.reader.next_packet().await?;
    }
    let mut value = None;
    loop {
        let (_, packet) = backend.reader.next_packet().await?;
        match packet.first() {
            Some(&ERR_HEADER) => return Ok(None),
            _ if ends_result_set(&packet, deprecate_eof) => return Ok(value),
            _ => {
                let mut rest = packet.as_slice();
                value = read_lenenc_int(&mut rest).and_then(|len| {
                    let text = rest.get(..usize::try_from(len).ok()?)?;
                    std::str::from_utf8(text).ok()?.parse().ok()
                });
            }
        }
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
pub struct RelayOptions<'a> {
    /// Sequence id of the first frame to the client.
    pub first_seq: u8,
    /// Whether the client set `CLIENT_DEPRECATE_EOF`.
    pub deprecate_eof: bool,
    /// The shard the statement runs on (None: no shard), for errors.
    pub shard: Option<u32>,
    /// Rewrites an object INSERT's last-insert-id into the 64-bit ID.
    pub composer: Option<InsertIdComposer<'a>>,
    /// More results of a multi-statement follow this response: its final
    /// OK/EOF gets `SERVER_MORE_RESULTS_EXISTS`.
    pub more_results: bool,
    /// Text rows from the backend are converted to binary-protocol rows
    /// (the client executed a prepared statement that runs as text).
    pub binary_rows: bool,
    /// The session's status flags once the statement ran: every relayed
    /// OK/EOF tells the client the session's autocommit and transaction
    /// state, not the backend connection's.
    pub session_status: StatusFlags,
    /// For `LOAD DATA LOCAL INFILE`: the file the server may ask for, and
    /// the way to the client's packets.
    pub local_infile: Option<LocalInfile<'a>>,
}

/// What the relay needs to relay a server's request for the client's file.
#[derive(Debug, Clone, Copy)]
pub struct LocalInfile<'a> {
    /// The file name the statement names (as the server decodes it).
    pub name: &'a [u8],
    /// The session's client reader.
    pub link: &'a ClientFileLink,
}

/// Reads the response to the command just sent on `backend` and writes it
/// to `client`. Does not flush.
pub async fn relay_response<W: AsyncWrite + Unpin>(
    backend: &mut BackendConn,
    client: &mut FrameWriter<W>,
    options: RelayOptions<'_>,
) -> Result<RelayOutcome, RelayFailure> {
    let RelayOptions {
        first_seq,
        deprecate_eof,
        shard,
        composer,
        more_results,
        binary_rows,
        session_status,
        local_infile,
    } = options;
    let mut seq = first_seq;
    let mut stage = Stage::FirstPacket;
    let mut continued = false;
    let mut forwarded = false;
    let mut last_insert_id = None;
    let mut affected_rows = None;
    let mut error_code = None;
    let mut rows = 0u64;
    let mut columns: Vec<ColumnInfo> = Vec::new();
    let mut row = Vec::new();
    loop {
        let next = match backend.reader.buffered_frame_in_place() {
            Ok(Some(frame)) => Ok(frame),
            Ok(None) => backend.reader.next_frame_in_place().await,
            Err(error) => Err(error),
        };
        let mut frame = match next {
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
            && (!starts_packet || !ends_result_set(payload, deprecate_eof));
        rows += u64::from(is_row && starts_packet);
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
        let backend_seq = frame.seq();
        frame.set_seq(seq);
        seq = seq.wrapping_add(1);
        let payload = frame.payload();

        let mut end: Option<(StatusFlags, u16, bool)> = None;
        // Where the status flags of an OK/EOF are, to rewrite them.
        let mut status_at = None;
        if starts_packet {
            match (&stage, header) {
                (Stage::FirstPacket, Some(OK_HEADER)) => {
                    let info = parse_ok(payload).ok_or_else(|| malformed(forwarded, seq))?;
                    let last = !info
                        .status
                        .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                    let composed = match composer
                        .filter(|_| info.last_insert_id != 0)
                        .map(|composer| composer.compose(info.last_insert_id, info.affected_rows))
                        .transpose()
                    {
                        Ok(composed) => composed,
                        Err(overflow) if last => {
                            Box::pin(write_refusal(client, frame.seq(), &overflow)).await?;
                            return Ok(RelayOutcome {
                                rows,
                                status: info.status,
                                failed: true,
                                last_insert_id,
                                affected_rows: None,
                                warnings: info.warnings,
                                error_code: None,
                                next_seq: seq,
                            });
                        }
                        // More results follow on the backend: give up the
                        // connection rather than relay them after an error.
                        Err(overflow) => {
                            return Err(RelayFailure::Backend {
                                error: io::Error::new(io::ErrorKind::InvalidData, overflow),
                                forwarded,
                                next_seq: seq,
                            })
                        }
                    };
                    if let Some(id) = composed {
                        last_insert_id = Some(id);
                        let mut rewritten = rewrite_ok_insert_id(payload, &info, id);
                        if let Some(at) = status_offset(&rewritten, false) {
                            rewrite_status(
                                &mut rewritten,
                                at,
                                session_status,
                                last && more_results,
                            );
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
                            rows,
                            status: info.status,
                            failed: false,
                            last_insert_id,
                            affected_rows: Some(info.affected_rows),
                            warnings: info.warnings,
                            error_code: None,
                            next_seq: seq,
                        });
                    }
                    if composer.is_none() && info.last_insert_id != 0 {
                        last_insert_id = Some(info.last_insert_id);
                    }
                    affected_rows = Some(info.affected_rows);
                    end = Some((info.status, info.warnings, false));
                    status_at = status_offset(payload, false);
                }
                (_, Some(ERR_HEADER)) => {
                    if let Some((code, _, message)) = parse_err(payload) {
                        error_code = Some(code);
                        if is_local_id_overflow(code, &message) {
                            // The frame is lent by the backend's reader, on
                            // which the explanation reads: not used after.
                            let client_seq = frame.seq();
                            let overflow =
                                Box::pin(explain_local_id_overflow(backend, &message, shard)).await;
                            Box::pin(write_refusal(client, client_seq, &overflow)).await?;
                            return Ok(RelayOutcome {
                                rows,
                                status: StatusFlags::empty(),
                                failed: true,
                                last_insert_id,
                                affected_rows: None,
                                warnings: 0,
                                error_code: None,
                                next_seq: seq,
                            });
                        }
                    }
                    end = Some((StatusFlags::empty(), 0, true));
                }
                (Stage::FirstPacket, Some(LOCAL_INFILE_HEADER)) => {
                    let asked = &payload[1..];
                    let infile = match local_infile {
                        Some(infile) if infile.name == asked => infile,
                        other => {
                            let reason = match other {
                                None => "backend asked for LOCAL INFILE for a statement that is not LOAD DATA LOCAL INFILE; refused".to_owned(),
                                Some(infile) => format!(
                                    "backend asked for the client's file '{}', but the statement names '{}'; refused (a server may ask only for the file the statement names)",
                                    String::from_utf8_lossy(asked),
                                    String::from_utf8_lossy(infile.name)
                                ),
                            };
                            return Err(RelayFailure::Backend {
                                error: io::Error::new(io::ErrorKind::InvalidData, reason),
                                forwarded,
                                next_seq: seq,
                            });
                        }
                    };
                    client
                        .write_raw(frame.raw())
                        .await
                        .map_err(RelayFailure::Client)?;
                    client.flush().await.map_err(RelayFailure::Client)?;
                    forwarded = true;
                    seq = Box::pin(relay_client_file(backend, infile.link, backend_seq)).await?;
                    continue;
                }
                (Stage::FirstPacket, _) => {
                    affected_rows = None;
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
                (Stage::ColumnsEof, _) => {
                    if ends_result_set(payload, false) {
                        status_at = status_offset(payload, true);
                    }
                    stage = Stage::Rows;
                }
                (Stage::Rows, Some(EOF_HEADER))
                    if deprecate_eof && payload.len() < MAX_FRAME_PAYLOAD =>
                {
                    let info = parse_ok(payload).ok_or_else(|| malformed(forwarded, seq))?;
                    end = Some((info.status, info.warnings, false));
                    status_at = status_offset(payload, false);
                }
                (Stage::Rows, Some(EOF_HEADER)) if !deprecate_eof && payload.len() < 9 => {
                    let status =
                        parse_eof_status(payload).ok_or_else(|| malformed(forwarded, seq))?;
                    let warnings = u16::from_le_bytes([payload[1], payload[2]]);
                    end = Some((status, warnings, false));
                    status_at = status_offset(payload, true);
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
        if let Some(at) = status_at {
            rewrite_status(
                frame.payload_mut(),
                at,
                session_status,
                finished && more_results,
            );
        }
        if !client.write_raw_buffered(frame.raw()) {
            client
                .write_raw(frame.raw())
                .await
                .map_err(RelayFailure::Client)?;
        }
        forwarded = true;
        if let Some((status, warnings, failed)) = end {
            if !finished {
                stage = Stage::FirstPacket;
                continue;
            }
            return Ok(RelayOutcome {
                rows,
                status,
                failed,
                last_insert_id,
                affected_rows: affected_rows.filter(|_| !failed),
                warnings,
                error_code,
                next_seq: seq,
            });
        }
    }
}

/// Relays the client's file to the server after its request (sent with
/// sequence id `backend_seq`):
/// packet by packet, each within the client's packet limit, up to the empty
/// packet that ends it; memory stays one packet. A lost server connection
/// is reported only once the client's file has been read to its end, so the
/// session stays in step with the client. Returns the client-side sequence
/// id of the server's answer.
async fn relay_client_file(
    backend: &mut BackendConn,
    link: &ClientFileLink,
    backend_seq: u8,
) -> Result<u8, RelayFailure> {
    let mut packets = link.request().await.map_err(RelayFailure::Client)?;
    let mut to_backend = backend_seq.wrapping_add(1);
    let mut lost: Option<io::Error> = None;
    let next_seq = loop {
        let packet = tokio::time::timeout(FILE_PACKET_TIMEOUT, packets.recv())
            .await
            .map_err(|_| {
                RelayFailure::Client(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client sent no packet of its LOCAL INFILE file in time",
                ))
            })?
            .ok_or_else(|| {
                RelayFailure::Client(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the session stopped reading the client's file",
                ))
            })?;
        let (seq, payload) = packet.map_err(RelayFailure::Client)?;
        if lost.is_none() {
            match backend.writer.write_packet(to_backend, &payload).await {
                Ok(next) => to_backend = next,
                Err(error) => lost = Some(error),
            }
        }
        if payload.is_empty() {
            break seq.wrapping_add(1);
        }
    };
    if lost.is_none() {
        lost = backend.writer.flush().await.err();
    }
    match lost {
        Some(error) => Err(RelayFailure::Backend {
            error,
            forwarded: true,
            next_seq,
        }),
        None => Ok(next_seq),
    }
}

/// Sends the client the 1105 for a `local_id` no ID can hold, in place of
/// the backend's answer.
async fn write_refusal<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    seq: u8,
    overflow: &LocalIdOverflow,
) -> Result<(), RelayFailure> {
    let refusal = overflow.to_client_error();
    let packet = err_packet(refusal.code(), refusal.sql_state(), &refusal.to_string());
    client
        .write_packet(seq, &packet)
        .await
        .map(|_| ())
        .map_err(RelayFailure::Client)
}

fn malformed(forwarded: bool, next_seq: u8) -> RelayFailure {
    RelayFailure::Backend {
        error: io::Error::new(io::ErrorKind::InvalidData, "malformed packet from backend"),
        forwarded,
        next_seq,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_read_from_the_servers_overflow_message() {
        let mariadb = "BIGINT UNSIGNED value is out of range in '`db03777`.`users`.`local_id` + \
                       (`db03777`.`users`.`local_id` >> 36) * 18446744073709551615'";
        assert_eq!(
            overflowing_table(mariadb),
            Some(("db03777".to_owned(), "users".to_owned()))
        );
        let mysql = "BIGINT UNSIGNED value is out of range in '(`db00001`.`p`.`local_id` + \
                     ((`db00001`.`p`.`local_id` >> 36) * 18446744073709551615))'";
        assert_eq!(
            overflowing_table(mysql),
            Some(("db00001".to_owned(), "p".to_owned()))
        );
        assert_eq!(overflowing_table("out of range in '`local_id` + 1'"), None);
    }

    #[test]
    fn an_insert_id_above_36_bits_is_refused_naming_table_shard_and_value() {
        let composer = InsertIdComposer {
            shard: 3777,
            type_id: 3,
            table: "users",
        };
        assert_eq!(composer.compose(7, 1), Ok((3777 << 46) | (3 << 36) | 7));
        assert_eq!(
            composer.compose(MAX_LOCAL, 1),
            Ok((3777 << 46) | (3 << 36) | MAX_LOCAL)
        );
        assert_eq!(
            composer.compose(MAX_LOCAL - 2, 3),
            Ok((3777 << 46) | (3 << 36) | (MAX_LOCAL - 2))
        );
        let refusal = composer.compose((1 << 36) + 5, 1).unwrap_err();
        let message = refusal.to_client_error().to_string();
        assert!(
            message.starts_with(
                "shardgate: table users on shard 3777 gave a new row local_id 68719476741, \
                 above the 36 bits"
            ),
            "{message}"
        );
        // A multi-row INSERT whose later rows pass 2^36: the first of those
        // is named.
        let refusal = composer.compose(MAX_LOCAL - 1, 3).unwrap_err();
        assert_eq!(refusal.local_id, Some(MAX_LOCAL + 1));
        assert_eq!(refusal.to_client_error().code(), 1105);
        let read = LocalIdOverflow {
            table: "db03777.users".to_owned(),
            shard: Some(3777),
            local_id: Some((1 << 36) + 5),
            inserted: false,
        };
        assert_eq!(
            read.to_string(),
            "shardgate: table db03777.users on shard 3777 holds a row with local_id 68719476741, \
             above the 36 bits of an ID's local part (at most 68719476735), so no 64-bit ID can \
             name that row; the statement was refused"
        );
    }
}
