//! Prepared statements (COM_STMT_PREPARE / EXECUTE / SEND_LONG_DATA /
//! RESET / CLOSE).
//!
//! The shard is known only when the parameters arrive, so nothing stays
//! prepared on the backends: PREPARE prepares a representative text on one
//! backend just long enough to relay its parameter and column metadata, then
//! closes it. EXECUTE puts the bound values into the statement text as SQL
//! literals, routes that text like any query, runs it with COM_QUERY, and
//! the relay converts the text rows to binary-protocol rows. The servers'
//! `max_prepared_stmt_count` is therefore never consumed by the proxy.

use std::collections::HashMap;
use std::io;
use std::ops::Range;

use mysql_common::constants::ColumnType;
use tokio::io::AsyncWrite;

use super::execute::{backend_error, lost_connection, write_error, Failure};
use super::{Engine, SessionState};
use crate::backend::PooledConn;
use crate::error::ClientError;
use crate::protocol::binary::{parse_execute, render_literal};
use crate::protocol::packets::{ERR_HEADER, OK_HEADER};
use crate::protocol::FrameWriter;
use crate::router::{placeholders, route_prepare, Placement, Plan};
use crate::topology::Topology;

/// COM_STMT_PREPARE command byte.
const COM_STMT_PREPARE: u8 = 0x16;
/// COM_STMT_CLOSE command byte.
const COM_STMT_CLOSE: u8 = 0x19;

/// Most statements one session may keep prepared (MySQL's default
/// `max_prepared_stmt_count` is 16,382 for a whole server).
const MAX_STATEMENTS_PER_SESSION: usize = 4096;

/// One statement prepared by a client.
#[derive(Debug, Clone)]
pub struct PreparedStatement {
    sql: String,
    placeholders: Vec<Range<usize>>,
    /// Parameter types from the last execute that sent them.
    types: Vec<(ColumnType, bool)>,
    /// Values sent with COM_STMT_SEND_LONG_DATA since the last execute.
    long_data: HashMap<u16, Vec<u8>>,
}

/// A session's prepared statements, by the id the proxy gave them.
#[derive(Debug, Default)]
pub struct PreparedStatements {
    next_id: u32,
    statements: HashMap<u32, PreparedStatement>,
}

impl PreparedStatements {
    /// Number of statements prepared now.
    pub fn len(&self) -> usize {
        self.statements.len()
    }

    /// Whether none is prepared.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    fn add(&mut self, statement: PreparedStatement) -> u32 {
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.statements.insert(self.next_id, statement);
        self.next_id
    }

    /// COM_STMT_SEND_LONG_DATA (`payload` without the command byte):
    /// appends a chunk to a parameter's value. No answer is sent.
    pub fn send_long_data(&mut self, payload: &[u8]) {
        let (Some(id), Some(param)) = (read_u32(payload), payload.get(4..6)) else {
            return;
        };
        if let Some(statement) = self.statements.get_mut(&id) {
            statement
                .long_data
                .entry(u16::from_le_bytes([param[0], param[1]]))
                .or_default()
                .extend_from_slice(&payload[6..]);
        }
    }

    /// COM_STMT_CLOSE: forgets a statement. No answer is sent.
    pub fn close(&mut self, payload: &[u8]) {
        if let Some(id) = read_u32(payload) {
            self.statements.remove(&id);
        }
    }

    /// COM_STMT_RESET: drops long data sent so far. Whether the statement
    /// exists.
    pub fn reset(&mut self, payload: &[u8]) -> bool {
        let statement = read_u32(payload).and_then(|id| self.statements.get_mut(&id));
        match statement {
            Some(statement) => {
                statement.long_data.clear();
                true
            }
            None => false,
        }
    }
}

impl Engine {
    /// Answers COM_STMT_PREPARE with the metadata of a representative
    /// backend preparation, and registers the statement.
    pub async fn prepare<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        sql: &str,
        client: &mut FrameWriter<W>,
    ) -> io::Result<()> {
        match self.prepare_inner(topology, state, sql, client).await {
            Ok(()) => {}
            Err(Failure::Client(error)) => write_error(client, state.response_seq, &error).await?,
            Err(Failure::Io(error)) => return Err(error),
        }
        client.flush().await
    }

    async fn prepare_inner<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        sql: &str,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        if state.prepared.len() >= MAX_STATEMENTS_PER_SESSION {
            return Err(Failure::Client(ClientError::TooManyPrepared(
                MAX_STATEMENTS_PER_SESSION,
            )));
        }
        let markers = placeholders(sql, &state.route.lex).map_err(|e| Failure::Client(e.into()))?;
        let mut hidden_columns = 0;
        let (pool, target, text) = match route_prepare(sql, topology, &state.route) {
            Plan::Shard(query) => (
                self.backends.pool(&topology.hosts[query.target.host].addr),
                Some(query.target),
                query.sql,
            ),
            Plan::MultiShard(query) => match query.parts.into_iter().next() {
                Some(part) => {
                    hidden_columns = query.merge.hidden_columns;
                    (
                        self.backends.pool(&topology.hosts[part.target.host].addr),
                        Some(part.target),
                        part.sql,
                    )
                }
                None => (self.any_pool(topology, state)?, None, sql.into()),
            },
            Plan::Reject(error) => return Err(Failure::Client(error.into())),
            Plan::AnyHost { sql } | Plan::Diagnostics { sql } => {
                (self.any_pool(topology, state)?, None, sql)
            }
            Plan::Session(_) => (self.any_pool(topology, state)?, None, sql.into()),
        };
        let mut conn = self.checkout(topology, &pool, target, state).await?;
        let marker_count = markers.len();
        let id = state.prepared.add(PreparedStatement {
            sql: sql.to_owned(),
            placeholders: markers,
            types: Vec::new(),
            long_data: HashMap::new(),
        });
        let shape = PrepareShape {
            id,
            markers: marker_count,
            hidden_columns,
        };
        let result = relay_prepare(&mut conn, shape, &text, state, client).await;
        if result.is_err() {
            state.prepared.statements.remove(&id);
        }
        match result {
            Ok(backend_id) => {
                let closed = conn
                    .conn()
                    .send_command(COM_STMT_CLOSE, &backend_id.to_le_bytes())
                    .await;
                match closed {
                    Ok(()) => conn.release(),
                    Err(_) => conn.discard_broken(),
                }
                Ok(())
            }
            Err(Failure::Client(ClientError::Backend { .. })) => {
                conn.release();
                result.map(|_| ())
            }
            Err(failure) => {
                conn.discard_broken();
                Err(failure)
            }
        }
    }

    /// COM_STMT_EXECUTE (`payload` without the command byte): binds the
    /// values into the statement text, routes it, runs it, and answers with
    /// binary-protocol rows.
    pub async fn execute_prepared<W: AsyncWrite + Unpin, P: Placement + Send>(
        &self,
        state: &mut SessionState,
        payload: &[u8],
        placement: &mut P,
        client: &mut FrameWriter<W>,
    ) -> io::Result<()> {
        let text = match bind(state, payload) {
            Ok(text) => text,
            Err(error) => {
                write_error(client, state.response_seq, &error).await?;
                return client.flush().await;
            }
        };
        state.binary_rows = true;
        let result = self
            .run_statement(state, text.as_bytes(), placement, false, client)
            .await;
        state.binary_rows = false;
        result?;
        client.flush().await
    }
}

/// The statement text with the bound values in place of its `?` markers.
fn bind(state: &mut SessionState, payload: &[u8]) -> Result<String, ClientError> {
    let no_backslash_escapes = state.settings.no_backslash_escapes();
    let id = read_u32(payload).ok_or_else(|| {
        ClientError::BadExecute("COM_STMT_EXECUTE shorter than a statement id".to_owned())
    })?;
    let statement = state
        .prepared
        .statements
        .get_mut(&id)
        .ok_or(ClientError::UnknownStatement(id))?;
    let request = parse_execute(
        payload,
        statement.placeholders.len(),
        &mut statement.types,
        &statement.long_data,
    )
    .map_err(|error| ClientError::BadExecute(error.to_string()))?;
    statement.long_data.clear();
    let mut text = String::with_capacity(statement.sql.len() + 16 * request.params.len());
    let mut copied = 0;
    for (range, value) in statement.placeholders.iter().zip(&request.params) {
        text.push_str(&statement.sql[copied..range.start]);
        render_literal(value, no_backslash_escapes, &mut text);
        copied = range.end;
    }
    text.push_str(&statement.sql[copied..]);
    Ok(text)
}

/// What the client's PREPARE answer must look like.
struct PrepareShape {
    /// The proxy's statement id.
    id: u32,
    /// `?` markers in the client's text.
    markers: usize,
    /// Trailing columns of the representative text that only a multi-shard
    /// merge uses; the client does not see them.
    hidden_columns: usize,
}

/// Prepares `text` on the backend and relays the answer in the client's
/// shape. Returns the backend's statement id.
async fn relay_prepare<W: AsyncWrite + Unpin>(
    conn: &mut PooledConn,
    shape: PrepareShape,
    text: &[u8],
    state: &SessionState,
    client: &mut FrameWriter<W>,
) -> Result<u32, Failure> {
    let host = conn.pool().addr.clone();
    let lost = lost_connection(&host);
    let backend = conn.conn();
    backend
        .send_command(COM_STMT_PREPARE, text)
        .await
        .map_err(&lost)?;
    let (_, first) = backend.reader.next_packet().await.map_err(&lost)?;
    match first.first() {
        Some(&ERR_HEADER) => return Err(Failure::Client(backend_error(&first))),
        Some(&OK_HEADER) if first.len() >= 12 => {}
        _ => {
            return Err(Failure::Client(ClientError::BackendLost {
                host: host.clone(),
                reason: "malformed COM_STMT_PREPARE answer".to_owned(),
            }))
        }
    }
    let backend_id = u32::from_le_bytes([first[1], first[2], first[3], first[4]]);
    let columns = usize::from(u16::from_le_bytes([first[5], first[6]]));
    let params = usize::from(u16::from_le_bytes([first[7], first[8]]));
    if params != shape.markers {
        return Err(Failure::Client(ClientError::BadExecute(format!(
            "the statement has {} parameter markers but the server counted {params}",
            shape.markers
        ))));
    }
    let visible = columns.saturating_sub(shape.hidden_columns);
    let mut answer = first;
    answer[1..5].copy_from_slice(&shape.id.to_le_bytes());
    answer[5..7].copy_from_slice(&(visible as u16).to_le_bytes());
    let mut seq = client.write_packet(state.response_seq, &answer).await?;
    for (count, shown) in [(params, params), (columns, visible)] {
        if count == 0 {
            continue;
        }
        for index in 0..count {
            let (_, packet) = backend.reader.next_packet().await.map_err(&lost)?;
            if index < shown {
                seq = client.write_packet(seq, &packet).await?;
            }
        }
        if !state.deprecate_eof {
            let (_, eof) = backend.reader.next_packet().await.map_err(&lost)?;
            if shown > 0 {
                seq = client.write_packet(seq, &eof).await?;
            }
        }
    }
    Ok(backend_id)
}

fn read_u32(payload: &[u8]) -> Option<u32> {
    let bytes = payload.get(..4)?;
    Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}
