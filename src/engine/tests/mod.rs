//! The statement path's rules, tested against a scripted fake fleet
//! ([`fake`]): an [`Engine`] built with [`Engine::with_dialer`] whose hosts
//! are in-process MySQL servers, client sessions driven through
//! [`Engine::run_statement`] as `frontend::session` drives them, the
//! client's answers decoded, and what each host received asserted.
//!
//! The fleet of [`RIG_YAML`]: fleet `main` (4096 shards, `db{:05}`) on
//! three masters, [`A`] (shards 0-2047), [`B`] (2048-3071), [`C`]
//! (3072-4095); fleet `mod` on [`M`]. The addresses are closed ports of
//! the loopback: a connection that missed the fake would be refused, never
//! reach a real server.
//!
//! Test files, one per family of rules, each a table of rows (setup,
//! statements, expected host traffic, expected client answer):
//! `routing`, `transactions`, `multi_shard`, `gates` (pause, fence),
//! `kill`.

mod allocations;
pub mod fake;
mod gates;
mod kill;
mod multi_shard;
mod routing;
mod transactions;

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use mysql_common::constants::{CapabilityFlags, StatusFlags};
use tokio::io::AsyncWrite;

use super::sessions::Registration;
use super::{Engine, SessionState};
use crate::backend::ConnKey;
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::{parse_err, parse_ok, EOF_HEADER, ERR_HEADER, OK_HEADER};
use crate::protocol::FrameWriter;
use crate::router::Placement;
use crate::sync::lock;
use crate::topology::Topology;
use fake::FakeFleet;

/// Master of shards 0-2047 of fleet `main`.
pub const A: &str = "127.0.0.1:1";
/// Master of shards 2048-3071 of fleet `main`.
pub const B: &str = "127.0.0.1:2";
/// Master of shards 3072-4095 of fleet `main`.
pub const C: &str = "127.0.0.1:3";
/// Master of fleet `mod`.
pub const M: &str = "127.0.0.1:4";

/// The rig's config; `{LIMITS}` is replaced by a test's `limits:` lines.
pub const RIG_YAML: &str = r#"listen: 127.0.0.1:6033
admin:
  listen: 127.0.0.1:6032
  users: [{ name: admin, password: admin }]
users: [{ name: app, password: app }]
backend: { user: shard, password: shardpw, pool_max_per_host: 8, checkout_timeout_ms: 500, connect_timeout_ms: 500 }
pause: { timeout_ms: 300 }
types: { pin: 1, board: 2, user: 3 }
fleets:
  main:
    shards: 4096
    database: "db{:05}"
    open: [0, 4095]
    hosts:
      - { range: [0, 2047],    master: 127.0.0.1:1 }
      - { range: [2048, 3071], master: 127.0.0.1:2 }
      - { range: [3072, 4095], master: 127.0.0.1:3 }
  mod:
    shards: 4096
    database: "msdb{:05}"
    hosts:
      - { range: [0, 4095], master: 127.0.0.1:4 }
tables:
  pins:            { fleet: main, object: pin }
  boards:          { fleet: main, object: board }
  users:           { fleet: main, object: user }
  board_has_pins:  { fleet: main, from: board_id }
  user_by_email:   { fleet: mod,  key: email }
"#;

/// A pin's ID on `shard`.
pub fn pin(shard: u32, local: u64) -> u64 {
    crate::id::compose(shard, 1, local)
}

/// An engine on the fake fleet.
pub struct Rig {
    /// The engine under test.
    pub engine: Arc<Engine>,
    /// Its hosts.
    pub fleet: Arc<FakeFleet>,
    next_session: u32,
}

impl Rig {
    /// The rig of [`RIG_YAML`].
    pub fn new() -> Self {
        Self::with_limits("")
    }

    /// Pauses shards `first..=last` of fleet `main` as `PAUSE SHARDS` does
    /// once drained; returns the pause's ids for [`Rig::resume`].
    pub fn pause(&self, first: u32, last: u32) -> Vec<u64> {
        let gate = &self.engine.pauses;
        let ids = match gate.begin(&["main".to_owned()], first, last, std::time::Instant::now()) {
            Ok(ids) => ids,
            Err(range) => panic!("already paused: {range:?}"),
        };
        assert!(gate.confirm(&ids));
        ids
    }

    /// Ends the pauses of `first..=last` of fleet `main`.
    pub fn resume(&self, first: u32, last: u32) {
        if let Err(error) = self.engine.pauses.end_within(Some("main"), first, last) {
            panic!("resume: {error:?}");
        }
    }

    /// The rig with a `limits:` section (its body, e.g.
    /// `"multi_shard_part_timeout_ms: 200"`).
    pub fn with_limits(limits: &str) -> Self {
        let mut yaml = RIG_YAML.to_owned();
        if !limits.is_empty() {
            yaml.push_str(&format!("limits: {{ {limits} }}\n"));
        }
        let topology = match Topology::from_yaml_str(&yaml, "rig.yaml") {
            Ok(topology) => topology,
            Err(errors) => panic!("the rig's config should load:\n{errors}"),
        };
        let fleet = FakeFleet::new(&[A, B, C, M]);
        let engine = Arc::new(Engine::with_dialer(topology, Arc::new(Arc::clone(&fleet))));
        Self {
            engine,
            fleet,
            next_session: 1,
        }
    }

    /// A new client session, logged in as `app`.
    pub fn session(&mut self) -> Session {
        self.session_as("app")
    }

    /// A new client session, logged in as `user`.
    pub fn session_as(&mut self, user: &str) -> Session {
        let id = self.next_session;
        self.next_session += 1;
        let registration = self.engine.sessions.register(id, user, "test");
        let key = ConnKey {
            framing: CapabilityFlags::empty(),
            collation: 45,
        };
        let mut state = SessionState::new(id, key, false);
        state.entry = Arc::clone(registration.entry());
        Session {
            engine: Arc::clone(&self.engine),
            state,
            _registration: registration,
        }
    }
}

/// One client session of a [`Rig`].
pub struct Session {
    engine: Arc<Engine>,
    /// The session's state.
    pub state: SessionState,
    _registration: Registration,
}

impl Session {
    /// The session's id (what `KILL` takes).
    pub fn id(&self) -> u32 {
        self.state.connection_id
    }

    /// Runs one statement as a COM_QUERY (bracketed as the session's
    /// command, as `frontend::session` does) and returns the client's
    /// answer.
    pub async fn run(&mut self, sql: &str) -> Answer {
        let sink = Sink::default();
        let mut client = FrameWriter::new(sink.clone());
        self.state.response_seq = 1;
        let sql = Bytes::copy_from_slice(sql.as_bytes());
        // As `frontend::session` brackets every command.
        self.state
            .entry
            .start("Query", Some(&sql), std::time::Instant::now());
        let result = self
            .engine
            .run_statement(&mut self.state, &sql, &mut First, false, &mut client)
            .await;
        self.state
            .entry
            .sleep(self.state.database_name(), std::time::Instant::now());
        if let Err(error) = result {
            return Answer::Gone(error.to_string());
        }
        if let Err(error) = client.flush().await {
            return Answer::Gone(error.to_string());
        }
        let bytes = lock(&sink.0).clone();
        Answer::decode(&bytes)
    }
}

/// The placement of new objects: the first shard of the range.
#[derive(Clone)]
struct First;

impl Placement for First {
    fn choose(&mut self, first: u32, _last: u32) -> u32 {
        first
    }
}

/// The bytes written to a client.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl AsyncWrite for Sink {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        lock(&self.0).extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// What a client got for one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// OK.
    Ok {
        /// Affected rows.
        affected: u64,
        /// Last insert id.
        insert_id: u64,
        /// Status flags (the session's).
        status: StatusFlags,
    },
    /// ERR.
    Error {
        /// MySQL code.
        code: u16,
        /// Message.
        message: String,
    },
    /// A result set (text protocol).
    Rows {
        /// Column names.
        columns: Vec<String>,
        /// Rows; None is NULL.
        rows: Vec<Vec<Option<String>>>,
    },
    /// The client connection is unusable (an `Err` of the engine).
    Gone(String),
    /// Bytes that are none of the above.
    Garbled(String),
}

impl Answer {
    /// Decodes one answer (the client did not set CLIENT_DEPRECATE_EOF).
    fn decode(bytes: &[u8]) -> Answer {
        let mut packets = Vec::new();
        let mut rest = bytes;
        while rest.len() >= 4 {
            let len = usize::from(rest[0]) | usize::from(rest[1]) << 8 | usize::from(rest[2]) << 16;
            let Some(payload) = rest.get(4..4 + len) else {
                return Answer::Garbled(format!("a frame cut short: {bytes:?}"));
            };
            packets.push(payload.to_vec());
            rest = &rest[4 + len..];
        }
        let Some(first) = packets.first() else {
            return Answer::Garbled("no answer".to_owned());
        };
        match first.first() {
            Some(&OK_HEADER) => match parse_ok(first) {
                Some(ok) => Answer::Ok {
                    affected: ok.affected_rows,
                    insert_id: ok.last_insert_id,
                    status: ok.status,
                },
                None => Answer::Garbled(format!("{first:?}")),
            },
            Some(&ERR_HEADER) => match parse_err(first) {
                Some((code, _, message)) => Answer::Error { code, message },
                None => Answer::Garbled(format!("{first:?}")),
            },
            _ => Self::result_set(&packets),
        }
    }

    fn result_set(packets: &[Vec<u8>]) -> Answer {
        let mut head = packets[0].as_slice();
        let count = read_lenenc_int(&mut head).unwrap_or(0) as usize;
        let mut columns = Vec::with_capacity(count);
        for packet in packets.iter().skip(1).take(count) {
            let mut field = packet.as_slice();
            let mut name = String::new();
            for index in 0..5 {
                let len = read_lenenc_int(&mut field).unwrap_or(0) as usize;
                let (text, after) = field.split_at(len.min(field.len()));
                if index == 4 {
                    name = String::from_utf8_lossy(text).into_owned();
                }
                field = after;
            }
            columns.push(name);
        }
        let mut rows = Vec::new();
        for packet in packets.iter().skip(count + 2) {
            match packet.first() {
                Some(&EOF_HEADER) if packet.len() < 9 => break,
                Some(&ERR_HEADER) => {
                    let (code, _, message) = parse_err(packet).unwrap_or_default();
                    return Answer::Error { code, message };
                }
                _ => {}
            }
            let mut values = Vec::with_capacity(count);
            let mut cursor = packet.as_slice();
            for _ in 0..count {
                if cursor.first() == Some(&0xFB) {
                    cursor = &cursor[1..];
                    values.push(None);
                    continue;
                }
                let len = read_lenenc_int(&mut cursor).unwrap_or(0) as usize;
                let (text, after) = cursor.split_at(len.min(cursor.len()));
                values.push(Some(String::from_utf8_lossy(text).into_owned()));
                cursor = after;
            }
            rows.push(values);
        }
        Answer::Rows { columns, rows }
    }

    /// An OK with `affected` rows and `insert_id` (status not compared).
    pub fn is_ok(&self, affected: u64, insert_id: u64) -> bool {
        matches!(self, Answer::Ok { affected: a, insert_id: i, .. } if *a == affected && *i == insert_id)
    }

    /// The error code, if an error.
    pub fn code(&self) -> Option<u16> {
        match self {
            Answer::Error { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The rows, if a result set, each row's values joined with `,`
    /// (NULL as `NULL`).
    pub fn rows(&self) -> Option<Vec<String>> {
        match self {
            Answer::Rows { rows, .. } => Some(
                rows.iter()
                    .map(|row| {
                        row.iter()
                            .map(|v| v.clone().unwrap_or_else(|| "NULL".to_owned()))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// What a row of a table expects of the client's answer.
#[derive(Debug, Clone)]
pub enum Expect {
    /// OK with these affected rows and insert id.
    Ok(u64, u64),
    /// An error with this code whose message contains this text.
    Error(u16, String),
    /// A result set with these rows (values joined with `,`).
    Rows(Vec<String>),
}

/// An error with `code` whose message contains `needle`.
pub fn error(code: u16, needle: &str) -> Expect {
    Expect::Error(code, needle.to_owned())
}

/// A result set of `rows` (each row's values joined with `,`).
pub fn rows(rows: &[&str]) -> Expect {
    Expect::Rows(rows.iter().map(|r| (*r).to_owned()).collect())
}

impl Expect {
    /// Panics with `context` when `answer` is not what is expected.
    pub fn check(&self, answer: &Answer, context: &str) {
        let fine = match (self, answer) {
            (Expect::Ok(affected, insert_id), answer) => answer.is_ok(*affected, *insert_id),
            (Expect::Error(code, needle), Answer::Error { code: got, message }) => {
                code == got && message.contains(needle.as_str())
            }
            (Expect::Rows(rows), answer) => answer.rows().as_ref() == Some(rows),
            _ => false,
        };
        assert!(fine, "{context}: expected {self:?}, got {answer:?}");
    }
}

/// What a row of a table expects the hosts to have received.
#[derive(Debug, Clone)]
pub enum Traffic {
    /// The host received a statement containing this text.
    Reached(&'static str, String),
    /// The host received no statement containing this text.
    NotReached(&'static str, String),
    /// The host received no statement at all.
    Silent(&'static str),
    /// The host received statements containing the first and the second
    /// text on one connection.
    SameConnection(&'static str, String, String),
    /// The host received the texts in this order (others between them
    /// allowed).
    InOrder(&'static str, Vec<String>),
}

/// `host` received a statement containing `text`.
pub fn reached(host: &'static str, text: &str) -> Traffic {
    Traffic::Reached(host, text.to_owned())
}

/// `host` received no statement containing `text`.
pub fn not_reached(host: &'static str, text: &str) -> Traffic {
    Traffic::NotReached(host, text.to_owned())
}

/// `host` received statements containing `first` and `second` on one
/// connection.
pub fn same_connection(host: &'static str, first: &str, second: &str) -> Traffic {
    Traffic::SameConnection(host, first.to_owned(), second.to_owned())
}

/// `host` received these texts in this order.
pub fn in_order(host: &'static str, texts: &[&str]) -> Traffic {
    Traffic::InOrder(host, texts.iter().map(|t| (*t).to_owned()).collect())
}

impl Traffic {
    /// Panics with `context` when the fleet's log does not show it.
    pub fn check(&self, fleet: &FakeFleet, context: &str) {
        let log = || fleet.received();
        match self {
            Traffic::Reached(host, text) => assert!(
                !fleet.queries_with(host, text).is_empty(),
                "{context}: {host} should have received {text:?}; it got {:#?}",
                fleet.queries(host)
            ),
            Traffic::NotReached(host, text) => assert!(
                fleet.queries_with(host, text).is_empty(),
                "{context}: {host} should not have received {text:?}; it got {:#?}",
                fleet.queries(host)
            ),
            Traffic::Silent(host) => assert!(
                fleet.queries(host).is_empty(),
                "{context}: {host} should have received nothing; it got {:#?}",
                fleet.queries(host)
            ),
            Traffic::SameConnection(host, first, second) => {
                let first_on = fleet.queries_with(host, first);
                let second_on = fleet.queries_with(host, second);
                assert!(
                    !first_on.is_empty()
                        && !second_on.is_empty()
                        && first_on.iter().all(|a| second_on.iter().all(|b| a.thread == b.thread)),
                    "{context}: {host} should have received {first:?} and {second:?} on one connection; log {:#?}",
                    log()
                );
            }
            Traffic::InOrder(host, texts) => {
                let queries = fleet.queries(host);
                let mut at = 0;
                for text in texts {
                    let needle = text.to_ascii_lowercase();
                    match queries[at..]
                        .iter()
                        .position(|q| q.to_ascii_lowercase().contains(&needle))
                    {
                        Some(found) => at += found + 1,
                        None => panic!(
                            "{context}: {host} should have received {texts:?} in this order; it got {queries:#?}"
                        ),
                    }
                }
            }
        }
    }
}

/// One row of a table: the fleet's script, the statements one session
/// runs, the answer expected for each, and the traffic expected on the
/// hosts once they all ran.
pub struct Case {
    /// What the row shows.
    pub name: &'static str,
    /// The `limits:` of the rig (empty: defaults).
    pub limits: &'static str,
    /// Scripts the hosts (and may kill them) before the statements run.
    pub setup: fn(&Rig),
    /// The statements, in order, each with the answer it must get.
    pub statements: Vec<(String, Expect)>,
    /// What the hosts must have received.
    pub traffic: Vec<Traffic>,
}

impl Case {
    /// A row named `name` with no script.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            limits: "",
            setup: |_| {},
            statements: Vec::new(),
            traffic: Vec::new(),
        }
    }

    /// Runs `sql` and expects `answer`.
    pub fn run(mut self, sql: impl Into<String>, answer: Expect) -> Self {
        self.statements.push((sql.into(), answer));
        self
    }

    /// Expects `traffic` once the statements ran.
    pub fn then(mut self, traffic: Traffic) -> Self {
        self.traffic.push(traffic);
        self
    }

    /// Scripts the hosts with `setup` first.
    pub fn given(mut self, setup: fn(&Rig)) -> Self {
        self.setup = setup;
        self
    }

    /// Runs the engine with these `limits:`.
    pub fn limits(mut self, limits: &'static str) -> Self {
        self.limits = limits;
        self
    }
}

/// Runs every row of `table` on a rig of its own; returns the number run.
pub async fn run_table(table: Vec<Case>) -> usize {
    let count = table.len();
    for case in table {
        let mut rig = Rig::with_limits(case.limits);
        (case.setup)(&rig);
        let mut session = rig.session();
        for (index, (sql, expect)) in case.statements.iter().enumerate() {
            let answer = session.run(sql).await;
            expect.check(
                &answer,
                &format!("row {:?}, statement {index} ({sql})", case.name),
            );
        }
        for traffic in &case.traffic {
            traffic.check(&rig.fleet, &format!("row {:?}", case.name));
        }
    }
    count
}
