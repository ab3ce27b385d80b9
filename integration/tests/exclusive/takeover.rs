//! `shardgate serve --takeover` between real `shardgate serve` processes
//! in front of the real fleet: the listeners and the client sessions move
//! to the new process with their state, no client reconnects, and a
//! takeover that fails half-way leaves every session served.

use std::time::Duration;

use mysql_async::prelude::*;

use crate::common::file_serve::FileServe;
use crate::common::*;

/// The test config on free ports, with `shutdown.drain_timeout_ms` and its
/// takeover socket in the test's own directory.
fn takeover_config(name: &str, drain_ms: u64) -> String {
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the test config directory");
    format!(
        "{}\nshutdown: {{ drain_timeout_ms: {drain_ms} }}\ntakeover: {{ socket: {} }}\n",
        test_config_yaml(),
        dir.join("takeover.sock").display()
    )
}

/// The takeover socket of a [`takeover_config`].
fn takeover_socket(yaml: &str) -> std::path::PathBuf {
    yaml.lines()
        .find_map(|line| line.strip_prefix("takeover: { socket: "))
        .and_then(|rest| rest.strip_suffix(" }"))
        .expect("the takeover socket in the test config")
        .into()
}

/// Starts `serve --takeover` on `yaml` and waits for the old process to
/// exit; its exit code and log.
fn take_over(name: &str, yaml: &str, old: &mut FileServe) -> (FileServe, Option<i32>, String) {
    let new = FileServe::start_with(name, "true", yaml, &["--takeover"]);
    let (code, log) = old.wait_exit(Duration::from_secs(20));
    (new, code, log)
}

async fn connection_id(conn: &mut mysql_async::Conn) -> u64 {
    conn.query_first("SELECT CONNECTION_ID()")
        .await
        .expect("SELECT CONNECTION_ID()")
        .expect("a row")
}

/// A client with user variables, a SET, a current database and a prepared
/// statement goes on over the same connection after a takeover: same
/// `CONNECTION_ID()`, the same variables, database, `sql_mode` and
/// prepared statement; the old process exits 0 saying it handed one
/// session; new clients are served by the new process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_state_and_connection_across_a_takeover() {
    let _fleet = serial().await;
    let yaml = takeover_config("takeover-state", 5000);
    let mut old = FileServe::start("takeover-state", "true", &yaml);
    let mut conn = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    conn.query_drop("USE db00014").await.unwrap();
    conn.query_drop("SET @who = 'takeover', @n = 41")
        .await
        .unwrap();
    conn.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES,STRICT_TRANS_TABLES'")
        .await
        .unwrap();
    let statement = conn.prep("SELECT ? + @n").await.unwrap();
    let before: Option<i64> = conn.exec_first(&statement, (1,)).await.unwrap();
    assert_eq!(before, Some(42));
    let id = connection_id(&mut conn).await;

    let (new, code, log) = take_over("takeover-state", &yaml, &mut old);
    assert_eq!(code, Some(0), "the old process exits 0:\n{log}");
    assert!(log.contains("sessions handed 1,"), "{log}");
    // The new process read the backends before it asked for the
    // listening sockets (new connections do not wait for its start-up).
    let at = |what: &str| {
        new.log
            .find(what)
            .unwrap_or_else(|| panic!("no {what:?} in the new process's log:\n{}", new.log))
    };
    assert!(
        at("server version") < at("took over the listening sockets"),
        "start-up before the listeners:\n{}",
        new.log
    );

    assert_eq!(connection_id(&mut conn).await, id, "the same session");
    let (who, database): (Option<String>, Option<String>) = conn
        .query_first("SELECT @who, DATABASE()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(who.as_deref(), Some("takeover"));
    assert_eq!(database.as_deref(), Some("db00014"));
    let mode: Option<String> = conn.query_first("SELECT @@sql_mode").await.unwrap();
    assert!(mode.unwrap_or_default().contains("ANSI_QUOTES"));
    let after: Option<i64> = conn.exec_first(&statement, (2,)).await.unwrap();
    assert_eq!(
        after,
        Some(43),
        "the prepared statement, as the client knows it"
    );
    // The new process serves new clients on the same port.
    let mut fresh = connect_to(new.client, APP_USER, APP_PASSWORD)
        .await
        .expect("a new client after the takeover");
    assert_ne!(connection_id(&mut fresh).await, id);
}

/// Rows of `db{shard}.pins` on its master whose data starts with `tag`.
async fn pins_tagged(shard: u32, tag: &str) -> u64 {
    let mut master = direct(main_master_port(shard)).await;
    master
        .query_first(format!(
            "SELECT COUNT(*) FROM db{shard:05}.pins WHERE data LIKE '{tag}%'"
        ))
        .await
        .unwrap()
        .unwrap_or(0)
}

async fn delete_tagged(shard: u32, tag: &str) {
    let mut master = direct(main_master_port(shard)).await;
    master
        .query_drop(format!(
            "DELETE FROM db{shard:05}.pins WHERE data LIKE '{tag}%'"
        ))
        .await
        .unwrap();
}

/// A session in an open transaction and one running a statement when the
/// takeover starts finish in the old process and then move: the
/// statement completes, the transaction commits (its row once on its
/// master), both keep their connection id, and the old process exits 0
/// once it handed all three sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_open_at_the_takeover_commits_then_moves() {
    let _fleet = serial().await;
    let yaml = takeover_config("takeover-transaction", 10000);
    let tag = format!("takeover-tx-{}", std::process::id());
    delete_tagged(14, &tag).await;
    let mut old = FileServe::start("takeover-transaction", "true", &yaml);
    let login = || connect_to(old.client, APP_USER, APP_PASSWORD);
    let mut in_transaction = login().await.expect("log in");
    let mut sleeper = login().await.expect("log in");
    let mut idle = login().await.expect("log in");
    let ids = (
        connection_id(&mut in_transaction).await,
        connection_id(&mut sleeper).await,
        connection_id(&mut idle).await,
    );
    in_transaction.query_drop("BEGIN").await.unwrap();
    let id = insert_pin(&mut in_transaction, 14, &tag).await;
    let sleeping = tokio::spawn(async move {
        let slept: mysql_async::Result<Option<i64>> = sleeper.query_first("SELECT SLEEP(2)").await;
        (slept, sleeper)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let new = FileServe::start_with("takeover-transaction", "true", &yaml, &["--takeover"]);
    // The idle session moved at once.
    assert_eq!(connection_id(&mut idle).await, ids.2);
    let (slept, mut sleeper) = sleeping.await.unwrap();
    assert_eq!(slept.expect("SELECT SLEEP(2) across the takeover"), Some(0));
    in_transaction
        .query_drop(format!("UPDATE pins SET data = '{tag}-2' WHERE id = {id}"))
        .await
        .expect("a statement of the open transaction during the takeover");
    in_transaction
        .query_drop("COMMIT")
        .await
        .expect("COMMIT during the takeover");
    let (code, log) = old.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("sessions handed 3, closed 0, cut 0"), "{log}");
    assert_eq!(connection_id(&mut in_transaction).await, ids.0);
    assert_eq!(connection_id(&mut sleeper).await, ids.1);
    assert_eq!(pin_on_host(id).await, Some(format!("{tag}-2")));
    assert_eq!(
        pins_tagged(14, &tag).await,
        1,
        "the row is on its master once"
    );
    // The sessions are the new process's now.
    drop(new);
    assert!(idle.query_drop("SELECT 1").await.is_err());
    delete_tagged(14, &tag).await;
}

/// What one load client saw.
#[derive(Debug, Default)]
struct LoadReport {
    statements: u64,
    errors: Vec<String>,
    inserted: Vec<u64>,
    longest: Duration,
    connection_ids: Vec<u64>,
}

/// Runs `statement`, keeping the longest time one took in `longest`.
async fn timed<T>(longest: &mut Duration, statement: impl std::future::Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let answer = statement.await;
    *longest = (*longest).max(started.elapsed());
    answer
}

/// Point reads, inserts and short transactions on one connection until
/// `stop`; every error is kept, and the longest time one statement took.
async fn load_client(
    addr: std::net::SocketAddr,
    shard: u32,
    tag: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> LoadReport {
    let mut report = LoadReport::default();
    let mut conn = connect_to(addr, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    conn.query_drop(format!("SET @client = '{tag}'"))
        .await
        .unwrap();
    let read = conn
        .prep("SELECT data FROM pins WHERE id = ?")
        .await
        .unwrap();
    let mut n = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        let data = format!("{tag}-{n}");
        let longest = &mut report.longest;
        let step: mysql_async::Result<()> = async {
            let id = if n.is_multiple_of(3) {
                timed(longest, conn.query_drop("BEGIN")).await?;
                let id = timed(longest, try_insert_pin(&mut conn, shard, &data)).await?;
                timed(longest, conn.query_drop("COMMIT")).await?;
                id
            } else {
                timed(longest, try_insert_pin(&mut conn, shard, &data)).await?
            };
            report.inserted.push(id);
            let got: Option<String> = timed(longest, conn.exec_first(&read, (id,))).await?;
            if got.as_deref() != Some(data.as_str()) {
                report.errors.push(format!("read {got:?} for {data}"));
            }
            let client: Option<String> = timed(longest, conn.query_first("SELECT @client")).await?;
            if client.as_deref() != Some(tag.as_str()) {
                report.errors.push(format!("@client is {client:?}"));
            }
            let id = timed(longest, conn.query_first("SELECT CONNECTION_ID()")).await?;
            report.connection_ids.push(id.unwrap_or(0));
            Ok(())
        }
        .await;
        report.statements += 1;
        if let Err(error) = step {
            report.errors.push(error.to_string());
        }
    }
    report
}

/// Six clients doing point reads, inserts and short transactions through
/// ten takeovers in a row see no error and keep their connection (the
/// same `CONNECTION_ID()` and user variable throughout), and every
/// acknowledged insert is on its master exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_under_load_see_no_error_through_ten_takeovers() {
    let _fleet = serial().await;
    let yaml = takeover_config("takeover-load", 10000);
    let tag = format!("takeover-load-{}", std::process::id());
    let shards = [14u32, 3000];
    for shard in shards {
        delete_tagged(shard, &tag).await;
    }
    let mut proxy = FileServe::start("takeover-load", "true", &yaml);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|i| {
            let shard = shards[i % 2];
            tokio::spawn(load_client(
                proxy.client,
                shard,
                format!("{tag}-c{i}"),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut handoffs = Vec::new();
    for round in 0..10 {
        let (new, code, log) = take_over("takeover-load", &yaml, &mut proxy);
        assert_eq!(code, Some(0), "round {round}:\n{log}");
        let line = log
            .lines()
            .find(|line| line.contains("handed over in"))
            .unwrap_or_else(|| panic!("round {round}: no summary:\n{log}"));
        assert!(line.contains("closed 0, cut 0"), "round {round}: {line}");
        handoffs.push(
            line.split("handed over in")
                .nth(1)
                .unwrap_or("")
                .trim()
                .to_owned(),
        );
        proxy = new;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut inserted = 0;
    let mut longest = Duration::ZERO;
    for (i, client) in clients.into_iter().enumerate() {
        let report = client.await.unwrap();
        assert!(report.errors.is_empty(), "client {i}: {:?}", report.errors);
        assert!(report.statements > 10, "client {i}: {report:?}");
        let first = report.connection_ids.first().copied();
        assert!(
            report.connection_ids.iter().all(|id| Some(*id) == first),
            "client {i} changed connection"
        );
        inserted += report.inserted.len() as u64;
        longest = longest.max(report.longest);
    }
    let mut on_masters = 0;
    for shard in shards {
        on_masters += pins_tagged(shard, &tag).await;
    }
    assert_eq!(on_masters, inserted, "every acknowledged insert, once");
    eprintln!(
        "ten takeovers: {inserted} inserts, longest statement {} ms; hand-offs: {handoffs:?}",
        longest.as_millis()
    );
    for shard in shards {
        delete_tagged(shard, &tag).await;
    }
}

/// Where a stand-in for the new process (the test itself, speaking the
/// takeover protocol) dies.
#[derive(Debug, Clone, Copy)]
enum DiesAfter {
    /// The old process's hello.
    Hello,
    /// Receiving the listening sockets (before saying it serves them).
    Listeners,
    /// Receiving one session with its socket (before acknowledging it).
    Session,
    /// Acknowledging one session (it is the stand-in's, which drops it).
    Ack,
}

/// Plays a new process that dies at `step`: connects to the takeover
/// socket of `yaml`, follows the exchange up to `step`, then closes the
/// channel and every socket it received (as the kernel does for a
/// SIGKILLed process).
async fn new_process_dying(yaml: &str, step: DiesAfter) {
    use shardgate::frontend::takeover::wire::Channel;
    use shardgate::frontend::takeover::{Message, FORMAT};
    let path = takeover_socket(yaml);
    let stream = tokio::net::UnixStream::connect(&path)
        .await
        .expect("connect");
    let mut channel = Channel::new(stream).expect("same user");
    let (hello, _) = channel.recv_value().await.expect("hello");
    assert_eq!(hello["format"], FORMAT);
    if let DiesAfter::Hello = step {
        return;
    }
    channel
        .send(&Message::Accept { format: FORMAT }, &[])
        .await
        .unwrap();
    let (listeners, fds) = channel.recv::<Message>().await.expect("listeners");
    assert!(
        matches!(listeners, Message::Listeners { .. }),
        "{listeners:?}"
    );
    assert_eq!(fds.len(), 3, "client, admin and metrics");
    if let DiesAfter::Listeners = step {
        return;
    }
    channel.send(&Message::Listening, &[]).await.unwrap();
    let (session, fds) = channel.recv::<Message>().await.expect("a session");
    let Message::Session(snapshot) = session else {
        panic!("expected a session, got {session:?}");
    };
    assert_eq!(fds.len(), 1);
    if let DiesAfter::Ack = step {
        let ack = Message::Ack {
            connection_id: snapshot.connection_id,
        };
        channel.send(&ack, &[]).await.unwrap();
    }
}

/// A new process that dies at any step of the hand-off (after the hello,
/// after taking the listening sockets, holding a session it has not
/// acknowledged) leaves every session served by the old process, over the
/// same connection, and the old process accepts new clients again; a
/// takeover after that completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_dying_at_any_step_leaves_every_session_served() {
    let _fleet = serial().await;
    let yaml = takeover_config("takeover-dies", 5000);
    let mut old = FileServe::start("takeover-dies", "true", &yaml);
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let mut conn = connect_to(old.client, APP_USER, APP_PASSWORD)
            .await
            .expect("log in");
        conn.query_drop("SET @kept = 'yes'").await.unwrap();
        let id = connection_id(&mut conn).await;
        sessions.push((conn, id));
    }
    for step in [DiesAfter::Hello, DiesAfter::Listeners, DiesAfter::Session] {
        new_process_dying(&yaml, step).await;
        for (conn, id) in &mut sessions {
            let (kept, now): (Option<String>, u64) = conn
                .query_first("SELECT @kept, CONNECTION_ID()")
                .await
                .unwrap_or_else(|e| panic!("{step:?}: session {id} lost: {e}"))
                .unwrap();
            assert_eq!((kept.as_deref(), now), (Some("yes"), *id), "{step:?}");
        }
        let mut fresh = connect_to(old.client, APP_USER, APP_PASSWORD)
            .await
            .unwrap_or_else(|e| panic!("{step:?}: a new client refused: {e}"));
        let one: Option<i64> = fresh.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
    }
    let (_new, code, log) = take_over("takeover-dies", &yaml, &mut old);
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(log.matches("takeover failed").count(), 3, "{log}");
    for (conn, id) in &mut sessions {
        assert_eq!(connection_id(conn).await, *id);
    }
}

/// A session the new process acknowledged leaves the old process's count
/// of client connections: with `limits.max_client_connections` full (one
/// session in a transaction, one idle), a stand-in new process takes the
/// idle one and dies; the old process accepts again and admits a new
/// client in the place freed, and the session in its transaction goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_handed_over_frees_its_place_in_the_old_process() {
    let _fleet = serial().await;
    let yaml = format!(
        "{}limits: {{ max_client_connections: 2 }}\n",
        takeover_config("takeover-old-cap", 10000)
    );
    let tag = format!("takeover-old-cap-{}", std::process::id());
    let old = FileServe::start("takeover-old-cap", "true", &yaml);
    let mut in_transaction = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    let id = connection_id(&mut in_transaction).await;
    in_transaction.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut in_transaction, 14, &tag).await;
    let idle = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    let refused = connect_to(old.client, APP_USER, APP_PASSWORD).await;
    assert_eq!(server_error(refused.expect_err("cap full")).0, 1040);

    new_process_dying(&yaml, DiesAfter::Ack).await;
    drop(idle);
    let mut admitted = None;
    for _ in 0..50 {
        if let Ok(conn) = connect_to(old.client, APP_USER, APP_PASSWORD).await {
            admitted = Some(conn);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut fresh = admitted.expect("the place of the session handed over");
    assert_eq!(
        fresh.query_first::<i64, _>("SELECT 1").await.unwrap(),
        Some(1)
    );
    in_transaction.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(connection_id(&mut in_transaction).await, id);
    assert_eq!(pins_tagged(14, &tag).await, 0, "rolled back");
}

/// A real new process killed with SIGKILL after it took the listening
/// sockets and serves them, while the old process's sessions (each in an
/// open transaction) have not moved yet: the old process accepts new
/// clients again and every session goes on there over the same
/// connection, its transaction committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_killed_after_taking_the_listeners_leaves_the_old_one_serving() {
    let _fleet = serial().await;
    let yaml = takeover_config("takeover-sigkill", 10000);
    let tag = format!("takeover-kill-{}", std::process::id());
    delete_tagged(14, &tag).await;
    let mut old = FileServe::start("takeover-sigkill", "true", &yaml);
    let mut sessions = Vec::new();
    for _ in 0..5 {
        let mut conn = connect_to(old.client, APP_USER, APP_PASSWORD)
            .await
            .expect("log in");
        let id = connection_id(&mut conn).await;
        conn.query_drop("BEGIN").await.unwrap();
        sessions.push((conn, id));
    }
    let new = FileServe::start_with("takeover-sigkill", "true", &yaml, &["--takeover"]);
    new.signal("KILL");
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (conn, id) in &mut sessions {
        insert_pin(conn, 14, &tag).await;
        conn.query_drop("COMMIT").await.unwrap();
        assert_eq!(connection_id(conn).await, *id);
    }
    assert_eq!(pins_tagged(14, &tag).await, 5);
    let mut fresh = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("the old process accepts again");
    assert_eq!(
        fresh.query_first::<i64, _>("SELECT 1").await.unwrap(),
        Some(1)
    );
    let (code, log) = old.wait_exit(Duration::from_millis(100));
    assert_eq!(code, None, "the old process still runs:\n{log}");
    assert!(log.contains("takeover failed"), "{log}");
    delete_tagged(14, &tag).await;
}

/// A new process that cannot read the running one's hand-off format
/// refuses (it says so and exits 1); a running proxy whose peer refuses
/// goes on serving its sessions and new clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_format_is_refused_and_the_old_process_keeps_serving() {
    use shardgate::frontend::takeover::wire::Channel;
    use shardgate::frontend::takeover::Message;
    let _fleet = serial().await;
    // A new process before an old one of a format it does not know.
    let yaml = takeover_config("takeover-format", 5000);
    let path = repo_root()
        .join("target/test-configs")
        .join(format!("takeover-format-{}", std::process::id()))
        .join("takeover.sock");
    let _ = std::fs::remove_file(&path);
    let future_old = tokio::net::UnixListener::bind(&path).unwrap();
    let mut new = FileServe::spawn_with("takeover-format", "true", &yaml, &["--takeover"]);
    let (stream, _) = tokio::time::timeout(Duration::from_secs(20), future_old.accept())
        .await
        .expect("the new process connects")
        .unwrap();
    let mut channel = Channel::new(stream).unwrap();
    channel
        .send(
            &serde_json::json!({"type": "hello", "format": 99, "proxy_id": "future"}),
            &[],
        )
        .await
        .unwrap();
    let (answer, _) = channel.recv_value().await.expect("an answer");
    assert_eq!(answer["type"], "refuse", "{answer}");
    let status = new.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut new.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("hands over in format 99;"), "{stderr}");
    drop(future_old);
    let _ = std::fs::remove_file(&path);

    // A running proxy whose would-be successor refuses its format.
    let old = FileServe::start("takeover-format", "true", &yaml);
    let mut conn = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    let id = connection_id(&mut conn).await;
    let stream = tokio::net::UnixStream::connect(&path).await.unwrap();
    let mut channel = Channel::new(stream).unwrap();
    let (hello, _) = channel.recv_value().await.unwrap();
    assert_eq!(hello["type"], "hello");
    channel
        .send(
            &Message::Refuse {
                reason: "test".into(),
            },
            &[],
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(connection_id(&mut conn).await, id);
    let mut fresh = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("still accepting");
    assert_eq!(
        fresh.query_first::<i64, _>("SELECT 1").await.unwrap(),
        Some(1)
    );
}

/// Waits up to 10 s for the running proxy to bind its takeover socket.
async fn wait_for_socket(path: &std::path::Path) -> std::fs::Metadata {
    for _ in 0..500 {
        if let Ok(metadata) = std::fs::symlink_metadata(path) {
            return metadata;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no takeover socket at {}", path.display());
}

/// Whether user and group `id` can execute `path` (every directory above
/// it searchable).
fn executable_by(id: u32, path: &std::path::Path) -> bool {
    use std::os::unix::process::CommandExt;
    std::process::Command::new("sh")
        .args(["-c", "test -x \"$0\""])
        .arg(path)
        .uid(id)
        .gid(id)
        .status()
        .is_ok_and(|status| status.success())
}

/// Runs `serve --takeover` on `yaml` as user and group `id` from `dir` (a
/// directory of its own under the system's temp directory, with the config
/// and, when the build's binary is out of that user's reach, a copy of it)
/// and waits up to 60 s for it to exit; its exit code and log.
fn take_over_as(dir: &std::path::Path, yaml: &str, id: u32) -> (Option<i32>, String) {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let readable = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    std::fs::create_dir_all(dir).unwrap();
    readable(dir, 0o755);
    let config = dir.join("shardgate.yaml");
    std::fs::write(&config, yaml).unwrap();
    readable(&config, 0o644);
    let schema = dir.join("schema.sql");
    std::fs::copy(repo_root().join("config/schema.sql"), &schema).unwrap();
    readable(&schema, 0o644);
    let mut binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_shardgate"));
    if !executable_by(id, &binary) {
        let copy = dir.join("shardgate");
        if !copy.exists() {
            std::fs::copy(&binary, &copy).unwrap();
        }
        readable(&copy, 0o755);
        binary = copy;
    }
    let mut child = std::process::Command::new(binary)
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .arg("--takeover")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .uid(id)
        .gid(id)
        .spawn()
        .expect("start serve --takeover as another user");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut log = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut stderr, &mut log);
    }
    (status.and_then(|status| status.code()), log)
}

/// `conn` (session `id`, `@kept` set) is still served, and the proxy at
/// `addr` accepts a new client.
async fn still_served(
    conn: &mut mysql_async::Conn,
    id: u64,
    addr: std::net::SocketAddr,
    step: &str,
) {
    let (kept, now): (Option<String>, u64) = conn
        .query_first("SELECT @kept, CONNECTION_ID()")
        .await
        .unwrap_or_else(|e| panic!("{step}: session lost: {e}"))
        .unwrap();
    assert_eq!((kept.as_deref(), now), (Some("yes"), id), "{step}");
    let mut fresh = connect_to(addr, APP_USER, APP_PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("{step}: a new client refused: {e}"));
    assert_eq!(
        fresh.query_first::<i64, _>("SELECT 1").await.unwrap(),
        Some(1)
    );
}

/// The user `nobody` runs as.
const NOBODY: u32 = 65534;

/// The takeover socket is the running user's, mode 0600. Run as root (as
/// CI runs), `serve --takeover` as `nobody` cannot even connect to it; with
/// the socket opened to everyone (chmod 0666, as a mistake would) it
/// connects, and both processes refuse the other's user (SO_PEERCRED):
/// the new one exits 1, the old one logs the refusal and keeps its
/// session and its listener; a takeover by its own user then completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_by_another_user_is_refused_and_the_old_process_keeps_serving() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let _fleet = serial().await;
    // Everything the other user needs (the socket's directory, the config,
    // the binary) within its reach, wherever the checkout is.
    let dir = std::env::temp_dir().join(format!("shardgate-takeover-uid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let yaml = format!(
        "{}\nshutdown: {{ drain_timeout_ms: 5000 }}\ntakeover: {{ socket: {} }}\n",
        test_config_yaml(),
        dir.join("takeover.sock").display()
    );
    let mut old = FileServe::start("takeover-uid", "true", &yaml);
    let path = takeover_socket(&yaml);
    let metadata = wait_for_socket(&path).await;
    // SAFETY: getuid cannot fail and touches no memory.
    let own = unsafe { libc::getuid() };
    assert_eq!(
        metadata.mode() & 0o777,
        0o600,
        "the takeover socket is owner-only"
    );
    assert_eq!(
        metadata.uid(),
        own,
        "the takeover socket is the proxy's user's"
    );
    if own != 0 {
        eprintln!(
            "SKIPPED the other-user part: the test runs as uid {own}, not root, so it cannot \
             start a process as another user (the socket's mode and owner were checked)"
        );
        return;
    }
    let mut conn = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    conn.query_drop("SET @kept = 'yes'").await.unwrap();
    let id = connection_id(&mut conn).await;

    // The socket's mode keeps another user out.
    let (code, log) = take_over_as(&dir.join("other-user"), &yaml, NOBODY);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("cannot reach the running proxy") && log.contains("Permission denied"),
        "{log}"
    );
    still_served(&mut conn, id, old.client, "mode 0600").await;

    // Opened to everyone, the peer check still refuses on both ends.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, log) = take_over_as(&dir.join("other-user"), &yaml, NOBODY);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains(&format!(
            "the takeover peer runs as uid {own}, not {NOBODY}: refused"
        )),
        "{log}"
    );
    let mut old_log = String::new();
    for _ in 0..40 {
        let (running, more) = old.wait_exit(Duration::from_millis(250));
        old_log.push_str(&more);
        assert_eq!(running, None, "the old process still runs:\n{old_log}");
        if old_log.contains("takeover refused") {
            break;
        }
    }
    assert!(
        old_log.contains("takeover refused")
            && old_log.contains(&format!(
                "the takeover peer runs as uid {NOBODY}, not {own}"
            )),
        "{old_log}"
    );
    assert!(!old_log.contains("handing over"), "{old_log}");
    still_served(&mut conn, id, old.client, "mode 0666").await;

    let (_new, code, log) = take_over("takeover-uid", &yaml, &mut old);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("closed 0, cut 0"), "{log}");
    assert_eq!(connection_id(&mut conn).await, id);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TLS client session (the stock `mariadb` CLI, certificate verified)
/// open in a transaction during a takeover finishes its transaction (its
/// row commits, once), then is closed with 1053 at the boundary: its next
/// statement reads a whole error packet, not a cut connection. A plain
/// session of the same run moves with its state; the old process exits
/// once the TLS session closed, long before `shutdown.drain_timeout_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_session_is_drained_at_a_boundary_while_a_plain_one_moves() {
    use std::io::{BufRead, Write};
    let _fleet = serial().await;
    let certificates = repo_root()
        .join("target/test-configs")
        .join(format!("takeover-tls-certificates-{}", std::process::id()));
    std::fs::create_dir_all(&certificates).unwrap();
    crate::common::tls_certificates::write_certificates(&certificates);
    let yaml = format!(
        "{}tls:\n  cert: {}\n  key: {}\n  require: false\n",
        takeover_config("takeover-tls", 60000),
        certificates.join("server.pem").display(),
        certificates.join("server.key").display(),
    );
    let tag = format!("takeover-tls-{}", std::process::id());
    delete_tagged(14, &tag).await;
    let mut old = FileServe::start("takeover-tls", "true", &yaml);
    let mut plain = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    plain.query_drop("SET @plain = 'kept'").await.unwrap();
    let plain_id = connection_id(&mut plain).await;

    let mut cli = std::process::Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &old.client.port().to_string(),
            "-u",
            APP_USER,
            &format!("-p{APP_PASSWORD}"),
            "--comments",
            "--batch",
            "--skip-column-names",
            "--unbuffered",
            "--skip-reconnect",
            "--ssl",
            &format!("--ssl-ca={}", certificates.join("ca.pem").display()),
            "--ssl-verify-server-cert",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the mariadb CLI");
    let mut input = cli.stdin.take().unwrap();
    let (lines, output) = std::sync::mpsc::channel();
    let stdout = cli.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let next_line = || {
        output
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from the mariadb CLI")
    };
    writeln!(
        input,
        "status;\nBEGIN;\nINSERT /*+ SHARD(14) */ INTO pins (data) VALUES ('{tag}');\n\
         SELECT CONCAT('inserted ', LAST_INSERT_ID());"
    )
    .unwrap();
    let mut status = String::new();
    let id: u64 = loop {
        let line = next_line();
        if let Some(id) = line.strip_prefix("inserted ") {
            break id.parse().expect("the inserted id");
        }
        status.push_str(&line);
        status.push('\n');
    };
    assert!(status.contains("Cipher in use is"), "over TLS: {status}");

    let new = FileServe::start_with("takeover-tls", "true", &yaml, &["--takeover"]);
    // The plain session moves at once; the TLS one waits in its transaction.
    let (plain_var, now): (Option<String>, u64) = plain
        .query_first("SELECT @plain, CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((plain_var.as_deref(), now), (Some("kept"), plain_id));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (running, _) = old.wait_exit(Duration::ZERO);
    assert_eq!(running, None, "the old process waits for the TLS session");
    writeln!(
        input,
        "UPDATE pins SET data = '{tag}-2' WHERE id = {id};\nCOMMIT;\nSELECT 'after the commit';"
    )
    .unwrap();
    drop(input);
    let started = std::time::Instant::now();
    let cli = cli.wait_with_output().expect("the CLI ends");
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(!cli.status.success(), "the CLI saw an error");
    assert!(
        stderr.contains("ERROR 1053") && stderr.contains("Server shutdown in progress"),
        "the statement after COMMIT reads 1053 whole: {stderr}"
    );
    assert!(
        output
            .try_iter()
            .all(|line| !line.contains("after the commit")),
        "the statement after COMMIT did not run"
    );
    assert_eq!(pin_on_host(id).await, Some(format!("{tag}-2")), "committed");
    assert_eq!(
        pins_tagged(14, &tag).await,
        1,
        "the row is on its master once"
    );
    let (code, log) = old.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{log}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "drained at the boundary, not at drain_timeout_ms"
    );
    assert!(log.contains("sessions handed 1, closed 1, cut 0"), "{log}");
    // The plain session is the new process's now.
    let (plain_var, now): (Option<String>, u64) = plain
        .query_first("SELECT @plain, CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((plain_var.as_deref(), now), (Some("kept"), plain_id));
    drop(new);
    assert!(plain.query_drop("SELECT 1").await.is_err());
    delete_tagged(14, &tag).await;
}

/// Sessions a takeover moved count against the new process's
/// `limits.max_client_connections`: with the cap full of moved sessions a
/// new client is answered 1040 while the moved ones keep working, and
/// once one of them quits a new client gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_sessions_count_against_the_client_cap() {
    let _fleet = serial().await;
    let yaml = format!(
        "{}limits: {{ max_client_connections: 3 }}\n",
        takeover_config("takeover-cap", 5000)
    );
    let mut old = FileServe::start("takeover-cap", "true", &yaml);
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let mut conn = connect_to(old.client, APP_USER, APP_PASSWORD)
            .await
            .expect("log in");
        let id = connection_id(&mut conn).await;
        sessions.push((conn, id));
    }
    let refused = connect_to(old.client, APP_USER, APP_PASSWORD).await;
    assert_eq!(server_error(refused.expect_err("cap full")).0, 1040);

    let (new, code, log) = take_over("takeover-cap", &yaml, &mut old);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("sessions handed 3,"), "{log}");
    let refused = connect_to(new.client, APP_USER, APP_PASSWORD).await;
    let error = refused.expect_err("the cap is full of moved sessions");
    assert_eq!(server_error(error).0, 1040);
    for (conn, id) in &mut sessions {
        assert_eq!(connection_id(conn).await, *id, "a moved session works");
    }
    let (conn, _) = sessions.pop().unwrap();
    conn.disconnect().await.unwrap();
    let mut admitted = None;
    for _ in 0..50 {
        if let Ok(conn) = connect_to(new.client, APP_USER, APP_PASSWORD).await {
            admitted = Some(conn);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut fresh = admitted.expect("a place freed by a moved session that quit");
    assert_eq!(
        fresh.query_first::<i64, _>("SELECT 1").await.unwrap(),
        Some(1)
    );
}

/// `SHOW WARNINGS` right after a move lists the previous statement's
/// warnings as the server gave them (`SHOW COUNT(*) WARNINGS` and
/// `@@warning_count` count them); the next statement clears them as a
/// server does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_warnings_right_after_a_move_lists_the_previous_statements_warnings() {
    let _fleet = serial().await;
    let yaml = takeover_config("takeover-warnings", 5000);
    let mut old = FileServe::start("takeover-warnings", "true", &yaml);
    let mut conn = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    let id = connection_id(&mut conn).await;
    let cast: Option<i64> = conn
        .query_first("SELECT CAST('x1' AS SIGNED) + CAST('2y' AS SIGNED)")
        .await
        .unwrap();
    assert_eq!(cast, Some(2));
    let before: Vec<(String, u32, String)> = conn.query("SHOW WARNINGS").await.unwrap();
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(
        before.iter().all(|(_, code, _)| *code == 1292),
        "{before:?}"
    );

    let (_new, code, log) = take_over("takeover-warnings", &yaml, &mut old);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("sessions handed 1,"), "{log}");
    let after: Vec<(String, u32, String)> = conn.query("SHOW WARNINGS").await.unwrap();
    assert_eq!(after, before, "the warnings moved with the session");
    let count: Option<u64> = conn.query_first("SHOW COUNT(*) WARNINGS").await.unwrap();
    assert_eq!(count, Some(2));
    let count: Option<u64> = conn.query_first("SELECT @@warning_count").await.unwrap();
    assert_eq!(count, Some(2));
    assert_eq!(connection_id(&mut conn).await, id);
    let none: Vec<(String, u32, String)> = conn.query("SHOW WARNINGS").await.unwrap();
    assert!(none.is_empty(), "{none:?}");
}
