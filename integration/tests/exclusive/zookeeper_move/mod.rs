//! `shardgate fleet move` against three real `serve` processes sharing one
//! ZooKeeper document, under a steady write load through all three:
//! shards 1024-2047 of main move from 3307 to its GTID replica 3309 with
//! no failed statement and no acknowledged write lost or written to the
//! old master after the switch; a `--dry-run` of the same move changes
//! nothing. The writers' worst stall and the pause the CLI reports are
//! printed (`FIGURES` lines).
//!
//! Moves shards: run it under the fleet lock (`flock /work/fleet.lock
//! cargo test --test exclusive zookeeper_move::`). Needs the fleet and a ZooKeeper
//! (see `common/zookeeper.rs`). Every test leaves the fleet as it found
//! it, also when it fails: rows, AUTO_INCREMENT, 3307's read_only, 3309's
//! replication (`move_load`), the znodes ([`Tree`]), the processes
//! ([`ServeProcess`]).

use crate::common;
use common::move_load;
use common::serial;
use common::zk_harness;
use common::zk_serve;

mod dry_run;
mod under_load;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use move_load::{Acked, LoadLog, MOVING};
use shardgate::topology::source::ZkLocation;
use tokio::task::JoinHandle;
use zk_harness::*;
use zk_serve::ServeProcess;

/// The proxies' ids.
const PROXIES: [&str; 3] = ["alpha", "beta", "gamma"];
/// Load clients per proxy.
const WRITERS_PER_PROXY: usize = 2;
/// The moved range, as the CLI takes it.
const SHARDS: &str = "1024-2047";
/// Bound for what should be immediate, generous for a loaded machine.
const PROMPT: Duration = Duration::from_secs(2);
/// The longest the CLI may run before the test kills it.
const CLI_LIMIT: Duration = Duration::from_secs(60);

/// The test's znode tree: cleaned when made, removed when dropped (on a
/// runtime of its own, so also when the test fails).
struct Tree(&'static str);

impl Tree {
    async fn clean(test: &'static str) -> Self {
        clean(test).await;
        Self(test)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let test = self.0;
        let removed = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime")
                .block_on(clean(test));
        })
        .join();
        if removed.is_err() {
            eprintln!("remove the znode tree {} by hand", root(test));
        }
    }
}

/// Starts the three proxies on the document at `location`.
async fn start_proxies(location: &ZkLocation) -> Vec<ServeProcess> {
    let mut proxies = Vec::new();
    for id in PROXIES {
        proxies.push(ServeProcess::start(location, id).await);
    }
    proxies
}

/// A finished `shardgate fleet move` run.
#[derive(Debug)]
struct CliRun {
    status: ExitStatus,
    started: Instant,
    ended: Instant,
    /// The report (a `step<TAB>ms<TAB>detail` line per step, then the
    /// cleanup lines).
    stdout: String,
    /// Its progress lines, each with when it arrived.
    progress: Vec<(Instant, String)>,
}

impl CliRun {
    /// The steps of the report: (name, milliseconds, detail).
    fn steps(&self) -> Vec<(String, u64, String)> {
        self.stdout
            .lines()
            .filter_map(|line| {
                let mut fields = line.splitn(3, '\t');
                let name = fields.next()?;
                let ms = fields.next()?.trim().parse().ok()?;
                Some((name.to_owned(), ms, fields.next().unwrap_or("").to_owned()))
            })
            .collect()
    }

    /// The pause as the report times it: the steps from `pause` to
    /// `resume`, both included, and their sum.
    fn pause_ms(&self) -> Option<(u64, String)> {
        let steps = self.steps();
        let first = steps.iter().position(|(name, ..)| name == "pause")?;
        let last = steps.iter().rposition(|(name, ..)| name == "resume")?;
        let paused = &steps[first..=last];
        let parts: Vec<String> = paused
            .iter()
            .map(|(name, ms, _)| format!("{name} {ms}"))
            .collect();
        Some((paused.iter().map(|(_, ms, _)| ms).sum(), parts.join(" + ")))
    }

    /// Everything it printed, the progress lines with their time since
    /// the start.
    fn output(&self) -> String {
        let progress: Vec<String> = self
            .progress
            .iter()
            .map(|(at, line)| format!("+{:?} {line}", *at - self.started))
            .collect();
        format!(
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            progress.join("\n")
        )
    }
}

/// Runs `shardgate fleet move --source LOCATION --shards 1024-2047 --fleet
/// main --to 127.0.0.1:3309` and `extra` arguments on a thread of its own;
/// killed after [`CLI_LIMIT`].
fn fleet_move(location: &ZkLocation, extra: &[&str]) -> JoinHandle<CliRun> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shardgate"));
    command
        .args(["fleet", "move", "--source", &location.to_string()])
        .args([
            "--shards",
            SHARDS,
            "--fleet",
            "main",
            "--to",
            "127.0.0.1:3309",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut child = command.spawn().expect("run shardgate fleet move");
        let pid = child.id();
        let mut stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let finished = Arc::new(AtomicBool::new(false));
        let watchdog = {
            let finished = finished.clone();
            std::thread::spawn(move || {
                while started.elapsed() < CLI_LIMIT {
                    if finished.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                eprintln!("fleet move ran for {CLI_LIMIT:?}: killed");
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            })
        };
        let report = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let progress = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .map(|line| (Instant::now(), line))
            .collect();
        let status = child.wait().expect("wait for fleet move");
        let ended = Instant::now();
        finished.store(true, Ordering::SeqCst);
        let _ = watchdog.join();
        CliRun {
            status,
            started,
            ended,
            stdout: report.join().unwrap_or_default(),
            progress,
        }
    })
}

/// What polling one proxy's `SHOW CONFIG` saw.
#[derive(Debug)]
struct Timeline {
    id: String,
    /// The config version in force at the first poll.
    first_version: String,
    /// The first poll that saw another version (when its answer came).
    switched: Option<Instant>,
    /// When the last poll that still saw the first version was sent: the
    /// proxy had not switched yet at that moment (a slow poll's answer
    /// time says nothing about when the switch happened).
    last_old_sent: Option<Instant>,
    /// The first and the last poll that saw a paused range.
    paused: Option<(Instant, Instant)>,
    polls: usize,
}

/// `SHOW CONFIG` of every proxy polled every 2 ms until stopped.
struct Watch {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<Timeline>>,
}

impl Watch {
    fn start(proxies: &[ServeProcess]) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let targets: Vec<(String, SocketAddr)> =
            proxies.iter().map(|p| (p.id.clone(), p.admin)).collect();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut conns = Vec::new();
            let mut timelines = Vec::new();
            for (id, addr) in targets {
                let mut conn = common::connect_to(addr, "admin", "admin")
                    .await
                    .unwrap_or_else(|e| panic!("admin login to {id}: {e}"));
                let rows = config_rows(&mut conn).await;
                conns.push(conn);
                timelines.push(Timeline {
                    id,
                    first_version: version_in(&rows),
                    switched: None,
                    last_old_sent: None,
                    paused: None,
                    polls: 0,
                });
            }
            while !stopped.load(Ordering::SeqCst) {
                for (conn, timeline) in conns.iter_mut().zip(timelines.iter_mut()) {
                    let sent = Instant::now();
                    let rows = config_rows(conn).await;
                    let now = Instant::now();
                    timeline.polls += 1;
                    if version_in(&rows) == timeline.first_version {
                        timeline.last_old_sent = Some(sent);
                    } else if timeline.switched.is_none() {
                        timeline.switched = Some(now);
                    }
                    if rows.iter().any(|(name, _)| name == "paused") {
                        let first = timeline.paused.map_or(now, |(first, _)| first);
                        timeline.paused = Some((first, now));
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            for conn in conns {
                conn.disconnect().await.ok();
            }
            timelines
        });
        Self { stop, task }
    }

    async fn stop(&mut self) -> Vec<Timeline> {
        self.stop.store(true, Ordering::SeqCst);
        (&mut self.task).await.expect("the SHOW CONFIG poller")
    }
}

impl Drop for Watch {
    /// A test that fails before [`Watch::stop`] ends the polls before its
    /// proxies go away.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The `version` row of `SHOW CONFIG`.
fn version_in(rows: &[(String, String)]) -> String {
    rows.iter()
        .find(|(name, _)| name == "version")
        .map(|(_, value)| value.clone())
        .unwrap_or_default()
}

/// `SHOW CONFIG` of a proxy, opened for the one command.
async fn show_config(proxy: &ServeProcess) -> Vec<(String, String)> {
    let mut conn = common::connect_to(proxy.admin, "admin", "admin")
        .await
        .unwrap_or_else(|e| panic!("admin login to {}: {e}", proxy.id));
    let answer = config_rows(&mut conn).await;
    conn.disconnect().await.ok();
    answer
}

/// `SHOW PROXIES` on a proxy as id → (config_version, runs_current).
async fn show_proxies(proxy: &ServeProcess) -> BTreeMap<String, (String, String)> {
    let mut conn = common::connect_to(proxy.admin, "admin", "admin")
        .await
        .unwrap_or_else(|e| panic!("admin login to {}: {e}", proxy.id));
    let answer = rows(&mut conn, "SHOW PROXIES").await;
    conn.disconnect().await.ok();
    answer
        .iter()
        .map(|row| {
            (
                text(row, "id").unwrap_or_default(),
                (
                    text(row, "config_version").unwrap_or_default(),
                    text(row, "runs_current").unwrap_or_default(),
                ),
            )
        })
        .collect()
}

/// The longest send-to-answer time among `writes` that were in flight at
/// some point of `from..to`, or zero.
fn worst_stall<'a>(
    writes: impl Iterator<Item = &'a Acked>,
    from: Instant,
    to: Instant,
) -> Duration {
    writes
        .filter(|w| w.sent <= to && w.acked >= from)
        .map(Acked::latency)
        .max()
        .unwrap_or_default()
}

/// Every write the clients had acknowledged.
fn acknowledged(logs: &[LoadLog]) -> Vec<&Acked> {
    logs.iter().flat_map(|log| log.acked.iter()).collect()
}

/// Whether `write` went to a moving shard.
fn moving(write: &&Acked) -> bool {
    MOVING.contains(&write.shard)
}
