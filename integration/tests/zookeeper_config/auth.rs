//! ZooKeeper credentials (`--zk-auth-file`): what a process given an
//! identity creates, only that identity reads or changes; a process
//! without it is told what to pass. Run through the built binary only:
//! credentials are per process, and the other tests of this binary run
//! without them.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::serve::ServeProcess;
use super::*;

fn shardgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(args)
        .env_remove("SHARDGATE_ZK_AUTH_FILE")
        .env_remove("SHARDGATE_ZK_ALLOW_OPEN_ACL")
        .output()
        .expect("run target/debug/shardgate")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A client of the test's own authenticated as `credentials`.
async fn client_as(credentials: &str) -> zk::Client {
    zk::Client::connector()
        .with_auth("digest", credentials.as_bytes())
        .with_session_timeout(Duration::from_secs(4))
        .connect(&zk_hosts())
        .await
        .expect("an authenticated session")
}

/// Kills the `serve` process when the test ends, however it ends.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

#[tokio::test]
async fn znodes_created_with_credentials_are_closed_to_everyone_else() {
    let test = "auth";
    clean(test).await;
    let location = location(test);
    let source = location.to_string();
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("zk-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let credentials = format!("sgtest:pw-{}", std::process::id());
    let auth_file = dir.join("zk.auth");
    std::fs::write(&auth_file, format!("digest:{credentials}\n")).unwrap();
    let auth_arg = auth_file.display().to_string();
    let file = dir.join("shardgate.yaml");
    std::fs::write(&file, document()).unwrap();
    let file_arg = file.display().to_string();
    // The test's root stays open, so the cleanup can always start there.
    let open = raw_client().await;
    open.mkdir(
        &root(test),
        &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
    )
    .await
    .expect("the test's root");

    let pushed = shardgate(&[
        "config",
        "push",
        &file_arg,
        "--source",
        &source,
        "--zk-auth-file",
        &auth_arg,
    ]);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));

    assert_eq!(
        open.get_data(&location.path).await.err(),
        Some(zk::Error::NoAuth),
        "a session without the identity cannot read the document (it holds passwords)"
    );
    let refused = shardgate(&["config", "get", "--source", &source]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("--zk-auth-file"),
        "the refusal says what to pass: {}",
        text(&refused.stderr)
    );
    let wrong = dir.join("wrong.auth");
    std::fs::write(&wrong, "sgtest:not-the-password\n").unwrap();
    let refused = shardgate(&[
        "config",
        "push",
        &file_arg,
        "--source",
        &source,
        "--zk-auth-file",
        &wrong.display().to_string(),
    ]);
    assert_eq!(
        refused.status.code(),
        Some(1),
        "another identity cannot overwrite it"
    );
    let got = shardgate(&[
        "config",
        "get",
        "--source",
        &source,
        "--zk-auth-file",
        &auth_arg,
    ]);
    assert!(got.status.success(), "{}", text(&got.stderr));
    assert_eq!(text(&got.stdout), document());

    let refused = shardgate(&[
        "serve",
        "--config",
        &source,
        "--proxy-id",
        "auth-0",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    assert!(
        !refused.status.success(),
        "serve without the identity refuses to start"
    );
    assert!(
        text(&refused.stderr).contains("--zk-auth-file"),
        "{}",
        text(&refused.stderr)
    );

    let log = dir.join("serve.log");
    let serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["serve", "--config", &source, "--proxy-id", "auth-1"])
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .env("SHARDGATE_ZK_AUTH_FILE", &auth_file)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("serve.log"))
            .spawn()
            .expect("start shardgate serve"),
    );
    let owner = client_as(&credentials).await;
    let entry_path = location.registry_entry("auth-1");
    let started = Instant::now();
    while owner.check_stat(&entry_path).await.ok().flatten().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "auth-1 never registered: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (entry, _) = owner
        .get_data(&entry_path)
        .await
        .expect("the owner reads it");
    assert!(shardgate::control::process::ProxyEntry::from_json(&entry).is_some());
    assert_eq!(
        open.get_data(&entry_path).await.err(),
        Some(zk::Error::NoAuth),
        "the registry entry is closed too"
    );
    assert_eq!(
        open.list_children(&location.registry_path()).await.err(),
        Some(zk::Error::NoAuth)
    );
    drop(serve);
    remove_tree(&owner, &root(test)).await;
    std::fs::remove_dir_all(&dir).ok();
}

/// A directory of the test's own under `target/test-configs`, with the
/// test document in `shardgate.yaml`; the file's path.
fn document_file(test: &str) -> (std::path::PathBuf, String) {
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("zk-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("shardgate.yaml");
    std::fs::write(&file, document()).unwrap();
    let arg = file.display().to_string();
    (dir, arg)
}

#[tokio::test]
async fn an_open_document_is_refused_unless_that_is_intended() {
    let test = "open-acl";
    clean(test).await;
    let location = location(test);
    let source = location.to_string();
    let (dir, file_arg) = document_file(test);

    // Without credentials a push would create the znode open: refused.
    let refused = shardgate(&["config", "push", &file_arg, "--source", &source]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    let message = text(&refused.stderr);
    for expected in ["would create", "--zk-auth-file", "--zk-allow-open-acl"] {
        assert!(message.contains(expected), "{expected}: {message}");
    }
    let missing = zookeeper::get(&location)
        .await
        .expect_err("nothing written");
    assert!(missing.to_string().contains("does not exist"), "{missing}");
    // Told it is intended: written, open to anyone.
    let pushed = shardgate(&[
        "config",
        "push",
        &file_arg,
        "--source",
        &source,
        "--zk-allow-open-acl",
    ]);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let again = shardgate(&["config", "push", &file_arg, "--source", &source]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("is writable by anyone"),
        "{}",
        text(&again.stderr)
    );

    // serve on it refuses to start, naming the fix.
    let started = Instant::now();
    let refused = shardgate(&[
        "serve",
        "--config",
        &source,
        "--proxy-id",
        "open-0",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    assert!(!refused.status.success(), "serve ran on an open document");
    let message = text(&refused.stderr);
    for expected in [
        "is writable by anyone",
        "--zk-auth-file",
        "--zk-allow-open-acl",
    ] {
        assert!(message.contains(expected), "{expected}: {message}");
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    let open = raw_client().await;
    assert_eq!(
        open.check_stat(&location.registry_entry("open-0"))
            .await
            .ok()
            .flatten(),
        None,
        "it never registered"
    );
    // Told: it runs, and says so.
    let served = ServeProcess::start(&location, "open-1").await;
    assert!(
        served
            .log_text()
            .contains("writable by anyone who can reach ZooKeeper; running on it because --zk-allow-open-acl was given"),
        "{}",
        served.log_text()
    );
    drop(served);
    clean(test).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_document_opened_to_anyone_after_the_start_is_not_loaded() {
    let test = "opened-acl";
    clean(test).await;
    let location = location(test);
    let source = location.to_string();
    let (dir, file_arg) = document_file(test);
    let credentials = format!("sgtest:pw-{}", std::process::id());
    let auth_file = dir.join("zk.auth");
    std::fs::write(&auth_file, format!("{credentials}\n")).unwrap();
    let auth_arg = auth_file.display().to_string();
    let open = raw_client().await;
    open.mkdir(
        &root(test),
        &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
    )
    .await
    .expect("the test's root");
    let pushed = shardgate(&[
        "config",
        "push",
        &file_arg,
        "--source",
        &source,
        "--zk-auth-file",
        &auth_arg,
    ]);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let log = dir.join("serve.log");
    let serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["serve", "--config", &source, "--proxy-id", "opened-1"])
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .env("SHARDGATE_ZK_AUTH_FILE", &auth_file)
            .env_remove("SHARDGATE_ZK_ALLOW_OPEN_ACL")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("serve.log"))
            .spawn()
            .expect("start shardgate serve"),
    );
    let owner = client_as(&credentials).await;
    let entry_path = location.registry_entry("opened-1");
    let started = Instant::now();
    let client_addr: std::net::SocketAddr = loop {
        let entry = owner
            .get_data(&entry_path)
            .await
            .ok()
            .and_then(|(data, _)| shardgate::control::process::ProxyEntry::from_json(&data));
        if let Some(addr) = entry.and_then(|e| e.addresses.client) {
            break addr.parse().expect("a client address");
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "opened-1 never registered: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // Someone opens the znode to anyone, and anyone adds an account.
    owner
        .set_acl(&location.path, &zk::Acls::anyone_all(), None)
        .await
        .expect("open the ACL");
    open.set_data(
        &location.path,
        document_with_account("opened").as_bytes(),
        None,
    )
    .await
    .expect("anyone writes the document now");
    let written = Instant::now();
    let log_text = loop {
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        if log_text.contains("config reload refused") {
            break log_text;
        }
        assert!(
            written.elapsed() < Duration::from_secs(5),
            "no refusal logged: {log_text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(log_text.contains("is writable by anyone"), "{log_text}");
    assert!(
        connect_to(client_addr, "zkcore_opened", "pw_opened")
            .await
            .is_err(),
        "the account anyone added logs in"
    );
    let app = connect_to(client_addr, "app", "app")
        .await
        .expect("the config in force keeps serving");
    app.disconnect().await.ok();
    drop(serve);
    remove_tree(&owner, &root(test)).await;
    std::fs::remove_dir_all(&dir).ok();
}
