//! Broken backend connections through a TCP forwarder: a statement whose
//! answer is lost is not sent again; a connection closed while idle is replaced.

use super::*;

/// A TCP forwarder in front of a backend port, to break the proxy's
/// backend connections the way a network or a restarted server does.
struct Forwarder {
    addr: SocketAddr,
    state: Arc<ForwarderState>,
}

struct ForwarderState {
    port: u16,
    /// The first statement containing these bytes reaches the server, but
    /// its answer is lost with the connection.
    lose_answer_to: std::sync::Mutex<Option<Vec<u8>>>,
    /// The connections being forwarded.
    connections: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl Forwarder {
    async fn start(port: u16) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(ForwarderState {
            port,
            lose_answer_to: std::sync::Mutex::new(None),
            connections: std::sync::Mutex::new(Vec::new()),
        });
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let connection = tokio::spawn(forward(client, accepting.clone()));
                accepting.connections.lock().unwrap().push(connection);
            }
        });
        Forwarder { addr, state }
    }

    /// Loses the answer to the next statement containing `marker`.
    fn lose_answer_to(&self, marker: &str) {
        *self.state.lose_answer_to.lock().unwrap() = Some(marker.as_bytes().to_vec());
    }

    /// Closes every connection it forwards (both sides) and returns once
    /// they are closed.
    async fn close_all(&self) {
        let connections = std::mem::take(&mut *self.state.connections.lock().unwrap());
        for connection in connections {
            connection.abort();
            let _ = connection.await;
        }
    }
}

impl ForwarderState {
    /// Whether `sent` carries the statement whose answer is to be lost
    /// (once).
    fn take_lost(&self, sent: &[u8]) -> bool {
        let mut lose = self.lose_answer_to.lock().unwrap();
        let hit = lose
            .as_deref()
            .is_some_and(|marker| sent.windows(marker.len()).any(|w| w == marker));
        if hit {
            *lose = None;
        }
        hit
    }
}

/// Forwards one connection both ways until either side closes, or until
/// the server answers a statement whose answer is to be lost.
async fn forward(client: TcpStream, state: Arc<ForwarderState>) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", state.port)).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let doomed = AtomicBool::new(false);
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if state.take_lost(&buf[..n]) {
                doomed.store(true, Ordering::SeqCst);
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if doomed.load(Ordering::SeqCst) {
                return;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// A proxy whose master B (shards 2048-4095 of main) is reached through
/// `forwarder`.
fn proxy_through(name: &str, forwarder: &Forwarder) -> RunningProxy {
    let yaml = common::test_config_yaml();
    let through = yaml.replace(
        "      - { range: [2048, 4095], master: 127.0.0.1:3308 }\n",
        &format!(
            "      - {{ range: [2048, 4095], master: {} }}\n",
            forwarder.addr
        ),
    );
    assert_ne!(
        through, yaml,
        "the host lines of config/shardgate.yaml changed"
    );
    common::start_server(name, &through)
}

/// Deletes the rows of `db03000.pins` on 3308 marked `mark`; those left.
async fn take_rows_on_b(mark: &str) -> BTreeMap<u64, String> {
    let rows = rows_on(MASTER_B, 3000, mark).await;
    delete_pins(MASTER_B, &[3000], mark).await;
    rows
}

/// An autocommit INSERT the server ran, whose answer was then lost with the
/// connection, is not sent again on another connection (it would be
/// written twice): the client gets the lost connection, told the statement
/// may have run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_whose_answer_is_lost_is_not_sent_again() {
    let _serial = serial().await;
    let forwarder = Forwarder::start(MASTER_B).await;
    let proxy = proxy_through("cutover-lost", &forwarder);
    let mark = marker("cutover-lost");
    let mut conn = app(&proxy).await;
    // Leaves a pooled connection to B, which the next statement reuses.
    insert_pin(&mut conn, 3000, &format!("{mark}-warm")).await;
    let lost = format!("{mark}-lost");
    forwarder.lose_answer_to(&lost);
    let result = try_insert_pin(&mut conn, 3000, &lost).await;
    let after = try_insert_pin(&mut conn, 3000, &format!("{mark}-after")).await;
    let rows = take_rows_on_b(&lost).await;
    take_rows_on_b(&mark).await;

    let (code, message) = common::server_error(result.expect_err("the answer was lost"));
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("127.0.0.1:") && message.contains("may have run"),
        "{message}"
    );
    assert_eq!(rows.len(), 1, "the INSERT ran exactly once: {rows:?}");
    after.expect("the session goes on");
}

/// A pooled connection that the server closed while it sat idle is replaced
/// before the statement is sent: the statement succeeds, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_closed_while_idle_is_replaced() {
    let _serial = serial().await;
    let forwarder = Forwarder::start(MASTER_B).await;
    let proxy = proxy_through("cutover-stale", &forwarder);
    let mark = marker("cutover-stale");
    let mut conn = app(&proxy).await;
    insert_pin(&mut conn, 3000, &format!("{mark}-warm")).await;
    forwarder.close_all().await;
    // A round trip through the proxy (on host A): by its end the proxy has
    // seen B's connection close.
    insert_pin(&mut conn, 10, &format!("{mark}-a")).await;
    let after = format!("{mark}-after");
    let result = try_insert_pin(&mut conn, 3000, &after).await;
    let rows = take_rows_on_b(&after).await;
    take_rows_on_b(&mark).await;
    delete_pins(MASTER_A, &[10], &mark).await;

    result.expect("a stale pooled connection is replaced before anything is sent on it");
    assert_eq!(rows.len(), 1, "{rows:?}");
}
