//! Bounds of the client port before login: the handshake deadline (plain and
//! TLS), the connection cap, oversized login packets, a statement over
//! `max_allowed_packet`, and idle unauthenticated sockets.

use super::*;

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
    // A well-behaved driver reads the limit and stays under it...
    let mut polite = app(&proxy).await;
    let told: Option<u64> = polite
        .query_first("SELECT @@max_allowed_packet")
        .await
        .expect("@@max_allowed_packet");
    assert_eq!(told, Some(1_048_576), "the proxy's limit, not the servers'");
    // ...so the oversized statements below come from a client that ignores
    // it (its own limit set far above).
    let mut conn = app_ignoring_packet_limit(&proxy).await;
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
    // Far over it: the client is still writing when the proxy refuses on
    // the header; it must still read the 1153, not a reset ("broken pipe").
    for _ in 0..3 {
        let mut conn = app_ignoring_packet_limit(&proxy).await;
        let far_over = format!("SELECT LENGTH('{}')", "x".repeat(12 << 20));
        let (code, message) = server_error(conn.query_drop(far_over).await.unwrap_err());
        assert_eq!(code, 1153, "{message}");
    }
    // Others are not affected.
    let mut other = app(&proxy).await;
    select_one(&mut other).await;

    // At the default (16 MiB, MariaDB's) a 17 MiB statement is refused on
    // its second frame; the ERR follows the client's numbering.
    let defaults = proxy_with("max-allowed-packet-default", "{}", "");
    let mut conn = app_ignoring_packet_limit(&defaults).await;
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

/// The app account, with the client's own packet limit at 64 MiB whatever
/// `@@max_allowed_packet` says, as a hostile or careless client would.
async fn app_ignoring_packet_limit(proxy: &RunningProxy) -> mysql_async::Conn {
    let addr = proxy.listening.client;
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(addr.port())
        .user(Some(APP_USER))
        .pass(Some(APP_PASSWORD))
        .prefer_socket(false)
        .max_allowed_packet(Some(64 << 20));
    mysql_async::Conn::new(opts).await.expect("client login")
}
