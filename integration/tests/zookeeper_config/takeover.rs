//! `serve --takeover` of a ZooKeeper-sourced proxy: the new process
//! registers before the old one leaves, so `SHOW PROXIES` never misses the
//! proxy, and the client session moves over its connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::serve::{admin_on, app_on, ServeProcess};
use super::*;

/// The ids `SHOW PROXIES` on the admin port at `addr` lists.
async fn listed(addr: std::net::SocketAddr) -> Vec<String> {
    admin_on(addr, "SHOW PROXIES")
        .await
        .expect("SHOW PROXIES")
        .iter()
        .filter_map(|row| row.get::<String, _>("id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_proxies_never_misses_a_proxy_being_taken_over() {
    let test = "takeover-registry";
    clean(test).await;
    let location = location(test);
    let socket = repo_root()
        .join("target/test-configs")
        .join(format!("zk-takeover-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let document = format!(
        "{}\ntakeover: {{ socket: {} }}\n",
        document(),
        socket.display()
    );
    push(&location, &document, None).await;
    let observer = start(&location, "takeover-observer");
    let mut old = ServeProcess::start(&location, "takeover-old").await;
    let mut app = app_on(&old).await;
    let id: Option<u64> = app.query_first("SELECT CONNECTION_ID()").await.unwrap();
    app.query_drop("SET @zk = 'kept'").await.unwrap();

    // SHOW PROXIES on another proxy of the document, all along.
    let stop = Arc::new(AtomicBool::new(false));
    let polled = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watching = {
        let (stop, polled, addr) = (stop.clone(), polled.clone(), admin_addr(&observer));
        tokio::spawn(async move {
            let (mut polls, mut misses) = (0, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let ids = listed(addr).await;
                polls += 1;
                polled.store(polls, Ordering::Relaxed);
                if !ids
                    .iter()
                    .any(|id| id == "takeover-old" || id == "takeover-new")
                {
                    misses.push(ids);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (polls, misses)
        })
    };
    while polled.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let config = location.to_string();
    let new = ServeProcess::start_with(
        &location,
        "takeover-new",
        &[
            "--config",
            &config,
            "--proxy-id",
            "takeover-new",
            "--takeover",
        ],
    )
    .await;
    let status = old.exited().await;
    assert!(status.success(), "{status}: {}", old.log_text());
    assert!(
        old.log_text().contains("sessions handed 1,"),
        "{}",
        old.log_text()
    );
    // The old entry goes once its ZooKeeper session closed.
    let mut now = listed(admin_addr(&observer)).await;
    for _ in 0..100 {
        if !now.iter().any(|id| id == "takeover-old") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        now = listed(admin_addr(&observer)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let (polls, misses) = watching.await.unwrap();
    assert!(polls >= 2, "{polls} polls: before and after at least");
    assert!(
        misses.is_empty(),
        "SHOW PROXIES missed the proxy: {misses:?}"
    );
    assert!(now.contains(&"takeover-new".to_owned()), "{now:?}");
    assert!(!now.contains(&"takeover-old".to_owned()), "{now:?}");
    let (same, kept): (Option<u64>, Option<String>) = app
        .query_first("SELECT CONNECTION_ID(), @zk")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((same, kept.as_deref()), (id, Some("kept")));
    drop(new);
    clean(test).await;
}
