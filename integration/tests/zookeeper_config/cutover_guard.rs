//! The ZooKeeper guards of a cutover, on the library functions with a real
//! ZooKeeper: its push is one multi with a check on each pause record it
//! holds (a record deleted in between aborts it, nothing written);
//! `RESUME SHARDS` leaves a record a cutover holds unless told `FORCE`; a
//! fleet-wide pause whose ack wait fails on ZooKeeper withdraws its record;
//! a push whose answer is lost and cannot be read back is "unknown".

use std::time::Duration;

use shardgate::control::pause::{pause_fleet, resume_fleet, FleetPauseError, Requester};
use shardgate::control::zookeeper::{GuardedPushError, ZooKeeper};

use super::*;

const MOVE: &str = "MOVE SHARDS 1024-2047 IN main TO 127.0.0.1:3309";

/// Pauses main 1024-2047 as the cutover `MOVE` (no proxy is registered:
/// it answers at once); the record's id.
async fn held_pause(zookeeper: &ZooKeeper) -> String {
    let requester = Requester {
        proxy: "guard-test",
        user: "cli",
        cutover: Some(MOVE),
    };
    pause_fleet(
        zookeeper,
        &topology(),
        requester,
        Some("main"),
        1024,
        2047,
        Duration::from_secs(2),
    )
    .await
    .unwrap_or_else(|e| panic!("pause: {e}"))
    .id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cutover_push_is_not_written_once_a_held_record_is_deleted() {
    clean("zk-guard-push").await;
    let location = location("zk-guard-push");
    let first = push(&location, &document(), None).await;
    let zookeeper = ZooKeeper::open(location.clone()).await.expect("session");
    let id = held_pause(&zookeeper).await;
    let other = document_with_account("guarded");

    let resumer = raw_client().await;
    let record = format!("{}/pauses/{id}", location.path);
    let lost = zookeeper
        .push_guarded_with(
            other.as_bytes(),
            "test.yaml",
            0,
            std::slice::from_ref(&id),
            async {
                remove_tree(&resumer, &record).await;
            },
        )
        .await
        .expect_err("the record is gone");
    assert!(
        matches!(&lost, GuardedPushError::PauseGone { id: gone } if *gone == id),
        "{lost}"
    );
    assert!(lost.to_string().contains("was not written"), "{lost}");
    let document_now = zookeeper::get(&location).await.unwrap();
    assert_eq!(document_now.znode_version, 0, "nothing written");
    assert_eq!(document_now.version, first.version);

    let id = held_pause(&zookeeper).await;
    let pushed = zookeeper
        .push_guarded(other.as_bytes(), "test.yaml", 0, &[id])
        .await
        .unwrap_or_else(|e| panic!("guarded push: {e}"));
    assert_eq!(pushed.znode_version, 1);
    assert_eq!(zookeeper::get(&location).await.unwrap().znode_version, 1);
    zookeeper.close().await;
    clean("zk-guard-push").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_leaves_a_cutovers_record_unless_forced() {
    clean("zk-guard-resume").await;
    let location = location("zk-guard-resume");
    push(&location, &document(), None).await;
    let zookeeper = ZooKeeper::open(location.clone()).await.expect("session");
    let id = held_pause(&zookeeper).await;
    let client = raw_client().await;

    let refused = resume_fleet(&zookeeper, Some("main"), 1024, 2047, false)
        .await
        .expect_err("held by the move");
    assert!(
        matches!(refused, FleetPauseError::HeldByCutover { .. }),
        "{refused}"
    );
    let message = refused.to_string();
    assert!(message.contains(MOVE), "{message}");
    assert!(
        message.contains("RESUME SHARDS 1024-2047 IN main FORCE"),
        "{message}"
    );
    assert_eq!(pause_records(&client, &location).await, [id]);

    let resumed = resume_fleet(&zookeeper, Some("main"), 1024, 2047, true)
        .await
        .unwrap_or_else(|e| panic!("forced resume: {e}"));
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].cutover.as_deref(), Some(MOVE));
    assert!(pause_records(&client, &location).await.is_empty());
    zookeeper.close().await;
    clean("zk-guard-resume").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zookeeper_error_while_the_pause_waits_withdraws_its_record() {
    clean("zk-guard-fail").await;
    let location = location("zk-guard-fail");
    push(&location, &document(), None).await;
    let zookeeper = ZooKeeper::open(location.clone()).await.expect("session");
    let client = raw_client().await;
    // A registered "proxy" that never acks keeps the pause waiting.
    let registry = location.registry_path();
    client
        .mkdir(
            &registry,
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    client
        .create(
            &location.registry_entry("silent"),
            b"{}",
            &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let requester = Requester {
        proxy: "guard-test",
        user: "admin",
        cutover: None,
    };
    let topology = topology();
    let pausing = pause_fleet(
        &zookeeper,
        &topology,
        requester,
        Some("main"),
        0,
        9,
        Duration::from_secs(20),
    );
    let breaking = async {
        let deadline = Deadline::new("the pause record", Duration::from_secs(5));
        while pause_records(&client, &location).await.is_empty() {
            deadline.retry("no record").await;
        }
        // The registry becomes unreadable: the ack wait's next read fails.
        client
            .set_acl(
                &registry,
                &[zk::Acl::new(zk::Permission::ADMIN, zk::AuthId::anyone())],
                None,
            )
            .await
            .unwrap();
    };
    let (failed, ()) = tokio::join!(pausing, breaking);
    client
        .set_acl(&registry, &zk::Acls::anyone_all(), None)
        .await
        .unwrap();
    let failed = failed.expect_err("the registry cannot be read");
    let message = failed.to_string();
    assert!(
        matches!(failed, FleetPauseError::Failed { .. }),
        "{message}"
    );
    assert!(message.contains("was withdrawn"), "{message}");
    assert!(
        pause_records(&client, &location).await.is_empty(),
        "no record left behind: {message}"
    );
    zookeeper.close().await;
    clean("zk-guard-fail").await;
}

/// The push's answer lost (ZooKeeper cut off while the multi is out) and
/// the znode unreadable afterwards: the outcome is unknown and said so,
/// never "not written".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_that_cannot_be_read_back_is_unknown() {
    use std::sync::atomic::Ordering;

    clean("zk-guard-lost").await;
    let direct = location("zk-guard-lost");
    push(&direct, &document(), None).await;
    let relay = super::expiry::relay(zk_hosts()).await;
    let through_relay = ZkLocation {
        hosts: vec![relay.addr.to_string()],
        path: direct.path.clone(),
    };
    let zookeeper = ZooKeeper::open(through_relay).await.expect("session");
    let other = document_with_account("lost");
    let blocked = relay.blocked.clone();
    let lost = zookeeper
        .push_guarded_with(other.as_bytes(), "test.yaml", 0, &[], async move {
            blocked.store(true, Ordering::SeqCst);
        })
        .await
        .expect_err("ZooKeeper is cut off");
    relay.blocked.store(false, Ordering::SeqCst);
    assert!(
        matches!(lost, GuardedPushError::Unknown { would_be: 1, .. }),
        "{lost}"
    );
    let message = lost.to_string();
    assert!(message.contains("may or may not be in force"), "{message}");
    zookeeper.close().await;
    clean("zk-guard-lost").await;
}
