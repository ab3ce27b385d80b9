//! The split from a file-sourced `shardgate serve` (a real process): the
//! admin port's `SPLIT SHARDS` as a background job followed with `SHOW
//! SPLITS`, and `shardgate fleet split --config FILE --admin HOST:PORT`
//! cutting over through that proxy's `MOVE SHARDS`. The scratch fleet of
//! `split` (16 databases on 127.0.0.1:3312, split 8-15 to the spare
//! 3311), emptied again when each test ends. Run under the fleet lock:
//! `cargo test --test exclusive split_admin::`. One test runs
//! `SPLIT SHARDS` on a ZooKeeper-sourced `shardgate serve`: the state
//! record is the znode beside the document and the cutover the fleet-wide
//! move.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use super::split::{
    database, databases_on, moved, replicates, rows_before, rows_on, yaml, Scratch, SHARDS, SOURCE,
    SOURCE_PORT, TARGET, TARGET_PORT,
};
use crate::common::file_serve::FileServe;
use crate::common::zk_serve::ServeProcess;
use crate::common::{
    connect_to, decode, insert_pin, pin_id, serial, server_error, APP_PASSWORD, APP_USER,
};

/// The longest a split may take here.
const LIMIT: Duration = Duration::from_secs(120);

/// A file-sourced proxy on the scratch fleet's config, with its config
/// file and its admin port (read from its start line).
struct Proxy {
    serve: FileServe,
    config: PathBuf,
    admin: SocketAddr,
}

impl Proxy {
    fn start(name: &str) -> Self {
        let serve = FileServe::start(name, "true", &yaml());
        let config = crate::common::file_serve::config_path(name);
        let admin = serve
            .log
            .lines()
            .find(|line| line.contains("shardgate started"))
            .and_then(|line| line.split("admin=Some(").nth(1))
            .and_then(|rest| rest.split(')').next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no admin address in the start line:\n{}", serve.log));
        Self {
            serve,
            config,
            admin,
        }
    }

    async fn admin(&self) -> Conn {
        connect_to(self.admin, "admin", "admin")
            .await
            .expect("admin login")
    }

    async fn app(&self) -> Conn {
        connect_to(self.serve.client, APP_USER, APP_PASSWORD)
            .await
            .expect("client login")
    }

    /// The master the config file names for `shard` now.
    fn master_in_file(&self, shard: u32) -> String {
        master_in(&self.config, shard)
    }

    /// The phase of the split's state record next to the config file.
    fn phase(&self) -> String {
        let path = shardgate::ops::split::state::default_state_path(&self.config, "split", 8, 15);
        shardgate::ops::split::state::read_state(&path)
            .expect("read the state file")
            .map_or_else(|| "none".to_owned(), |s| s.phase.name().to_owned())
    }
}

fn master_in(config: &Path, shard: u32) -> String {
    let topology = shardgate::topology::Topology::load(config).expect("the config file loads");
    let fleet = topology.fleet_by_name("split").expect("fleet split");
    let host = topology.master_of(fleet, shard).expect("a master");
    topology.hosts[host].addr.clone()
}

/// What the split left: the range on the target only with `expected`
/// rows, the rest on the source only, no replication, the file routing
/// the range to the target, and rows of the range read (and written)
/// through the proxy on the target.
async fn assert_split_done(proxy: &Proxy, expected: &[BTreeSet<(u64, String)>]) {
    let range: BTreeSet<String> = moved().map(database).collect();
    let rest: BTreeSet<String> = (0..8).map(database).collect();
    assert_eq!(
        databases_on(TARGET_PORT).await,
        range,
        "the target holds the moved databases"
    );
    assert_eq!(
        databases_on(SOURCE_PORT).await,
        rest,
        "the source keeps 0-7 only"
    );
    for shard in moved() {
        assert_eq!(
            rows_on(TARGET_PORT, shard).await,
            expected[shard as usize],
            "rows of {} on the target",
            database(shard)
        );
    }
    assert!(
        !replicates(TARGET_PORT).await,
        "the target no longer replicates"
    );
    assert_eq!(proxy.master_in_file(8), TARGET);
    assert_eq!(proxy.master_in_file(15), TARGET);
    assert_eq!(proxy.master_in_file(7), SOURCE);
    assert_eq!(proxy.phase(), "cleanup", "the state record says done");
    // Through the proxy: a moved row read (its database is gone from the
    // source, so only the target can answer), a new one written to the
    // target, a kept shard still read on the source.
    let mut app = proxy.app().await;
    let (local, data) = expected[9].iter().next().expect("shard 9 has rows").clone();
    let read: Option<String> = app
        .query_first(format!(
            "SELECT data FROM pins WHERE id = {}",
            pin_id(9, local)
        ))
        .await
        .expect("read a moved row through the proxy");
    assert_eq!(read, Some(data), "shard 9's row through the proxy");
    let id = insert_pin(&mut app, 12, "after the split").await;
    assert!(
        rows_on(TARGET_PORT, 12)
            .await
            .contains(&(decode(id).local_id, "after the split".to_owned())),
        "the write landed on the target"
    );
    let (local, data) = expected[3].iter().next().expect("shard 3 has rows").clone();
    let read: Option<String> = app
        .query_first(format!(
            "SELECT data FROM pins WHERE id = {}",
            pin_id(3, local)
        ))
        .await
        .expect("read a kept row through the proxy");
    assert_eq!(read, Some(data), "shard 3's row through the proxy");
}

/// `SHOW SPLITS` as (column, value) maps, a row each.
pub(crate) async fn show_splits(admin: &mut Conn) -> Vec<Vec<(String, String)>> {
    let rows: Vec<Row> = admin.query("SHOW SPLITS").await.expect("SHOW SPLITS");
    rows.into_iter()
        .map(|row| {
            let columns: Vec<String> = row
                .columns_ref()
                .iter()
                .map(|c| c.name_str().into_owned())
                .collect();
            columns
                .into_iter()
                .enumerate()
                .map(|(i, name)| {
                    let value: Option<String> = row.get(i).flatten();
                    (name, value.unwrap_or_else(|| "NULL".to_owned()))
                })
                .collect()
        })
        .collect()
}

pub(crate) fn cell<'r>(row: &'r [(String, String)], column: &str) -> &'r str {
    row.iter()
        .find(|(name, _)| name == column)
        .map_or("", |(_, value)| value.as_str())
}

/// Polls `SHOW SPLITS` until its one split ends: the phases seen, the copy
/// progress seen (a `copy` row whose progress counts databases), the last
/// row.
pub(crate) async fn follow(
    admin: &mut Conn,
    started: Instant,
) -> (BTreeSet<String>, Option<String>, Vec<(String, String)>) {
    let mut phases_seen = BTreeSet::new();
    let mut copy_progress = None;
    loop {
        let rows = show_splits(admin).await;
        assert_eq!(rows.len(), 1, "one split: {rows:?}");
        let row = rows.into_iter().next().unwrap_or_default();
        phases_seen.insert(cell(&row, "phase").to_owned());
        if cell(&row, "phase") == "copy" && cell(&row, "progress").contains("databases") {
            copy_progress = Some(cell(&row, "progress").to_owned());
        }
        if cell(&row, "state") != "running" {
            return (phases_seen, copy_progress, row);
        }
        assert!(started.elapsed() < LIMIT, "the split still runs: {row:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_split_shards_runs_in_the_background_refuses_a_second_and_cuts_over_the_file() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-admin-e2e").await;
    let expected = rows_before().await;
    let proxy = Proxy::start("split-admin-e2e");
    let mut admin = proxy.admin().await;

    // Bad arguments: refused at once, saying what is expected.
    let error = admin
        .query_drop("SPLIT SHARDS 8-15 TO nowhere")
        .await
        .map(|()| "accepted".to_owned())
        .map_err(server_error);
    let (code, message) = error.expect_err("a target without a port is refused");
    assert_eq!(code, 1064, "{message}");
    assert!(
        message.contains("host:port") && message.contains("'nowhere'"),
        "{message}"
    );
    let (code, message) = admin
        .query_drop(format!("SPLIT SHARDS 8-{} TO {TARGET}", SHARDS + 4))
        .await
        .map_err(server_error)
        .expect_err("a range outside the fleet is refused");
    assert_eq!(code, 1210, "{message}");
    assert!(message.contains("SPLIT SHARDS"), "{message}");
    assert!(show_splits(&mut admin).await.is_empty(), "nothing started");
    let (code, message) = admin
        .query_drop(format!("SPLIT SHARDS 8-15 TO {TARGET} RESUME"))
        .await
        .map_err(server_error)
        .expect_err("RESUME without a record is refused");
    assert_eq!(code, 1210, "{message}");
    assert!(message.contains("no split recorded"), "{message}");

    // The split: answered at once with its job.
    let started = Instant::now();
    let answer: Vec<Row> = admin
        .query(format!(
            "SPLIT SHARDS 8-15 IN split TO {TARGET} MAX 1000 ROWS PER SECOND GRACE 0 SECONDS"
        ))
        .await
        .expect("SPLIT SHARDS starts");
    assert_eq!(answer.len(), 1, "one row: the job");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at once, not at the end ({:?})",
        started.elapsed()
    );
    let (code, message) = admin
        .query_drop(format!("SPLIT SHARDS 0-3 TO {TARGET}"))
        .await
        .map_err(server_error)
        .expect_err("a second split while one runs is refused");
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("is running") && message.contains("SHOW SPLITS"),
        "{message}"
    );

    // Followed with SHOW SPLITS until it ends.
    let (phases_seen, copy_progress, last) = follow(&mut admin, started).await;
    assert_eq!(cell(&last, "state"), "done", "{last:?}");
    assert_eq!(cell(&last, "last_error"), "NULL", "{last:?}");
    assert_eq!(cell(&last, "source"), SOURCE, "{last:?}");
    assert_eq!(cell(&last, "shards"), "8-15", "{last:?}");
    assert!(
        cell(&last, "state_record").ends_with("shardgate.yaml.split-split-8-15.state"),
        "{last:?}"
    );
    assert!(
        phases_seen.contains("copy") && phases_seen.contains("verify"),
        "phases seen: {phases_seen:?}"
    );
    let progress =
        copy_progress.unwrap_or_else(|| panic!("no copy progress seen: {phases_seen:?}"));
    assert!(progress.contains("/16 databases"), "{progress}");
    assert_split_done(&proxy, &expected).await;

    // The CLI sees the same state record: done.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["fleet", "split", "--config"])
        .arg(&proxy.config)
        .args(["--shards", "8-15", "--to", TARGET, "--resume"])
        .output()
        .expect("run fleet split");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout.contains("already done"), "{stdout}");
    drop(scratch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_split_with_a_config_file_cuts_over_through_the_proxy_admin_port() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-admin-cli").await;
    let expected = rows_before().await;
    let proxy = Proxy::start("split-admin-cli");
    let admin = proxy.admin.to_string();
    let config = proxy.config.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["fleet", "split", "--config"])
            .arg(&config)
            .args(["--shards", "8-15", "--to", TARGET, "--grace", "0"])
            .args(["--max-rows-per-second", "0", "--admin", &admin])
            .output()
            .expect("run fleet split")
    })
    .await
    .expect("the CLI thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("cutover\twrite\t"),
        "the proxy's MOVE SHARDS steps:\n{stdout}"
    );
    assert!(stderr.contains("on the admin port"), "{stderr}");
    assert_split_done(&proxy, &expected).await;
    drop(scratch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_split_shards_on_a_zookeeper_sourced_proxy_keeps_the_znode_record_and_pushes_the_move(
) {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-admin-zk").await;
    let expected = rows_before().await;
    let proxy = ServeProcess::start(&scratch.location, "split-admin-zk").await;
    let mut admin = connect_to(proxy.admin, "admin", "admin")
        .await
        .expect("admin login");
    let started = Instant::now();
    admin
        .query_drop(format!(
            "SPLIT SHARDS 8-15 TO {TARGET} MAX 0 ROWS PER SECOND GRACE 0 SECONDS"
        ))
        .await
        .expect("SPLIT SHARDS starts");
    let (_, _, last) = follow(&mut admin, started).await;
    assert_eq!(cell(&last, "state"), "done", "{last:?}");
    assert!(
        cell(&last, "state_record").starts_with("znode ")
            && cell(&last, "state_record").ends_with("/splits/split-8-15"),
        "{last:?}"
    );
    assert_eq!(scratch.phase().await, "done", "the znode record");
    assert_eq!(
        scratch.master_of(8).await,
        TARGET,
        "the document was pushed"
    );
    assert_eq!(scratch.master_of(15).await, TARGET);
    assert_eq!(scratch.master_of(7).await, SOURCE);
    let range: BTreeSet<String> = moved().map(database).collect();
    assert_eq!(databases_on(TARGET_PORT).await, range);
    assert_eq!(databases_on(SOURCE_PORT).await.len(), 8);
    let mut app = connect_to(proxy.client, APP_USER, APP_PASSWORD)
        .await
        .expect("client login");
    let (local, data) = expected[10]
        .iter()
        .next()
        .expect("shard 10 has rows")
        .clone();
    let read: Option<String> = app
        .query_first(format!(
            "SELECT data FROM pins WHERE id = {}",
            pin_id(10, local)
        ))
        .await
        .expect("read a moved row through the proxy");
    assert_eq!(read, Some(data), "shard 10's row through the proxy");
    drop(app);
    drop(admin);
    proxy.terminate().await;
    drop(scratch);
}
