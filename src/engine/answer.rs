//! Result sets the proxy writes itself (its own answers and merged
//! multi-shard results), in the text protocol or, for a prepared statement's
//! execution, the binary protocol.

use tokio::io::AsyncWrite;

use super::failure::Failure;
use super::merge::{RowFormat, Value};
use super::session_state::SessionState;
use crate::error::ClientError;
use crate::protocol::binary::{
    parse_column_definition, text_row_to_binary, write_binary_values, ColumnInfo,
};
use crate::protocol::frame::{write_lenenc_bytes, write_lenenc_int};
use crate::protocol::packets::{
    column_definition, eof_packet, ok_packet, result_set_terminator, LocalColumnType, TEXT_NULL,
};
use crate::protocol::FrameWriter;

/// Writes a complete result set: column definitions (payloads as a server
/// sends them, with `columns` their parsed types) and rows of values
/// written as `format` says. Text values go to a prepared statement's
/// execution as binary rows converted from them; binary values only ever
/// come from an execution.
pub(crate) async fn write_result_set<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    state: &SessionState,
    definitions: &[Vec<u8>],
    columns: &[ColumnInfo],
    rows: impl IntoIterator<Item = Vec<Value>>,
    format: RowFormat,
) -> Result<(), Failure> {
    let mut count = Vec::new();
    write_lenenc_int(&mut count, definitions.len() as u64);
    let mut seq = client.write_packet(state.response_seq, &count).await?;
    for definition in definitions {
        seq = client.write_packet(seq, definition).await?;
    }
    if !state.deprecate_eof {
        seq = client
            .write_packet(seq, &eof_packet(state.status_flags(), 0))
            .await?;
    }
    let mut text = Vec::new();
    let mut binary = Vec::new();
    let unencodable = |error| {
        Failure::Client(ClientError::Internal(format!(
            "cannot encode a row in the binary protocol: {error}"
        )))
    };
    for row in rows {
        if format == RowFormat::Binary {
            binary.clear();
            write_binary_values(
                &row[..row.len().min(definitions.len())],
                columns,
                &mut binary,
            )
            .map_err(unencodable)?;
            seq = client.write_packet(seq, &binary).await?;
            continue;
        }
        text.clear();
        for value in row.iter().take(definitions.len()) {
            match value {
                Some(bytes) => write_lenenc_bytes(&mut text, bytes),
                None => text.push(TEXT_NULL),
            }
        }
        let payload = if state.binary_rows {
            binary.clear();
            text_row_to_binary(&text, columns, &mut binary).map_err(unencodable)?;
            &binary
        } else {
            &text
        };
        seq = client.write_packet(seq, payload).await?;
    }
    client
        .write_packet(
            seq,
            &result_set_terminator(state.deprecate_eof, state.status_flags()),
        )
        .await?;
    Ok(())
}

/// Writes a small result set of the proxy's own: named columns of simple
/// types, rows of values.
pub(crate) async fn write_local_result<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    state: &SessionState,
    columns: &[(&str, LocalColumnType)],
    rows: Vec<Vec<Value>>,
) -> Result<(), Failure> {
    let definitions: Vec<Vec<u8>> = columns
        .iter()
        .map(|(name, column_type)| column_definition(name, *column_type))
        .collect();
    let types: Vec<ColumnInfo> = definitions
        .iter()
        .filter_map(|definition| parse_column_definition(definition))
        .collect();
    write_result_set(client, state, &definitions, &types, rows, RowFormat::Text).await
}

/// Writes a one-column, one-row result set.
pub(crate) async fn write_single_value<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    state: &SessionState,
    name: &str,
    column_type: LocalColumnType,
    value: Option<&[u8]>,
) -> Result<(), Failure> {
    let row = vec![value.map(<[u8]>::to_vec)];
    write_local_result(client, state, &[(name, column_type)], vec![row]).await
}

/// Writes an OK packet with the session's status flags.
pub(crate) async fn write_ok<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    state: &SessionState,
) -> Result<(), Failure> {
    client
        .write_packet(
            state.response_seq,
            &ok_packet(0, 0, state.status_flags(), 0),
        )
        .await?;
    Ok(())
}
