//! A proxy whose ZooKeeper session expires (its connection black-holed by a
//! relay for longer than the session timeout) keeps serving, then opens a
//! new session, registers again and reads the document pushed meanwhile.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shardgate::control::process::ProxyEntry;
use shardgate::control::reload::ReloadTrigger;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A TCP relay to ZooKeeper that can stop passing bytes (without closing).
pub(super) struct Relay {
    pub(super) addr: SocketAddr,
    pub(super) blocked: Arc<AtomicBool>,
}

pub(super) async fn relay(upstream: String) -> Relay {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the relay");
    let addr = listener.local_addr().expect("relay address");
    let blocked = Arc::new(AtomicBool::new(false));
    let flag = blocked.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let (flag, upstream) = (flag.clone(), upstream.clone());
            tokio::spawn(async move {
                hold(&flag).await;
                let Ok(outbound) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (in_read, in_write) = inbound.into_split();
                let (out_read, out_write) = outbound.into_split();
                tokio::spawn(pipe(in_read, out_write, flag.clone()));
                tokio::spawn(pipe(out_read, in_write, flag));
            });
        }
    });
    Relay { addr, blocked }
}

async fn hold(blocked: &AtomicBool) {
    while blocked.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, blocked: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        hold(&blocked).await;
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        hold(&blocked).await;
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

// Multi-threaded: the relay keeps running while the test thread waits for
// the proxy to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_its_session_expired_a_proxy_registers_again_and_rereads() {
    let test = "expiry";
    clean(test).await;
    let direct = location(test);
    let first = push(&direct, &document(), None).await;
    let relay = relay(zk_hosts()).await;
    let through_relay = ZkLocation {
        hosts: vec![relay.addr.to_string()],
        path: direct.path.clone(),
    };
    let proxy = start(&through_relay, "expiry-a");
    let client = raw_client().await;
    let entry_path = direct.registry_entry("expiry-a");
    let session = client
        .check_stat(&entry_path)
        .await
        .unwrap()
        .expect("registered")
        .ephemeral_owner;

    relay.blocked.store(true, Ordering::SeqCst);
    let blocked_at = Instant::now();
    // The server expires the session (4 s asked for) and its entry.
    loop {
        if client.check_stat(&entry_path).await.unwrap().is_none() {
            break;
        }
        assert!(
            blocked_at.elapsed() < Duration::from_secs(15),
            "the session never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("entry gone {:?} after the block", blocked_at.elapsed());
    let second = push(
        &direct,
        &document_with_account("expiry"),
        Some(first.znode_version),
    )
    .await;
    // Cut off from ZooKeeper, the proxy serves with the config it has.
    let mut app = app(&proxy).await;
    let one: Option<u32> = app
        .query_first("SELECT 1")
        .await
        .expect("serves while cut off");
    assert_eq!(one, Some(1));
    app.disconnect().await.ok();
    assert_eq!(proxy.control.config_status().version, first.version);
    // Past the client's own expiry (1.4 x the session timeout).
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(blocked_at.elapsed())).await;
    relay.blocked.store(false, Ordering::SeqCst);
    let unblocked_at = Instant::now();

    loop {
        let status = proxy.control.config_status();
        if status.version == second.version {
            assert_eq!(status.znode_version, Some(1));
            let attempt = status.last_reload.expect("a reload");
            assert_eq!(attempt.trigger, ReloadTrigger::ZooKeeperSession);
            break;
        }
        assert!(
            unblocked_at.elapsed() < Duration::from_secs(15),
            "no new session and re-read: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "re-read {:?} after the relay passed bytes again",
        unblocked_at.elapsed()
    );
    let started = Instant::now();
    loop {
        if let Ok((data, stat)) = client.get_data(&entry_path).await {
            let entry = ProxyEntry::from_json(&data).expect("an entry");
            if entry.config_version == second.version {
                assert_ne!(stat.ephemeral_owner, session, "registered on a new session");
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "not registered again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(can_log_in(&proxy, "zkcore_expiry", "pw_expiry").await);
    proxy.control.shutdown().await;
    drop(client);
    clean(test).await;
}
