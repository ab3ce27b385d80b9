//! The move of shards 1024-2047 to 3309 through `shardgate fleet move`,
//! while every proxy writes to moving and control shards.

use super::*;
use move_load::{check_placement, marker, MoveLoad, NEW_MASTER};
use shardgate::control::zookeeper;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_under_load_through_three_proxies_loses_no_write() {
    let _serial = serial().await;
    let test = "move-load";
    let _tree = Tree::clean(test).await;
    let location = location(test);
    let pushed = push(&location, &common::test_config_yaml(), None).await;
    let proxies = start_proxies(&location).await;
    let mut load = MoveLoad::prepare(marker("zkmove-load")).await;
    for proxy in &proxies {
        for writer in 0..WRITERS_PER_PROXY {
            load.spawn_client(proxy.client, &format!("{}-{writer}", proxy.id));
        }
    }
    let mut watch = Watch::start(&proxies);
    tokio::time::sleep(Duration::from_millis(700)).await;

    let run = fleet_move(&location, &[]).await.expect("the CLI's thread");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let logs = load.stop().await;
    let timelines = watch.stop().await;

    let now = zookeeper::get(&location).await.expect("read the document");
    let mut configs = Vec::new();
    let mut registries = Vec::new();
    for proxy in &proxies {
        configs.push(show_config(proxy).await);
        registries.push(show_proxies(proxy).await);
    }
    let records = pause_records(&raw_client().await, &location).await;
    // Collect what is where, then clean up, then judge.
    let (still_replicating, replication_error) = common::replication_running(NEW_MASTER).await;
    let placement = load.finish().await;

    let acked = acknowledged(&logs);
    let during = |moving_shards: bool| {
        let writes = acked.iter().copied().filter(|w| moving(w) == moving_shards);
        worst_stall(writes, run.started, run.ended)
    };
    let (stall_moving, stall_control) = (during(true), during(false));
    let paused_seen = timelines.iter().filter_map(|t| t.paused).fold(
        None,
        |span: Option<(Instant, Instant)>, (first, last)| {
            Some(span.map_or((first, last), |(a, b)| (a.min(first), b.max(last))))
        },
    );
    println!("{}", run.output());
    for timeline in &timelines {
        println!(
            "{}: {} SHOW CONFIG polls, switched {:?} after the CLI started, paused seen {:?}",
            timeline.id,
            timeline.polls,
            timeline.switched.map(|at| at - run.started),
            timeline
                .paused
                .map(|(first, last)| (first - run.started, last - run.started)),
        );
    }
    println!(
        "FIGURES fleet move under load: cli {:?}, cli-reported pause {} ms, paused as polled {:?}, worst stall moving {stall_moving:?}, control {stall_control:?}, {} writes acknowledged through {} clients",
        run.ended - run.started,
        run.pause_ms()
            .map_or_else(|| "none".to_owned(), |(ms, parts)| format!("{ms} ({parts})")),
        paused_seen.map(|(first, last)| last - first),
        acked.len(),
        logs.len(),
    );

    assert!(run.status.success(), "fleet move failed: {}", run.output());
    for log in &logs {
        assert!(
            log.errors.is_empty(),
            "statements through {} failed: {:#?}",
            log.client,
            log.errors
        );
    }
    assert!(
        still_replicating,
        "3309 stopped replicating: {replication_error}"
    );
    // The switch: the first and the last proxy to run the new document.
    let switches: Vec<Instant> = timelines
        .iter()
        .map(|t| {
            t.switched
                .unwrap_or_else(|| panic!("{} never ran another document", t.id))
        })
        .collect();
    let first_switch = switches.iter().min().copied().unwrap_or(run.ended);
    let switched = switches.iter().max().copied().unwrap_or(run.ended);
    // Nothing sent through a proxy once it had paused reached 3307: 3309
    // had every row of the moved shards before any proxy routed to it. (A
    // write sent before it paused may still be acknowledged after: the
    // pause drains it.)
    for log in &logs {
        let timeline = timelines
            .iter()
            .find(|t| log.client.starts_with(&t.id))
            .expect("the client's proxy");
        let (paused, _) = timeline
            .paused
            .unwrap_or_else(|| panic!("{} was never seen paused", timeline.id));
        for write in log.acked.iter().filter(moving) {
            let local = common::decode(write.id).local_id;
            if placement.old[&write.shard].contains_key(&local) {
                assert!(
                    write.sent < paused,
                    "write {} (shard {}) sent through {} {:?} after it paused reached 3307",
                    write.id,
                    write.shard,
                    timeline.id,
                    write.sent - paused
                );
            }
        }
    }
    // No write reached 3307 once any proxy routed to 3309.
    let checked = check_placement(&acked, &placement, run.started, first_switch);
    assert!(
        checked.moving_before > 0 && checked.moving_after > 0,
        "{checked:?}"
    );
    // The CLI ends only once every proxy runs the new document: no poll
    // sent after it ended may still see the old one. (The answer time of
    // the first poll seeing the new one can be later on a loaded machine.)
    for timeline in &timelines {
        if let Some(sent) = timeline.last_old_sent {
            assert!(
                sent <= run.ended,
                "{} still ran the old document {:?} after the CLI ended",
                timeline.id,
                sent - run.ended
            );
        }
    }
    // Every client wrote to the moved shards on 3309 after the switch.
    for log in &logs {
        let after = log
            .acked
            .iter()
            .filter(|w| moving(w) && w.acked > switched)
            .count();
        assert!(
            after > 0,
            "{} wrote nothing to a moved shard after the switch",
            log.client
        );
    }
    assert!(
        stall_control < PROMPT,
        "writes to shards that did not move stalled for {stall_control:?}"
    );

    assert_ne!(now.version, pushed.version, "the document changed");
    assert_eq!(now.znode_version, pushed.znode_version + 1, "one push");
    for ((proxy, config), registry) in proxies.iter().zip(&configs).zip(&registries) {
        assert_eq!(version_in(config), now.version, "{}: SHOW CONFIG", proxy.id);
        let paused: Vec<_> = config.iter().filter(|(name, _)| name == "paused").collect();
        assert!(paused.is_empty(), "{} still pauses {paused:?}", proxy.id);
        assert_eq!(
            registry.keys().map(String::as_str).collect::<Vec<_>>(),
            PROXIES,
            "SHOW PROXIES on {}",
            proxy.id
        );
        for (id, (version, current)) in registry {
            assert_eq!(
                (version.as_str(), current.as_str()),
                (now.version.as_str(), "yes"),
                "{id} in SHOW PROXIES on {}",
                proxy.id
            );
        }
    }
    assert!(records.is_empty(), "pause records left: {records:?}");
    println!(
        "moving shards: {} writes before the CLI started, {} after the first proxy switched; {} to control shards",
        checked.moving_before, checked.moving_after, checked.control
    );
}
