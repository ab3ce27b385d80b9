//! Prepared statements (COM_STMT_PREPARE / EXECUTE / SEND_LONG_DATA /
//! RESET / CLOSE).
//!
//! The shard is known only when the parameters arrive: PREPARE prepares a
//! representative text on one backend just long enough to relay its
//! parameter and column metadata, then closes it. EXECUTE asks the router
//! for a one-shard plan that leaves the values it does not read as `?`
//! (`router::route_marked`); with one, the server gets that text (kept
//! prepared on the backend connection) and the client's own binary
//! parameters ([`BinaryExecute`], `direct`). Otherwise the bound values go
//! into the statement text as SQL literals and that text is routed like any
//! query; on one server it runs as a prepared statement (`direct`), its
//! binary rows relayed; elsewhere with COM_QUERY, text rows converted to
//! binary-protocol rows. A backend connection keeps at most
//! `limits.backend_prepared_statements` statements prepared.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use mysql_common::constants::{ColumnType, Command};
use rustc_hash::FxHashMap;
use tokio::io::AsyncWrite;

use super::failure::{answer_failure, backend_error, lost_connection, write_error, Failure};
use super::long_values::SetAside;
use super::{Engine, SessionState};
use crate::backend::PooledConn;
use crate::error::ClientError;
use crate::protocol::binary::{
    bind_separator, param_spans, parse_column_definition, parse_execute, render_literal,
    BinaryError, ExecuteRequest, ParamBytes, ParamValue,
};
use crate::protocol::charset::Charset;
use crate::protocol::frame::write_lenenc_bytes;
use crate::protocol::packets::{rewrite_status, status_offset, ERR_HEADER, OK_HEADER};
use crate::protocol::FrameWriter;
use crate::router::{
    placeholders, route_marked, route_prepare, MarkedParam, MarkedRoute, MarkerValue, Placement,
    Plan, RouteContext,
};
use crate::topology::config::LimitsConfig;
use crate::topology::Topology;

/// Most parameter markers a statement may have (MariaDB's own limit: the
/// count is 16 bits in the PREPARE answer).
const MAX_PLACEHOLDERS: usize = u16::MAX as usize;

/// One statement prepared by a client.
#[derive(Debug, Clone)]
pub struct PreparedStatement {
    /// Its text (UTF-8: COM_STMT_PREPARE's text is checked), shared with
    /// each execute.
    sql: Bytes,
    placeholders: Arc<[Range<usize>]>,
    /// Parameter types from the last execute that sent them.
    types: Vec<(ColumnType, bool)>,
    /// Values sent with COM_STMT_SEND_LONG_DATA since the last execute.
    long_data: HashMap<u16, Vec<u8>>,
    /// Long data went past `limits.max_allowed_packet` since the last
    /// execute: it was dropped, and the next execute fails (1153).
    long_data_overflow: bool,
    /// The server's PREPARE answer named no FLOAT or DOUBLE column: its
    /// text rows convert to the binary rows the server would send.
    text_rows_exact: bool,
    /// Its route with the values as markers, as an execute learned it
    /// ([`MarkedRoute`]): later executes that it fits fill it in.
    marked: Option<Box<MarkedRoute>>,
}

impl PreparedStatement {
    /// A statement of text `sql` with parameter markers at `placeholders`.
    fn new(sql: Bytes, placeholders: Vec<Range<usize>>) -> Self {
        Self {
            sql,
            placeholders: placeholders.into(),
            types: Vec::new(),
            long_data: HashMap::new(),
            long_data_overflow: false,
            text_rows_exact: false,
            marked: None,
        }
    }

    fn long_data_bytes(&self) -> usize {
        self.long_data.values().map(Vec::len).sum()
    }

    /// Its text as a string.
    fn text(&self) -> Result<&str, ClientError> {
        std::str::from_utf8(&self.sql)
            .map_err(|_| ClientError::BadExecute("the statement's text is not UTF-8".to_owned()))
    }

    /// Takes its long data out (an execute binds it, COM_STMT_RESET drops
    /// it) and forgets that it overflowed: the data, and whether it had.
    fn take_long_data(&mut self) -> (HashMap<u16, Vec<u8>>, bool) {
        let overflow = std::mem::take(&mut self.long_data_overflow);
        (std::mem::take(&mut self.long_data), overflow)
    }
}

/// A session's prepared statements, by the id the proxy gave them.
#[derive(Debug, Default)]
pub struct PreparedStatements {
    next_id: u32,
    /// By id (the proxy's own numbers: a fast hasher is safe).
    statements: FxHashMap<u32, PreparedStatement>,
    /// Bytes of statement text held.
    text_bytes: usize,
    /// Bytes the statements' kept routes hold ([`MarkedRoute::held_bytes`]),
    /// within `limits.max_allowed_packet` like their text.
    marked_bytes: usize,
    /// Bytes of long data held, all statements together.
    long_data_bytes: usize,
    /// The long values of the execute being routed, set aside.
    set_aside: Option<SetAside>,
    /// The execute being routed, when its values go to the server as the
    /// client bound them.
    binary: Option<Box<BinaryExecute>>,
}

/// An execute whose plan leaves the values the planner does not read as
/// `?` ([`route_marked`]): the server gets the client's binary parameters
/// (types and bytes as sent, long data included), never their text.
#[derive(Debug)]
pub struct BinaryExecute {
    /// The client's statement text and its markers.
    sql: Bytes,
    markers: Arc<[Range<usize>]>,
    /// How each value reads for routing.
    values: Vec<MarkerValue>,
    /// The values decoded (the text fallback writes them as literals).
    params: Vec<ParamValue>,
    /// The client's parameter types.
    types: Vec<(ColumnType, bool)>,
    /// Where each value is in `payload`.
    spans: Vec<ParamBytes>,
    /// The client's COM_STMT_EXECUTE (without the command byte).
    payload: Bytes,
    charset: Charset,
    /// The plan routed first, and the topology it was routed on.
    first: Option<(Plan, u64, u64)>,
    /// What each `?` of the routed plan's text takes, and where it is.
    marked: Vec<MarkedParam>,
    marked_at: Vec<Range<usize>>,
    /// The statement's text rows convert exactly to binary rows
    /// ([`PreparedStatement`]).
    text_rows_exact: bool,
}

impl BinaryExecute {
    /// The single-shard plan with `?` for the values (and its digest), on
    /// `topo`; `None`: the values must be written into the text.
    fn route(&mut self, topo: &Topology, ctx: &RouteContext) -> Option<(Plan, u64)> {
        if let Some((plan, digest, identity)) = self.first.take() {
            if identity == topo.identity {
                return Some((plan, digest));
            }
        }
        let marked = route_marked(&self.sql, &self.markers, &self.values, topo, ctx)?;
        self.marked = marked.params;
        self.marked_at = marked.markers;
        Some((Plan::Shard(marked.query), marked.digest))
    }

    /// Whether the statement's text rows convert exactly to the binary
    /// rows the server would send (no FLOAT or DOUBLE column).
    pub(super) fn text_rows_exact(&self) -> bool {
        self.text_rows_exact
    }

    /// `?`s of the routed text.
    pub(super) fn param_count(&self) -> usize {
        self.marked.len()
    }

    /// Bytes [`BinaryExecute::write_params`] writes, but for long data:
    /// at most the client's payload, and a type and local id per `?`.
    pub(super) fn params_capacity(&self) -> usize {
        self.payload.len() + 10 * self.marked.len()
    }

    /// Bytes of the bound values.
    fn value_bytes(&self) -> u64 {
        self.params
            .iter()
            .map(|value| match value {
                ParamValue::Bytes { data, .. } => data.len() as u64,
                _ => 8,
            })
            .sum()
    }

    /// Appends to `block` what COM_STMT_EXECUTE carries after its
    /// statement id, flags and iteration count for the routed text's `?`s:
    /// NULL bitmap, new-params flag, types, values (the client's bytes;
    /// long data as a length-encoded string of the client's type; a local
    /// id as LONGLONG UNSIGNED). Nothing for none.
    pub(super) fn write_params(&self, block: &mut Vec<u8>) {
        let count = self.marked.len();
        if count == 0 {
            return;
        }
        let bitmap = block.len();
        block.resize(bitmap + count.div_ceil(8), 0);
        block.push(1);
        for param in &self.marked {
            let (kind, unsigned) = match *param {
                MarkedParam::Client(i) => self
                    .types
                    .get(i)
                    .map_or((ColumnType::MYSQL_TYPE_NULL, false), |&t| t),
                MarkedParam::LocalId(_) => (ColumnType::MYSQL_TYPE_LONGLONG, true),
            };
            block.extend_from_slice(&[kind as u8, if unsigned { 0x80 } else { 0 }]);
        }
        for (index, param) in self.marked.iter().enumerate() {
            match *param {
                MarkedParam::LocalId(local_id) => block.extend_from_slice(&local_id.to_le_bytes()),
                MarkedParam::Client(i) => match (self.spans.get(i), self.params.get(i)) {
                    (Some(ParamBytes::Value(range)), _) => {
                        block.extend_from_slice(self.payload.get(range.clone()).unwrap_or_default())
                    }
                    (Some(ParamBytes::Long), Some(ParamValue::Bytes { data, .. })) => {
                        write_lenenc_bytes(block, data)
                    }
                    _ => block[bitmap + index / 8] |= 1 << (index % 8),
                },
            }
        }
    }

    /// The routed text `sql` with the values written in as literals, for
    /// a server that does not prepare it.
    pub(super) fn text(&self, sql: &[u8]) -> Option<Vec<u8>> {
        let sql = std::str::from_utf8(sql).ok()?;
        let values: Vec<ParamValue> = self
            .marked
            .iter()
            .map(|param| match *param {
                MarkedParam::Client(i) => self.params.get(i).cloned(),
                MarkedParam::LocalId(local_id) => Some(ParamValue::UInt(local_id)),
            })
            .collect::<Option<_>>()?;
        render_statement(sql, &self.marked_at, &values, self.charset)
            .ok()
            .map(String::into_bytes)
    }
}

/// A session's prepared statements as another process takes them over:
/// the ids the client knows, each statement's text, parameter markers and
/// parameter types.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CarriedStatements {
    /// The last id given.
    pub next_id: u32,
    /// The statements, by id.
    pub statements: Vec<CarriedStatement>,
}

/// One prepared statement as it moves.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CarriedStatement {
    /// The id the client knows.
    pub id: u32,
    /// Its text.
    pub sql: String,
    /// Byte ranges of its parameter markers.
    pub markers: Vec<(usize, usize)>,
    /// (type, unsigned) of its parameters, from the last execute that
    /// sent them.
    pub types: Vec<(u8, bool)>,
}

impl PreparedStatements {
    /// The statements to hand over; `None` while long data or an execute
    /// is pending (the session is then not at a boundary).
    pub fn carry(&self) -> Option<CarriedStatements> {
        if self.long_data_bytes > 0 || self.set_aside.is_some() {
            return None;
        }
        let mut statements: Vec<_> = self
            .statements
            .iter()
            .map(|(&id, statement)| CarriedStatement {
                id,
                sql: String::from_utf8_lossy(&statement.sql).into_owned(),
                markers: statement
                    .placeholders
                    .iter()
                    .map(|r| (r.start, r.end))
                    .collect(),
                types: statement
                    .types
                    .iter()
                    .map(|&(kind, unsigned)| (kind as u8, unsigned))
                    .collect(),
            })
            .collect();
        statements.sort_by_key(|statement| statement.id);
        Some(CarriedStatements {
            next_id: self.next_id,
            statements,
        })
    }

    /// The statements [`PreparedStatements::carry`] handed over; a marker
    /// outside its text or an unknown type is refused.
    pub fn from_carried(carried: CarriedStatements) -> Result<Self, String> {
        let mut restored = Self {
            next_id: carried.next_id,
            ..Self::default()
        };
        for CarriedStatement {
            id,
            sql,
            markers,
            types,
        } in carried.statements
        {
            if markers
                .iter()
                .any(|&(start, end)| start > end || end > sql.len())
            {
                return Err(format!(
                    "statement {id}: a parameter marker outside its text"
                ));
            }
            let types = types
                .into_iter()
                .map(|(kind, unsigned)| {
                    ColumnType::try_from(kind)
                        .map(|kind| (kind, unsigned))
                        .map_err(|_| format!("statement {id}: unknown parameter type {kind}"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            restored.text_bytes += sql.len();
            let mut statement = PreparedStatement::new(
                Bytes::from(sql),
                markers.into_iter().map(|(start, end)| start..end).collect(),
            );
            statement.types = types;
            restored.statements.insert(id, statement);
        }
        Ok(restored)
    }

    /// Number of statements prepared now.
    pub fn len(&self) -> usize {
        self.statements.len()
    }

    /// Whether none is prepared.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    /// Bytes the long values set aside by the execute being routed add to
    /// its text ([`SetAside::extra_bytes`]).
    pub fn set_aside_bytes(&self) -> u64 {
        self.set_aside.as_ref().map_or(0, SetAside::extra_bytes)
            + self.binary.as_deref().map_or(0, BinaryExecute::value_bytes)
    }

    /// The plan of the execute being routed with its values as `?`, when
    /// it has one on `topo` ([`route_marked`]). `Err`: it has none (any
    /// more): the text with the values written in, to route instead.
    pub fn route_binary(
        &mut self,
        topo: &Topology,
        ctx: &RouteContext,
    ) -> Option<Result<(Plan, u64), Bytes>> {
        let binary = self.binary.as_mut()?;
        if let Some(routed) = binary.route(topo, ctx) {
            return Some(Ok(routed));
        }
        let binary = self.binary.take()?;
        let text = std::str::from_utf8(&binary.sql)
            .ok()
            .and_then(|sql| {
                render_statement(sql, &binary.markers, &binary.params, binary.charset).ok()
            })
            .unwrap_or_default();
        Some(Err(Bytes::from(text.into_bytes())))
    }

    /// The execute whose plan [`PreparedStatements::route_binary`] gave,
    /// taken to be sent.
    pub(super) fn take_binary(&mut self) -> Option<Box<BinaryExecute>> {
        self.binary.take()
    }

    /// `plan` of an execute's text with its long values spliced in (see
    /// [`super::long_values`]); `None` if they cannot be: the execute then
    /// routes its whole text again, and nothing was answered.
    pub fn splice_set_aside(&mut self, plan: Plan) -> Option<Plan> {
        match &mut self.set_aside {
            Some(aside) => aside.splice(plan),
            None => Some(plan),
        }
    }

    /// Total bytes of long data held by the session's statements.
    pub fn long_data_bytes(&self) -> usize {
        self.long_data_bytes
    }

    fn add(&mut self, statement: PreparedStatement) -> u32 {
        self.next_id = self.next_id.wrapping_add(1).max(1);
        while self.statements.contains_key(&self.next_id) {
            self.next_id = self.next_id.wrapping_add(1).max(1);
        }
        self.text_bytes += statement.sql.len();
        self.statements.insert(self.next_id, statement);
        self.next_id
    }

    fn remove(&mut self, id: u32) {
        if let Some(statement) = self.statements.remove(&id) {
            self.text_bytes -= statement.sql.len();
            self.long_data_bytes -= statement.long_data_bytes();
            self.marked_bytes -= statement.marked.as_ref().map_or(0, |m| m.held_bytes());
        }
    }

    /// Drops a statement's long data (COM_STMT_RESET).
    fn clear_long_data(&mut self, id: u32) {
        self.long_data_taken(id);
    }

    /// Statement `id` with its long data taken out of it
    /// ([`PreparedStatement::take_long_data`]) and out of the session's
    /// count.
    #[allow(clippy::type_complexity)]
    fn long_data_taken(
        &mut self,
        id: u32,
    ) -> Option<(&mut PreparedStatement, HashMap<u16, Vec<u8>>, bool)> {
        let statement = self.statements.get_mut(&id)?;
        self.long_data_bytes -= statement.long_data_bytes();
        let (long_data, overflow) = statement.take_long_data();
        Some((statement, long_data, overflow))
    }

    /// Keeps `route` as statement `id`'s, in place of the one it kept,
    /// while the session's kept routes stay within `budget` bytes.
    fn keep_route(&mut self, id: u32, route: MarkedRoute, budget: usize) {
        let Some(statement) = self.statements.get_mut(&id) else {
            return;
        };
        if let Some(old) = statement.marked.take() {
            self.marked_bytes -= old.held_bytes();
        }
        let bytes = route.held_bytes();
        if self.marked_bytes.saturating_add(bytes) <= budget {
            self.marked_bytes += bytes;
            statement.marked = Some(Box::new(route));
        }
    }

    /// COM_STMT_SEND_LONG_DATA (`payload` without the command byte):
    /// appends a chunk to a parameter's value. No answer is sent. Long
    /// data past `limit` bytes (all parameters of all the session's
    /// statements together) is dropped with the rest of its statement's,
    /// and the statement's next execute fails with 1153, as MariaDB does
    /// past `max_long_data_size`. Chunks for a parameter the statement
    /// does not have are ignored.
    pub fn send_long_data(&mut self, payload: &[u8], limit: usize) {
        let (Some(id), Some(&[low, high])) = (read_u32(payload), payload.get(4..6)) else {
            return;
        };
        let chunk = payload.get(6..).unwrap_or_default();
        let held = self.long_data_bytes;
        let Some(statement) = self.statements.get_mut(&id) else {
            return;
        };
        let param = u16::from_le_bytes([low, high]);
        if statement.long_data_overflow || usize::from(param) >= statement.placeholders.len() {
            return;
        }
        if held.saturating_add(chunk.len()) > limit {
            self.long_data_bytes -= statement.long_data_bytes();
            statement.long_data = HashMap::new();
            statement.long_data_overflow = true;
            return;
        }
        statement
            .long_data
            .entry(param)
            .or_default()
            .extend_from_slice(chunk);
        self.long_data_bytes += chunk.len();
    }

    /// COM_STMT_CLOSE: forgets a statement. No answer is sent.
    pub fn close(&mut self, payload: &[u8]) {
        if let Some(id) = read_u32(payload) {
            self.remove(id);
        }
    }

    /// COM_STMT_RESET: drops long data sent so far. Whether the statement
    /// exists.
    pub fn reset(&mut self, payload: &[u8]) -> bool {
        match read_u32(payload).filter(|id| self.statements.contains_key(id)) {
            Some(id) => {
                self.clear_long_data(id);
                true
            }
            None => false,
        }
    }

    /// Whether a statement of `text_len` bytes may be prepared under
    /// `limits`: a statement longer than `max_allowed_packet` is refused
    /// with 1153, one more than `max_prepared_statements` with 1461, and
    /// one that would make the session hold more than `max_allowed_packet`
    /// bytes of statement text in all with 1105.
    fn admit(&self, text_len: usize, limits: &LimitsConfig) -> Result<(), ClientError> {
        let max_packet = usize::try_from(limits.max_allowed_packet).unwrap_or(usize::MAX);
        if text_len > max_packet {
            return Err(ClientError::PacketTooLarge(format!(
                "the statement to prepare has {text_len} bytes; limits.max_allowed_packet is {max_packet}"
            )));
        }
        let max_statements = usize::try_from(limits.max_prepared_statements).unwrap_or(usize::MAX);
        if self.statements.len() >= max_statements {
            return Err(ClientError::TooManyPrepared(max_statements));
        }
        if self.text_bytes.saturating_add(text_len) > max_packet {
            return Err(ClientError::SessionLimit(format!(
                "the session's prepared statements would hold {} bytes of text, more than limits.max_allowed_packet ({max_packet}) in all; close some with COM_STMT_CLOSE",
                self.text_bytes.saturating_add(text_len)
            )));
        }
        Ok(())
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
        let result = self.prepare_inner(topology, state, sql, client).await;
        answer_failure(client, state.response_seq, result).await?;
        client.flush().await
    }

    async fn prepare_inner<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        sql: &str,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        state
            .prepared
            .admit(sql.len(), &topology.config.limits)
            .map_err(Failure::Client)?;
        state.route.max_tokens = topology.config.limits.max_statement_tokens;
        let markers = placeholders(sql, &state.route.lex).map_err(|e| Failure::Client(e.into()))?;
        if markers.len() > MAX_PLACEHOLDERS {
            return Err(Failure::Client(ClientError::Backend {
                code: 1390,
                sql_state: "HY000".to_owned(),
                message: format!("Prepared statement contains too many placeholders (at most {MAX_PLACEHOLDERS})"),
            }));
        }
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
            Plan::AnyHost { sql, .. } | Plan::Diagnostics { sql, .. } => {
                (self.any_pool(topology, state)?, None, sql)
            }
            Plan::Session(_) => (self.any_pool(topology, state)?, None, sql.into()),
        };
        let mut conn = self.checkout(topology, &pool, target, state).await?;
        let marker_count = markers.len();
        let id = state.prepared.add(PreparedStatement::new(
            Bytes::copy_from_slice(sql.as_bytes()),
            markers,
        ));
        let shape = PrepareShape {
            id,
            markers: marker_count,
            hidden_columns,
        };
        let result = relay_prepare(&mut conn, shape, &text, state, client).await;
        if result.is_err() {
            state.prepared.remove(id);
        }
        match result {
            Ok((backend_id, exact)) => {
                if let Some(statement) = state.prepared.statements.get_mut(&id) {
                    statement.text_rows_exact = exact;
                }
                let closed = conn
                    .conn()
                    .send_command(Command::COM_STMT_CLOSE, &backend_id.to_le_bytes())
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

    /// COM_STMT_SEND_LONG_DATA (`payload` without the command byte), held
    /// within `limits.max_allowed_packet`.
    pub fn send_long_data(&self, state: &mut SessionState, payload: &[u8]) {
        let limit = self.topology.load().config.limits.max_allowed_packet;
        state
            .prepared
            .send_long_data(payload, usize::try_from(limit).unwrap_or(usize::MAX));
    }

    /// COM_STMT_EXECUTE (`payload` without the command byte): binds the
    /// values into the statement text, routes it, runs it, and answers with
    /// binary-protocol rows.
    pub async fn execute_prepared<W: AsyncWrite + Unpin, P: Placement + Clone + Send + 'static>(
        &self,
        state: &mut SessionState,
        payload: &Bytes,
        placement: &mut P,
        client: &mut FrameWriter<W>,
    ) -> io::Result<()> {
        let decoded = decode(state, payload).and_then(|(id, request, long)| {
            match self.binary_execute(state, payload, id, request, &long) {
                Ok(binary) => Ok(Err(binary)),
                Err(request) => bind(state, id, request).map(Ok),
            }
        });
        let (text, set_aside, binary) = match decoded {
            Ok(Ok((text, set_aside))) => (Bytes::from(text.into_bytes()), set_aside, None),
            Ok(Err(binary)) => (binary.sql.clone(), None, Some(binary)),
            Err(error) => {
                write_error(client, state.response_seq, &error).await?;
                return client.flush().await;
            }
        };
        state.prepared.set_aside = set_aside;
        // Boxed: every session holds this field, most never use it.
        state.prepared.binary = binary.map(Box::new);
        state.binary_rows = true;
        let mut result = self
            .run_statement(state, &text, placement, false, client)
            .await;
        state.prepared.binary = None;
        if let Some(aside) = state.prepared.set_aside.take() {
            if aside.fallback() && result.is_ok() {
                let whole = aside.into_text(&text);
                drop(text);
                result = match whole {
                    Some(whole) => {
                        self.run_statement(state, &whole, placement, false, client)
                            .await
                    }
                    None => Err(io::Error::other("a long value's stub was lost")),
                };
            }
        }
        state.binary_rows = false;
        result?;
        client.flush().await
    }

    /// The execute as one whose values go to the server as bound, when
    /// its plan is one shard's with the values the planner does not read
    /// left as `?` (the statement's kept [`MarkedRoute`] filled in, or one
    /// learned and kept); `Err`: the request, to bind into the text.
    fn binary_execute(
        &self,
        state: &mut SessionState,
        payload: &Bytes,
        id: u32,
        request: ExecuteRequest,
        long: &[u16],
    ) -> Result<BinaryExecute, ExecuteRequest> {
        let topology = self.topology_for(state);
        let limits = &topology.config.limits;
        if limits.backend_prepared_statements == 0 || request.cursor_flags != 0 {
            return Err(request);
        }
        state.route.max_tokens = limits.max_statement_tokens;
        state.route.autocommit = state.transaction.autocommit();
        state.route.in_transaction = state.transaction.is_open();
        let Some(statement) = state.prepared.statements.get(&id) else {
            return Err(request);
        };
        let Some(spans) = param_spans(payload, &statement.types, |i| {
            u16::try_from(i).is_ok_and(|i| long.contains(&i))
        }) else {
            return Err(request);
        };
        let values = request
            .params
            .iter()
            .map(|value| match *value {
                ParamValue::UInt(n) => MarkerValue::Digits(n),
                ParamValue::Int(n) => {
                    u64::try_from(n).map_or(MarkerValue::Other, MarkerValue::Digits)
                }
                _ => MarkerValue::Other,
            })
            .collect::<Vec<_>>();
        let kept = statement
            .marked
            .as_deref()
            .filter(|route| route.fits(&values, &topology, &state.route));
        let marked = match kept {
            Some(route) => route.fill(&values, &topology, &state.route),
            None => {
                let learned = MarkedRoute::learn(
                    &statement.sql,
                    &statement.placeholders,
                    &values,
                    &topology,
                    &state.route,
                );
                learned.map(|(route, plan)| {
                    let budget = usize::try_from(limits.max_allowed_packet).unwrap_or(usize::MAX);
                    state.prepared.keep_route(id, route, budget);
                    plan
                })
            }
        };
        let (Some(marked), Some(statement)) = (marked, state.prepared.statements.get(&id)) else {
            return Err(request);
        };
        Ok(BinaryExecute {
            sql: statement.sql.clone(),
            markers: statement.placeholders.clone(),
            values,
            params: request.params,
            types: statement.types.clone(),
            spans,
            payload: payload.clone(),
            charset: state.charset,
            first: Some((Plan::Shard(marked.query), marked.digest, topology.identity)),
            marked: marked.params,
            marked_at: marked.markers,
            text_rows_exact: statement.text_rows_exact,
        })
    }
}

/// A COM_STMT_EXECUTE decoded: the statement id, its values, and which
/// parameters had long data. Long data is dropped whatever the outcome;
/// long data that went past the limit fails the execute with 1153.
fn decode(
    state: &mut SessionState,
    payload: &[u8],
) -> Result<(u32, ExecuteRequest, Vec<u16>), ClientError> {
    let id = read_u32(payload).ok_or_else(|| {
        ClientError::BadExecute("COM_STMT_EXECUTE shorter than a statement id".to_owned())
    })?;
    // Moved into the bound values, not copied.
    let (statement, mut long_data, overflow) = state
        .prepared
        .long_data_taken(id)
        .ok_or(ClientError::UnknownStatement(id))?;
    if overflow {
        return Err(ClientError::PacketTooLarge(
            "the long data (COM_STMT_SEND_LONG_DATA) of this statement's parameters went past limits.max_allowed_packet and was dropped".to_owned(),
        ));
    }
    let long: Vec<u16> = long_data.keys().copied().collect();
    let request = parse_execute(
        payload,
        statement.placeholders.len(),
        &mut statement.types,
        &mut long_data,
    )
    .map_err(|error| ClientError::BadExecute(error.to_string()))?;
    Ok((id, request, long))
}

/// The statement text with the bound values in place of its `?` markers,
/// written as literals in the session's character set
/// ([`render_literal`]). Long string values are bound as stubs and
/// returned set aside ([`SetAside::take_long_values`]).
fn bind(
    state: &mut SessionState,
    id: u32,
    mut request: ExecuteRequest,
) -> Result<(String, Option<SetAside>), ClientError> {
    let charset = state.charset;
    let statement = state
        .prepared
        .statements
        .get(&id)
        .ok_or(ClientError::UnknownStatement(id))?;
    let sql = statement.text()?;
    let set_aside = SetAside::take_long_values(sql, &mut request.params, charset);
    let text = render_statement(sql, &statement.placeholders, &request.params, charset)
        .map_err(|error| ClientError::BadExecute(error.to_string()))?;
    Ok((text, set_aside))
}

/// `sql` with each placeholder range replaced by the literal of its value.
fn render_statement(
    sql: &str,
    placeholders: &[Range<usize>],
    params: &[ParamValue],
    charset: Charset,
) -> Result<String, BinaryError> {
    // Room for every literal: a long value's text is not moved to a
    // larger allocation once written.
    let literals: usize = params.iter().map(literal_room).sum();
    let mut text = String::with_capacity(sql.len() + literals);
    let mut copied = 0;
    for (range, value) in placeholders.iter().zip(params) {
        let before = sql.get(copied..range.start).unwrap_or_default();
        text.push_str(before);
        // Rendered in place (a long value is not copied once more); the
        // separator, which depends on its first character, goes in after.
        let at = text.len();
        render_literal(value, charset, &mut text)?;
        let literal = &text[at..];
        let (first, last) = (literal.chars().next(), literal.chars().next_back());
        let separator = bind_separator(
            sql.get(..range.start)
                .and_then(|head| head.chars().next_back()),
            first,
        );
        text.insert_str(at, separator);
        let after = sql.get(range.end..).and_then(|tail| tail.chars().next());
        if bind_separator(last, after) == " " {
            text.push(' ');
        }
        copied = range.end;
    }
    text.push_str(sql.get(copied..).unwrap_or_default());
    Ok(text)
}

/// Bytes enough for the literal of `value` and the blanks around it
/// ([`render_literal`]: bytes are written in hex after a character set
/// introducer; any other value is short).
fn literal_room(value: &ParamValue) -> usize {
    match value {
        ParamValue::Bytes { data, .. } => data.len().saturating_mul(2).saturating_add(32),
        ParamValue::Decimal(text) => text.len() + 2,
        _ => 64,
    }
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
/// shape. Returns the backend's statement id, and whether no column is a
/// FLOAT or DOUBLE (whose text does not give back the server's binary
/// value).
async fn relay_prepare<W: AsyncWrite + Unpin>(
    conn: &mut PooledConn,
    shape: PrepareShape,
    text: &[u8],
    state: &SessionState,
    client: &mut FrameWriter<W>,
) -> Result<(u32, bool), Failure> {
    let host = conn.pool().addr.clone();
    let lost = lost_connection(&host);
    let backend = conn.conn();
    backend
        .send_command(Command::COM_STMT_PREPARE, text)
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
    let server_params = u16::from_le_bytes([first[7], first[8]]);
    backend.statements.prepared(backend_id, server_params);
    let params = usize::from(server_params);
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
    let mut exact = true;
    for (count, shown, are_columns) in [(params, params, false), (columns, visible, true)] {
        if count == 0 {
            continue;
        }
        for index in 0..count {
            let (_, packet) = backend.reader.next_packet().await.map_err(&lost)?;
            if are_columns {
                exact &= parse_column_definition(&packet).is_some_and(|column| {
                    !matches!(
                        column.column_type,
                        ColumnType::MYSQL_TYPE_FLOAT | ColumnType::MYSQL_TYPE_DOUBLE
                    )
                });
            }
            if index < shown {
                seq = client.write_packet(seq, &packet).await?;
            }
        }
        if !state.deprecate_eof {
            let (_, mut eof) = backend.reader.next_packet().await.map_err(&lost)?;
            if let Some(at) = status_offset(&eof, true) {
                rewrite_status(&mut eof, at, state.status_flags(), false);
            }
            if shown > 0 {
                seq = client.write_packet(seq, &eof).await?;
            }
        }
    }
    Ok((backend_id, exact))
}

fn read_u32(payload: &[u8]) -> Option<u32> {
    let bytes = payload.get(..4)?;
    Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameters sent for a plan's `?`s: the client's types and value
    /// bytes as sent, a NULL as its bit, long data as a length-encoded
    /// string, the key's local id as LONGLONG UNSIGNED; the text fallback
    /// writes the same values in.
    #[test]
    fn parameters_go_to_the_server_as_the_client_bound_them() {
        use ColumnType as T;
        let mut payload = vec![7, 0, 0, 0, 0, 1, 0, 0, 0, 0b0000_0100, 1];
        for (kind, flag) in [
            (T::MYSQL_TYPE_LONGLONG, 0),
            (T::MYSQL_TYPE_VAR_STRING, 0),
            (T::MYSQL_TYPE_LONG, 0x80),
            (T::MYSQL_TYPE_BLOB, 0),
        ] {
            payload.extend_from_slice(&[kind as u8, flag]);
        }
        payload.extend_from_slice(&42i64.to_le_bytes());
        payload.extend_from_slice(b"\x03abc");
        let mut types = Vec::new();
        let mut long_data = HashMap::from([(3u16, b"long".to_vec())]);
        let request = parse_execute(&payload, 4, &mut types, &mut long_data).unwrap();
        let spans = param_spans(&payload, &types, |i| i == 3).unwrap();
        let sql = "SELECT ?, ?, ?, ?, ?";
        let binary = BinaryExecute {
            sql: sql.into(),
            markers: Vec::new().into(),
            values: Vec::new(),
            params: request.params,
            types,
            spans,
            payload: payload.clone().into(),
            charset: Charset::UTF8MB4,
            first: None,
            marked: vec![
                MarkedParam::LocalId(9),
                MarkedParam::Client(1),
                MarkedParam::Client(2),
                MarkedParam::Client(3),
                MarkedParam::Client(0),
            ],
            marked_at: vec![7..8, 10..11, 13..14, 16..17, 19..20],
            text_rows_exact: false,
        };
        let mut expected = vec![0b0000_0100, 1];
        for (kind, flag) in [
            (T::MYSQL_TYPE_LONGLONG, 0x80),
            (T::MYSQL_TYPE_VAR_STRING, 0),
            (T::MYSQL_TYPE_LONG, 0x80),
            (T::MYSQL_TYPE_BLOB, 0),
            (T::MYSQL_TYPE_LONGLONG, 0),
        ] {
            expected.extend_from_slice(&[kind as u8, flag]);
        }
        expected.extend_from_slice(&9u64.to_le_bytes());
        expected.extend_from_slice(b"\x03abc\x04long");
        expected.extend_from_slice(&42i64.to_le_bytes());
        let mut block = b"head".to_vec();
        binary.write_params(&mut block);
        assert_eq!(block[4..], expected);
        let text = String::from_utf8(binary.text(sql.as_bytes()).unwrap()).unwrap();
        assert!(
            text.starts_with("SELECT 9, _utf8mb4 X'616263', NULL, _") && text.ends_with(", 42"),
            "{text}"
        );
    }

    #[test]
    fn prepared_statements_move_with_their_ids_markers_and_types() {
        let mut statements = PreparedStatements::default();
        let mut first = PreparedStatement::new("SELECT ? + ?".into(), vec![7..8, 11..12]);
        first.types = vec![(ColumnType::MYSQL_TYPE_LONGLONG, true)];
        let first = statements.add(first);
        let second = statements.add(PreparedStatement::new("SELECT 1".into(), Vec::new()));
        statements.remove(second);
        let carried = statements.carry().expect("nothing pending");
        let text = serde_json::to_string(&carried).unwrap();
        let mut taken =
            PreparedStatements::from_carried(serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(taken.carry(), Some(carried.clone()));
        assert_eq!(taken.len(), 1);
        assert_eq!(&taken.statements[&first].placeholders[..], &[7..8, 11..12]);
        // The next id goes on from the old process's, never reusing one.
        let third = taken.add(PreparedStatement::new("SELECT 2".into(), Vec::new()));
        assert!(third > second, "{third} after {second}");
        // A marker outside the text is refused.
        let mut broken = carried;
        broken.statements[0].markers = vec![(7, 99)];
        assert!(PreparedStatements::from_carried(broken).is_err());
    }
}
