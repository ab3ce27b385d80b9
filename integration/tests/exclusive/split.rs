//! `shardgate fleet split` end to end on scratch servers: a fleet of its
//! own (16 shard databases `sp00`..`sp15`) on 127.0.0.1:3312, split 8-15
//! to the spare 127.0.0.1:3311 through a ZooKeeper document. The shared
//! fleet (3307-3310) is never touched; every test empties 3311 and 3312
//! and removes its znodes (the state record among them) when it ends, also on failure
//! ([`Scratch`]). Run under the fleet lock: `cargo test --test exclusive
//! split::`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use shardgate::control::status::parse_config;
use shardgate::topology::source::ZkLocation;

use crate::common::{fleet_script, serial, zk_harness, OPS_PASSWORD, OPS_USER};

pub(crate) const SOURCE_PORT: u16 = 3312;
pub(crate) const TARGET_PORT: u16 = 3311;
pub(crate) const SOURCE: &str = "127.0.0.1:3312";
pub(crate) const TARGET: &str = "127.0.0.1:3311";
pub(crate) const SHARDS: u32 = 16;
pub(crate) const SPLIT: &str = "8-15";
/// Rows per shard database before the split.
pub(crate) const ROWS: u32 = 300;
/// The longest a CLI run may take before the test gives up on it.
pub(crate) const CLI_LIMIT: Duration = Duration::from_secs(60);

pub(crate) fn yaml() -> String {
    format!(
        "listen: 127.0.0.1:0
admin: {{ listen: 127.0.0.1:0, users: [{{ name: admin, password: admin }}] }}
users: [{{ name: app, password: app }}]
backend: {{ user: shard, password: shardpw }}
operations: {{ user: {OPS_USER}, password: {OPS_PASSWORD} }}
types: {{ pin: 1 }}
fleets:
  split:
    shards: {SHARDS}
    database: \"sp{{:02}}\"
    hosts:
      - {{ range: [0, {}], master: {SOURCE} }}
tables:
  pins: {{ fleet: split, object: pin }}
",
        SHARDS - 1
    )
}

pub(crate) fn database(shard: u32) -> String {
    format!("sp{shard:02}")
}

pub(crate) fn moved() -> std::ops::RangeInclusive<u32> {
    8..=15
}

pub(crate) async fn ops(port: u16) -> Option<Conn> {
    Conn::new(
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some(OPS_USER))
            .pass(Some(OPS_PASSWORD)),
    )
    .await
    .ok()
}

/// Everything the split tests create on the scratch servers, removed.
async fn empty_scratch() {
    for port in [TARGET_PORT, SOURCE_PORT] {
        let Some(mut conn) = ops(port).await else {
            continue;
        };
        if port == TARGET_PORT {
            let _ = conn.query_drop("STOP SLAVE").await;
            let _ = conn.query_drop("RESET SLAVE ALL").await;
        }
        let names: Vec<String> = conn
            .query(
                "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA \
                 WHERE SCHEMA_NAME LIKE 'sp__' OR SCHEMA_NAME LIKE '\\_moved\\_sp__'",
            )
            .await
            .unwrap_or_default();
        for name in names {
            conn.query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
                .await
                .unwrap_or_else(|e| panic!("drop {name} on {port}: {e}"));
        }
        let _ = conn.disconnect().await;
    }
}

/// The scratch fleet of one test: 3311 and 3312 up and empty, the shard
/// databases with [`ROWS`] rows each on 3312, the document in ZooKeeper
/// (the split's state record goes beside it). Dropped: all of it removed
/// again.
pub(crate) struct Scratch {
    test: &'static str,
    pub(crate) location: ZkLocation,
}

impl Scratch {
    pub(crate) async fn new(test: &'static str) -> Self {
        // Always, before any data: on a running server of this fleet it
        // only sets the accounts' grants (the proxies' account needs the
        // `sp__` databases); a server of another fleet directory on the
        // port is replaced now (CI), not after the data was created.
        for port in [TARGET_PORT, SOURCE_PORT] {
            let arg = port.to_string();
            tokio::task::spawn_blocking(move || fleet_script(&["start-host", &arg]))
                .await
                .expect("start-host");
        }
        empty_scratch().await;
        zk_harness::clean(test).await;
        let mut conn = ops(SOURCE_PORT).await.expect("3312 answers");
        for shard in 0..SHARDS {
            let db = database(shard);
            conn.query_drop(format!(
                "CREATE DATABASE {db}; CREATE TABLE {db}.pins (local_id BIGINT UNSIGNED NOT NULL \
                 AUTO_INCREMENT PRIMARY KEY, data TEXT, n INT, ts TIMESTAMP NOT NULL DEFAULT \
                 CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP) ENGINE=InnoDB; \
                 USE {db}; INSERT INTO pins (data, n) SELECT CONCAT('row ', seq, ' \\'q\\' \\\\ '), seq \
                 FROM seq_1_to_{ROWS}"
            ))
            .await
            .unwrap_or_else(|e| panic!("create {db} on 3312: {e}"));
        }
        let _ = conn.disconnect().await;
        let location = zk_harness::location(test);
        zk_harness::push(&location, &yaml(), None).await;
        Self { test, location }
    }

    /// The phase in the split's state record (a znode beside the
    /// document), `none` without one.
    pub(crate) async fn phase(&self) -> String {
        let bytes = shardgate::control::zookeeper::read_split_record(&self.location, "split-8-15")
            .await
            .expect("read the state record")
            .unwrap_or_default();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        value["phase"].as_str().unwrap_or("none").to_owned()
    }

    /// Starts `shardgate fleet split` on this fleet with `extra` arguments.
    pub(crate) fn split(&self, extra: &[&str]) -> CliRun {
        let mut command = Command::new(env!("CARGO_BIN_EXE_shardgate"));
        command
            .args(["--zk-allow-open-acl", "fleet", "split", "--source"])
            .arg(self.location.to_string())
            .args(["--shards", SPLIT, "--to", TARGET, "--grace", "0"])
            .args(extra);
        CliRun::start(command)
    }

    /// Waits until no driver claims the split: a SIGKILLed CLI's claim
    /// (an ephemeral znode) goes when ZooKeeper expires its session.
    pub(crate) async fn wait_unclaimed(&self) {
        // The claim's znode, as docs/operations/move-and-split.md names it.
        let path = format!("{}/splits/split-8-15.lock", self.location.path);
        let client = shardgate::control::zookeeper::connect(&self.location)
            .await
            .expect("a ZooKeeper session");
        let started = Instant::now();
        while client
            .check_stat(&path)
            .await
            .unwrap_or_else(|e| panic!("stat {path}: {e}"))
            .is_some()
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{path} stays after its holder was killed"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Who the document says is the master of `shard`.
    pub(crate) async fn master_of(&self, shard: u32) -> String {
        let document = shardgate::control::zookeeper::get(&self.location)
            .await
            .expect("read the document");
        let topology = parse_config(&document.bytes, "split").expect("the document parses");
        let fleet = topology.fleet_by_name("split").expect("fleet split");
        let host = topology.master_of(fleet, shard).expect("a master");
        topology.hosts[host].addr.clone()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let test = self.test;
        let cleaned = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime")
                .block_on(async {
                    empty_scratch().await;
                    zk_harness::clean(test).await;
                });
        })
        .join();
        if cleaned.is_err() {
            eprintln!(
                "empty 3311/3312 (sp* databases, replication) and {} by hand",
                zk_harness::root(test)
            );
        }
    }
}

/// A running `shardgate fleet split`: its stderr lines as they come.
pub(crate) struct CliRun {
    child: Child,
    started: Instant,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<String>>>,
    /// Each stderr line with when it arrived.
    timed: Arc<Mutex<Vec<(Instant, String)>>>,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl CliRun {
    pub(crate) fn start(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run shardgate fleet split");
        let mut stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (send, lines) = channel();
        let all = Arc::new(Mutex::new(Vec::new()));
        let kept = all.clone();
        let timed = Arc::new(Mutex::new(Vec::new()));
        let stamped = timed.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                kept.lock().unwrap().push(line.clone());
                stamped.lock().unwrap().push((Instant::now(), line.clone()));
                let _ = send.send(line);
            }
        });
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        Self {
            child,
            started: Instant::now(),
            lines,
            stderr: all,
            timed,
            stdout: Some(stdout),
        }
    }

    /// Waits for a stderr line containing `text`; false when the process
    /// ended (or [`CLI_LIMIT`] passed) first.
    pub(crate) fn wait_for(&self, text: &str) -> bool {
        loop {
            let left = CLI_LIMIT.saturating_sub(self.started.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }

    /// Its stderr lines with when each arrived, as they come.
    pub(crate) fn timeline(&self) -> Arc<Mutex<Vec<(Instant, String)>>> {
        self.timed.clone()
    }

    /// Its stderr so far.
    pub(crate) fn seen(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// The process id (its claim names it: `cli@<host>:<pid>`).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn kill(mut self) -> String {
        self.child.kill().expect("SIGKILL fleet split");
        let _ = self.child.wait();
        self.stderr.lock().unwrap().join("\n")
    }

    /// Waits for the end: exit status, stdout, stderr.
    pub(crate) fn finish(mut self) -> (ExitStatus, String, String) {
        let deadline = self.started + CLI_LIMIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                break self.child.wait().expect("wait");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = self
            .stdout
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        std::thread::sleep(Duration::from_millis(50));
        let stderr = self.stderr.lock().unwrap().join("\n");
        (status, stdout, stderr)
    }
}

pub(crate) async fn databases_on(port: u16) -> BTreeSet<String> {
    let mut conn = ops(port).await.expect("scratch server answers");
    let names: Vec<String> = conn
        .query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'sp__'")
        .await
        .expect("list databases");
    names.into_iter().collect()
}

pub(crate) async fn rows_on(port: u16, shard: u32) -> BTreeSet<(u64, String)> {
    let mut conn = ops(port).await.expect("scratch server answers");
    let rows: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT local_id, data FROM {}.pins",
            database(shard)
        ))
        .await
        .unwrap_or_else(|e| panic!("rows of {} on {port}: {e}", database(shard)));
    rows.into_iter().collect()
}

pub(crate) async fn replicates(port: u16) -> bool {
    let mut conn = ops(port).await.expect("scratch server answers");
    let status: Option<mysql_async::Row> =
        conn.query_first("SHOW SLAVE STATUS").await.expect("status");
    status.is_some()
}

/// What the split must have left: the range on the target only with
/// `expected` rows, the rest on the source only, no replication, the
/// document routing the range to the target.
pub(crate) async fn assert_split_done(scratch: &Scratch, expected: &[BTreeSet<(u64, String)>]) {
    let on_target = databases_on(TARGET_PORT).await;
    let on_source = databases_on(SOURCE_PORT).await;
    let range: BTreeSet<String> = moved().map(database).collect();
    let rest: BTreeSet<String> = (0..8).map(database).collect();
    assert_eq!(
        on_target, range,
        "the target holds exactly the moved databases"
    );
    assert_eq!(
        on_source, rest,
        "the source holds exactly the databases it keeps"
    );
    for shard in moved() {
        let rows = rows_on(TARGET_PORT, shard).await;
        assert_eq!(
            rows,
            expected[shard as usize],
            "rows of {} on the target",
            database(shard)
        );
    }
    assert!(
        !replicates(TARGET_PORT).await,
        "the target no longer replicates"
    );
    assert_eq!(scratch.master_of(8).await, TARGET);
    assert_eq!(scratch.master_of(15).await, TARGET);
    assert_eq!(scratch.master_of(7).await, SOURCE);
    assert_eq!(scratch.phase().await, "done");
}

pub(crate) async fn rows_before() -> Vec<BTreeSet<(u64, String)>> {
    let mut all = Vec::new();
    for shard in 0..SHARDS {
        all.push(rows_on(SOURCE_PORT, shard).await);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_end_to_end_with_writes_during_the_copy() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-e2e").await;
    let expected = Arc::new(Mutex::new(rows_before().await));
    // Writes to every shard on the source from before the split until its
    // verify starts (the copy is slowed so that some land during it).
    let stop = Arc::new(AtomicBool::new(false));
    let during = Arc::new(Mutex::new((false, 0u32)));
    let writer = {
        let (stop, expected, during) = (stop.clone(), expected.clone(), during.clone());
        tokio::spawn(async move {
            let mut conn = ops(SOURCE_PORT).await.expect("3312 answers");
            let mut n = 0u32;
            while !stop.load(Ordering::SeqCst) {
                let shard = n % SHARDS;
                let data = format!("written {n}");
                conn.query_drop(format!(
                    "INSERT INTO {}.pins (data, n) VALUES ('{data}', {n})",
                    database(shard)
                ))
                .await
                .expect("write to the source");
                let id = conn.last_insert_id().expect("an id");
                expected.lock().unwrap()[shard as usize].insert((id, data));
                {
                    let mut during = during.lock().unwrap();
                    if during.0 {
                        during.1 += 1;
                    }
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let run = scratch.split(&["--max-rows-per-second", "2000"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || {
        assert!(
            run.wait_for("split: copy 127.0.0.1:3312"),
            "{}:\n{}",
            "the copy starts",
            run.seen()
        );
        during.lock().unwrap().0 = true;
        let copied = run.wait_for("split: copy done");
        let written = during.lock().unwrap().1;
        during.lock().unwrap().0 = false;
        if copied {
            assert!(
                run.wait_for("split: verify"),
                "{}:\n{}",
                "the verify starts",
                run.seen()
            );
        }
        stop.store(true, Ordering::SeqCst);
        let (status, stdout, stderr) = run.finish();
        assert!(written > 0, "no write landed during the copy\n{stderr}");
        (status, stdout, stderr)
    })
    .await
    .expect("the CLI thread");
    writer.await.expect("the writer");
    assert!(
        status.success(),
        "exit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for shard in moved() {
        assert!(
            stdout.contains(&format!("drop\t{SOURCE}\t{}", database(shard))),
            "{stdout}"
        );
    }
    let expected = expected.lock().unwrap().clone();
    assert_split_done(&scratch, &expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_dry_run_changes_nothing_and_lists_every_drop() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-dry").await;
    let before = zk_harness::raw_client().await;
    let (_, stat) = before
        .get_data(&scratch.location.path)
        .await
        .expect("document");
    let run = scratch.split(&["--dry-run"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    assert!(
        status.success(),
        "exit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for shard in 0..8 {
        assert!(
            stdout.contains(&format!("would drop\t{TARGET}\t{}", database(shard))),
            "{stdout}"
        );
    }
    for shard in moved() {
        assert!(
            stdout.contains(&format!("would drop\t{SOURCE}\t{}", database(shard))),
            "{stdout}"
        );
    }
    assert_eq!(stdout.matches("would drop").count(), 16, "{stdout}");
    assert!(stdout.contains("dry run: nothing was changed"), "{stdout}");
    assert!(databases_on(TARGET_PORT).await.is_empty(), "nothing copied");
    assert_eq!(databases_on(SOURCE_PORT).await.len(), 16, "nothing dropped");
    assert!(!replicates(TARGET_PORT).await, "no replication set up");
    let (_, after) = before
        .get_data(&scratch.location.path)
        .await
        .expect("document");
    assert_eq!(after.version, stat.version, "the document is unchanged");
    assert_eq!(scratch.phase().await, "none", "no state recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_killed_in_copy_and_in_verify_resumes_to_the_same_result_keeping_the_moved() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-kill").await;
    let expected = rows_before().await;
    let slow = ["--max-rows-per-second", "2500"];
    let run = scratch.split(&slow);
    let output = tokio::task::spawn_blocking(move || {
        assert!(
            run.wait_for("split: copy 127.0.0.1:3312"),
            "{}:\n{}",
            "the copy starts",
            run.seen()
        );
        std::thread::sleep(Duration::from_millis(700));
        run.kill()
    })
    .await
    .expect("the CLI thread");
    assert_eq!(
        scratch.phase().await,
        "copying",
        "killed during the copy\n{output}"
    );
    scratch.wait_unclaimed().await;
    let mut args = slow.to_vec();
    args.push("--resume");
    let run = scratch.split(&args);
    let output = tokio::task::spawn_blocking(move || {
        assert!(
            run.wait_for("split: verify shards"),
            "{}:\n{}",
            "the verify starts",
            run.seen()
        );
        std::thread::sleep(Duration::from_millis(300));
        run.kill()
    })
    .await
    .expect("the CLI thread");
    assert_eq!(
        scratch.phase().await,
        "copied",
        "killed during the verify\n{output}"
    );
    // The last run keeps the moved databases on the source, renamed.
    scratch.wait_unclaimed().await;
    args.push("--keep-moved");
    let run = scratch.split(&args);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    assert!(
        status.success(),
        "exit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_split_done(&scratch, &expected).await;
    let mut source = ops(SOURCE_PORT).await.expect("3312 answers");
    for shard in moved() {
        let kept: Vec<(u64, String)> = source
            .query(format!(
                "SELECT local_id, data FROM _moved_{}.pins",
                database(shard)
            ))
            .await
            .unwrap_or_else(|e| panic!("_moved_{} on the source: {e}\n{stdout}", database(shard)));
        let kept: BTreeSet<(u64, String)> = kept.into_iter().collect();
        assert_eq!(
            kept,
            expected[shard as usize],
            "rows kept in _moved_{}",
            database(shard)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_verify_names_rows_changed_deleted_and_added_on_the_target_and_stops_before_cutover()
{
    let _fleet = serial().await;
    let scratch = Scratch::new("split-diff").await;
    let run = scratch.split(&["--stop-after", "copy", "--max-rows-per-second", "0"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    assert!(
        status.success(),
        "exit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(scratch.phase().await, "copied");
    let mut target = ops(TARGET_PORT).await.expect("3311 answers");
    target
        .query_drop(
            "SET SESSION sql_log_bin = 0; \
             UPDATE sp09.pins SET data = 'changed behind the split' WHERE local_id = 7; \
             DELETE FROM sp12.pins WHERE local_id = 100; \
             INSERT INTO sp15.pins (local_id, data, n) VALUES (99999, 'only on the target', 0)",
        )
        .await
        .expect("change, delete and add rows on the target");
    let run = scratch.split(&["--resume", "--max-rows-per-second", "0"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    assert!(
        !status.success(),
        "a difference fails the split\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for line in [
        "shard 9 sp09.pins: rows differ in keys (-inf, +inf): 1 changed: 7",
        "shard 12 sp12.pins: rows differ in keys (-inf, +inf): 1 missing on target: 100",
        "shard 15 sp15.pins: rows differ in keys (-inf, +inf): 1 extra on target: 99999",
    ] {
        assert!(
            stdout.contains(line),
            "each difference names its shard, table and key: {line}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
    assert_eq!(
        stdout.matches("rows differ").count(),
        3,
        "only the planted rows\nstdout:\n{stdout}"
    );
    assert!(stderr.contains("nothing was cut over"), "{stderr}");
    assert_eq!(scratch.master_of(9).await, SOURCE, "no cutover");
    assert_eq!(
        scratch.phase().await,
        "copied",
        "the state stays before the verify"
    );
    assert_eq!(databases_on(SOURCE_PORT).await.len(), 16, "nothing dropped");
}

/// Views (one reading another, named so that the alphabetical order is
/// the wrong one), a trigger, a procedure, a function and an event in a
/// moved database and in a kept one.
const OBJECTS: &str = "CREATE TABLE pin_log (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
     local_id BIGINT UNSIGNED, what VARCHAR(32)); \
     CREATE VIEW b_pins AS SELECT local_id, data FROM pins WHERE n <= 10; \
     CREATE VIEW a_pins AS SELECT local_id FROM b_pins WHERE local_id > 5; \
     CREATE TRIGGER pins_logged AFTER INSERT ON pins FOR EACH ROW \
     INSERT INTO pin_log (local_id, what) VALUES (NEW.local_id, 'inserted'); \
     CREATE PROCEDURE count_pins(OUT total BIGINT) BEGIN SELECT COUNT(*) INTO total FROM pins; END; \
     CREATE FUNCTION doubled(x INT) RETURNS INT DETERMINISTIC RETURN x * 2; \
     CREATE EVENT pins_tick ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM pin_log WHERE id < 0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_copies_views_triggers_routines_and_events() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-objects").await;
    let mut source = ops(SOURCE_PORT).await.expect("3312 answers");
    for db in ["sp09", "sp02"] {
        source
            .query_drop(format!("USE {db}; {OBJECTS}"))
            .await
            .unwrap_or_else(|e| panic!("objects in {db} on 3312: {e}"));
    }
    let _ = source.disconnect().await;
    let run = scratch.split(&["--stop-after", "copy", "--max-rows-per-second", "0"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    assert!(
        status.success(),
        "exit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let mut target = ops(TARGET_PORT).await.expect("3311 answers");
    for db in ["sp09", "sp02"] {
        let viewed: Vec<u64> = target
            .query(format!(
                "SELECT local_id FROM {db}.a_pins ORDER BY local_id"
            ))
            .await
            .unwrap_or_else(|e| panic!("the view {db}.a_pins on the target: {e}\n{stderr}"));
        assert_eq!(viewed, (6..=10).collect::<Vec<u64>>(), "{db}.a_pins");
        let doubled: Option<i64> = target
            .query_first(format!("SELECT {db}.doubled(21)"))
            .await
            .unwrap_or_else(|e| panic!("the function {db}.doubled on the target: {e}"));
        assert_eq!(doubled, Some(42));
        target
            .query_drop(format!("CALL {db}.count_pins(@total)"))
            .await
            .unwrap_or_else(|e| panic!("the procedure {db}.count_pins on the target: {e}"));
        let total: Option<i64> = target.query_first("SELECT @total").await.expect("@total");
        assert_eq!(total, Some(i64::from(ROWS)), "{db}.count_pins");
        let triggers: Vec<(String, String)> = target
            .exec(
                "SELECT TRIGGER_NAME, ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?",
                (db,),
            )
            .await
            .expect("triggers on the target");
        assert_eq!(triggers.len(), 1, "{db}: {triggers:?}");
        assert_eq!(triggers[0].0, "pins_logged");
        let events: Vec<(String, String)> = target
            .exec(
                "SELECT EVENT_NAME, STATUS FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?",
                (db,),
            )
            .await
            .expect("events on the target");
        assert_eq!(
            events,
            vec![("pins_tick".to_owned(), "SLAVESIDE_DISABLED".to_owned())],
            "{db}: the event is copied, not run by the target while the source runs it"
        );
    }
    // The trigger fires on the source and its row replicates (row events
    // do not fire the target's copy of it: one log row, not two).
    let mut source = ops(SOURCE_PORT).await.expect("3312 answers");
    source
        .query_drop("INSERT INTO sp09.pins (data, n) VALUES ('after the copy', 0)")
        .await
        .expect("insert on the source");
    let position: Option<String> = source
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .expect("gtid_binlog_pos");
    let _ = source.disconnect().await;
    let waited: Option<i64> = target
        .exec_first(
            "SELECT MASTER_GTID_WAIT(?, 10)",
            (position.unwrap_or_default(),),
        )
        .await
        .expect("MASTER_GTID_WAIT");
    assert_eq!(waited, Some(0), "the target caught up");
    let logged: Option<i64> = target
        .query_first("SELECT COUNT(*) FROM sp09.pin_log WHERE what = 'inserted'")
        .await
        .expect("pin_log on the target");
    assert_eq!(logged, Some(1), "one log row for one insert");
    let _ = target.disconnect().await;
}

/// Whether a `DROP DATABASE` of `database` waits for a metadata lock on
/// `port`.
async fn drop_waits(port: u16, database: &str) -> bool {
    let mut conn = ops(port).await.expect("scratch server answers");
    let waiting: Vec<String> = conn
        .query(format!(
            "SELECT INFO FROM information_schema.PROCESSLIST WHERE INFO LIKE 'DROP DATABASE%{database}%' \
             AND STATE LIKE 'Waiting for%metadata lock'"
        ))
        .await
        .expect("the process list");
    let _ = conn.disconnect().await;
    !waiting.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_killed_in_prepare_and_in_cleanup_resumes_to_the_same_result() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-kill-ends").await;
    let expected = rows_before().await;
    let run = scratch.split(&["--max-rows-per-second", "0"]);
    let output = tokio::task::spawn_blocking(move || {
        let preparing = run.wait_for("split: prepare ...");
        let output = run.kill();
        assert!(preparing, "the prepare starts:\n{output}");
        output
    })
    .await
    .expect("the CLI thread");
    assert_eq!(
        scratch.phase().await,
        "none",
        "killed in the prepare\n{output}"
    );

    // The resumed run is held in its cleanup: a transaction on the source
    // reads sp12, so its DROP DATABASE waits for the metadata lock.
    let mut holder = ops(SOURCE_PORT).await.expect("3312 answers");
    holder
        .query_drop("START TRANSACTION; SELECT COUNT(*) FROM sp12.pins")
        .await
        .expect("hold sp12");
    scratch.wait_unclaimed().await;
    let run = scratch.split(&["--resume", "--max-rows-per-second", "0"]);
    let (run, cleaning) = tokio::task::spawn_blocking(move || {
        let cleaning = run.wait_for("split: cleanup ...");
        (run, cleaning)
    })
    .await
    .expect("the CLI thread");
    assert!(
        cleaning,
        "--resume after a kill in the prepare:\n{}",
        run.seen()
    );
    let mut waited = 0;
    while !drop_waits(SOURCE_PORT, "sp12").await {
        waited += 1;
        assert!(
            waited < 200,
            "the drop of sp12 never waited:\n{}",
            run.seen()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = run.kill();
    // Read while sp12 is still held: once released, the server may still
    // run the killed CLI's waiting DROP.
    let left: BTreeSet<String> = (0..8).chain(12..16).map(database).collect();
    assert_eq!(
        databases_on(SOURCE_PORT).await,
        left,
        "the cleanup was half done\n{output}"
    );
    holder.query_drop("ROLLBACK").await.expect("release sp12");
    let _ = holder.disconnect().await;
    assert_eq!(
        scratch.phase().await,
        "cutover",
        "killed in the cleanup\n{output}"
    );

    scratch.wait_unclaimed().await;
    let run = scratch.split(&["--resume", "--max-rows-per-second", "0"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || run.finish())
        .await
        .expect("the CLI thread");
    assert!(
        status.success(),
        "--resume after a kill in the cleanup\nexit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_split_done(&scratch, &expected).await;
}
