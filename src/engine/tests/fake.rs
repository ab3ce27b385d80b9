//! A scripted fake fleet: each host is an in-process MySQL server over
//! `tokio::io::duplex`, reached through the engine's [`Dialer`] seam, so
//! the engine's own checkout, settings replay, relay, release and KILL code
//! runs unchanged against it. A host answers each COM_QUERY from its
//! script (the last rule given whose text matches: OK with affected rows and an
//! insert id, a result set, an error, after a delay, or the connection
//! dropped), and every command it receives is recorded: host, the server's
//! thread id of the connection, the command, the text.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_common::constants::{CapabilityFlags, Command, StatusFlags};
use mysql_common::packets::HandshakePacket;
use mysql_common::proto::MySerialize;
use tokio::io::{AsyncWrite, DuplexStream};
use tokio::sync::Notify;

use crate::backend::link::{Dialer, Dialing, HostStream};
use crate::protocol::packets::{
    column_definition, err_packet, ok_packet, result_set_terminator, text_row, LocalColumnType,
};
use crate::protocol::{FrameReader, FrameWriter};
use crate::sync::lock;

/// The version every fake host reports: the lexer's default, so a fake
/// login changes nothing the other unit tests of the process read.
const FAKE_VERSION: &str = "10.11.0-MariaDB-fake";

const QUIT: u8 = Command::COM_QUIT as u8;
const INIT_DB: u8 = Command::COM_INIT_DB as u8;
const PING: u8 = Command::COM_PING as u8;
const RESET: u8 = Command::COM_RESET_CONNECTION as u8;
/// COM_QUERY's code.
pub const QUERY: u8 = Command::COM_QUERY as u8;

/// MariaDB's deadlock error: the server rolled the transaction back.
pub const DEADLOCK: u16 = 1213;

/// MariaDB's "Query execution was interrupted" (a `KILL QUERY` arrived).
pub const INTERRUPTED: u16 = 1317;

/// What a host answers to a statement.
#[derive(Debug, Clone)]
pub enum Reply {
    /// OK with affected rows and last insert id.
    Ok {
        /// Affected rows.
        affected: u64,
        /// Last insert id.
        insert_id: u64,
    },
    /// A text result set: column names and types, rows (None is NULL).
    Rows {
        /// Column names and types.
        columns: Vec<(String, LocalColumnType)>,
        /// Rows of values.
        rows: Vec<Vec<Option<String>>>,
    },
    /// An ERR packet.
    Error {
        /// MySQL error code.
        code: u16,
        /// Message.
        message: String,
    },
    /// The reply after a delay; a `KILL QUERY` of the connection's thread
    /// ends the wait with error 1317.
    After(Duration, Box<Reply>),
    /// The connection is closed without an answer (a host that died).
    Drop,
}

impl Reply {
    /// OK with `affected` rows.
    pub fn ok(affected: u64) -> Self {
        Reply::Ok {
            affected,
            insert_id: 0,
        }
    }

    /// A result set of text columns named `columns`.
    pub fn rows(columns: &[&str], rows: &[&[Option<&str>]]) -> Self {
        Reply::Rows {
            columns: columns
                .iter()
                .map(|name| ((*name).to_owned(), LocalColumnType::Text))
                .collect(),
            rows: rows
                .iter()
                .map(|row| row.iter().map(|v| v.map(str::to_owned)).collect())
                .collect(),
        }
    }

    /// A result set of signed integer columns.
    pub fn ints(columns: &[&str], rows: &[&[i64]]) -> Self {
        Reply::Rows {
            columns: columns
                .iter()
                .map(|name| ((*name).to_owned(), LocalColumnType::BigInt))
                .collect(),
            rows: rows
                .iter()
                .map(|row| row.iter().map(|v| Some(v.to_string())).collect())
                .collect(),
        }
    }

    /// A result set whose columns are `(name, is_integer)`.
    pub fn table(columns: &[(&str, bool)], rows: &[&[Option<&str>]]) -> Self {
        Reply::Rows {
            columns: columns
                .iter()
                .map(|(name, integer)| {
                    let kind = match integer {
                        true => LocalColumnType::BigInt,
                        false => LocalColumnType::Text,
                    };
                    ((*name).to_owned(), kind)
                })
                .collect(),
            rows: rows
                .iter()
                .map(|row| row.iter().map(|v| v.map(str::to_owned)).collect())
                .collect(),
        }
    }

    /// An error.
    pub fn error(code: u16, message: &str) -> Self {
        Reply::Error {
            code,
            message: message.to_owned(),
        }
    }

    /// `self` after `delay`.
    pub fn after(self, delay: Duration) -> Self {
        Reply::After(delay, Box::new(self))
    }
}

/// Which statements a rule answers.
#[derive(Debug, Clone)]
pub enum Match {
    /// Text that contains this (ASCII case-insensitive).
    Contains(String),
    /// Exactly this text.
    Exact(String),
}

impl Match {
    fn matches(&self, sql: &str) -> bool {
        match self {
            Match::Contains(needle) => sql
                .to_ascii_lowercase()
                .contains(&needle.to_ascii_lowercase()),
            Match::Exact(text) => sql == text,
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    matcher: Match,
    reply: Reply,
}

/// One command a fake host received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The host's address.
    pub host: String,
    /// The server's thread id of the connection it came on.
    pub thread: u32,
    /// The command's code (`Command::COM_QUERY as u8` ...).
    pub command: u8,
    /// The database the connection had selected (login or COM_INIT_DB).
    pub db: Option<String>,
    /// The command's body as text (the SQL of a COM_QUERY).
    pub sql: String,
}

/// One fake host's script and state.
struct Host {
    rules: Mutex<Vec<Rule>>,
    dead: AtomicBool,
    /// Running statements' kill switches, by thread id.
    threads: Mutex<HashMap<u32, Arc<Notify>>>,
    /// Wakes every connection of the host to close it.
    restart: Notify,
    /// Wakes every connection of the host to send an unsolicited ERR 1053
    /// (as a server that is shutting down does before it closes).
    announce: Notify,
}

/// The fake fleet: hosts by address, their scripts, what they received.
#[derive(Default)]
pub struct FakeFleet {
    hosts: Mutex<HashMap<String, Arc<Host>>>,
    log: Mutex<Vec<Received>>,
    next_thread: AtomicU32,
}

impl FakeFleet {
    /// A fleet whose hosts are `addrs`, each answering OK to everything
    /// until scripted.
    pub fn new(addrs: &[&str]) -> Arc<Self> {
        let fleet = FakeFleet {
            next_thread: AtomicU32::new(100),
            ..FakeFleet::default()
        };
        for addr in addrs {
            lock(&fleet.hosts).insert(
                (*addr).to_owned(),
                Arc::new(Host {
                    rules: Mutex::new(Vec::new()),
                    dead: AtomicBool::new(false),
                    threads: Mutex::new(HashMap::new()),
                    restart: Notify::new(),
                    announce: Notify::new(),
                }),
            );
        }
        Arc::new(fleet)
    }

    fn host(&self, addr: &str) -> Arc<Host> {
        match lock(&self.hosts).get(addr) {
            Some(host) => Arc::clone(host),
            None => panic!("no fake host {addr}"),
        }
    }

    /// Host `addr` answers statements that contain `needle` with `reply`
    /// (the last rule given that matches answers, so a row can override a
    /// shared script).
    pub fn on(&self, addr: &str, needle: &str, reply: Reply) {
        lock(&self.host(addr).rules).push(Rule {
            matcher: Match::Contains(needle.to_owned()),
            reply,
        });
    }

    /// Host `addr` answers exactly `sql` with `reply`.
    pub fn on_exact(&self, addr: &str, sql: &str, reply: Reply) {
        lock(&self.host(addr).rules).push(Rule {
            matcher: Match::Exact(sql.to_owned()),
            reply,
        });
    }

    /// Host `addr` refuses connections (and closes the ones it has at
    /// their next command) until [`FakeFleet::revive`].
    pub fn kill_host(&self, addr: &str) {
        self.host(addr).dead.store(true, Ordering::SeqCst);
    }

    /// Host `addr` restarts: every connection it has is closed (a pooled
    /// one is found closed at its next checkout); new ones are accepted.
    pub fn restart_host(&self, addr: &str) {
        self.host(addr).restart.notify_waiters();
    }

    /// Host `addr` sends ERR 1053 on every connection it has, which stay
    /// open (the FIN that follows on a real server not arrived yet).
    pub fn announce_shutdown(&self, addr: &str) {
        self.host(addr).announce.notify_waiters();
    }

    /// Host `addr` accepts connections again.
    pub fn revive(&self, addr: &str) {
        self.host(addr).dead.store(false, Ordering::SeqCst);
    }

    /// Everything every host received, in order.
    pub fn received(&self) -> Vec<Received> {
        lock(&self.log).clone()
    }

    /// The COM_QUERY texts host `addr` received, in order.
    pub fn queries(&self, addr: &str) -> Vec<String> {
        self.received()
            .into_iter()
            .filter(|r| r.host == addr && r.command == QUERY)
            .map(|r| r.sql)
            .collect()
    }

    /// The COM_QUERYs host `addr` received that contain `needle`.
    pub fn queries_with(&self, addr: &str, needle: &str) -> Vec<Received> {
        let needle = needle.to_ascii_lowercase();
        self.received()
            .into_iter()
            .filter(|r| {
                r.host == addr && r.command == QUERY && r.sql.to_ascii_lowercase().contains(&needle)
            })
            .collect()
    }

    /// Forgets what was received so far.
    pub fn clear_log(&self) {
        lock(&self.log).clear();
    }

    fn record(&self, received: Received) {
        lock(&self.log).push(received);
    }

    fn reply_for(&self, host: &Host, sql: &str) -> Reply {
        let rules = lock(&host.rules);
        if let Some(rule) = rules.iter().rev().find(|rule| rule.matcher.matches(sql)) {
            return rule.reply.clone();
        }
        drop(rules);
        default_reply(sql)
    }
}

/// What a host answers when no rule matches: the reads the engine makes
/// of a session's state answer as a fresh server would; anything else OK.
fn default_reply(sql: &str) -> Reply {
    let lower = sql.to_ascii_lowercase();
    if lower.starts_with("select @@session.sql_mode") {
        return Reply::rows(
            &["sql_mode", "cs", "wait_timeout"],
            &[&[Some("STRICT_TRANS_TABLES"), Some("utf8mb4"), Some("28800")]],
        );
    }
    if lower.starts_with("select version()") {
        return Reply::rows(
            &["v", "w", "i"],
            &[&[Some(FAKE_VERSION), Some("28800"), Some("28800")]],
        );
    }
    Reply::ok(0)
}

impl Dialer for Arc<FakeFleet> {
    fn dial<'a>(&'a self, addr: &'a str) -> Dialing<'a> {
        Box::pin(async move {
            let host = lock(&self.hosts).get(addr).cloned();
            let Some(host) = host else {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("no fake host {addr}"),
                ));
            };
            if host.dead.load(Ordering::SeqCst) {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "Connection refused (fake host down)",
                ));
            }
            let (ours, theirs) = tokio::io::duplex(64 * 1024);
            let thread = self.next_thread.fetch_add(1, Ordering::Relaxed);
            let fleet = Arc::clone(self);
            let addr = addr.to_owned();
            tokio::spawn(async move {
                let _ = serve(fleet, host, addr, thread, theirs).await;
            });
            Ok(HostStream::Memory(ours))
        })
    }
}

/// One connection of a fake host: greeting, login (any password), then
/// commands until COM_QUIT or the end of the stream.
async fn serve(
    fleet: Arc<FakeFleet>,
    host: Arc<Host>,
    addr: String,
    thread: u32,
    stream: DuplexStream,
) -> io::Result<()> {
    let (read, write) = tokio::io::split(stream);
    let mut reader = FrameReader::new(read);
    let mut writer = FrameWriter::new(write);
    let offered = CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_FOUND_ROWS
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_LOCAL_FILES
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_DEPRECATE_EOF;
    let greeting = HandshakePacket::new(
        10,
        FAKE_VERSION.as_bytes(),
        thread,
        *b"abcdefgh",
        Some(&b"ijklmnopqrst"[..]),
        offered,
        45,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        Some(&b"mysql_native_password"[..]),
    );
    let mut body = Vec::new();
    greeting.serialize(&mut body);
    writer.write_packet(0, &body).await?;
    writer.flush().await?;
    let (seq, response) = reader.next_packet().await?;
    let client = response
        .get(..4)
        .map(|b| CapabilityFlags::from_bits_truncate(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .unwrap_or_else(CapabilityFlags::empty);
    let deprecate_eof = client.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let mut session = Conn {
        in_trans: false,
        db: None,
    };
    writer
        .write_packet(seq.wrapping_add(1), &session.ok(0, 0))
        .await?;
    writer.flush().await?;
    let kill = Arc::new(Notify::new());
    lock(&host.threads).insert(thread, Arc::clone(&kill));
    let result = async {
        loop {
            let (_, packet) = tokio::select! {
                packet = reader.next_packet() => packet?,
                () = host.restart.notified() => return Ok(()),
                () = host.announce.notified() => {
                    writer.write_packet(0, &err_packet(1053, "08S01", "Server shutdown in progress")).await?;
                    writer.flush().await?;
                    continue;
                }
            };
            if host.dead.load(Ordering::SeqCst) {
                return Ok(());
            }
            let Some((&code, body)) = packet.split_first() else {
                return Ok(());
            };
            let command = code;
            let text = String::from_utf8_lossy(body).into_owned();
            fleet.record(Received {
                host: addr.clone(),
                thread,
                command,
                db: session.db.clone(),
                sql: text.clone(),
            });
            match command {
                QUIT => return Ok(()),
                INIT_DB => {
                    session.db = Some(text);
                    writer.write_packet(1, &session.ok(0, 0)).await?;
                }
                PING => {
                    writer.write_packet(1, &session.ok(0, 0)).await?;
                }
                RESET => {
                    session.in_trans = false;
                    writer.write_packet(1, &session.ok(0, 0)).await?;
                }
                QUERY => {
                    if let Some(victim) = killed_thread(&text) {
                        let found = lock(&host.threads).get(&victim).cloned();
                        let answer = match found {
                            Some(switch) => {
                                switch.notify_one();
                                session.ok(0, 0)
                            }
                            None => {
                                err_packet(1094, "HY000", &format!("Unknown thread id: {victim}"))
                            }
                        };
                        writer.write_packet(1, &answer).await?;
                    } else {
                        let reply = fleet.reply_for(&host, &text);
                        if !answer(
                            &mut writer,
                            &mut session,
                            &text,
                            reply,
                            deprecate_eof,
                            &kill,
                        )
                        .await?
                        {
                            return Ok(());
                        }
                    }
                }
                _ => {
                    let message = format!("the fake host does not speak command {command}");
                    writer
                        .write_packet(1, &err_packet(1047, "08S01", &message))
                        .await?;
                }
            }
            writer.flush().await?;
        }
    }
    .await;
    lock(&host.threads).remove(&thread);
    result
}

/// What one connection of a fake host knows about its session.
struct Conn {
    in_trans: bool,
    db: Option<String>,
}

impl Conn {
    fn status(&self) -> StatusFlags {
        let mut status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        if self.in_trans {
            status |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        status
    }

    fn ok(&self, affected: u64, insert_id: u64) -> Vec<u8> {
        ok_packet(affected, insert_id, self.status(), 0)
    }

    /// Follows BEGIN / COMMIT / ROLLBACK as a server's IN_TRANS does.
    fn track(&mut self, sql: &str) {
        let lower = sql.trim().to_ascii_lowercase();
        if lower.starts_with("begin") || lower.starts_with("start transaction") {
            self.in_trans = true;
        } else if (lower.starts_with("commit") || lower.starts_with("rollback"))
            && !lower.starts_with("rollback to")
        {
            self.in_trans = false;
        }
    }
}

/// `KILL QUERY n` / `KILL n`: the thread id.
fn killed_thread(sql: &str) -> Option<u32> {
    let lower = sql.trim().to_ascii_lowercase();
    let rest = lower.strip_prefix("kill ")?;
    let rest = rest
        .strip_prefix("query ")
        .or_else(|| rest.strip_prefix("connection "))
        .unwrap_or(rest);
    rest.trim().parse().ok()
}

/// Writes `reply` for statement `sql`; false when the connection is to be
/// dropped.
async fn answer<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter<W>,
    session: &mut Conn,
    sql: &str,
    reply: Reply,
    deprecate_eof: bool,
    kill: &Notify,
) -> io::Result<bool> {
    let mut reply = reply;
    loop {
        match reply {
            Reply::After(delay, then) => {
                tokio::select! {
                    () = tokio::time::sleep(delay) => reply = *then,
                    () = kill.notified() => {
                        reply = Reply::error(INTERRUPTED, "Query execution was interrupted");
                    }
                }
            }
            Reply::Drop => return Ok(false),
            Reply::Error { code, message } => {
                if code == DEADLOCK {
                    session.in_trans = false;
                }
                writer
                    .write_packet(1, &err_packet(code, "HY000", &message))
                    .await?;
                return Ok(true);
            }
            Reply::Ok {
                affected,
                insert_id,
            } => {
                session.track(sql);
                writer
                    .write_packet(1, &session.ok(affected, insert_id))
                    .await?;
                return Ok(true);
            }
            Reply::Rows { columns, rows } => {
                let mut seq = writer.write_packet(1, &[columns.len() as u8]).await?;
                for (name, kind) in &columns {
                    seq = writer
                        .write_packet(seq, &column_definition(name, *kind))
                        .await?;
                }
                if !deprecate_eof {
                    seq = writer
                        .write_packet(
                            seq,
                            &crate::protocol::packets::eof_packet(session.status(), 0),
                        )
                        .await?;
                }
                for row in &rows {
                    let values: Vec<Option<&[u8]>> = row
                        .iter()
                        .map(|v| v.as_deref().map(str::as_bytes))
                        .collect();
                    seq = writer.write_packet(seq, &text_row(&values)).await?;
                }
                writer
                    .write_packet(seq, &result_set_terminator(deprecate_eof, session.status()))
                    .await?;
                return Ok(true);
            }
        }
    }
}
