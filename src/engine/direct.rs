//! Runs a prepared statement's planned text on the server as a prepared
//! statement of its own, so the client gets the server's binary rows as
//! they are (a FLOAT's four bytes cannot be rebuilt from its text).
//!
//! COM_STMT_PREPARE of the text and COM_STMT_EXECUTE of statement id
//! `0xFFFFFFFF` ("the statement just prepared", MariaDB 10.2 and later) go
//! out in one write; the prepare's answer gives the statement id, which the
//! connection keeps (`backend::statements`, `limits.backend_prepared_statements`)
//! so a later execute of the same text there is a COM_STMT_EXECUTE alone.
//! A text not kept (too long, the connection dirty, none kept) is closed in
//! the same write. The bound values are already in the text as literals
//! (`prepared::render_statement`), so the server gets no parameters and
//! every routing and rewriting decision stays the planner's.
//!
//! When the server refuses to prepare the text (a statement the prepared
//! protocol does not take, `max_prepared_stmt_count` reached, or any error
//! the statement would raise as text), nothing ran: the text is sent
//! again with COM_QUERY and its text rows converted, as before. The
//! execute of the missing statement fails too and would leave its own
//! error in the diagnostics area; the COM_QUERY puts the statement's own
//! diagnostics there for `SHOW WARNINGS`.

use std::io;

use mysql_common::constants::Command;
use tokio::io::AsyncWrite;

use super::checkout::DIRTY;
use super::prepared::BinaryExecute;
use super::relay::{relay_response, RelayFailure, RelayOptions, RelayOutcome};
use crate::backend::statements::MAX_CACHED_TEXT;
use crate::backend::BackendConn;
use crate::protocol::packets::{ERR_HEADER, OK_HEADER};
use crate::protocol::FrameWriter;

/// The statement id MariaDB reads as "the statement prepared last on this
/// connection".
const LAST_PREPARED: [u8; 4] = u32::MAX.to_le_bytes();

/// COM_STMT_EXECUTE of [`LAST_PREPARED`] without a cursor, one iteration,
/// no parameters.
const EXECUTE_LAST: [u8; 9] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x01, 0x00, 0x00, 0x00];

/// Runs `sql` on `backend` as a directly executed prepared statement and
/// relays the server's binary answer to `client` (rows untouched, OK/EOF
/// treated as [`relay_response`] treats them). With `binary`, `sql` has a
/// `?` per parameter and the execute carries the client's parameters
/// ([`execute_bound`]). Falls back to COM_QUERY with rows converted when
/// the server does not prepare `sql`.
pub(super) async fn execute_direct<W: AsyncWrite + Unpin>(
    backend: &mut BackendConn,
    sql: &[u8],
    client: &mut FrameWriter<W>,
    options: RelayOptions<'_>,
    keep: usize,
    binary: Option<&BinaryExecute>,
) -> Result<RelayOutcome, RelayFailure> {
    let lost = |error| RelayFailure::Backend {
        error,
        forwarded: false,
        next_seq: options.first_seq,
    };
    let started = match binary {
        Some(binary) => {
            let params = (binary.param_count(), binary.param_block());
            execute_bound(backend, sql, params, options.deprecate_eof, keep).await
        }
        None => start_direct(backend, sql, options.deprecate_eof, keep).await,
    };
    let prepared = match started {
        Ok(prepared) => prepared,
        Err(Unsent(error)) => return Err(RelayFailure::NotSent(error)),
        Err(Lost(error)) => return Err(lost(error)),
    };
    if !prepared {
        let text = match binary {
            Some(binary) => binary.text(sql).ok_or_else(|| {
                RelayFailure::NotSent(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a bound value cannot be written as a literal",
                ))
            })?,
            None => sql.to_vec(),
        };
        backend
            .send_command(Command::COM_QUERY, &text)
            .await
            .map_err(RelayFailure::NotSent)?;
        let converted = RelayOptions {
            binary_rows: true,
            ..options
        };
        return relay_response(backend, client, converted).await;
    }
    let relayed = RelayOptions {
        binary_rows: false,
        ..options
    };
    relay_response(backend, client, relayed).await
}

/// Whether `sql` may be kept prepared on `backend` (`keep` statements at
/// most, its settings known, the text not too long), and the id of the
/// statement it keeps for it, if any.
fn kept_statement(backend: &mut BackendConn, sql: &[u8], keep: usize) -> (bool, Option<u32>) {
    let fingerprint = backend.settings_fingerprint;
    let cacheable = keep > 0 && fingerprint != DIRTY && sql.len() <= MAX_CACHED_TEXT;
    let kept = match cacheable {
        true => backend.statements.lookup(fingerprint, sql),
        false => None,
    };
    (cacheable, kept)
}

/// Starts `sql` (`count` `?`s) as the statement the connection keeps for
/// that text, executed with parameters `block` (what COM_STMT_EXECUTE
/// carries after its header: [`BinaryExecute::param_block`]; empty for
/// none). A text not kept yet is prepared first
/// and its answer read (its id is known before the execute is sent: an
/// execute of [`LAST_PREPARED`] after a refused prepare could run the
/// statement prepared before it), then kept (`keep` per connection; 0 or
/// a dirty connection: closed after the execute).
///
/// True: the execute's binary answer comes next. False: the server refused
/// the prepare (`max_prepared_stmt_count`, a statement the prepared
/// protocol does not take, ...) or counted other parameters; nothing ran.
async fn execute_bound(
    backend: &mut BackendConn,
    sql: &[u8],
    (count, block): (usize, Vec<u8>),
    deprecate_eof: bool,
    keep: usize,
) -> Result<bool, DirectFailure> {
    let fingerprint = backend.settings_fingerprint;
    let (cacheable, kept) = kept_statement(backend, sql, keep);
    let closes = backend.statements.take_closes();
    let mut close_after = false;
    let id = match kept {
        Some(id) => id,
        None => {
            let sent = async {
                write_closes(backend, &closes).await?;
                backend
                    .writer
                    .write_command(Command::COM_STMT_PREPARE as u8, sql)
                    .await?;
                backend.writer.flush().await
            };
            sent.await.map_err(Unsent)?;
            let answer = read_prepare_answer(backend, deprecate_eof)
                .await
                .map_err(Lost)?;
            let Some((id, params)) = answer else {
                return Ok(false);
            };
            if usize::from(params) != count {
                send_close(backend, id).await.map_err(Lost)?;
                return Ok(false);
            }
            match cacheable {
                true => backend.statements.insert(fingerprint, sql, id, keep),
                false => close_after = true,
            }
            id
        }
    };
    let mut execute = Vec::with_capacity(EXECUTE_LAST.len() + 64);
    execute.extend_from_slice(&id.to_le_bytes());
    execute.extend_from_slice(&EXECUTE_LAST[4..]);
    execute.extend_from_slice(&block);
    let sent = async {
        if kept.is_some() {
            write_closes(backend, &closes).await?;
        }
        backend
            .writer
            .write_command(Command::COM_STMT_EXECUTE as u8, &execute)
            .await?;
        if close_after {
            backend
                .writer
                .write_command(Command::COM_STMT_CLOSE as u8, &id.to_le_bytes())
                .await?;
        }
        backend.writer.flush().await
    };
    match (sent.await, kept) {
        (Ok(()), _) => Ok(true),
        (Err(error), Some(_)) => Err(Unsent(error)),
        // The prepare's answer was read: the connection is in use.
        (Err(error), None) => Err(Lost(error)),
    }
}

/// Queues COM_STMT_CLOSE of `ids` (no answer comes).
async fn write_closes(backend: &mut BackendConn, ids: &[u32]) -> io::Result<()> {
    for id in ids {
        backend
            .writer
            .write_command(Command::COM_STMT_CLOSE as u8, &id.to_le_bytes())
            .await?;
    }
    Ok(())
}

/// Closes statement `id` now.
async fn send_close(backend: &mut BackendConn, id: u32) -> io::Result<()> {
    write_closes(backend, &[id]).await?;
    backend.writer.flush().await
}

/// How [`start_direct`] failed: before anything was sent, or after.
pub(super) enum DirectFailure {
    /// Nothing reached the server.
    Unsent(io::Error),
    /// The connection failed after the statement was sent.
    Lost(io::Error),
}
use DirectFailure::{Lost, Unsent};

impl From<DirectFailure> for io::Error {
    fn from(failure: DirectFailure) -> Self {
        match failure {
            Unsent(error) | Lost(error) => error,
        }
    }
}

/// Starts `sql` as a prepared statement executed on `backend`: the
/// statement the connection keeps for that text is executed (no parse on
/// the server), else the text is prepared and executed at once as
/// [`LAST_PREPARED`], and kept (up to `keep` statements per connection,
/// `limits.backend_prepared_statements`; 0 closes it at once). Statements
/// evicted or prepared under other settings are closed in the same write.
///
/// A connection that keeps statements open prepares the text alone first
/// ([`execute_bound`]): MariaDB answers an execute of [`LAST_PREPARED`]
/// after a prepare it refused at `max_prepared_stmt_count` by running the
/// statement prepared before it (checked on 10.11), so pipelining is only
/// for a connection with none open.
///
/// True: the execute's binary answer comes next. False: the server refused
/// to prepare the text; nothing ran (the failed execute's error, if one was
/// sent, was read too; the caller sends the text as COM_QUERY).
pub(super) async fn start_direct(
    backend: &mut BackendConn,
    sql: &[u8],
    deprecate_eof: bool,
    keep: usize,
) -> Result<bool, DirectFailure> {
    let fingerprint = backend.settings_fingerprint;
    let (cacheable, kept) = kept_statement(backend, sql, keep);
    if kept.is_none() && !backend.statements.is_empty() {
        // A statement stays open on the connection: an execute of
        // LAST_PREPARED after a refused prepare (1461) would run it again.
        return execute_bound(backend, sql, (0, Vec::new()), deprecate_eof, keep).await;
    }
    let closes = backend.statements.take_closes();
    let sent = async {
        write_closes(backend, &closes).await?;
        if let Some(id) = kept {
            let mut execute = EXECUTE_LAST;
            execute[..4].copy_from_slice(&id.to_le_bytes());
            backend
                .writer
                .write_command(Command::COM_STMT_EXECUTE as u8, &execute)
                .await?;
            return backend.writer.flush().await;
        }
        backend
            .writer
            .write_command(Command::COM_STMT_PREPARE as u8, sql)
            .await?;
        backend
            .writer
            .write_command(Command::COM_STMT_EXECUTE as u8, &EXECUTE_LAST)
            .await?;
        if !cacheable {
            backend
                .writer
                .write_command(Command::COM_STMT_CLOSE as u8, &LAST_PREPARED)
                .await?;
        }
        backend.writer.flush().await
    };
    sent.await.map_err(Unsent)?;
    if kept.is_some() {
        return Ok(true);
    }
    match read_prepare_answer(backend, deprecate_eof)
        .await
        .map_err(Lost)?
    {
        Some((id, _)) => {
            if cacheable {
                backend.statements.insert(fingerprint, sql, id, keep);
            }
            Ok(true)
        }
        None => {
            let (_, answer) = backend.reader.next_packet().await.map_err(Lost)?;
            if answer.first() != Some(&ERR_HEADER) {
                return Err(Lost(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the server executed a statement after its prepare failed",
                )));
            }
            Ok(false)
        }
    }
}

/// Reads a COM_STMT_PREPARE answer to its end; the statement id the
/// server gave it and its parameter count (None: it answered with an
/// error).
async fn read_prepare_answer(
    backend: &mut BackendConn,
    deprecate_eof: bool,
) -> io::Result<Option<(u32, u16)>> {
    let (_, first) = backend.reader.next_packet().await?;
    match first.first() {
        Some(&ERR_HEADER) => return Ok(None),
        Some(&OK_HEADER) if first.len() >= 9 => {}
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "malformed COM_STMT_PREPARE answer",
            ))
        }
    }
    let id = u32::from_le_bytes([first[1], first[2], first[3], first[4]]);
    let columns = u16::from_le_bytes([first[5], first[6]]);
    let params = u16::from_le_bytes([first[7], first[8]]);
    for count in [params, columns] {
        if count == 0 {
            continue;
        }
        for _ in 0..count {
            backend.reader.next_packet().await?;
        }
        if !deprecate_eof {
            backend.reader.next_packet().await?;
        }
    }
    Ok(Some((id, params)))
}

#[cfg(test)]
mod tests {
    use mysql_common::constants::Command;
    use mysql_common::packets::ComStmtExecuteRequestBuilder;
    use mysql_common::proto::MySerialize;

    use super::*;

    #[test]
    fn the_execute_is_the_one_a_driver_sends_for_the_last_prepared_statement() {
        let (request, _) = ComStmtExecuteRequestBuilder::new(u32::MAX).build(&[]);
        let mut packet = Vec::new();
        request.serialize(&mut packet);
        assert_eq!(packet[0], Command::COM_STMT_EXECUTE as u8);
        assert_eq!(&packet[1..], &EXECUTE_LAST[..]);
        assert_eq!(&EXECUTE_LAST[..4], &LAST_PREPARED[..]);
    }
}
