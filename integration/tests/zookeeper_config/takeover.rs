//! `serve --takeover` of a ZooKeeper-sourced proxy: the new process
//! registers before the old one leaves, so `SHOW PROXIES` never misses the
//! proxy, and the client session moves over its connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::serve::{admin_on, app_on, ServeProcess};
use super::*;

/// The ids `SHOW PROXIES` on the admin port at `addr` lists.
async fn listed(addr: std::net::SocketAddr) -> Vec<String> {
    admin_on(addr, "SHOW PROXIES")
        .await
        .expect("SHOW PROXIES")
        .iter()
        .filter_map(|row| row.get::<String, _>("id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_proxies_never_misses_a_proxy_being_taken_over() {
    let test = "takeover-registry";
    clean(test).await;
    let location = location(test);
    let socket = repo_root()
        .join("target/test-configs")
        .join(format!("zk-takeover-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let document = format!(
        "{}\ntakeover: {{ socket: {} }}\n",
        document(),
        socket.display()
    );
    push(&location, &document, None).await;
    let observer = start(&location, "takeover-observer");
    let mut old = ServeProcess::start(&location, "takeover-old").await;
    let mut app = app_on(&old).await;
    let id: Option<u64> = app.query_first("SELECT CONNECTION_ID()").await.unwrap();
    app.query_drop("SET @zk = 'kept'").await.unwrap();

    // SHOW PROXIES on another proxy of the document, all along.
    let stop = Arc::new(AtomicBool::new(false));
    let polled = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watching = {
        let (stop, polled, addr) = (stop.clone(), polled.clone(), admin_addr(&observer));
        tokio::spawn(async move {
            let (mut polls, mut misses) = (0, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let ids = listed(addr).await;
                polls += 1;
                polled.store(polls, Ordering::Relaxed);
                if !ids
                    .iter()
                    .any(|id| id == "takeover-old" || id == "takeover-new")
                {
                    misses.push(ids);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (polls, misses)
        })
    };
    while polled.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let config = location.to_string();
    let new = ServeProcess::start_with(
        &location,
        "takeover-new",
        &[
            "--config",
            &config,
            "--proxy-id",
            "takeover-new",
            "--takeover",
        ],
    )
    .await;
    let status = old.exited().await;
    assert!(status.success(), "{status}: {}", old.log_text());
    assert!(
        old.log_text().contains("sessions handed 1,"),
        "{}",
        old.log_text()
    );
    // The old entry goes once its ZooKeeper session closed.
    let mut now = listed(admin_addr(&observer)).await;
    for _ in 0..100 {
        if !now.iter().any(|id| id == "takeover-old") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        now = listed(admin_addr(&observer)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let (polls, misses) = watching.await.unwrap();
    assert!(polls >= 2, "{polls} polls: before and after at least");
    assert!(
        misses.is_empty(),
        "SHOW PROXIES missed the proxy: {misses:?}"
    );
    assert!(now.contains(&"takeover-new".to_owned()), "{now:?}");
    assert!(!now.contains(&"takeover-old".to_owned()), "{now:?}");
    let (same, kept): (Option<u64>, Option<String>) = app
        .query_first("SELECT CONNECTION_ID(), @zk")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((same, kept.as_deref()), (id, Some("kept")));
    drop(new);
    clean(test).await;
}

/// One look at pause record `pause`: the registered proxies and its acks
/// (`None`: the record is gone).
async fn acks_now(
    client: &zk::Client,
    location: &ZkLocation,
    pause: &str,
) -> (Vec<String>, Option<Vec<String>>) {
    let live = client
        .list_children(&location.registry_path())
        .await
        .unwrap_or_default();
    let acks = client
        .list_children(&format!("{}/pauses/{pause}/acks", location.path))
        .await
        .ok();
    (live, acks)
}

/// One look at a pause record: the registered proxies, its acks.
type Look = (Vec<String>, Vec<String>);

/// Polls the acks of `pause` every 3 ms until `stop` or the record is
/// gone: how many looks, and those in which neither process of the proxy
/// (`ids`) had acked it.
fn watch_acks(
    location: &ZkLocation,
    pause: String,
    ids: [&'static str; 2],
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<Look>)> {
    let location = location.clone();
    tokio::spawn(async move {
        let client = zookeeper::connect(&location).await.expect("connect");
        let (mut looks, mut misses) = (0, Vec::new());
        while !stop.load(Ordering::Relaxed) {
            let (live, acks) = acks_now(&client, &location, &pause).await;
            // Gone: resumed.
            let Some(acks) = acks else {
                break;
            };
            looks += 1;
            if !acks.iter().any(|a| ids.contains(&a.as_str())) {
                misses.push((live, acks));
            }
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        (looks, misses)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_stay_applied_and_acked_through_a_takeover() {
    use super::pause::{count_on, document_with_pause, marker, PROMPT};
    use super::pause_process::insert_later;

    let test = "takeover-pause";
    clean(test).await;
    let location = location(test);
    let socket = repo_root()
        .join("target/test-configs")
        .join(format!("zk-takeover-pause-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let document = format!(
        "{}\ntakeover: {{ socket: {} }}\n",
        document_with_pause(15_000, 3000),
        socket.display()
    );
    push(&location, &document, None).await;
    let (old_id, new_id) = ("tkp-old", "tkp-new");
    let mut old = ServeProcess::start(&location, old_id).await;
    let answer = admin_on(old.admin, "PAUSE SHARDS 1770-1771 IN main")
        .await
        .expect("PAUSE SHARDS");
    let first = text(&answer[0], "pause").expect("a pause id");
    let mark = marker("takeover");
    // Waits on the old process's gate, and keeps it running (a statement
    // in progress moves only once it ended) until the first RESUME.
    let held_old = insert_later(&old, 1770, format!("{mark}-old"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !held_old.is_finished(),
        "the old process wrote to a paused shard"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let watching_first = watch_acks(&location, first.clone(), [old_id, new_id], stop.clone());
    let config = location.to_string();
    let mut new = ServeProcess::start_with(
        &location,
        new_id,
        &["--config", &config, "--proxy-id", new_id, "--takeover"],
    )
    .await;
    // The hand-off is under way (the old process holds the waiting
    // session): a write through the new process waits too.
    assert!(old.running(), "{}", old.log_text());
    let held_new = insert_later(&new, 1771, format!("{mark}-new"));
    // A pause taken now is applied by both processes and acked by both.
    let answer = admin_on(new.admin, "PAUSE SHARDS 1774-1775 IN main")
        .await
        .expect("PAUSE SHARDS during the hand-off");
    let second = text(&answer[0], "pause").expect("a pause id");
    assert_eq!(
        text(&answer[0], "proxies").as_deref(),
        Some("tkp-new, tkp-old"),
        "{answer:?}"
    );
    assert!(old.running(), "{}", old.log_text());
    let applied = old
        .log_text()
        .lines()
        .any(|line| line.contains("fleet-wide pause applied") && line.contains(&second));
    assert!(applied, "{}", old.log_text());
    let watching_second = watch_acks(&location, second.clone(), [old_id, new_id], stop.clone());
    let held_second = insert_later(&new, 1774, format!("{mark}-second"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!held_old.is_finished() && !held_new.is_finished() && !held_second.is_finished());
    assert_eq!(
        count_on(MASTER_A, 1770, &mark).await,
        0,
        "a write went through a pause"
    );
    assert_eq!(
        count_on(MASTER_A, 1771, &mark).await,
        0,
        "a write went through a pause"
    );
    assert_eq!(
        count_on(MASTER_A, 1774, &mark).await,
        0,
        "a write went through a pause"
    );

    // The first RESUME lets the old process's statement end; its session
    // moves and the old process exits while the second pause holds.
    let resumed = Instant::now();
    admin_on(new.admin, "RESUME SHARDS 1770-1771 IN main")
        .await
        .expect("RESUME SHARDS");
    let (id, returned) = held_old.await.expect("the held insert");
    id.expect("the old process's insert runs after RESUME");
    assert!(returned - resumed < PROMPT);
    let (id, _) = held_new.await.expect("the held insert");
    id.expect("the new process's insert runs after RESUME");
    let status = old.exited().await;
    assert!(status.success(), "{status}: {}", old.log_text());
    // Past the old process's exit (its session closed), the second pause
    // stays acked and applied.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let client = zookeeper::connect(&location).await.expect("connect");
    let (live, acks) = acks_now(&client, &location, &second).await;
    assert_eq!(live, vec![new_id.to_owned()]);
    // The old process's ack may outlive it until its session expires;
    // only the live proxies count.
    let acks = acks.expect("the second pause's acks");
    assert!(
        zookeeper::missing(&live, &acks).is_empty(),
        "live {live:?}, acks {acks:?}"
    );
    assert!(
        !held_second.is_finished(),
        "a write went through the second pause"
    );
    let mut conn = app_on(&new).await;
    let sent = Instant::now();
    insert_pin(&mut conn, 1772, &format!("{mark}-free")).await;
    assert!(sent.elapsed() < PROMPT, "an unpaused shard was held");
    stop.store(true, Ordering::Relaxed);
    let (looks, misses) = watching_first.await.expect("watch");
    assert!(looks >= 2, "{looks}");
    assert!(
        misses.is_empty(),
        "the first pause went unacked: {misses:?}"
    );
    let (looks, misses) = watching_second.await.expect("watch");
    assert!(looks >= 2, "{looks}");
    assert!(
        misses.is_empty(),
        "the second pause went unacked: {misses:?}"
    );

    let resumed = Instant::now();
    admin_on(new.admin, "RESUME SHARDS 1774-1775 IN main")
        .await
        .expect("RESUME SHARDS");
    let (id, returned) = held_second.await.expect("the held insert");
    id.expect("the insert runs after RESUME");
    assert!(returned - resumed < PROMPT);
    insert_pin(&mut conn, 1775, &format!("{mark}-after")).await;
    conn.disconnect().await.ok();
    for shard in [1770, 1771, 1772, 1774, 1775] {
        assert_eq!(count_on(MASTER_A, shard, &mark).await, 1, "shard {shard}");
    }
    new.stop();
    delete_pins(MASTER_A, &[1770, 1771, 1772, 1774, 1775], &mark).await;
    clean(test).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_with_the_running_proxys_id_is_refused_at_once() {
    let test = "takeover-same-id";
    clean(test).await;
    let location = location(test);
    let socket = repo_root()
        .join("target/test-configs")
        .join(format!("zk-takeover-same-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let document = format!(
        "{}\ntakeover: {{ socket: {} }}\n",
        document(),
        socket.display()
    );
    push(&location, &document, None).await;
    let old = ServeProcess::start(&location, "tks-same").await;
    let mut app = app_on(&old).await;
    let config = location.to_string();
    let log = repo_root()
        .join("target/test-configs")
        .join(format!("zk-takeover-same-{}.log", std::process::id()));
    let log_file = std::fs::File::create(&log).expect("create the log");
    let started = Instant::now();
    let mut new = std::process::Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args([
            "serve",
            "--config",
            &config,
            "--proxy-id",
            "tks-same",
            "--takeover",
        ])
        .arg("--zk-allow-open-acl")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log_file)
        .spawn()
        .expect("start shardgate serve --takeover");
    let status = loop {
        if let Some(status) = new.try_wait().expect("wait for serve") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            new.kill().ok();
            panic!("serve --takeover with a taken id did not exit");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = started.elapsed();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("the new process needs another --proxy-id"),
        "{text}"
    );
    // Not after waiting for a session to expire.
    assert!(
        took < zookeeper::SESSION_TIMEOUT,
        "refused after {took:?}: {text}"
    );
    // The running proxy goes on serving, still registered.
    let one: Option<u64> = app
        .query_first("SELECT 1")
        .await
        .expect("the old process serves");
    assert_eq!(one, Some(1));
    assert_eq!(listed(old.admin).await, vec!["tks-same".to_owned()]);
    app.disconnect().await.ok();
    old.terminate().await;
    clean(test).await;
}
