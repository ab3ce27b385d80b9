//! Bounds of the admin port in front of opensrv-mysql: huge and broken login
//! packets refused without a panic.

use super::*;

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

/// Sockets that connect to the admin port and never log in (70 from the
/// operator's own address, 4 from each of 16 other loopback addresses) do
/// not lock operators out: a login still succeeds at once (it takes the
/// place of the oldest idle socket of its address), a session logged in
/// before goes on, and an idle socket is closed at the admin login
/// deadline (2 s) although `handshake_timeout_ms` is 10 s.
#[tokio::test]
async fn idle_unauthenticated_sockets_do_not_lock_operators_out_of_the_admin_port() {
    let _turn = serial().await;
    let proxy = proxy_with("admin-flood", "{handshake_timeout_ms: 10000}", "");
    let port = admin_addr(&proxy);
    let mut before = admin(&proxy).await;
    let mut idle = Vec::new();
    for _ in 0..70 {
        idle.push(TcpStream::connect(port).await.expect("connect"));
    }
    for host in 2..18u8 {
        for _ in 0..4 {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket
                .bind(SocketAddr::from(([127, 0, 0, host], 0)))
                .expect("bind a loopback address");
            idle.push(socket.connect(port).await.expect("connect"));
        }
    }
    let started = Instant::now();
    let mut operator = connect_to(port, "admin", "admin")
        .await
        .expect("an operator logs in beside 134 idle sockets");
    let hosts: Vec<mysql_async::Row> = operator.query("SHOW HOSTS").await.expect("SHOW HOSTS");
    let took = started.elapsed();
    eprintln!("admin login and SHOW HOSTS beside idle sockets: {took:?}");
    assert!(!hosts.is_empty());
    assert!(took < Duration::from_secs(1), "{took:?}");
    let _: Vec<mysql_async::Row> = before
        .query("SHOW HOSTS")
        .await
        .expect("a session logged in before the flood");
    let mut late = TcpStream::connect(port).await.expect("connect");
    read_packet(&mut late).await.expect("the greeting");
    let closed = closed_within(&mut late, Duration::from_secs(4)).await;
    eprintln!("an idle admin socket was closed after {closed:?}");
    assert!(
        closed.is_some_and(|after| after > Duration::from_millis(1500)),
        "{closed:?}"
    );
    drop(idle);
}
