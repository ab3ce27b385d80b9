//! `shardgate fleet move` stopped by SIGINT, held at a step by a
//! registered "proxy" the test plays: before the write (it never acks the
//! pause) the pause is withdrawn and nothing changed, and a RESUME SHARDS
//! typed meanwhile is refused naming the move; after the write (it acks
//! but stays on the old version) the pause stays and the CLI names the
//! version written and the RESUME SHARDS ... FORCE. A RESUME SHARDS ...
//! FORCE typed after a move's write is reported when the move resumes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use shardgate::control::zookeeper::PauseRecord;

use super::*;

/// The CLI's move, its stderr lines sent to the channel as they come.
fn spawn_move(source: &str) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["fleet", "move", "--source", source])
        .args([
            "--shards",
            "1024-2047",
            "--fleet",
            "main",
            "--to",
            "127.0.0.1:3309",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run target/debug/shardgate");
    let stderr = child.stderr.take().expect("stderr");
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    (child, received)
}

/// Waits for the stderr line starting with `prefix`; every line read.
fn wait_line(lines: &mpsc::Receiver<String>, prefix: &str, seen: &mut Vec<String>) {
    let limit = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < limit {
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(100)) {
            let found = line.starts_with(prefix);
            seen.push(line);
            if found {
                return;
            }
        }
    }
    panic!("no line starting with {prefix:?} in {seen:#?}");
}

/// SIGINT to `child`, then its exit code and the rest of its stderr.
fn interrupt(
    mut child: Child,
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
) -> Option<i32> {
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(sent.success());
    let status = child.wait().expect("wait for the CLI");
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(2)) {
        seen.push(line);
    }
    status.code()
}

/// Registers `id` as a live proxy on znode version 0 (ephemeral, on the
/// test's own session).
async fn register(client: &zookeeper_client::Client, location: &ZkLocation, id: &str) {
    let entry = shardgate::control::process::Process::new(
        id.to_owned(),
        shardgate::topology::bootstrap::ListenOverrides::default(),
    )
    .entry("old".to_owned(), Some(0));
    client
        .mkdir(
            &location.registry_path(),
            &zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .expect("the registry");
    client
        .create(
            &location.registry_entry(id),
            &entry.to_json(),
            &zookeeper_client::CreateMode::Ephemeral
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .expect("register the test's proxy");
}

/// The first pause record under the document, waited for.
async fn first_record(location: &ZkLocation) -> (String, PauseRecord) {
    let client = raw_client().await;
    let deadline = Deadline::new("the move's pause record", Duration::from_secs(10));
    loop {
        if let Some(id) = pause_records(location).await.pop() {
            let path = format!("{}/pauses/{id}", location.path);
            let (data, _) = client.get_data(&path).await.expect("read the record");
            let record = PauseRecord::from_json(&data).expect("a pause record");
            return (id, record);
        }
        deadline.retry("no record").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_before_the_write_withdraws_the_pause_and_changes_nothing() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-sigint").await;
    let location = location("cut-sigint");
    push(&location, &test_config_yaml(), None).await;
    let proxy = guard.start(&location, "sigint-1");
    let silent = raw_client().await;
    register(&silent, &location, "silent").await;

    let (child, lines) = spawn_move(&location.to_string());
    let (id, record) = first_record(&location).await;
    assert_eq!(record.cutover.as_deref(), Some(MOVE), "{record:?}");
    assert!(record.requested_by.starts_with("cli:"), "{record:?}");
    let (code, refused) = admin_command(&proxy, "RESUME SHARDS 1024-2047 IN main")
        .await
        .expect_err("the move holds the range");
    assert_eq!(code, 1105, "{refused}");
    assert!(
        refused.contains(&format!("held by the cutover `{MOVE}`")),
        "{refused}"
    );
    assert!(
        refused.contains("RESUME SHARDS 1024-2047 IN main FORCE"),
        "{refused}"
    );
    assert_eq!(pause_records(&location).await, [id], "the RESUME left it");

    let mut seen = Vec::new();
    let code = interrupt(child, &lines, &mut seen);
    let stderr = seen.join("\n");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("fleet move stopped by SIGINT"), "{stderr}");
    assert!(
        stderr.contains("the pause was withdrawn") && stderr.contains("nothing changed"),
        "{stderr}"
    );
    assert!(pause_records(&location).await.is_empty(), "{stderr}");
    assert_eq!(znode_version(&location).await, 0, "nothing written");
    wait_resumed(&proxy).await;
    assert_eq!(master_of(&proxy, MOVED_SHARD), "127.0.0.1:3307");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_after_the_write_keeps_the_pause_and_names_the_resume() {
    let _serial = serial().await;
    let _guard = FleetGuard::new("cut-sigint-late").await;
    let location = location("cut-sigint-late");
    let yaml = test_config_yaml().replace(
        "pause: { timeout_ms: 5000, drain_timeout_ms: 5000 }",
        "pause: { timeout_ms: 20000, drain_timeout_ms: 5000 }",
    );
    assert_ne!(
        yaml,
        test_config_yaml(),
        "the pause line of the config moved"
    );
    push(&location, &yaml, None).await;
    let stale = raw_client().await;
    register(&stale, &location, "stale").await;

    let (child, lines) = spawn_move(&location.to_string());
    let (id, _) = first_record(&location).await;
    stale
        .create(
            &format!("{}/pauses/{id}/acks/stale", location.path),
            b"",
            &zookeeper_client::CreateMode::Ephemeral
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .expect("ack as the stale proxy");
    let mut seen = Vec::new();
    wait_line(&lines, "write (", &mut seen);
    wait_line(&lines, "proxies ...", &mut seen);
    let code = interrupt(child, &lines, &mut seen);
    let stderr = seen.join("\n");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("stopped after the new shard map was written (znode version 1"),
        "{stderr}"
    );
    assert!(stderr.contains("STAY PAUSED"), "{stderr}");
    assert!(stderr.contains(&format!("held by `{MOVE}`")), "{stderr}");
    assert!(
        stderr.contains("RESUME SHARDS 1024-2047 IN main FORCE"),
        "{stderr}"
    );
    assert_eq!(pause_records(&location).await, [id], "the pause stays");
    assert_eq!(znode_version(&location).await, 1);
}

/// A `RESUME SHARDS ... FORCE` after the move's write (a proxy held the
/// adoption wait) is found at the move's final resume and reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_resume_during_the_move_is_reported_at_its_end() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-forced").await;
    let location = location("cut-forced");
    push(&location, &test_config_yaml(), None).await;
    let one = guard.start(&location, "forced-1");
    let stale = raw_client().await;
    register(&stale, &location, "lagging").await;

    let moving = tokio::spawn(admin_command_at(admin_addr(&one), MOVE.to_owned()));
    let (id, _) = first_record(&location).await;
    stale
        .create(
            &format!("{}/pauses/{id}/acks/lagging", location.path),
            b"",
            &zookeeper_client::CreateMode::Ephemeral
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .expect("ack as the lagging proxy");
    let deadline = Deadline::new("the move's write", Duration::from_secs(10));
    while znode_version(&location).await != 1 {
        deadline.retry("not written").await;
    }
    let forced = admin_command(&one, "RESUME SHARDS 1024-2047 IN main FORCE")
        .await
        .unwrap_or_else(|e| panic!("forced resume: {e:?}"));
    assert_eq!(forced.len(), 1, "{forced:?}");
    assert_eq!(forced[0][5], MOVE, "the cutover column: {forced:?}");
    // The lagging proxy takes the new map: the move goes on to resume.
    let entry = shardgate::control::process::Process::new(
        "lagging".to_owned(),
        shardgate::topology::bootstrap::ListenOverrides::default(),
    )
    .entry("new".to_owned(), Some(1));
    stale
        .set_data(&location.registry_entry("lagging"), &entry.to_json(), None)
        .await
        .expect("the lagging proxy runs version 1");

    let (code, message) = moving
        .await
        .unwrap()
        .expect_err("the lost record is an error");
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains(&format!(
            "the pause records {id} were deleted by someone else"
        )),
        "{message}"
    );
    assert!(pause_records(&location).await.is_empty());
    wait_resumed(&one).await;
}
