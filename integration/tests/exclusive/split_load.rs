//! `shardgate fleet split` with proxies in front: three real `shardgate
//! serve` processes on the scratch fleet's ZooKeeper document, writers
//! through all three during the whole split, and SIGKILL of the CLI in the
//! middle of the cutover and `--resume`.
//!
//! The run splits 1024-2047 of 127.0.0.1:3307 to 127.0.0.1:3311.
//! Here the source is the scratch master 127.0.0.1:3312 standing in for
//! 3307, with the scratch fleet's 16 shard databases (`sp00`..`sp15`), and
//! the moved half is 8-15: a split drops the moved half from its source
//! and the kept half from its target, which the shared fleet (3307-3310,
//! which other tests expect as they are) must never go through. The
//! commands are the runbook's (docs/operations/move-and-split.md,
//! "Splitting a master") with this document and range. Run under the fleet
//! lock: `cargo test --test exclusive split_load::`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use tokio::task::JoinHandle;

use crate::common::zk_serve::ServeProcess;
use crate::common::{self, serial, zk_harness};
use crate::split::{
    database, databases_on, moved, ops, replicates, Scratch, SHARDS, SOURCE, SOURCE_PORT, TARGET,
    TARGET_PORT,
};

/// The proxies' ids.
const PROXIES: [&str; 3] = ["split-a", "split-b", "split-c"];
/// Writer connections per proxy.
const WRITERS_PER_PROXY: usize = 2;
/// `--max-rows-per-second` of the load test: the copy and the verify must
/// stay under it.
const RATE: f64 = 3000.0;

/// One acknowledged insert.
#[derive(Debug, Clone)]
struct Acked {
    shard: u32,
    id: u64,
    data: String,
}

/// What one writer saw.
#[derive(Debug, Default)]
struct WriterLog {
    client: String,
    acked: Vec<Acked>,
    /// Statements that failed: (statement, error).
    errors: Vec<(String, String)>,
    /// Reads of a row just acknowledged that did not return it.
    misses: Vec<u64>,
    reads: usize,
    /// The longest a statement took, and when it was sent.
    longest: (Duration, Option<Instant>),
}

/// One connection through `proxy`: insert a pin (round robin over every
/// shard), read it back by its ID, again, until `stop`.
async fn writer(
    proxy: SocketAddr,
    client: String,
    offset: u32,
    mark: String,
    stop: Arc<AtomicBool>,
) -> WriterLog {
    let mut conn = common::connect_to(proxy, "app", "app")
        .await
        .unwrap_or_else(|e| panic!("{client} login: {e}"));
    let mut log = WriterLog {
        client: client.clone(),
        ..WriterLog::default()
    };
    let mut n = 0u32;
    let timed = |log: &mut WriterLog, sent: Instant| {
        let took = sent.elapsed();
        if took > log.longest.0 {
            log.longest = (took, Some(sent));
        }
    };
    while !stop.load(Ordering::SeqCst) {
        let shard = (offset + n) % SHARDS;
        let data = format!("{mark}-{client}-{n}");
        let sent = Instant::now();
        let inserted = common::try_insert_pin(&mut conn, shard, &data).await;
        timed(&mut log, sent);
        match inserted {
            Ok(id) => {
                log.acked.push(Acked {
                    shard,
                    id,
                    data: data.clone(),
                });
                let sent = Instant::now();
                let read: mysql_async::Result<Option<String>> = conn
                    .query_first(format!("SELECT data FROM pins WHERE id = {id}"))
                    .await;
                timed(&mut log, sent);
                log.reads += 1;
                match read {
                    Ok(Some(found)) if found == data => {}
                    Ok(_) => log.misses.push(id),
                    Err(e) => log.errors.push((format!("read {id}"), e.to_string())),
                }
            }
            Err(e) => log
                .errors
                .push((format!("insert on shard {shard}"), e.to_string())),
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let _ = conn.disconnect().await;
    log
}

/// The writers of a test: started on every proxy, stopped at the end.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<WriterLog>>,
}

impl Load {
    fn start(proxies: &[ServeProcess], mark: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for proxy in proxies {
            for n in 0..WRITERS_PER_PROXY {
                let offset = tasks.len() as u32 * 5;
                tasks.push(tokio::spawn(writer(
                    proxy.client,
                    format!("{}-{n}", proxy.id),
                    offset,
                    mark.to_owned(),
                    stop.clone(),
                )));
            }
        }
        Self { stop, tasks }
    }

    async fn stop(self) -> Vec<WriterLog> {
        self.stop.store(true, Ordering::SeqCst);
        let mut logs = Vec::new();
        for task in self.tasks {
            logs.push(task.await.expect("a writer"));
        }
        logs
    }
}

/// Starts the three proxies on the scratch document ([`Scratch::new`] ran
/// `integration/fleet.sh start-host` on both scratch servers, which gives
/// the proxies' backend account (`shard`) the scratch fleet's `sp__`
/// databases).
async fn start_proxies(scratch: &Scratch) -> Vec<ServeProcess> {
    let mut proxies = Vec::new();
    for id in PROXIES {
        proxies.push(ServeProcess::start(&scratch.location, id).await);
    }
    proxies
}

/// Rows of `db.pins` on `port` whose data starts with `mark`: data ->
/// local ids (more than one: written twice).
async fn marked_rows(port: u16, shard: u32, mark: &str) -> BTreeMap<String, Vec<u64>> {
    let mut conn = ops(port).await.expect("scratch server answers");
    let rows: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT local_id, data FROM {}.pins WHERE data LIKE '{mark}%'",
            database(shard)
        ))
        .await
        .unwrap_or_else(|e| panic!("rows of {} on {port}: {e}", database(shard)));
    let _ = conn.disconnect().await;
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (local_id, data) in rows {
        out.entry(data).or_default().push(local_id);
    }
    out
}

/// `(rows, rows per second)` of a `split: <phase> done` line.
fn rate_of(stderr: &str, phase: &str) -> Option<(u64, f64)> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&format!("split: {phase} done")))?;
    let rows: u64 = line
        .split(", ")
        .find_map(|part| part.strip_suffix(" rows")?.rsplit(' ').next()?.parse().ok())?;
    let rate: f64 = line
        .split('(')
        .find_map(|part| part.split(" rows/s").next()?.trim().parse().ok())?;
    Some((rows, rate))
}

/// The cutover's pause as its steps report it: the sum of the steps from
/// `pause` to `resume` (`cutover<TAB>step<TAB>ms<TAB>detail` lines).
fn pause_ms(stdout: &str) -> Option<u64> {
    let steps: Vec<(&str, u64)> = stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            (fields.next()? == "cutover").then_some(())?;
            Some((fields.next()?, fields.next()?.trim().parse().ok()?))
        })
        .collect();
    let first = steps.iter().position(|(name, _)| *name == "pause")?;
    let last = steps.iter().rposition(|(name, _)| *name == "resume")?;
    Some(steps[first..=last].iter().map(|(_, ms)| ms).sum())
}

/// The config version each proxy runs (`SHOW CONFIG`'s `version`).
async fn versions_run(proxies: &[ServeProcess]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for proxy in proxies {
        let mut admin = common::connect_to(proxy.admin, "admin", "admin")
            .await
            .unwrap_or_else(|e| panic!("admin of {}: {e}", proxy.id));
        let rows = zk_harness::config_rows(&mut admin).await;
        let version = rows
            .iter()
            .find(|(name, _)| name == "version")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        out.push((proxy.id.clone(), version));
        let _ = admin.disconnect().await;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_under_write_load_through_three_zookeeper_proxies_loses_no_write() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-load").await;
    let proxies = start_proxies(&scratch).await;
    let mark = common::move_load::marker("split-load");
    let load = Load::start(&proxies, &mark);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let rate = format!("{RATE}");
    let run = scratch.split(&["--max-rows-per-second", &rate]);
    let timeline = run.timeline();
    let started = Instant::now();
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    let ended = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let logs = load.stop().await;
    let versions = versions_run(&proxies).await;

    let acked: Vec<&Acked> = logs.iter().flat_map(|l| &l.acked).collect();
    let (stall, stalled_at, staller) = logs
        .iter()
        .map(|l| (l.longest.0, l.longest.1, l.client.as_str()))
        .max()
        .unwrap_or_default();
    let copy = rate_of(&stderr, "copy");
    let verify = rate_of(&stderr, "verify");
    println!("stdout:\n{stdout}\nstderr:\n{stderr}");
    println!(
        "FIGURES split under load through 3 proxies: cli {:?}, copy {copy:?} (rows, rows/s), verify {verify:?}, \
         cutover pause {:?} ms, longest stall {stall:?} ({staller}, {:?} after the CLI started), \
         {} writes and {} reads through {} writers",
        ended - started,
        pause_ms(&stdout),
        stalled_at.map(|at| at.saturating_duration_since(started)),
        acked.len(),
        logs.iter().map(|l| l.reads).sum::<usize>(),
        logs.len()
    );

    assert!(
        status.success(),
        "exit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for log in &logs {
        assert!(
            log.errors.is_empty(),
            "statements through {} failed: {:#?}",
            log.client,
            log.errors
        );
        assert!(
            log.misses.is_empty(),
            "{}: acknowledged rows not read back: {:?}",
            log.client,
            log.misses
        );
        assert!(log.acked.len() > 20, "{} hardly wrote", log.client);
    }
    // Writes to the moved half landed on the source before the cutover and
    // on the target after it.
    assert!(pause_ms(&stdout).is_some(), "no cutover steps:\n{stdout}");
    let (copied_rows, copy_rate) = copy.expect("the copy's line");
    let (verified_rows, verify_rate) = verify.expect("the verify's line");
    assert!(copied_rows >= u64::from(SHARDS) * 300, "{stderr}");
    assert!(verified_rows >= 8 * 300, "{stderr}");
    assert!(
        copy_rate <= RATE && verify_rate <= RATE,
        "the source was read faster than --max-rows-per-second {RATE}: copy {copy_rate}, verify {verify_rate}"
    );
    // Measured here too: the verify's source rows over the time between
    // its start and end lines as they arrived.
    let at = |prefix: &str| {
        timeline
            .lock()
            .unwrap()
            .iter()
            .find(|(_, line)| line.starts_with(prefix))
            .map(|(at, _)| *at)
            .unwrap_or_else(|| panic!("no line {prefix}"))
    };
    let verify_wall = at("split: verify done") - at("split: verify shards");
    let measured = verified_rows as f64 / verify_wall.as_secs_f64();
    println!("verify: {verified_rows} source rows in {verify_wall:?} as seen from the test: {measured:.0} rows/s");
    assert!(
        measured <= RATE,
        "the verify read {measured:.0} rows/s from the source, over --max-rows-per-second {RATE}"
    );

    // Every acknowledged write exactly once, on its owner.
    let mut on_owner: BTreeMap<u32, BTreeMap<String, Vec<u64>>> = BTreeMap::new();
    for shard in 0..SHARDS {
        let owner = if moved().contains(&shard) {
            TARGET_PORT
        } else {
            SOURCE_PORT
        };
        on_owner.insert(shard, marked_rows(owner, shard, &mark).await);
    }
    let mut written_after = 0;
    for write in &acked {
        let id = common::decode(write.id);
        assert_eq!(
            id.shard, write.shard,
            "write {} routed by its hint",
            write.id
        );
        let found = on_owner[&write.shard].get(&write.data);
        assert_eq!(
            found,
            Some(&vec![id.local_id]),
            "acknowledged write {} ({}) once on the owner of shard {}",
            write.id,
            write.data,
            write.shard
        );
        if moved().contains(&write.shard) && id.local_id > 300 {
            written_after += 1;
        }
    }
    let acked_data: BTreeSet<&str> = acked.iter().map(|w| w.data.as_str()).collect();
    for (shard, rows) in &on_owner {
        for data in rows.keys() {
            assert!(
                acked_data.contains(data.as_str()),
                "row {data} in shard {shard} was never acknowledged"
            );
        }
    }
    assert!(written_after > 0, "no write reached the moved half");

    // The source holds only its half, the target only its half.
    let kept: BTreeSet<String> = (0..8).map(database).collect();
    let range: BTreeSet<String> = moved().map(database).collect();
    assert_eq!(databases_on(SOURCE_PORT).await, kept);
    assert_eq!(databases_on(TARGET_PORT).await, range);
    assert!(
        !replicates(TARGET_PORT).await,
        "the target still replicates"
    );
    assert_eq!(scratch.master_of(8).await, TARGET);
    assert_eq!(scratch.master_of(7).await, SOURCE);
    let document = shardgate::control::zookeeper::get(&scratch.location)
        .await
        .expect("the document");
    for (proxy, version) in &versions {
        assert_eq!(
            version, &document.version,
            "{proxy} runs the split's document"
        );
    }
    assert_eq!(scratch.phase().await, "done");
    drop(proxies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_killed_in_the_cutover_leaves_the_proxies_on_one_map_and_resumes() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-kill-cutover").await;
    let proxies = start_proxies(&scratch).await;
    let before = shardgate::control::zookeeper::get(&scratch.location)
        .await
        .expect("the document");
    let run = scratch.split(&["--max-rows-per-second", "0"]);
    // The cutover's catch-up is held: the target cannot apply a row of
    // sp09 while its table is locked there.
    let mut target = ops(TARGET_PORT).await.expect("3311 answers");
    let mut source = ops(SOURCE_PORT).await.expect("3312 answers");
    let (run, output) = {
        let seen = tokio::task::spawn_blocking(move || {
            let seen = run.wait_for("split: cutover ...");
            (run, seen)
        })
        .await
        .expect("the CLI thread");
        let (run, seen) = seen;
        assert!(seen, "the cutover starts:\n{}", run.seen());
        target
            .query_drop("LOCK TABLES sp09.pins WRITE")
            .await
            .expect("lock sp09.pins on the target");
        source
            .query_drop("INSERT INTO sp09.pins (data, n) VALUES ('held', 0)")
            .await
            .expect("a row the target cannot apply");
        tokio::task::spawn_blocking(move || {
            let waiting = run.wait_for("split: cutover: catch-up ...");
            assert!(waiting, "the catch-up starts:\n{}", run.seen());
            std::thread::sleep(Duration::from_millis(200));
            let output = run.seen();
            (run, output)
        })
        .await
        .expect("the CLI thread")
    };
    let output = format!("{output}\n{}", run.kill());
    target
        .query_drop("UNLOCK TABLES")
        .await
        .expect("unlock on the target");
    let _ = target.disconnect().await;
    let _ = source.disconnect().await;
    // Killed in the middle: every proxy on the same map, the old one (the
    // push did not happen); none routes the range to the target.
    let now = shardgate::control::zookeeper::get(&scratch.location)
        .await
        .expect("the document");
    assert_eq!(now.znode_version, before.znode_version, "no push\n{output}");
    for (proxy, version) in versions_run(&proxies).await {
        assert_eq!(
            version, before.version,
            "{proxy} runs the old map\n{output}"
        );
    }
    assert_eq!(scratch.master_of(9).await, SOURCE);
    assert_eq!(scratch.phase().await, "verified", "{output}");

    scratch.wait_unclaimed().await;
    let run = scratch.split(&["--resume", "--max-rows-per-second", "0"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    assert!(
        status.success(),
        "--resume after a kill in the cutover\nexit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(scratch.master_of(9).await, TARGET);
    let records =
        zk_harness::pause_records(&zk_harness::raw_client().await, &scratch.location).await;
    assert!(records.is_empty(), "pause records left: {records:?}");
    // The proxies serve the range from the target: a write through each
    // lands there.
    let now = shardgate::control::zookeeper::get(&scratch.location)
        .await
        .expect("the document");
    for proxy in &proxies {
        let mut app = common::connect_to(proxy.client, "app", "app")
            .await
            .expect("app login");
        let data = format!("after-resume-{}", proxy.id);
        let id = common::try_insert_pin(&mut app, 9, &data)
            .await
            .unwrap_or_else(|e| panic!("write through {} after the resume: {e}", proxy.id));
        let local = common::decode(id).local_id;
        let mut target = ops(TARGET_PORT).await.expect("3311 answers");
        let found: Option<String> = target
            .query_first(format!(
                "SELECT data FROM sp09.pins WHERE local_id = {local}"
            ))
            .await
            .expect("read on the target");
        assert_eq!(found.as_deref(), Some(data.as_str()), "{}", proxy.id);
        let _ = app.disconnect().await;
    }
    for (proxy, version) in versions_run(&proxies).await {
        assert_eq!(version, now.version, "{proxy} runs the new map");
    }
    assert_eq!(databases_on(SOURCE_PORT).await.len(), 8);
    assert_eq!(databases_on(TARGET_PORT).await.len(), 8);
    assert_eq!(scratch.phase().await, "done");
    drop(proxies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_killed_after_the_cutover_pushed_keeps_the_range_paused_and_resumes_on_the_new_map() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-kill-pushed").await;
    let proxies = start_proxies(&scratch).await;
    let before = shardgate::control::zookeeper::get(&scratch.location)
        .await
        .expect("the document");
    // One proxy stopped (SIGSTOP) once the range is paused: the cutover
    // then waits in its `proxies` step for it to run the new map.
    let run = scratch.split(&["--max-rows-per-second", "0"]);
    let (run, seen) = tokio::task::spawn_blocking(move || {
        let seen = run.wait_for("split: cutover: gtid ...");
        (run, seen)
    })
    .await
    .expect("the CLI thread");
    assert!(seen, "the cutover pauses:\n{}", run.seen());
    proxies[2].signal("STOP");
    let output = tokio::task::spawn_blocking(move || {
        let waiting = run.wait_for("split: cutover: proxies ...");
        let output = run.kill();
        assert!(waiting, "the push is done, the proxies awaited:\n{output}");
        output
    })
    .await
    .expect("the CLI thread");
    let records =
        zk_harness::pause_records(&zk_harness::raw_client().await, &scratch.location).await;
    proxies[2].signal("CONT");
    let now = shardgate::control::zookeeper::get(&scratch.location)
        .await
        .expect("the document");
    assert_ne!(
        now.version, before.version,
        "the new map was pushed\n{output}"
    );
    assert_eq!(scratch.master_of(9).await, TARGET);
    assert!(
        !records.is_empty(),
        "the range stays paused on every proxy while one may run the old map\n{output}"
    );
    assert_eq!(scratch.phase().await, "verified", "{output}");

    scratch.wait_unclaimed().await;
    let run = scratch.split(&["--resume", "--max-rows-per-second", "0"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    assert!(
        status.success(),
        "--resume after a kill once the map was pushed\nexit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let records =
        zk_harness::pause_records(&zk_harness::raw_client().await, &scratch.location).await;
    assert!(
        records.is_empty(),
        "pause records left: the range stays paused on every proxy: {records:?}\n{stderr}"
    );
    assert!(
        stderr.contains("its map was written") && stderr.contains("already routed"),
        "{stderr}"
    );
    for (proxy, version) in versions_run(&proxies).await {
        assert_eq!(version, now.version, "{proxy} runs the new map");
    }
    for proxy in &proxies {
        let mut app = common::connect_to(proxy.client, "app", "app")
            .await
            .expect("app login");
        let data = format!("after-resume-{}", proxy.id);
        let id = common::try_insert_pin(&mut app, 12, &data)
            .await
            .unwrap_or_else(|e| panic!("write through {} after the resume: {e}", proxy.id));
        let mut target = ops(TARGET_PORT).await.expect("3311 answers");
        let found: Option<String> = target
            .query_first(format!(
                "SELECT data FROM sp12.pins WHERE local_id = {}",
                common::decode(id).local_id
            ))
            .await
            .expect("read on the target");
        assert_eq!(found.as_deref(), Some(data.as_str()), "{}", proxy.id);
        let _ = app.disconnect().await;
    }
    assert_eq!(databases_on(SOURCE_PORT).await.len(), 8);
    assert_eq!(databases_on(TARGET_PORT).await.len(), 8);
    assert_eq!(scratch.phase().await, "done");
    drop(proxies);
}
