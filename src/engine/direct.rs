//! Runs a prepared statement's planned text on the server as a prepared
//! statement of its own, so the client gets the server's binary rows as
//! they are (a FLOAT's four bytes cannot be rebuilt from its text).
//!
//! MariaDB's direct execution (10.2 and later): COM_STMT_PREPARE of the
//! text, COM_STMT_EXECUTE of statement id `0xFFFFFFFF` ("the statement
//! just prepared") and COM_STMT_CLOSE of the same id go out in one write.
//! The prepare's answer is read and dropped, the execute's relayed; the
//! close has none. The bound values are already in the text as literals
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

use super::relay::{relay_response, RelayFailure, RelayOptions, RelayOutcome};
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
/// treated as [`relay_response`] treats them). Falls back to COM_QUERY with
/// rows converted when the server does not prepare `sql`.
pub(super) async fn execute_direct<W: AsyncWrite + Unpin>(
    backend: &mut BackendConn,
    sql: &[u8],
    client: &mut FrameWriter<W>,
    options: RelayOptions<'_>,
) -> Result<RelayOutcome, RelayFailure> {
    send_direct(backend, sql)
        .await
        .map_err(RelayFailure::NotSent)?;
    let lost = |error| RelayFailure::Backend {
        error,
        forwarded: false,
        next_seq: options.first_seq,
    };
    if !read_direct_prepare(backend, options.deprecate_eof)
        .await
        .map_err(lost)?
    {
        backend
            .send_command(Command::COM_QUERY, sql)
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

/// Sends `sql` for direct execution: its COM_STMT_PREPARE, the
/// COM_STMT_EXECUTE of [`LAST_PREPARED`] and its COM_STMT_CLOSE, in one
/// write. [`read_direct_prepare`] reads what comes first.
pub(super) async fn send_direct(backend: &mut BackendConn, sql: &[u8]) -> io::Result<()> {
    backend
        .writer
        .write_command(Command::COM_STMT_PREPARE as u8, sql)
        .await?;
    backend
        .writer
        .write_command(Command::COM_STMT_EXECUTE as u8, &EXECUTE_LAST)
        .await?;
    backend
        .writer
        .write_command(Command::COM_STMT_CLOSE as u8, &LAST_PREPARED)
        .await?;
    backend.writer.flush().await
}

/// Reads the answer to [`send_direct`]'s prepare: true when the server
/// prepared the statement (its execute's answer, binary rows, comes
/// next); false when it refused, in which case the failed execute's error
/// was read too and nothing ran (the caller sends the text as COM_QUERY).
pub(super) async fn read_direct_prepare(
    backend: &mut BackendConn,
    deprecate_eof: bool,
) -> io::Result<bool> {
    if read_prepare_answer(backend, deprecate_eof).await? {
        return Ok(true);
    }
    let (_, answer) = backend.reader.next_packet().await?;
    if answer.first() != Some(&ERR_HEADER) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the server executed a statement after its prepare failed",
        ));
    }
    Ok(false)
}

/// Reads a COM_STMT_PREPARE answer to its end; whether the server prepared
/// the statement (false: it answered with an error).
async fn read_prepare_answer(backend: &mut BackendConn, deprecate_eof: bool) -> io::Result<bool> {
    let (_, first) = backend.reader.next_packet().await?;
    match first.first() {
        Some(&ERR_HEADER) => return Ok(false),
        Some(&OK_HEADER) if first.len() >= 9 => {}
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "malformed COM_STMT_PREPARE answer",
            ))
        }
    }
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
    Ok(true)
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
