//! `shardgate config push|get` and `serve --config zookeeper://...` through
//! the built binary; the push's version checks through the library.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::serve::ServeProcess;
use super::*;

fn shardgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(args)
        // The test documents are open to anyone (no credentials).
        .arg("--zk-allow-open-acl")
        .output()
        .expect("run target/debug/shardgate")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn a_push_with_a_stale_version_loses_and_the_znode_is_unchanged() {
    let test = "stale";
    clean(test).await;
    let location = location(test);
    let missing = zookeeper::get(&location).await.expect_err("no znode yet");
    assert!(missing.to_string().contains("does not exist"), "{missing}");
    let first = push(&location, &document(), None).await;
    let second = push(
        &location,
        &document_with_account("stale"),
        Some(first.znode_version),
    )
    .await;
    assert_eq!(second.znode_version, 1);

    // Based on version 0, which is gone.
    let error = zookeeper::push(
        &location,
        format!("{}\n# late\n", document()).as_bytes(),
        "late.yaml",
        Some(0),
    )
    .await
    .expect_err("a stale push loses");
    let message = error.to_string();
    assert!(
        message.contains("at version 1, not the expected version 0"),
        "{message}"
    );
    assert!(message.contains("nothing was written"), "{message}");
    let now = zookeeper::get(&location).await.expect("get");
    assert_eq!(now.znode_version, 1, "the znode is unchanged");
    assert_eq!(now.bytes, document_with_account("stale").into_bytes());

    // An invalid file is refused before anything is written.
    let error = zookeeper::push(&location, b"fleets: 3\n", "bad.yaml", None)
        .await
        .expect_err("invalid");
    assert!(error.to_string().contains("bad.yaml"), "{error}");
    assert_eq!(zookeeper::get(&location).await.unwrap().znode_version, 1);
    clean(test).await;
}

#[tokio::test]
async fn the_cli_pushes_gets_and_serves_from_a_znode() {
    let test = "cli";
    clean(test).await;
    let location = location(test);
    let source = location.to_string();
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("zk-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("shardgate.yaml");
    std::fs::write(&file, document()).unwrap();
    let file_arg = file.display().to_string();

    let pushed = shardgate(&["config", "push", &file_arg, "--source", &source]);
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    assert!(
        stdout(&pushed).contains("znode version 0 (created)"),
        "{}",
        stdout(&pushed)
    );

    let got = shardgate(&["config", "get", "--source", &source]);
    assert!(got.status.success(), "{}", stderr(&got));
    assert_eq!(stdout(&got), document());
    let md5 = shardgate::control::status::version_of(document().as_bytes());
    assert!(
        stderr(&got).contains(&format!("znode version 0, md5 {md5}")),
        "{}",
        stderr(&got)
    );

    let stale = shardgate(&[
        "config",
        "push",
        &file_arg,
        "--source",
        &source,
        "--expected-version",
        "7",
    ]);
    assert_eq!(stale.status.code(), Some(1), "{}", stderr(&stale));
    assert!(
        stderr(&stale).contains("at version 0, not the expected version 7"),
        "{}",
        stderr(&stale)
    );
    let not_zk = shardgate(&["config", "get", "--source", "some/file.yaml"]);
    assert_eq!(not_zk.status.code(), Some(1));
    assert!(
        stderr(&not_zk).contains("zookeeper://host:port"),
        "{}",
        stderr(&not_zk)
    );

    // serve from the znode, with a bootstrap file and a flag over it.
    let bootstrap = dir.join("bootstrap.yaml");
    std::fs::write(
        &bootstrap,
        format!("config: {source}\nproxy_id: from-bootstrap\nlisten: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n"),
    )
    .unwrap();
    let served = ServeProcess::start_with(
        &location,
        "cli-1",
        &[
            "--bootstrap",
            &bootstrap.display().to_string(),
            "--proxy-id",
            "cli-1",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    )
    .await;
    assert_eq!(
        served.entry.id, "cli-1",
        "the flag beats the bootstrap file"
    );
    assert_eq!(served.entry.config_version, md5);
    assert!(
        served.entry.addresses.metrics.is_some(),
        "--metrics-listen adds the endpoint"
    );
    // SIGTERM: it leaves the registry and exits cleanly.
    served.terminate().await;
    let client = raw_client().await;
    assert_eq!(
        client
            .check_stat(&location.registry_entry("cli-1"))
            .await
            .expect("stat"),
        None,
        "the entry is gone"
    );
    drop(client);
    std::fs::remove_dir_all(&dir).ok();
    clean(test).await;
}

#[tokio::test]
async fn a_sigterm_while_serve_starts_makes_it_leave_the_registry() {
    let test = "cli-term";
    clean(test).await;
    let location = location(test);
    push(&location, &document(), None).await;
    let log = repo_root()
        .join("target/test-configs")
        .join(format!("zk-cli-term-{}.log", std::process::id()));
    let mut serve = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["serve", "--config", &location.to_string()])
        .args(["--proxy-id", "term-1", "--zk-allow-open-acl"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("create the serve log"))
        .spawn()
        .expect("start shardgate serve");
    let client = raw_client().await;
    let entry_path = location.registry_entry("term-1");
    // The entry exists from the start's registration on, before the proxy
    // listens: the signal comes while it starts.
    let deadline =
        Deadline::new("term-1 registers", Duration::from_secs(20)).every(Duration::from_millis(1));
    while client
        .check_stat(&entry_path)
        .await
        .expect("stat")
        .is_none()
    {
        deadline.retry("no entry").await;
    }
    let killed = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Deadline::new("serve exits on SIGTERM", Duration::from_secs(15));
    let status = loop {
        if let Some(status) = serve.try_wait().expect("wait") {
            break status;
        }
        deadline.retry("running").await;
    };
    let serve_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "serve on SIGTERM: {status}: {serve_log}");
    assert!(serve_log.contains("SIGTERM: draining"), "{serve_log}");
    assert_eq!(
        client.check_stat(&entry_path).await.expect("stat"),
        None,
        "the entry is still there"
    );
    std::fs::remove_file(&log).ok();
    drop(client);
    clean(test).await;
}

#[tokio::test]
async fn check_config_and_push_refuse_a_hostile_document_at_once() {
    let test = "cli-hostile";
    clean(test).await;
    let location = location(test);
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("zk-cli-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("deep.yaml");
    let levels = 200_000;
    std::fs::write(
        &file,
        format!("listen: {}{}\n", "[".repeat(levels), "]".repeat(levels)),
    )
    .unwrap();
    let file_arg = file.display().to_string();
    let source = location.to_string();
    for args in [
        vec!["check-config", file_arg.as_str()],
        vec![
            "config",
            "push",
            file_arg.as_str(),
            "--source",
            source.as_str(),
        ],
    ] {
        let started = std::time::Instant::now();
        let output = shardgate(&args);
        let took = started.elapsed();
        println!("{} refused in {took:?}", args[..2].join(" "));
        assert!(!output.status.success(), "{args:?}: {}", stdout(&output));
        assert!(
            stderr(&output).contains("nested more than 32 deep"),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(took < Duration::from_secs(2), "{args:?} took {took:?}");
    }
    let missing = zookeeper::get(&location)
        .await
        .expect_err("nothing written");
    assert!(missing.to_string().contains("does not exist"), "{missing}");
    clean(test).await;
}

/// `config push` of a document that would send existing data to other
/// shards (the mod fleet's shard count doubled) is refused before writing,
/// and the proxy following the znode keeps routing as before (checked on
/// the server); `--allow-rehome` writes it and the proxy loads it.
#[tokio::test]
async fn a_push_that_rehomes_data_is_refused_unless_allowed() {
    use shardgate::id::mod_shard;
    const MOD_FLEET: &str = "    shards: 4096\n    database: \"msdb{:05}\"\n    hosts:\n      - { range: [0, 4095], master: 127.0.0.1:3310 }\n";
    let test = "rehome";
    clean(test).await;
    let location = location(test);
    let source = location.to_string();
    let yaml = document();
    assert!(yaml.contains(MOD_FLEET), "config/shardgate.yaml changed");
    let rehoming = yaml.replace(
        MOD_FLEET,
        &MOD_FLEET
            .replace("shards: 4096", "shards: 8192")
            .replace("[0, 4095]", "[0, 8191]"),
    );
    let first = push(&location, &yaml, None).await;
    let proxy = start(&location, "rehome-a");
    let pid = std::process::id();
    let email = (0..)
        .map(|i| format!("zk-rehome-{pid}-{i}@example.com"))
        .find(|e| mod_shard(e.as_bytes(), 4096) != mod_shard(e.as_bytes(), 8192))
        .unwrap();
    let old_db = format!("msdb{:05}", mod_shard(email.as_bytes(), 4096));
    let new_db = format!("msdb{:05}", mod_shard(email.as_bytes(), 8192));
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("zk-rehome-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("shardgate.yaml");
    std::fs::write(&file, &rehoming).unwrap();
    let file_arg = file.display().to_string();

    let refused = shardgate(&["config", "push", &file_arg, "--source", &source]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    for needle in [
        "fleet mod: shard count 4096 -> 8192",
        "nothing was written",
        "--allow-rehome",
    ] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    let now = zookeeper::get(&location).await.expect("get");
    assert_eq!(
        now.znode_version, first.znode_version,
        "the znode is unchanged"
    );
    assert_eq!(proxy.control.config_status().version, first.version);

    // The proxy still routes by 4096 shards: the row lands there.
    let mut conn = app(&proxy).await;
    conn.query_drop(format!(
        "INSERT INTO user_by_email (email, user_id) VALUES ('{email}', 7)"
    ))
    .await
    .expect("insert through the proxy");
    conn.disconnect().await.ok();
    let mut server = operations(MOD_HOST).await;
    let landed: Option<u64> = server
        .query_first(format!(
            "SELECT COUNT(*) FROM {old_db}.user_by_email WHERE email = '{email}'"
        ))
        .await
        .unwrap();
    assert_eq!(landed, Some(1), "the row should be in {old_db} on 3310");
    server
        .query_drop(format!(
            "DELETE FROM {old_db}.user_by_email WHERE email = '{email}'"
        ))
        .await
        .unwrap();
    server.disconnect().await.ok();

    // --allow-rehome writes it; the proxy loads what the znode holds.
    let allowed = shardgate(&[
        "config",
        "push",
        &file_arg,
        "--source",
        &source,
        "--allow-rehome",
    ]);
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    let version = shardgate::control::status::version_of(rehoming.as_bytes());
    wait_until(
        "the proxy loads the pushed document",
        Duration::from_secs(5),
        || proxy.control.config_status().version == version,
    )
    .await;
    let mut admin = admin(&proxy).await;
    let statement = format!("SELECT user_id FROM user_by_email WHERE email = '{email}'");
    assert_eq!(
        explain_route_database(&mut admin, &statement).await,
        Some(new_db.clone())
    );
    admin.disconnect().await.ok();
    proxy.control.shutdown().await;
    std::fs::remove_dir_all(&dir).ok();
    clean(test).await;
}
