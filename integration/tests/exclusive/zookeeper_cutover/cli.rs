//! `shardgate fleet move` end to end: the CLI process runs the move on its
//! own ZooKeeper session, prints its steps, and exits 0; a dry run and
//! `--config FILE` change nothing.

use std::process::{Command, Output};

use super::*;

fn fleet_move(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["fleet", "move"])
        .args(args)
        .output()
        .expect("run target/debug/shardgate")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_move_runs_the_move_from_the_command_line() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-cli").await;
    let location = location("cut-cli");
    push(&location, &test_config_yaml(), None).await;
    let (one, two) = (
        guard.start(&location, "cli-1"),
        guard.start(&location, "cli-2"),
    );
    let source = location.to_string();
    let move_args = [
        "--source",
        source.as_str(),
        "--shards",
        "1024-2047",
        "--fleet",
        "main",
        "--to",
        "127.0.0.1:3309",
    ];

    let refused = fleet_move(&["--config", "x.yaml", "--shards", "1024-2047", "--to", "h:1"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("run MOVE SHARDS 1024-2047 TO h:1 on its admin port"),
        "{}",
        text(&refused.stderr)
    );

    let mut dry = move_args.to_vec();
    dry.push("--dry-run");
    let dry = fleet_move(&dry);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).contains("would pause\t0\tmain 1024-2047 on cli-1, cli-2"),
        "{}",
        text(&dry.stdout)
    );
    assert_eq!(
        znode_version(&location).await,
        0,
        "a dry run writes nothing"
    );

    let moved = fleet_move(&move_args);
    let (stdout, stderr) = (text(&moved.stdout), text(&moved.stderr));
    assert!(moved.status.success(), "{stdout}\n{stderr}");
    for step in ["pause", "catch-up", "write", "proxies", "resume"] {
        assert!(
            stderr.contains(&format!("{step} ...")),
            "progress of {step}: {stderr}"
        );
        assert!(stdout.contains(&format!("\n{step}\t")), "{step}: {stdout}");
    }
    assert!(stdout.contains("cleanup\t\t"), "{stdout}");
    for proxy in [&one, &two] {
        assert_eq!(proxy.control.config_status().znode_version, Some(1));
        assert_eq!(master_of(proxy, MOVED_SHARD), "127.0.0.1:3309");
        wait_resumed(proxy).await;
    }
    assert!(pause_records(&location).await.is_empty());

    // The same move again: the shards are on the target already.
    let again = fleet_move(&move_args);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("nothing was changed"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(znode_version(&location).await, 1);
}
