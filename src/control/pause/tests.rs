use super::*;
use crate::engine::pause::tests::{enter, gate, MAIN, MOD};
use crate::engine::pause::{Blocked, PausedShard};
use crate::topology::tests::{load, SPEC_YAML};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[tokio::test]
async fn pause_with_nothing_running_returns_at_once_and_blocks_new_statements() {
    let (gate, topology) = gate();
    let report = pause(
        &gate,
        &topology,
        Some("main"),
        1024,
        2047,
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    assert_eq!(report.fleets, vec!["main".to_owned()]);
    assert_eq!(report.drained, 0);
    assert!(matches!(
        enter(&gate, &topology, 1500),
        Err(Blocked::Paused(PausedShard { shard: 1500, .. }))
    ));
    // Outside the range, and the same shard of another fleet, pass.
    assert!(enter(&gate, &topology, 1023).is_ok());
    assert!(enter(&gate, &topology, 2048).is_ok());
    assert!(gate
        .enter(&topology, [(MOD, 1500)], gate.epoch(), None)
        .is_ok());
    // A refused statement is not left registered.
    assert_eq!(gate.running_on("main", 1500), 0);
}

/// Polls until `gate` lists `count` paused ranges.
async fn until_paused(gate: &PauseGate, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while gate.paused().len() != count {
        assert!(Instant::now() < deadline, "{:?}", gate.paused());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn a_statement_registered_before_the_pause_is_drained() {
    let (gate, topology) = gate();
    let gate = Arc::new(gate);
    let running = enter(&gate, &topology, 1500).unwrap();
    let pausing = {
        let gate = gate.clone();
        let topology = topology.clone();
        tokio::spawn(async move {
            pause(&gate, &topology, None, 1024, 2047, Duration::from_secs(5)).await
        })
    };
    until_paused(&gate, 2).await;
    let marked = Instant::now();
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!pausing.is_finished(), "the pause waits for the statement");
    // Meanwhile new statements for the range wait.
    assert!(matches!(
        enter(&gate, &topology, 2000),
        Err(Blocked::Paused(_))
    ));
    let held = marked.elapsed();
    drop(running);
    let report = pausing.await.unwrap().unwrap();
    assert_eq!(report.drained, 1);
    assert!(report.waited >= held, "{:?} < {held:?}", report.waited);
    assert_eq!(report.fleets, vec!["main".to_owned(), "mod".to_owned()]);
}

/// The Dekker ordering: racing statements and a pause never both pass
/// (a statement admitted while the pause believes the range drained).
#[test]
fn racing_statements_either_wait_or_are_drained() {
    let topology = Arc::new(load(SPEC_YAML));
    let gate = Arc::new(PauseGate::new());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for _ in 0..200 {
        let drained = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let violations = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (gate, topology) = (gate.clone(), topology.clone());
                let (drained, violations) = (drained.clone(), violations.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        if let Ok(guard) = enter(&gate, &topology, 7) {
                            if drained.load(Ordering::SeqCst) {
                                violations.fetch_add(1, Ordering::SeqCst);
                            }
                            drop(guard);
                        }
                    }
                })
            })
            .collect();
        runtime.block_on(async {
            pause(
                &gate,
                &topology,
                Some("main"),
                0,
                15,
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        });
        drained.store(true, Ordering::SeqCst);
        for worker in workers {
            worker.join().unwrap();
        }
        assert_eq!(violations.load(Ordering::SeqCst), 0);
        resume(&gate, Some("main"), 0, 15).unwrap();
    }
}

#[tokio::test]
async fn drain_timeout_undoes_the_pause_and_says_where_statements_run() {
    let (gate, topology) = gate();
    let _transaction = enter(&gate, &topology, 1777).unwrap();
    let error = pause(
        &gate,
        &topology,
        Some("main"),
        1024,
        2047,
        Duration::from_millis(30),
    )
    .await
    .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, PauseError::DrainTimeout { running: 1, .. }));
    assert!(text.contains("shard 1777: 1"), "{text}");
    assert!(text.contains("undone"), "{text}");
    assert!(gate.paused().is_empty());
    assert!(enter(&gate, &topology, 1500).is_ok());
}

#[tokio::test]
async fn resume_wakes_waiters_and_reports_them() {
    let (gate, topology) = gate();
    let gate = Arc::new(gate);
    pause(
        &gate,
        &topology,
        Some("main"),
        1024,
        2047,
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    let Err(Blocked::Paused(paused)) = enter(&gate, &topology, 1500) else {
        panic!("shard 1500 is paused");
    };
    assert_eq!(gate.paused()[0].waiting, 1);
    let waiter = {
        let gate = gate.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let resumed = gate
                .wait(&paused, Instant::now() + Duration::from_secs(5))
                .await;
            (resumed, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = gate.epoch();
    let report = resume(&gate, None, 1024, 2047).unwrap();
    assert_eq!(report.released, 1);
    assert!(report.paused_for >= Duration::from_millis(50));
    let (resumed, waited) = waiter.await.unwrap();
    assert!(resumed);
    assert!(waited < Duration::from_secs(3), "woken after {waited:?}");
    assert_ne!(gate.epoch(), before);
    assert!(gate.paused().is_empty());
    assert!(enter(&gate, &topology, 1500).is_ok());
}

#[tokio::test]
async fn a_wait_gives_up_at_its_deadline() {
    let (gate, topology) = gate();
    pause(&gate, &topology, Some("main"), 0, 0, Duration::from_secs(1))
        .await
        .unwrap();
    let Err(Blocked::Paused(paused)) = enter(&gate, &topology, 0) else {
        panic!("shard 0 is paused");
    };
    let started = Instant::now();
    assert!(
        !gate
            .wait(&paused, Instant::now() + Duration::from_millis(40))
            .await
    );
    assert!(started.elapsed() >= Duration::from_millis(40));
    drop(paused);
    assert_eq!(gate.paused()[0].waiting, 0);
}

#[tokio::test]
async fn a_statement_routed_before_a_pause_ended_routes_again() {
    let (gate, topology) = gate();
    pause(&gate, &topology, Some("main"), 0, 9, Duration::from_secs(1))
        .await
        .unwrap();
    let epoch = gate.epoch();
    resume(&gate, Some("main"), 0, 9).unwrap();
    assert!(matches!(
        gate.enter(&topology, [(MAIN, 5)], epoch, None),
        Err(Blocked::Stale)
    ));
    assert_eq!(gate.running_on("main", 5), 0);
    // The range that pauses a session's bound shard does not hold that
    // session's statements; another paused range does.
    pause(&gate, &topology, Some("main"), 0, 9, Duration::from_secs(1))
        .await
        .unwrap();
    pause(
        &gate,
        &topology,
        Some("main"),
        20,
        29,
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    let exempt = Some(("main", 3));
    let epoch = gate.epoch();
    let same_range = gate.enter(&topology, [(MAIN, 5)], epoch, exempt).unwrap();
    assert_eq!(gate.running_on("main", 5), 1);
    drop(same_range);
    assert!(matches!(
        gate.enter(&topology, [(MAIN, 25)], epoch, exempt),
        Err(Blocked::Paused(PausedShard { shard: 25, .. }))
    ));
    assert!(matches!(
        gate.enter(&topology, [(MAIN, 5), (MAIN, 25)], epoch, exempt),
        Err(Blocked::Paused(PausedShard { shard: 25, .. }))
    ));
    assert!(matches!(
        gate.enter(&topology, [(MAIN, 5)], epoch, Some(("mod", 3))),
        Err(Blocked::Paused(_))
    ));
    // The epoch is still checked.
    resume(&gate, Some("main"), 20, 29).unwrap();
    assert!(matches!(
        gate.enter(&topology, [(MAIN, 5)], epoch, exempt),
        Err(Blocked::Stale)
    ));
    assert_eq!(gate.running_on("main", 5), 0);
}

#[tokio::test]
async fn overlapping_and_bad_ranges_are_refused() {
    let (gate, topology) = gate();
    pause(
        &gate,
        &topology,
        Some("main"),
        1024,
        2047,
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    let overlap = pause(
        &gate,
        &topology,
        Some("main"),
        2000,
        2100,
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    assert!(
        overlap.to_string().contains("overlap shards 1024-2047"),
        "{overlap}"
    );
    // The other fleet's same range is free.
    pause(
        &gate,
        &topology,
        Some("mod"),
        2000,
        2100,
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    let none = pause(&gate, &topology, None, 1500, 1600, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(none, PauseError::AlreadyPaused { .. }));
    let reversed = pause(&gate, &topology, None, 9, 3, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(reversed, PauseError::BadRange { .. }));
    let beyond = pause(
        &gate,
        &topology,
        Some("main"),
        4000,
        4096,
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    assert!(
        beyond.to_string().contains("fleet main (shards 0-4095)"),
        "{beyond}"
    );
    let unknown = pause(&gate, &topology, Some("nope"), 0, 1, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(
        unknown.to_string().contains("fleets: main, mod"),
        "{unknown}"
    );
    // Resume: part of a range is refused, an unpaused range is refused,
    // the whole range works.
    let partial = resume(&gate, Some("main"), 1024, 1500).unwrap_err();
    assert!(
        matches!(partial, PauseError::PartialResume { .. }),
        "{partial}"
    );
    let not_paused = resume(&gate, Some("main"), 0, 10).unwrap_err();
    assert!(
        not_paused
            .to_string()
            .contains("main 1024-2047, mod 2000-2100"),
        "{not_paused}"
    );
    let report = resume(&gate, None, 0, 4095).unwrap();
    assert_eq!(report.fleets, vec!["main".to_owned(), "mod".to_owned()]);
    assert!(gate.paused().is_empty());
}

#[tokio::test]
async fn a_dropped_pause_future_is_undone() {
    let (gate, topology) = gate();
    let _running = enter(&gate, &topology, 3).unwrap();
    let pausing = pause(&gate, &topology, Some("main"), 0, 9, Duration::from_secs(5));
    assert!(tokio::time::timeout(Duration::from_millis(20), pausing)
        .await
        .is_err());
    assert!(gate.paused().is_empty());
    assert!(enter(&gate, &topology, 4).is_ok());
}

/// Spawns a pause of main 0-9 with `drain` as its drain timeout.
fn spawn_pause(
    gate: &Arc<PauseGate>,
    topology: &Topology,
    drain: Duration,
) -> tokio::task::JoinHandle<Result<PauseReport, PauseError>> {
    let (gate, topology) = (gate.clone(), topology.clone());
    tokio::spawn(async move { pause(&gate, &topology, Some("main"), 0, 9, drain).await })
}

#[tokio::test]
async fn resume_is_refused_while_the_pause_drains() {
    let (gate, topology) = gate();
    let gate = Arc::new(gate);
    let running = enter(&gate, &topology, 3).unwrap();
    let pausing = spawn_pause(&gate, &topology, Duration::from_secs(10));
    until_paused(&gate, 1).await;
    let refused = resume(&gate, Some("main"), 0, 9).unwrap_err();
    assert!(
        matches!(
            refused,
            PauseError::StillDraining {
                paused_first: 0,
                paused_last: 9,
                ..
            }
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("still draining"), "{refused}");
    // A wider RESUME is refused as a whole too.
    assert!(matches!(
        resume(&gate, None, 0, 4095),
        Err(PauseError::StillDraining { .. })
    ));
    assert_eq!(gate.paused().len(), 1);
    drop(running);
    pausing.await.unwrap().unwrap();
    assert!(matches!(
        enter(&gate, &topology, 3),
        Err(Blocked::Paused(_))
    ));
    resume(&gate, Some("main"), 0, 9).unwrap();
    assert!(gate.paused().is_empty());
}

/// A pause's entries are its own: one whose drain times out removes
/// only them, not a later pause of the same range; one whose entries
/// were ended meanwhile reports that instead of success.
#[tokio::test]
async fn a_pause_undoes_and_confirms_only_its_own_entries() {
    let (gate, topology) = gate();
    let gate = Arc::new(gate);
    let running = enter(&gate, &topology, 3).unwrap();
    let early = spawn_pause(&gate, &topology, Duration::from_millis(300));
    until_paused(&gate, 1).await;
    // Something ends the early pause's range (the old RESUME did), and a
    // later PAUSE of the same range begins.
    assert_eq!(gate.end_all(), 1);
    let later = spawn_pause(&gate, &topology, Duration::from_secs(10));
    until_paused(&gate, 1).await;
    let later_id = gate.entry_ids()[0];
    let timed_out = early.await.unwrap().unwrap_err();
    assert!(
        matches!(timed_out, PauseError::DrainTimeout { .. }),
        "{timed_out}"
    );
    let ids = gate.entry_ids();
    assert_eq!(ids.len(), 1, "the later pause stays");
    assert_eq!(ids[0], later_id);
    // The later pause's entry ends before its drain finishes.
    gate.end_all();
    drop(running);
    let ended = later.await.unwrap().unwrap_err();
    assert!(matches!(ended, PauseError::Ended { .. }), "{ended}");
    assert!(ended.to_string().contains("nothing is paused"), "{ended}");
    assert!(gate.paused().is_empty());
    assert!(enter(&gate, &topology, 3).is_ok());
}
