//! Figures, not a test (ignored; `integration/bench/zookeeper.sh` runs it
//! on a release build): with real `shardgate serve` processes on the
//! ZooKeeper at `SHARDGATE_ZK`, how long after `config push` returns the
//! last of three proxies runs the new version, and how long a fleet-wide
//! `PAUSE SHARDS` takes to answer with one and with three proxies
//! registered. Prints a markdown section (also written to `BENCH_REPORT`
//! when set).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use shardgate::control::status::version_of;

use super::serve::ServeProcess;
use super::*;

/// Pushes, and PAUSE/RESUME rounds per proxy count (`BENCH_ROUNDS`).
fn rounds() -> usize {
    std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20)
}

/// How often each proxy's version is read.
const POLL: Duration = Duration::from_millis(1);

/// The range every PAUSE takes (nothing writes there).
const RANGE: &str = "1790-1791 IN main";

/// A persistent admin session on `proxy`.
async fn admin_session(proxy: &ServeProcess) -> Conn {
    connect_to(proxy.admin, "admin", "admin")
        .await
        .unwrap_or_else(|e| panic!("admin login to {}: {e}", proxy.id))
}

/// The values of the `SHOW CONFIG` rows named `name` on an open admin
/// session.
async fn config_values(conn: &mut Conn, name: &str) -> Vec<String> {
    config_rows(conn)
        .await
        .into_iter()
        .filter(|(row, _)| row == name)
        .map(|(_, value)| value)
        .collect()
}

/// Polls `conn` every [`POLL`] until it runs `version`; when it first did.
async fn first_runs(mut conn: Conn, version: String) -> (Conn, Instant) {
    let started = Instant::now();
    loop {
        if config_values(&mut conn, "version").await.first() == Some(&version) {
            return (conn, Instant::now());
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "a proxy did not take version {version} within 30 s"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// p50 (nearest rank), max and min of `samples`, in ms.
fn summary(samples: &mut [Duration]) -> [f64; 3] {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p50 = samples[samples.len().div_ceil(2) - 1];
    [ms(p50), ms(samples[samples.len() - 1]), ms(samples[0])]
}

fn row(report: &mut String, what: &str, samples: &mut [Duration]) {
    let [p50, max, min] = summary(samples);
    writeln!(report, "| {what} | {p50:.1} | {max:.1} | {min:.1} |").ok();
}

/// One push of a new document per round, the three proxies' versions
/// polled meanwhile: (push call → return, return → last proxy runs it).
async fn push_rounds(
    location: &ZkLocation,
    sessions: &mut Vec<Conn>,
    rounds: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut pushing, mut following) = (Vec::new(), Vec::new());
    let mut znode_version = zookeeper::get(location).await.expect("get").znode_version;
    for round in 0..rounds {
        let yaml = format!("{}\n# figures round {round}\n", document());
        let version = version_of(yaml.as_bytes());
        let pollers: Vec<_> = sessions
            .drain(..)
            .map(|conn| tokio::spawn(first_runs(conn, version.clone())))
            .collect();
        let called = Instant::now();
        let pushed = push(location, &yaml, Some(znode_version)).await;
        let returned = Instant::now();
        znode_version = pushed.znode_version;
        let mut last = returned;
        for poller in pollers {
            let (conn, seen) = poller.await.expect("poller");
            sessions.push(conn);
            last = last.max(seen);
        }
        pushing.push(returned - called);
        following.push(last - returned);
    }
    (pushing, following)
}

/// PAUSE then RESUME through `sessions[0]`, `rounds` times, waiting
/// between rounds until no proxy has the range paused: the answer times.
async fn pause_rounds(sessions: &mut [Conn], rounds: usize) -> (Vec<Duration>, Vec<Duration>) {
    let (mut pausing, mut resuming) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let sent = Instant::now();
        let answer = rows(&mut sessions[0], &format!("PAUSE SHARDS {RANGE}")).await;
        pausing.push(sent.elapsed());
        assert_eq!(answer.len(), 1);
        let sent = Instant::now();
        rows(&mut sessions[0], &format!("RESUME SHARDS {RANGE}")).await;
        resuming.push(sent.elapsed());
        let deadline = Deadline::new("every proxy resumed", Duration::from_secs(10));
        for conn in sessions.iter_mut() {
            loop {
                let paused = config_values(conn, "paused").await;
                if paused.is_empty() {
                    break;
                }
                deadline.retry(paused).await;
            }
        }
    }
    (pausing, resuming)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures: integration/bench/zookeeper.sh"]
async fn figures() {
    let test = "figures";
    clean(test).await;
    let location = location(test);
    let rounds = rounds();
    push(&location, &document(), None).await;
    let mut proxies = vec![ServeProcess::start(&location, "figures-1").await];
    let mut sessions = vec![admin_session(&proxies[0]).await];
    let (mut pause_one, mut resume_one) = pause_rounds(&mut sessions, rounds).await;
    for id in ["figures-2", "figures-3"] {
        let proxy = ServeProcess::start(&location, id).await;
        sessions.push(admin_session(&proxy).await);
        proxies.push(proxy);
    }
    let (mut pause_three, mut resume_three) = pause_rounds(&mut sessions, rounds).await;
    let (mut pushing, mut following) = push_rounds(&location, &mut sessions, rounds).await;

    let mut report = String::new();
    writeln!(
        report,
        "| figure (ms) | p50 | max | min |\n| --- | ---: | ---: | ---: |"
    )
    .ok();
    row(
        &mut report,
        &format!("`config push` call → return ({rounds} pushes)"),
        &mut pushing,
    );
    row(
        &mut report,
        &format!(
            "push returned → the last of 3 proxies runs it (`SHOW CONFIG` polled every {} ms)",
            POLL.as_millis()
        ),
        &mut following,
    );
    for (proxies, pause, resume) in [
        (1, &mut pause_one, &mut resume_one),
        (3, &mut pause_three, &mut resume_three),
    ] {
        row(
            &mut report,
            &format!(
                "`PAUSE SHARDS` sent → answer, registered proxies: {proxies} ({rounds} rounds)"
            ),
            pause,
        );
        row(
            &mut report,
            &format!("`RESUME SHARDS` sent → answer, registered proxies: {proxies}"),
            resume,
        );
    }
    print!("{report}");
    if let Ok(path) = std::env::var("BENCH_REPORT") {
        std::fs::write(&path, &report).unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
    drop(sessions);
    for proxy in proxies {
        proxy.terminate().await;
    }
    clean(test).await;
}
