//! Runs a prepared statement's planned text on the server as a prepared
//! statement of its own, so the client gets the server's binary rows as
//! they are (a FLOAT's four bytes cannot be rebuilt from its text).
//!
//! A text the connection keeps prepared (`backend::statements`,
//! `limits.backend_prepared_statements`) is a COM_STMT_EXECUTE of its id
//! alone. A text worth keeping is prepared and kept. Any other text (not
//! worth keeping yet, too long, the connection dirty, none kept) runs in
//! one round trip with the values written in as literals
//! (`prepared::render_statement`): as COM_QUERY, text rows converted, when
//! the client's PREPARE answer named no FLOAT or DOUBLE column (the server
//! parses a query for less than it prepares, executes and closes one);
//! else COM_STMT_PREPARE, COM_STMT_EXECUTE of statement id `0xFFFFFFFF`
//! ("the statement just prepared", MariaDB 10.2 and later) and
//! COM_STMT_CLOSE of it in one write, so the rows stay the server's binary
//! rows.
//!
//! MariaDB answers an execute of `0xFFFFFFFF` after a prepare it refused
//! at `max_prepared_stmt_count` by running the statement prepared before
//! it (checked on 10.11; a prepare refused for any other reason leaves
//! none), so that write is only sent when the statement prepared last on
//! the connection is closed or cannot run without parameters
//! (`StatementCache::last`): a kept write never runs twice. Otherwise the
//! text is prepared alone and executed by its id once the answer is read.
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
use crate::backend::pool::HostState;
use crate::backend::statements::{LastPrepared, MAX_CACHED_TEXT};
use crate::backend::BackendConn;
use crate::protocol::packets::{ERR_HEADER, OK_HEADER};
use crate::protocol::FrameWriter;

/// The statement id MariaDB reads as "the statement prepared last on this
/// connection".
const LAST_PREPARED: [u8; 4] = u32::MAX.to_le_bytes();

/// COM_STMT_EXECUTE of [`LAST_PREPARED`] without a cursor, one iteration,
/// no parameters.
const EXECUTE_LAST: [u8; 9] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x01, 0x00, 0x00, 0x00];

/// How many statements a connection may keep prepared
/// (`limits.backend_prepared_statements`), and whether its server has room
/// for more (under three quarters of its `max_prepared_stmt_count`, as
/// the health checker last read it).
#[derive(Debug, Clone, Copy)]
pub(super) struct Keep {
    /// Statements kept per connection at most.
    pub(super) capacity: usize,
    /// The server takes more.
    pub(super) room: bool,
}

impl Keep {
    /// `capacity` statements per connection to `host`.
    pub(super) fn on(host: &HostState, capacity: usize) -> Self {
        Self {
            capacity,
            room: host.has_statement_room(),
        }
    }
}

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
    keep: Keep,
    binary: Option<&BinaryExecute>,
) -> Result<RelayOutcome, RelayFailure> {
    let lost = |error| RelayFailure::Backend {
        error,
        forwarded: false,
        next_seq: options.first_seq,
    };
    let started = match binary {
        Some(binary) => execute_bound(backend, sql, binary, options.deprecate_eof, keep).await,
        None => start_direct(backend, sql, options.deprecate_eof, keep)
            .await
            .map(Started::from),
    };
    let text = match started {
        Ok(Started::Binary) => {
            let relayed = RelayOptions {
                binary_rows: false,
                ..options
            };
            return relay_response(backend, client, relayed).await;
        }
        Ok(Started::Text(text)) => text,
        Ok(Started::Refused) => match binary {
            Some(binary) => binary.text(sql).ok_or_else(|| {
                RelayFailure::NotSent(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a bound value cannot be written as a literal",
                ))
            })?,
            None => sql.to_vec(),
        },
        Err(Unsent(error)) => return Err(RelayFailure::NotSent(error)),
        Err(Lost(error)) => return Err(lost(error)),
    };
    // Statements queued for closing (evicted, shed while the server has
    // no room, or of other settings) go out before the text, else a
    // connection that runs only text would keep them open on the server.
    let closes = backend.statements.take_closes();
    write_closes(backend, &closes)
        .await
        .map_err(RelayFailure::NotSent)?;
    backend
        .send_command(Command::COM_QUERY, &text)
        .await
        .map_err(RelayFailure::NotSent)?;
    let converted = RelayOptions {
        binary_rows: true,
        ..options
    };
    relay_response(backend, client, converted).await
}

/// How an execute started on the server.
enum Started {
    /// As a prepared statement: its binary answer comes next.
    Binary,
    /// The server refused to prepare it; nothing ran.
    Refused,
    /// Not sent: it runs as this text (COM_QUERY, text rows converted).
    Text(Vec<u8>),
}

/// What an execute of a text does with the statements its connection
/// keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// The text is kept as this statement: executed alone.
    Hit(u32),
    /// Not kept, and worth keeping ([`StatementCache::admit`]): prepared
    /// and kept.
    Admit,
    /// Not kept, and not worth keeping (or not cacheable): run once, in
    /// one round trip as text or as a prepare, execute and close in one
    /// write when that is safe ([`once_is_pipelined`]).
    Once,
}

/// What `sql` does with the statements `backend` keeps: cacheable when
/// statements are kept at all, the connection's settings are known and
/// the text is not too long.
///
/// [`StatementCache::admit`]: crate::backend::statements::StatementCache::admit
fn kept_statement(backend: &mut BackendConn, sql: &[u8], keep: Keep) -> Kept {
    let fingerprint = backend.settings_fingerprint;
    let cacheable = keep.capacity > 0 && fingerprint != DIRTY && sql.len() <= MAX_CACHED_TEXT;
    if !cacheable {
        return Kept::Once;
    }
    if !keep.room {
        backend.statements.shed();
    }
    if let Some(id) = backend.statements.lookup(fingerprint, sql) {
        return Kept::Hit(id);
    }
    match backend.statements.admit(sql, keep.capacity, keep.room) {
        true => Kept::Admit,
        false => Kept::Once,
    }
}

/// Whether a prepare, an execute of [`LAST_PREPARED`] without parameters
/// and a close of it may go in one write: if the server refuses the
/// prepare at `max_prepared_stmt_count`, the execute and close reach the
/// statement prepared before it, which must then be none, or one that
/// cannot run without parameters (MariaDB refuses a direct execute of a
/// statement with parameters whose types are not sent: malformed packet).
fn once_is_pipelined(backend: &BackendConn) -> bool {
    match backend.statements.last() {
        LastPrepared::None => true,
        LastPrepared::Open { params, .. } => params > 0,
        LastPrepared::Unknown => false,
    }
}

/// Starts `sql` (a `?` per bound value of `binary`) as the statement the
/// connection keeps for that text, executed with the client's parameters
/// ([`BinaryExecute::write_params`]). A text not kept yet and worth keeping
/// is prepared alone first and its answer read (its id is known before the
/// execute is sent: an execute of [`LAST_PREPARED`] after a refused prepare
/// could run the statement prepared before it with these values), then
/// kept. A text not worth keeping runs in one round trip with the values
/// written in: as text when its text rows convert exactly
/// ([`BinaryExecute::text_rows_exact`]: the server parses a query for
/// less than it prepares, executes and closes one), else as [`run_once`].
async fn execute_bound(
    backend: &mut BackendConn,
    sql: &[u8],
    binary: &BinaryExecute,
    deprecate_eof: bool,
    keep: Keep,
) -> Result<Started, DirectFailure> {
    let kept = kept_statement(backend, sql, keep);
    if kept == Kept::Once {
        if let Some(text) = binary.text(sql) {
            if binary.text_rows_exact() {
                return Ok(Started::Text(text));
            }
            if once_is_pipelined(backend) {
                return run_once(backend, &text, deprecate_eof)
                    .await
                    .map(Started::from);
            }
        }
    }
    prepare_alone(backend, sql, Some(binary), deprecate_eof, (kept, keep))
        .await
        .map(Started::from)
}

impl From<bool> for Started {
    fn from(prepared: bool) -> Self {
        match prepared {
            true => Started::Binary,
            false => Started::Refused,
        }
    }
}

/// Executes `sql` (a `?` per parameter of `binary`; none without) with
/// `binary`'s parameters ([`BinaryExecute::write_params`]) as the
/// statement kept for it (`kept` is [`Kept::Hit`]), or prepares it alone
/// first, reads the answer, and then executes it by its id: kept
/// ([`Kept::Admit`]) or closed in the same write ([`Kept::Once`]).
async fn prepare_alone(
    backend: &mut BackendConn,
    sql: &[u8],
    binary: Option<&BinaryExecute>,
    deprecate_eof: bool,
    (kept, keep): (Kept, Keep),
) -> Result<bool, DirectFailure> {
    let fingerprint = backend.settings_fingerprint;
    let closes = backend.statements.take_closes();
    let mut close_after = false;
    let id = match kept {
        Kept::Hit(id) => id,
        Kept::Admit | Kept::Once => {
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
            backend.statements.prepared(id, params);
            if usize::from(params) != binary.map_or(0, BinaryExecute::param_count) {
                send_close(backend, id).await.map_err(Lost)?;
                return Ok(false);
            }
            match kept {
                Kept::Admit => backend
                    .statements
                    .insert(fingerprint, sql, id, keep.capacity),
                _ => close_after = true,
            }
            id
        }
    };
    let capacity = binary.map_or(0, BinaryExecute::params_capacity);
    let mut execute = Vec::with_capacity(EXECUTE_LAST.len() + capacity);
    execute.extend_from_slice(&id.to_le_bytes());
    execute.extend_from_slice(&EXECUTE_LAST[4..]);
    if let Some(binary) = binary {
        binary.write_params(&mut execute);
    }
    let hit = matches!(kept, Kept::Hit(_));
    let sent = async {
        if hit {
            write_closes(backend, &closes).await?;
        }
        let close = close_after.then(|| id.to_le_bytes());
        write_execute_and_close(backend, &execute, close).await
    };
    let sent = sent.await;
    if close_after {
        backend.statements.closed(id);
    }
    match (sent, hit) {
        (Ok(()), _) => Ok(true),
        (Err(error), true) => Err(Unsent(error)),
        // The prepare's answer was read: the connection is in use.
        (Err(error), false) => Err(Lost(error)),
    }
}

/// Sends, in one write after the queued closes, COM_STMT_PREPARE of `sql`
/// and COM_STMT_EXECUTE of [`LAST_PREPARED`] (no parameters), and with
/// `close` COM_STMT_CLOSE of it.
async fn send_prepare_execute_last(
    backend: &mut BackendConn,
    sql: &[u8],
    close: bool,
) -> Result<(), DirectFailure> {
    let closes = backend.statements.take_closes();
    let sent = async {
        write_closes(backend, &closes).await?;
        backend
            .writer
            .write_command(Command::COM_STMT_PREPARE as u8, sql)
            .await?;
        write_execute_and_close(backend, &EXECUTE_LAST, close.then_some(LAST_PREPARED)).await
    };
    sent.await.map_err(Unsent)
}

/// Writes COM_STMT_EXECUTE with `execute` as its body, then, with
/// `close`, COM_STMT_CLOSE of that statement id, and flushes them.
async fn write_execute_and_close(
    backend: &mut BackendConn,
    execute: &[u8],
    close: Option<[u8; 4]>,
) -> std::io::Result<()> {
    backend
        .writer
        .write_command(Command::COM_STMT_EXECUTE as u8, execute)
        .await?;
    if let Some(id) = close {
        backend
            .writer
            .write_command(Command::COM_STMT_CLOSE as u8, &id)
            .await?;
    }
    backend.writer.flush().await
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
    backend.statements.closed(id);
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

/// Starts `sql` (no parameters) as a prepared statement executed on
/// `backend`: the statement the connection keeps for that text is
/// executed (no parse on the server); a text worth keeping
/// ([`StatementCache::admit`]) is prepared, executed as [`LAST_PREPARED`]
/// in the same write when no statement is the last prepared one (else
/// prepared alone first, [`prepare_alone`]), and kept; any other text runs
/// once ([`run_once`]). Statements evicted or prepared under other settings
/// are closed in the same write.
///
/// True: the execute's binary answer comes next. False: the server refused
/// to prepare the text; nothing ran (the failed execute's error, if one was
/// sent, was read too; the caller sends the text as COM_QUERY).
///
/// [`StatementCache::admit`]: crate::backend::statements::StatementCache::admit
pub(super) async fn start_direct(
    backend: &mut BackendConn,
    sql: &[u8],
    deprecate_eof: bool,
    keep: Keep,
) -> Result<bool, DirectFailure> {
    let kept = kept_statement(backend, sql, keep);
    let pipelined = match kept {
        Kept::Hit(_) => false,
        Kept::Admit => backend.statements.last() == LastPrepared::None,
        Kept::Once => once_is_pipelined(backend),
    };
    match (kept, pipelined) {
        (Kept::Once, true) => run_once(backend, sql, deprecate_eof).await,
        (Kept::Admit, true) => prepare_and_keep(backend, sql, deprecate_eof, keep).await,
        _ => prepare_alone(backend, sql, None, deprecate_eof, (kept, keep)).await,
    }
}

/// Prepares `sql` (no parameters) and executes it as [`LAST_PREPARED`] in
/// one write, and keeps it. Only when no statement is the last prepared
/// one: a refused prepare leaves none for the execute.
async fn prepare_and_keep(
    backend: &mut BackendConn,
    sql: &[u8],
    deprecate_eof: bool,
    keep: Keep,
) -> Result<bool, DirectFailure> {
    let fingerprint = backend.settings_fingerprint;
    send_prepare_execute_last(backend, sql, false).await?;
    match read_prepare_answer(backend, deprecate_eof)
        .await
        .map_err(Lost)?
    {
        Some((id, params)) => {
            backend.statements.prepared(id, params);
            backend
                .statements
                .insert(fingerprint, sql, id, keep.capacity);
            Ok(true)
        }
        None => read_refused_execute(backend).await.map(|()| false),
    }
}

/// Runs `sql` (no parameters) once in one round trip: COM_STMT_PREPARE,
/// COM_STMT_EXECUTE of [`LAST_PREPARED`] and COM_STMT_CLOSE of it in one
/// write (MariaDB's direct execution). Only when [`once_is_pipelined`]:
/// when the server refuses the prepare, the execute fails and runs
/// nothing, and the close may have closed the statement prepared before
/// (`StatementCache::refused_after`).
async fn run_once(
    backend: &mut BackendConn,
    sql: &[u8],
    deprecate_eof: bool,
) -> Result<bool, DirectFailure> {
    send_prepare_execute_last(backend, sql, true).await?;
    match read_prepare_answer(backend, deprecate_eof)
        .await
        .map_err(Lost)?
    {
        // Prepared, then closed by the close of the last prepared one.
        Some(_) => Ok(true),
        None => {
            backend.statements.refused_after();
            read_refused_execute(backend).await.map(|()| false)
        }
    }
}

/// Reads the error an execute of [`LAST_PREPARED`] answers after its
/// prepare was refused.
async fn read_refused_execute(backend: &mut BackendConn) -> Result<(), DirectFailure> {
    let (_, answer) = backend.reader.next_packet().await.map_err(Lost)?;
    if answer.first() != Some(&ERR_HEADER) {
        return Err(Lost(io::Error::new(
            io::ErrorKind::InvalidData,
            "the server executed a statement after its prepare failed",
        )));
    }
    Ok(())
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
