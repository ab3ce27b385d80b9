//! One driver per split: `shardgate fleet split` and the admin port's
//! `SPLIT SHARDS ... RESUME` claim the split before running it (an `flock`
//! beside a file record, an ephemeral znode beside a znode record), so a
//! second driver of the same split is refused at once, naming the holder;
//! a SIGKILLed holder's claim goes with its process (or its ZooKeeper
//! session) and a resume then continues. The scratch fleet of `split`
//! (16 databases on 127.0.0.1:3312, split 8-15 to the spare 3311). Run
//! under the fleet lock: `cargo test --test exclusive split_claim::`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::split::{
    database, databases_on, moved, rows_before, rows_on, yaml, CliRun, Scratch, SOURCE, TARGET,
    TARGET_PORT,
};
use super::split_admin::{cell, follow, show_splits};
use crate::common::zk_serve::ServeProcess;
use crate::common::{connect_to, serial, server_error};

/// What the refused driver is told.
const REFUSED: &str = "is being run by another driver";

/// `shardgate fleet split --config <config>` of 8-15 to the spare (no
/// `--admin`: it stops before the cutover unless told to stop earlier).
fn file_split(config: &Path, extra: &[&str]) -> CliRun {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shardgate"));
    command
        .args(["fleet", "split", "--config"])
        .arg(config)
        .args(["--shards", "8-15", "--to", TARGET, "--grace", "0"])
        .args(extra);
    CliRun::start(command)
}

/// The phase in the state file next to `config`, `none` without one.
fn file_phase(config: &Path) -> String {
    let path = shardgate::ops::split::state::default_state_path(config, "split", 8, 15);
    shardgate::ops::split::state::read_state(&path)
        .expect("read the state file")
        .map_or_else(|| "none".to_owned(), |s| s.phase.name().to_owned())
}

/// Waits for the copy of `run` to start; gives the run back.
async fn copying(run: CliRun) -> CliRun {
    tokio::task::spawn_blocking(move || {
        assert!(
            run.wait_for("split: copy 127.0.0.1:3312"),
            "the copy starts:\n{}",
            run.seen()
        );
        run
    })
    .await
    .expect("the CLI thread")
}

/// The range's rows on the target are the source's before the split.
async fn assert_range_on_target(expected: &[BTreeSet<(u64, String)>]) {
    for shard in moved() {
        assert_eq!(
            rows_on(TARGET_PORT, shard).await,
            expected[shard as usize],
            "rows of {} on the target",
            database(shard)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_claim_a_second_cli_on_a_file_record_is_refused_and_a_killed_holder_resumes_at_once()
{
    let _fleet = serial().await;
    let scratch = Scratch::new("split-claim-file").await;
    let expected = rows_before().await;
    let config: PathBuf = crate::common::file_serve::config_path("split-claim-file");
    if let Some(dir) = config.parent() {
        std::fs::create_dir_all(dir).expect("the config's directory");
    }
    std::fs::write(&config, yaml()).expect("write the config");

    // The holder copies slowly (4800 rows at 300 a second).
    let holder = copying(file_split(&config, &["--max-rows-per-second", "300"])).await;
    let pid = holder.pid();
    let since = Instant::now();
    while file_phase(&config) != "copying" {
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "{}",
            holder.seen()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A second CLI on the same record is refused at once, naming the
    // holder, with or without --resume.
    for extra in [
        &["--resume", "--max-rows-per-second", "0"][..],
        &["--max-rows-per-second", "0"][..],
    ] {
        let second = file_split(&config, extra);
        let started = Instant::now();
        let (status, stdout, stderr) = tokio::task::spawn_blocking(move || second.finish())
            .await
            .expect("the CLI thread");
        assert!(
            !status.success(),
            "a second driver ran ({extra:?}):\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        assert!(
            stderr.contains(REFUSED)
                && stderr.contains("cli@")
                && stderr.contains(&format!(":{pid}, since "))
                && stderr.contains("fuser"),
            "the refusal names the holder and what to do ({extra:?}):\n{stderr}"
        );
        assert!(
            !stderr.contains("split: copy"),
            "the refused driver copied nothing:\n{stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "refused at once, not after {:?}",
            started.elapsed()
        );
    }
    assert_eq!(file_phase(&config), "copying", "the holder goes on");

    // SIGKILLed: the kernel released the lock; a resume at once continues.
    let output = holder.kill();
    assert_eq!(
        file_phase(&config),
        "copying",
        "killed in the copy\n{output}"
    );
    let resumed = file_split(
        &config,
        &[
            "--resume",
            "--max-rows-per-second",
            "0",
            "--stop-after",
            "verify",
        ],
    );
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || resumed.finish())
        .await
        .expect("the CLI thread");
    assert!(
        status.success(),
        "--resume after the holder was killed\nexit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(file_phase(&config), "verify", "{stderr}");
    assert_range_on_target(&expected).await;
    let _ = std::fs::remove_dir_all(config.parent().unwrap_or(&config));
    drop(scratch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_claim_cli_and_admin_resume_on_a_znode_record_exclude_each_other() {
    let _fleet = serial().await;
    let scratch = Scratch::new("split-claim-zk").await;
    let expected = rows_before().await;
    let proxy = ServeProcess::start(&scratch.location, "split-claim-zk").await;
    let mut admin = connect_to(proxy.admin, "admin", "admin")
        .await
        .expect("admin login");
    let resume =
        format!("SPLIT SHARDS 8-15 TO {TARGET} RESUME MAX 1000 ROWS PER SECOND GRACE 0 SECONDS");

    // A CLI runs the split; the proxy's RESUME of it is refused, naming
    // the CLI and the session timeout a dead holder's claim lasts.
    let cli = copying(scratch.split(&["--max-rows-per-second", "300"])).await;
    let pid = cli.pid();
    let since = Instant::now();
    while scratch.phase().await != "copying" {
        assert!(since.elapsed() < Duration::from_secs(10), "{}", cli.seen());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, message) = admin
        .query_drop(&resume)
        .await
        .map_err(server_error)
        .expect_err("RESUME while a CLI runs the split is refused");
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains(REFUSED)
            && message.contains(&format!(":{pid}, since "))
            && message.contains("cli@")
            && message.contains("ZooKeeper session expires"),
        "{message}"
    );
    assert!(
        show_splits(&mut admin).await.is_empty(),
        "no job was started"
    );
    assert_eq!(scratch.phase().await, "copying", "the CLI goes on");

    // SIGKILLed: once ZooKeeper expired its session, the RESUME starts,
    // with nobody removing anything by hand.
    let output = cli.kill();
    let killed = Instant::now();
    let started = loop {
        match admin.query_drop(&resume).await.map_err(server_error) {
            Ok(()) => break Instant::now(),
            Err((code, message)) => {
                assert!(
                    code == 1105 && message.contains(REFUSED),
                    "{code} {message}\n{output}"
                );
                assert!(
                    killed.elapsed() < Duration::from_secs(30),
                    "still claimed {:?} after the kill: {message}",
                    killed.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };

    // While the proxy's job runs, a CLI --resume is refused naming it.
    let second = scratch.split(&["--resume", "--max-rows-per-second", "0"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || second.finish())
        .await
        .expect("the CLI thread");
    assert!(
        !status.success(),
        "a second driver ran:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains(REFUSED) && stderr.contains("proxy split-claim-zk"),
        "{stderr}"
    );
    let rows = show_splits(&mut admin).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        cell(&rows[0], "state"),
        "running",
        "the job ran meanwhile: {rows:?}"
    );

    let (_, _, last) = follow(&mut admin, started).await;
    assert_eq!(cell(&last, "state"), "done", "{last:?}");
    assert_eq!(scratch.phase().await, "done", "the znode record");
    assert_eq!(scratch.master_of(8).await, TARGET);
    assert_eq!(scratch.master_of(7).await, SOURCE);
    let range: BTreeSet<String> = moved().map(database).collect();
    assert_eq!(databases_on(TARGET_PORT).await, range);
    assert_range_on_target(&expected).await;
    // Done: the claim was given up.
    scratch.wait_unclaimed().await;
    drop(admin);
    proxy.terminate().await;
    drop(scratch);
}
