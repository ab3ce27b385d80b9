//! Bounds before login (issue 9, item 7), each against a proxy of its own
//! started in-process with small `limits`: the login deadline (plain and
//! TLS), the client connection cap (1040 before any handshake data), login
//! packets refused on their header without being buffered (the process's
//! RSS is read from /proc/self/status), a statement over
//! `max_allowed_packet` (1153, connection closed), idle unauthenticated
//! sockets that do not stop logged-in clients, and the admin port's bounds
//! in front of opensrv-mysql (huge and broken login packets refused without
//! a panic). The tests take turns ([`serial`]): RSS is the whole process's.

mod common;

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

/// One test at a time: RSS is measured for the whole process.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

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

#[tokio::test]
async fn an_idle_socket_is_closed_after_the_handshake_timeout() {
    let _turn = serial().await;
    let proxy = proxy_with(
        "idle-timeout",
        "{handshake_timeout_ms: 500, max_client_connections: 20, max_login_packet: 4096}",
        "",
    );
    let addr = proxy.listening.client;

    // Never answers the greeting.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let (seq, greeting) = read_packet(&mut silent).await.unwrap();
    assert_eq!((seq, greeting[0]), (0, 10), "a HandshakeV10 greeting");
    let closed = closed_within(&mut silent, Duration::from_secs(3))
        .await
        .expect("the proxy closes a socket that does not log in");
    assert!(
        closed >= Duration::from_millis(400),
        "closed after the timeout, not before: {closed:?}"
    );

    // Trickles its handshake response one byte at a time: the deadline
    // counts from the accept, not from the last byte.
    let mut trickle = TcpStream::connect(addr).await.unwrap();
    read_packet(&mut trickle).await.unwrap();
    let started = Instant::now();
    let response = frame(1, &[0x55; 200]);
    let mut closed_after = None;
    for byte in response {
        if trickle.write_all(&[byte]).await.is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        if started.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    let closed_after = match closed_after {
        Some(after) => after,
        None => {
            started.elapsed()
                + closed_within(&mut trickle, Duration::from_secs(1))
                    .await
                    .expect("closed")
        }
    };
    assert!(
        closed_after < Duration::from_millis(1500),
        "a trickling client is cut at the deadline: {closed_after:?}"
    );

    // The proxy still logs clients in.
    let mut app = app(&proxy).await;
    select_one(&mut app).await;
}

/// A certificate and key for 127.0.0.1 in a directory of their own; the
/// `tls` section naming them.
fn tls_section(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("shardgate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    format!(
        "tls: {{ cert: {}, key: {} }}\n",
        dir.join("cert.pem").display(),
        dir.join("key.pem").display()
    )
}

/// The 32-byte SSLRequest asking to switch to TLS.
fn ssl_request() -> Vec<u8> {
    let caps = CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_SSL;
    let mut payload = caps.bits().to_le_bytes().to_vec();
    payload.extend_from_slice(&(16u32 << 20).to_le_bytes());
    payload.push(45);
    payload.extend_from_slice(&[0u8; 23]);
    payload
}

#[tokio::test]
async fn a_stalled_tls_start_is_closed_after_the_handshake_timeout() {
    let _turn = serial().await;
    let proxy = proxy_with(
        "tls-timeout",
        "{handshake_timeout_ms: 500, max_client_connections: 20, max_login_packet: 4096}",
        &tls_section("tls-timeout"),
    );
    let addr = proxy.listening.client;

    // Asks for TLS, then sends half a ClientHello and stops.
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    read_packet(&mut stalled).await.unwrap();
    stalled.write_all(&frame(1, &ssl_request())).await.unwrap();
    stalled
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    let closed = closed_within(&mut stalled, Duration::from_secs(3))
        .await
        .expect("a stalled TLS handshake is cut");
    assert!(closed >= Duration::from_millis(400), "{closed:?}");

    // Never answers the TLS-offering greeting at all.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    read_packet(&mut silent).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(3))
        .await
        .is_some());

    // A login packet over the limit on the TLS listener's raw read.
    let mut huge = TcpStream::connect(addr).await.unwrap();
    read_packet(&mut huge).await.unwrap();
    huge.write_all(&[0x00, 0x00, 0xA0, 1]).await.unwrap();
    let closed = closed_within(&mut huge, Duration::from_secs(3))
        .await
        .expect("refused on the header");
    assert!(
        closed < Duration::from_millis(400),
        "not at the deadline: {closed:?}"
    );
}

#[tokio::test]
async fn the_connection_past_the_cap_gets_1040_before_any_handshake() {
    let _turn = serial().await;
    let proxy = proxy_with(
        "connection-cap",
        "{handshake_timeout_ms: 10000, max_client_connections: 20, max_login_packet: 4096}",
        "",
    );
    let addr = proxy.listening.client;
    // One logged-in client and 19 that never log in fill the cap.
    let mut app = app(&proxy).await;
    let mut idle = Vec::new();
    for _ in 0..19 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let (_, greeting) = read_packet(&mut stream).await.unwrap();
        assert_eq!(greeting[0], 10);
        idle.push(stream);
    }
    // The 21st: 1040 in place of the greeting, sent without reading
    // anything, then closed.
    let mut extra = TcpStream::connect(addr).await.unwrap();
    let (seq, answer) = read_packet(&mut extra).await.unwrap();
    assert_eq!(seq, 0);
    assert_eq!(err_code(&answer), Some(1040), "{answer:?}");
    let message = String::from_utf8_lossy(&answer[9..]).into_owned();
    assert!(message.starts_with("Too many connections"), "{message}");
    assert!(closed_within(&mut extra, Duration::from_secs(1))
        .await
        .is_some());
    // A stock client is told the same.
    let refused = connect_to(addr, APP_USER, APP_PASSWORD).await.unwrap_err();
    assert_eq!(server_error(refused).0, 1040);
    // The logged-in client is not affected.
    assert!(select_one(&mut app).await < Duration::from_secs(2));

    // A closed connection gives its place back.
    drop(idle.pop());
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut second = loop {
        match connect_to(addr, APP_USER, APP_PASSWORD).await {
            Ok(conn) => break conn,
            Err(error) if Instant::now() < deadline => {
                assert_eq!(server_error(error).0, 1040);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("the freed place was not given back: {error}"),
        }
    };
    select_one(&mut second).await;
}

/// Sends a login packet declaring `declared` bytes and then up to `send`
/// bytes of it (less when the proxy cuts it), leaving the socket open.
async fn oversized_login(
    addr: SocketAddr,
    declared: usize,
    send: usize,
    chunk: &'static [u8],
) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let (seq, _) = read_packet(&mut stream).await.unwrap();
    let header = [
        declared as u8,
        (declared >> 8) as u8,
        (declared >> 16) as u8,
        seq + 1,
    ];
    stream.write_all(&header).await.unwrap();
    let mut sent = 0;
    while sent < send {
        let n = chunk.len().min(send - sent);
        if stream.write_all(&chunk[..n]).await.is_err() {
            break;
        }
        sent += n;
    }
    stream
}

/// The proxy's answer on `stream`, if one came before the close.
async fn answer(mut stream: TcpStream) -> Option<Vec<u8>> {
    tokio::time::timeout(Duration::from_secs(3), read_packet(&mut stream))
        .await
        .expect("answered or closed at once")
        .ok()
        .map(|(_, payload)| payload)
}

#[tokio::test]
async fn a_10_mib_login_packet_is_refused_without_growing_the_process() {
    let _turn = serial().await;
    let proxy = proxy_with(
        "login-packet",
        "{handshake_timeout_ms: 5000, max_client_connections: 100, max_login_packet: 4096}",
        "",
    );
    let addr = proxy.listening.client;
    // One buffer for every client's writes, so the test's own memory does
    // not grow with them.
    let chunk: &'static [u8] = Box::leak(vec![0x41u8; 1 << 20].into_boxed_slice());
    let mut app = app(&proxy).await;
    select_one(&mut app).await;
    // Warm up (runtime, allocator arenas) before measuring.
    answer(oversized_login(addr, 10 << 20, 1 << 20, chunk).await).await;

    // Each client declares 10 MiB, sends all but the last byte and holds
    // its socket open while RSS is read.
    const CLIENTS: usize = 10;
    let before = rss_kib();
    let clients = (0..CLIENTS).map(|_| oversized_login(addr, 10 << 20, (10 << 20) - 1, chunk));
    let held = futures_join(clients).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = rss_kib();
    let growth_per_client = after.saturating_sub(before) / CLIENTS as u64;
    println!(
        "RSS {before} KiB -> {after} KiB with {CLIENTS} clients each holding a 10 MiB login packet: {growth_per_client} KiB per client"
    );
    let answers = futures_join(held.into_iter().map(answer)).await;
    println!(
        "{} of {CLIENTS} clients read the ERR before the reset",
        answers.iter().flatten().count()
    );
    for answer in answers.into_iter().flatten() {
        assert_eq!(err_code(&answer), Some(1153), "{answer:?}");
        let message = String::from_utf8_lossy(&answer[9..]).into_owned();
        assert!(
            message.contains("over the limit of 4096 bytes"),
            "{message}"
        );
    }
    assert!(
        growth_per_client < 1024,
        "RSS grew {growth_per_client} KiB per abusive client"
    );

    // A refused packet is answered 1153 when the client waits for it.
    let refused = answer(oversized_login(addr, 10 << 20, 0, chunk).await)
        .await
        .expect("an answer");
    assert_eq!(err_code(&refused), Some(1153), "{refused:?}");
    // A packet within the limit that is not a handshake response is still
    // read and answered (the limit did not cut legitimate sizes).
    let malformed = answer(oversized_login(addr, 4000, 4000, chunk).await)
        .await
        .expect("an answer");
    assert_eq!(malformed[0], 0xFF);
    assert_ne!(err_code(&malformed), Some(1153));
    assert!(select_one(&mut app).await < Duration::from_secs(2));
}

/// Awaits every future, concurrently.
async fn futures_join<F, T>(futures: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn a_statement_over_max_allowed_packet_gets_1153_and_the_connection_closes() {
    let _turn = serial().await;
    let proxy = proxy_with("max-allowed-packet", "{max_allowed_packet: 1048576}", "");
    let mut conn = app(&proxy).await;
    // Within the limit (in one frame): answered.
    let fits = format!("SELECT LENGTH('{}')", "x".repeat(1_000_000));
    let length: Option<u64> = conn
        .query_first(fits)
        .await
        .expect("a statement within the limit");
    assert_eq!(length, Some(1_000_000));
    // Over it: 1153, then the connection is gone.
    let over = format!("SELECT LENGTH('{}')", "x".repeat(2_000_000));
    let error = conn.query_drop(over).await.unwrap_err();
    let (code, message) = server_error(error);
    assert_eq!(code, 1153, "{message}");
    assert!(message.contains("max_allowed_packet"), "{message}");
    assert!(
        conn.query_drop("SELECT 1").await.is_err(),
        "the connection was closed"
    );
    // Others are not affected.
    let mut other = app(&proxy).await;
    select_one(&mut other).await;

    // At the default (16 MiB, MariaDB's) a 17 MiB statement is refused on
    // its second frame; the ERR follows the client's numbering.
    let defaults = proxy_with("max-allowed-packet-default", "{}", "");
    let mut conn = app(&defaults).await;
    let over = format!("SELECT LENGTH('{}')", "x".repeat(17 << 20));
    let (code, message) = server_error(conn.query_drop(over).await.unwrap_err());
    assert_eq!(code, 1153, "{message}");
    assert!(
        message.contains("over the limit of 16778240 bytes"),
        "{message}"
    );
    let mut other = app(&defaults).await;
    select_one(&mut other).await;
}

#[tokio::test]
async fn idle_unauthenticated_sockets_do_not_stop_logged_in_clients() {
    let _turn = serial().await;
    let proxy = proxy_with(
        "idle-sockets",
        "{handshake_timeout_ms: 3000, max_client_connections: 250, max_login_packet: 4096}",
        "",
    );
    let addr = proxy.listening.client;
    let mut app = app(&proxy).await;
    let fds_before = open_fds();
    let rss_before = rss_kib();
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let opened_at = Instant::now();
    // Greeted, so accepted and counted.
    for stream in &mut idle {
        read_packet(stream).await.unwrap();
    }
    println!(
        "open fds of the test process (proxy and clients): {fds_before} -> {} with 200 idle sockets; RSS {rss_before} KiB -> {} KiB",
        open_fds(),
        rss_kib()
    );
    let latency = select_one(&mut app).await;
    assert!(
        latency < Duration::from_secs(2),
        "SELECT 1 took {latency:?}"
    );
    let started = Instant::now();
    let mut newcomer = connect_to(addr, APP_USER, APP_PASSWORD)
        .await
        .expect("a new client logs in beside 200 idle sockets");
    assert!(started.elapsed() < Duration::from_secs(2));
    select_one(&mut newcomer).await;

    // At the deadline the proxy closes every one of them.
    for stream in &mut idle {
        let limit = Duration::from_secs(5).saturating_sub(opened_at.elapsed());
        assert!(
            closed_within(stream, limit).await.is_some(),
            "closed at the deadline"
        );
    }
    println!("open fds after the proxy closed them: {}", open_fds());
    assert!(select_one(&mut app).await < Duration::from_secs(2));
}

/// Logs in on the admin port by hand, for packets no client library sends.
async fn admin_login(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let (seq, payload) = read_packet(&mut stream).await.unwrap();
    let handshake = HandshakePacket::deserialize((), &mut ParseBuf(&payload)).unwrap();
    let scramble = scramble_native(&handshake.nonce(), b"admin").unwrap();
    let response = HandshakeResponse::new(
        Some(scramble.to_vec()),
        (8, 0, 36),
        Some(&b"admin"[..]),
        None::<&[u8]>,
        Some(AuthPlugin::MysqlNativePassword),
        CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH,
        None,
        16 * 1024 * 1024,
    );
    let mut body = Vec::new();
    response.serialize(&mut body);
    stream.write_all(&frame(seq + 1, &body)).await.unwrap();
    let (_, ok) = read_packet(&mut stream).await.unwrap();
    assert_eq!(ok[0], 0x00, "admin logged in: {ok:?}");
    stream
}

/// A packet whose first frame is full (16 MiB - 1, sequence id `first`)
/// and whose second frame carries sequence id `second`.
async fn send_continued(stream: &mut TcpStream, first: u8, second: u8, chunk: &[u8]) {
    let full = shardgate::protocol::MAX_FRAME_PAYLOAD;
    let mut bytes = vec![0xFF, 0xFF, 0xFF, first];
    let _ = stream.write_all(&bytes).await;
    let mut sent = 0;
    while sent < full {
        let n = chunk.len().min(full - sent);
        if stream.write_all(&chunk[..n]).await.is_err() {
            return;
        }
        sent += n;
    }
    bytes = frame(second, b"SHOW HOSTS");
    let _ = stream.write_all(&bytes).await;
}

/// Panics of this process, by place.
fn panics() -> &'static Mutex<Vec<String>> {
    static PANICS: std::sync::OnceLock<Mutex<Vec<String>>> = std::sync::OnceLock::new();
    PANICS.get_or_init(|| {
        // Over the proxy's own hook, which keeps panics of session tasks
        // to itself.
        shardgate::net::install_panic_hook();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let place = info
                .location()
                .map(|l| l.file().to_owned())
                .unwrap_or_default();
            panics()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(place);
            previous(info);
        }));
        Mutex::new(Vec::new())
    })
}

#[tokio::test]
async fn the_admin_port_refuses_huge_and_broken_packets_without_a_panic() {
    let _turn = serial().await;
    panics();
    // Each MiB starts with COM_QUERY, so a well-formed continued packet is
    // a (bad) query.
    let mut chunk = vec![0x20u8; 1 << 20];
    chunk[0] = 0x03;
    let proxy = proxy_with(
        "admin-bounds",
        "{handshake_timeout_ms: 500, max_client_connections: 20, max_login_packet: 4096}",
        "",
    );
    let admin_port = admin_addr(&proxy);

    // 128 MiB declared in 16 MiB frames: refused on the first header.
    let before = rss_kib();
    let mut huge = TcpStream::connect(admin_port).await.unwrap();
    read_packet(&mut huge).await.unwrap();
    let started = Instant::now();
    if huge.write_all(&[0xFF, 0xFF, 0xFF, 1]).await.is_ok() {
        for _ in 0..128 {
            if huge.write_all(&chunk).await.is_err() {
                break;
            }
        }
    }
    assert!(closed_within(&mut huge, Duration::from_secs(3))
        .await
        .is_some());
    assert!(
        started.elapsed() < Duration::from_millis(450),
        "refused, not timed out"
    );
    println!(
        "admin: RSS {before} KiB -> {} KiB after a 128 MiB login packet",
        rss_kib()
    );

    // An idle admin socket is closed at the login deadline.
    let mut idle = TcpStream::connect(admin_port).await.unwrap();
    read_packet(&mut idle).await.unwrap();
    let closed = closed_within(&mut idle, Duration::from_secs(3))
        .await
        .expect("an idle admin socket is closed");
    assert!(closed >= Duration::from_millis(400), "{closed:?}");

    // A broken continuation sequence after login (the login limit leaves
    // no room for a continued packet before).
    let mut broken = admin_login(admin_port).await;
    send_continued(&mut broken, 0, 5, &chunk).await;
    assert!(closed_within(&mut broken, Duration::from_secs(3))
        .await
        .is_some());
    // A continuation after sequence id 255 (opensrv's `seq + 1` overflows).
    let mut wrapped = admin_login(admin_port).await;
    send_continued(&mut wrapped, 255, 0, &chunk).await;
    assert!(closed_within(&mut wrapped, Duration::from_secs(3))
        .await
        .is_some());

    // A well-formed continued packet after login still goes through to
    // opensrv (answered with a parse error, not cut).
    let mut continued = admin_login(admin_port).await;
    send_continued(&mut continued, 0, 1, &chunk).await;
    let (_, answer) = tokio::time::timeout(Duration::from_secs(10), read_packet(&mut continued))
        .await
        .expect("answered")
        .expect("an answer");
    assert_eq!(answer[0], 0xFF, "an error for a 16 MiB command of spaces");

    // The admin port still answers.
    let mut admin = admin(&proxy).await;
    let hosts: Vec<mysql_async::Row> = admin.query("SHOW HOSTS").await.expect("SHOW HOSTS");
    assert!(!hosts.is_empty());
    let seen = panics().lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(seen.is_empty(), "panics: {seen:?}");
}

#[tokio::test]
async fn the_admin_port_refuses_a_broken_continuation_during_login() {
    let _turn = serial().await;
    panics();
    let chunk = vec![0x20u8; 1 << 20];
    // A login packet limit large enough for a continued login packet.
    let proxy = proxy_with(
        "admin-login-continuation",
        "{handshake_timeout_ms: 5000, max_login_packet: 33554432}",
        "",
    );
    let admin_port = admin_addr(&proxy);
    let mut broken = TcpStream::connect(admin_port).await.unwrap();
    read_packet(&mut broken).await.unwrap();
    send_continued(&mut broken, 1, 7, &chunk).await;
    let closed = closed_within(&mut broken, Duration::from_secs(4))
        .await
        .expect("refused");
    assert!(closed < Duration::from_secs(4));
    let mut admin = admin(&proxy).await;
    let hosts: Vec<mysql_async::Row> = admin.query("SHOW HOSTS").await.expect("SHOW HOSTS");
    assert!(!hosts.is_empty());
    let seen = panics().lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(seen.is_empty(), "panics: {seen:?}");
}

/// A `shardgate serve` process started under a shell `ulimit`; killed on drop.
struct ServeProcess {
    child: std::process::Child,
    client: SocketAddr,
    /// Its log up to "shardgate started", ANSI colours removed.
    log: String,
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the `shardgate` binary on `yaml` after the shell command `ulimit`.
fn serve_under(name: &str, ulimit: &str, yaml: &str) -> ServeProcess {
    use std::io::BufRead;
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo_root().join("config/schema.sql"),
        dir.join("schema.sql"),
    )
    .unwrap();
    let config = dir.join("shardgate.yaml");
    std::fs::write(&config, yaml).unwrap();
    let mut child = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("{ulimit} && exec \"$0\" serve --config \"$1\""),
            env!("CARGO_BIN_EXE_shardgate"),
            &config.display().to_string(),
        ])
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start shardgate serve");
    let stderr = child.stderr.take().unwrap();
    // Killed on drop from here on, also when it does not start.
    let mut process = ServeProcess {
        child,
        client: SocketAddr::from(([0, 0, 0, 0], 0)),
        log: String::new(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(strip_ansi(&line)).is_err() {
                break;
            }
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("shardgate did not start:\n{}", process.log));
        process.log.push_str(&line);
        process.log.push('\n');
        if line.contains("shardgate started") {
            process.client = line
                .split_whitespace()
                .find_map(|field| field.strip_prefix("client="))
                .and_then(|addr| addr.parse().ok())
                .unwrap_or_else(|| panic!("no client address in {line}"));
        }
        // The client listener's task logs its cap, maybe after the start.
        let cap_logged = process.log.contains("client connection cap")
            || process.log.contains("does not fit the open file limit");
        if cap_logged && process.client.port() != 0 {
            return process;
        }
    }
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test]
async fn the_open_file_limit_is_raised_or_lowers_the_client_cap() {
    let _turn = serial().await;
    let yaml = format!(
        "{}\nlimits: {{ handshake_timeout_ms: 2000 }}\n",
        test_config_yaml().replace("pool_max_per_host: 64", "pool_max_per_host: 2")
    );
    assert!(yaml.contains("pool_max_per_host: 2"));

    // A soft limit under the hard one is raised to it.
    let raised = serve_under("fd-raised", "ulimit -Sn 300", &yaml);
    let hard = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_owned();
    assert!(
        raised
            .log
            .contains(&format!("found=300 soft={hard} hard={hard}")),
        "{}",
        raised.log
    );
    drop(raised);

    // A hard limit of 300 with 4 hosts x (2 + 1) backend descriptors, 64
    // admin connections and 128 spare: at most 96 clients, said at start.
    let tight = serve_under("fd-tight", "ulimit -n 300", &yaml);
    assert!(
        tight.log.contains("does not fit the open file limit")
            && tight.log.contains("effective=96"),
        "{}",
        tight.log
    );
    let mut app = connect_to(tight.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    select_one(&mut app).await;
    let mut greeted = Vec::new();
    let mut refused = 0;
    for _ in 0..150 {
        let mut stream = TcpStream::connect(tight.client).await.unwrap();
        let (_, first) = read_packet(&mut stream).await.unwrap();
        match err_code(&first) {
            Some(1040) => refused += 1,
            None => greeted.push(stream),
            other => panic!("unexpected answer {other:?}"),
        }
    }
    println!(
        "ulimit -n 300: {} idle sockets greeted, {refused} answered 1040",
        greeted.len()
    );
    assert_eq!(
        greeted.len(),
        95,
        "the cap of 96 holds the logged-in client too"
    );
    // The logged-in client still reaches the backends: descriptors were
    // kept for the pools.
    for shard in [1u32, 3000] {
        let started = Instant::now();
        let _: Vec<u64> = app
            .query(format!(
                "SELECT id FROM pins WHERE id = {}",
                pin_id(shard, 1)
            ))
            .await
            .expect("a read on a shard");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
    assert!(select_one(&mut app).await < Duration::from_secs(2));
    // When the idle sockets time out, clients get in again.
    for stream in &mut greeted {
        assert!(closed_within(stream, Duration::from_secs(4))
            .await
            .is_some());
    }
    let mut later = connect_to(tight.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in after the idle sockets were closed");
    select_one(&mut later).await;
}
