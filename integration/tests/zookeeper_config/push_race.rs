//! Two writers of the document at once: a push whose version check is
//! overtaken by another writer (put exactly between its read and its
//! write) writes nothing and names both versions; two `config push`
//! processes racing leave the document of the push that succeeded last.

use std::process::{Command, Output};

use super::*;

/// `push_with`, another push run between its read and its write.
async fn overtaken_push(
    location: &ZkLocation,
    late: &str,
    other: &str,
    other_expected: Option<i32>,
) -> zookeeper::ZkError {
    zookeeper::push_with(location, late.as_bytes(), "late.yaml", None, async {
        push(location, other, other_expected).await;
    })
    .await
    .expect_err("a push overtaken by another writer loses")
}

#[tokio::test]
async fn a_push_overtaken_between_its_read_and_its_write_writes_nothing() {
    let test = "overtaken";
    clean(test).await;
    let location = location(test);

    // Both find no znode; the other creates it first.
    let error = overtaken_push(
        &location,
        &document(),
        &document_with_account("first"),
        None,
    )
    .await;
    let message = error.to_string();
    assert!(
        message.contains("another writer changed the config znode")
            && message.contains("read at version <none: no znode>, now at version 0")
            && message.contains("nothing was written"),
        "{message}"
    );
    let now = zookeeper::get(&location).await.expect("get");
    assert_eq!(now.znode_version, 0);
    assert_eq!(now.bytes, document_with_account("first").into_bytes());

    // Both read version 0; the other writes version 1 first.
    let error = overtaken_push(
        &location,
        &document(),
        &document_with_account("second"),
        Some(0),
    )
    .await;
    let message = error.to_string();
    assert!(
        message.contains("read at version 0, now at version 1"),
        "{message}"
    );
    let now = zookeeper::get(&location).await.expect("get");
    assert_eq!(now.znode_version, 1, "the late push wrote");
    assert_eq!(now.bytes, document_with_account("second").into_bytes());
    clean(test).await;
}

/// What one `config push` process reported: the znode version it wrote,
/// or its error.
fn pushed_version(output: &Output) -> Result<i32, String> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        return Err(stderr);
    }
    let version = stdout
        .split("znode version ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    Ok(version.unwrap_or_else(|| panic!("no znode version in {stdout:?}")))
}

#[tokio::test]
async fn two_racing_config_push_processes_leave_the_last_successful_document() {
    let test = "push-race";
    clean(test).await;
    let location = location(test);
    let source = location.to_string();
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("zk-push-race-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the race directory");
    let (mut conflicts, mut rounds) = (0, 0);
    for round in 0..20 {
        let writers = ["a", "b"].map(|writer| {
            let text = format!("{}\n# writer {writer}, round {round}\n", document());
            let file = dir.join(format!("{writer}.yaml"));
            std::fs::write(&file, &text).expect("write the document");
            (text, file)
        });
        let children = writers.each_ref().map(|(_, file)| {
            Command::new(env!("CARGO_BIN_EXE_shardgate"))
                .args(["config", "push"])
                .arg(file)
                .args(["--source", &source, "--zk-allow-open-acl"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start config push")
        });
        let results = children
            .map(|child| pushed_version(&child.wait_with_output().expect("config push ends")));
        let mut last: Option<(i32, &str)> = None;
        for ((text, _), result) in writers.iter().zip(&results) {
            match result {
                Ok(version) => {
                    if last.is_none_or(|(newest, _)| *version > newest) {
                        last = Some((*version, text));
                    }
                }
                Err(message) => {
                    assert!(
                        message.contains("another writer changed the config znode")
                            && message.contains("nothing was written"),
                        "round {round}: an error other than the lost version check: {message}"
                    );
                    conflicts += 1;
                }
            }
        }
        let (version, text) =
            last.unwrap_or_else(|| panic!("round {round}: both pushes failed: {results:?}"));
        let now = zookeeper::get(&location).await.expect("get");
        assert_eq!(now.znode_version, version, "round {round}: {results:?}");
        assert_eq!(
            String::from_utf8_lossy(&now.bytes),
            text,
            "round {round}: the znode holds another document than the last successful push's"
        );
        rounds += 1;
    }
    println!("{rounds} rounds, {conflicts} pushes lost their version check");
    std::fs::remove_dir_all(&dir).ok();
    clean(test).await;
}
