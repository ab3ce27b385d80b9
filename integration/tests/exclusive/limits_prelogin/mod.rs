//! Bounds before login, each against a proxy of its own
//! started in-process with small `limits`: the login deadline (plain and
//! TLS), the client connection cap (1040 before any handshake data), login
//! packets refused on their header without being buffered (the process's
//! RSS is read from /proc/self/status), a statement over
//! `max_allowed_packet` (1153, connection closed), idle unauthenticated
//! sockets that do not stop logged-in clients, and the admin port's bounds
//! in front of opensrv-mysql (huge and broken login packets refused without
//! a panic). The tests take turns ([`serial`]): RSS is the whole process's.

use crate::common;

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
use mysql_common::proto::{MyDeserialize, MySerialize};
use mysql_common::scramble::scramble_native;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod admin_port;
mod client_port;
mod open_file_limit;

/// A proxy with the test fleet's config and `limits` (a YAML flow map).
fn proxy_with(name: &str, limits: &str, extra: &str) -> RunningProxy {
    let yaml = format!("{}\nlimits: {limits}\n{extra}", test_config_yaml());
    start_server(name, &yaml)
}

/// This process's resident set size, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

fn frame(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, seq];
    out.extend_from_slice(payload);
    out
}

/// Reads one packet off a raw socket: sequence id and payload.
async fn read_packet(stream: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await?;
    Ok((header[3], payload))
}

/// The code of an ERR payload.
fn err_code(payload: &[u8]) -> Option<u16> {
    match payload {
        [0xFF, low, high, ..] => Some(u16::from_le_bytes([*low, *high])),
        _ => None,
    }
}

/// Waits for the peer to close `stream` (EOF or reset), reading and
/// dropping anything it sends; returns how long that took.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut sink = [0u8; 4096];
    loop {
        let remaining = limit.checked_sub(started.elapsed())?;
        match tokio::time::timeout(remaining, stream.read(&mut sink)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// A SELECT 1 through a logged-in connection, with its latency.
async fn select_one(conn: &mut mysql_async::Conn) -> Duration {
    let started = Instant::now();
    let one: Option<u64> = conn.query_first("SELECT 1").await.expect("SELECT 1");
    assert_eq!(one, Some(1));
    started.elapsed()
}
