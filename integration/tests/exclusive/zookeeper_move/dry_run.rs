//! `shardgate fleet move --dry-run` of the same move under the same load:
//! nothing changes.

use super::*;
use move_load::{marker, MoveLoad, HIGH_LOCAL_ID};
use shardgate::control::zookeeper;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_changes_nothing() {
    let _serial = serial().await;
    let test = "move-dry";
    let _tree = Tree::clean(test).await;
    let location = location(test);
    let pushed = push(&location, &common::test_config_yaml(), None).await;
    let proxies = start_proxies(&location).await;
    let mut load = MoveLoad::prepare(marker("zkmove-dry")).await;
    for proxy in &proxies {
        load.spawn_client(proxy.client, &proxy.id);
    }
    let mut watch = Watch::start(&proxies);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let run = fleet_move(&location, &["--dry-run"])
        .await
        .expect("the CLI's thread");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logs = load.stop().await;
    let timelines = watch.stop().await;
    let now = zookeeper::get(&location).await.expect("read the document");
    let records = pause_records(&raw_client().await, &location).await;
    let placement = load.finish().await;

    let acked = acknowledged(&logs);
    let stall = worst_stall(acked.iter().copied(), run.started, run.ended);
    println!("{}", run.output());
    println!(
        "FIGURES fleet move --dry-run under load: cli {:?}, worst stall {stall:?}, {} writes acknowledged",
        run.ended - run.started,
        acked.len()
    );
    assert!(run.status.success(), "the dry run failed: {}", run.output());
    assert!(
        run.stdout.contains("127.0.0.1:3309"),
        "the dry run says what would move where: {}",
        run.output()
    );
    for id in PROXIES {
        assert!(
            run.stdout.contains(id),
            "the dry run names {id} among the proxies it would pause: {}",
            run.output()
        );
    }
    assert_eq!(now.znode_version, pushed.znode_version, "the znode changed");
    assert_eq!(
        now.bytes,
        common::test_config_yaml().into_bytes(),
        "the document changed"
    );
    assert!(records.is_empty(), "pause records: {records:?}");
    for timeline in &timelines {
        assert!(timeline.polls > 0, "{} was never polled", timeline.id);
        assert_eq!(timeline.switched, None, "{} switched", timeline.id);
        assert_eq!(timeline.paused, None, "{} paused", timeline.id);
    }
    for log in &logs {
        assert!(
            log.errors.is_empty(),
            "statements through {} failed: {:#?}",
            log.client,
            log.errors
        );
    }
    assert!(stall < PROMPT, "writes stalled for {stall:?}");
    assert!(
        acked
            .iter()
            .any(|w| w.sent <= run.ended && w.acked >= run.started && moving(w)),
        "no write to a moving shard while the dry run ran"
    );
    // Every write stayed on the master it had.
    for write in &acked {
        let local = common::decode(write.id).local_id;
        assert_eq!(
            placement.old[&write.shard].get(&local),
            Some(&write.data),
            "write {} (shard {}) is on its old master",
            write.id,
            write.shard
        );
        assert!(local < HIGH_LOCAL_ID, "write {} went to 3309", write.id);
    }
}
