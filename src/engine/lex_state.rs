//! Reads back from a server how it will read the session's statements
//! (`sql_mode`, `character_set_client`), after a `SET` that may change it.

use super::merge::decode_text_row;
use crate::backend::BackendConn;
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::{ends_result_set, ERR_HEADER};
use mysql_common::constants::Command;

/// The statement that reads the session's lexical state (and its
/// `wait_timeout`, which a `SET` may change as well).
const LEX_STATE_QUERY: &[u8] =
    b"SELECT @@session.sql_mode, @@session.character_set_client, @@session.wait_timeout";

/// What the server answered: `(sql_mode, character_set_client)`, and the
/// session's `wait_timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLexState {
    /// `@@session.sql_mode`.
    pub sql_mode: String,
    /// `@@session.character_set_client`.
    pub character_set_client: String,
    /// `@@session.wait_timeout`, in seconds.
    pub wait_timeout: Option<u64>,
}

/// Asks `conn` for the session's `sql_mode`, `character_set_client` and
/// `wait_timeout` (one round trip). `Err` says why the answer could not
/// be had.
pub async fn read_lex_state(conn: &mut BackendConn) -> Result<ServerLexState, String> {
    let mut values = read_row(conn, LEX_STATE_QUERY).await?.into_iter();
    match (values.next(), values.next(), values.next()) {
        (Some(Some(sql_mode)), Some(Some(character_set_client)), Some(wait_timeout)) => {
            Ok(ServerLexState {
                sql_mode,
                character_set_client,
                wait_timeout: wait_timeout.and_then(|text| text.parse().ok()),
            })
        }
        _ => Err("malformed row".to_owned()),
    }
}

/// Runs `query` on `conn` and returns the values of its last row (NULL as
/// `None`), as text. `Err` says why the answer could not be had.
pub async fn read_row(conn: &mut BackendConn, query: &[u8]) -> Result<Vec<Option<String>>, String> {
    conn.send_command(Command::COM_QUERY, query)
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
            String::from_utf8_lossy(query)
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
    let count = usize::try_from(columns).map_err(|_| "malformed column count")?;
    let values = decode_text_row(&row, count)
        .into_iter()
        .map(|value| value.map(|text| String::from_utf8_lossy(&text).into_owned()))
        .collect();
    Ok(values)
}

async fn next_packet(conn: &mut BackendConn) -> Result<Vec<u8>, String> {
    conn.reader
        .next_packet()
        .await
        .map(|(_, payload)| payload)
        .map_err(|e| e.to_string())
}
