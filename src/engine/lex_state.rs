//! Reads back from a server how it will read the session's statements
//! (`sql_mode`, `character_set_client`), after a `SET` that may change it.

use crate::backend::BackendConn;
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::{ends_result_set, ERR_HEADER};
use mysql_common::constants::Command;

/// The statement that reads the session's lexical state.
const LEX_STATE_QUERY: &[u8] = b"SELECT @@session.sql_mode, @@session.character_set_client";

/// What the server answered: `(sql_mode, character_set_client)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLexState {
    /// `@@session.sql_mode`.
    pub sql_mode: String,
    /// `@@session.character_set_client`.
    pub character_set_client: String,
}

/// Asks `conn` for the session's `sql_mode` and `character_set_client`
/// (one round trip). `Err` says why the answer could not be had.
pub async fn read_lex_state(conn: &mut BackendConn) -> Result<ServerLexState, String> {
    conn.send_command(Command::COM_QUERY, LEX_STATE_QUERY)
        .await
        .map_err(|e| e.to_string())?;
    let deprecate_eof = conn
        .key
        .framing
        .contains(mysql_common::constants::CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let first = next_packet(conn).await?;
    if first.first() == Some(&ERR_HEADER) {
        return Err(format!(
            "the server refused {}",
            String::from_utf8_lossy(LEX_STATE_QUERY)
        ));
    }
    let columns = read_lenenc_int(&mut first.as_slice()).ok_or("malformed column count")?;
    for _ in 0..columns {
        next_packet(conn).await?;
    }
    if !deprecate_eof {
        next_packet(conn).await?;
    }
    let mut row = None;
    loop {
        let packet = next_packet(conn).await?;
        match packet.first() {
            Some(&ERR_HEADER) => return Err("the server failed reading the session state".into()),
            _ if ends_result_set(&packet, deprecate_eof) => break,
            _ => row = Some(packet),
        }
    }
    let row = row.ok_or("no row")?;
    let mut rest = row.as_slice();
    let mut value = || -> Option<String> {
        let len = usize::try_from(read_lenenc_int(&mut rest)?).ok()?;
        let text = rest.get(..len)?;
        rest = rest.get(len..)?;
        Some(String::from_utf8_lossy(text).into_owned())
    };
    match (value(), value()) {
        (Some(sql_mode), Some(character_set_client)) => Ok(ServerLexState {
            sql_mode,
            character_set_client,
        }),
        _ => Err("malformed row".to_owned()),
    }
}

async fn next_packet(conn: &mut BackendConn) -> Result<Vec<u8>, String> {
    conn.reader
        .next_packet()
        .await
        .map(|(_, payload)| payload)
        .map_err(|e| e.to_string())
}
