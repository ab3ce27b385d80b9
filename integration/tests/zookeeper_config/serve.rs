//! Sessions and admin commands on real `shardgate serve` processes
//! ([`ServeProcess`], started and stopped by the shared harness).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

pub(super) use crate::zk_serve::ServeProcess;

use super::pause::acked_at;
use super::*;

/// A session on `proxy`'s client port as the app account.
pub(super) async fn app_on(proxy: &ServeProcess) -> Conn {
    connect_to(proxy.client, APP_USER, APP_PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("log in to {}: {e}", proxy.id))
}

/// Runs `sql` on the admin port at `addr`; the rows or the error.
pub(super) async fn admin_on(addr: SocketAddr, sql: &str) -> Result<Vec<Row>, mysql_async::Error> {
    let mut conn = connect_to(addr, "admin", "admin")
        .await
        .unwrap_or_else(|e| panic!("admin login to {addr}: {e}"));
    let answer = conn.query(sql).await;
    conn.disconnect().await.ok();
    answer
}

/// `SHOW CONFIG` of `proxy` as name → value.
pub(super) async fn config_of(proxy: &ServeProcess) -> BTreeMap<String, String> {
    show_config_at(proxy.admin).await
}

/// `SHOW PROXIES` on `proxy` as id → pauses_acked.
pub(super) async fn acked_on(proxy: &ServeProcess) -> BTreeMap<String, String> {
    acked_at(proxy.admin).await
}

#[tokio::test]
async fn failed_admin_logins_are_slowed_and_the_right_password_still_works() {
    let test = "admin-throttle";
    clean(test).await;
    let location = location(test);
    push(&location, &document(), None).await;
    let proxy = start(&location, "throttle-a");
    let addr = admin_addr(&proxy);
    let mut took = Vec::new();
    for _ in 0..8 {
        let started = std::time::Instant::now();
        assert!(connect_to(addr, "admin", "wrong").await.is_err());
        took.push(started.elapsed());
    }
    println!("8 wrong admin passwords: {took:?}");
    let total: Duration = took.iter().sum();
    // Three free, then 100, 200, 400, 800 and 1600 ms.
    assert!(total >= Duration::from_millis(3000), "{took:?}");
    assert!(took[7] >= Duration::from_millis(1500), "{took:?}");
    assert!(
        took[..3].iter().all(|t| *t < Duration::from_millis(500)),
        "{took:?}"
    );
    let started = std::time::Instant::now();
    let conn = connect_to(addr, "admin", "admin")
        .await
        .expect("the right password still logs in");
    conn.disconnect().await.ok();
    let right = started.elapsed();
    assert!(right < Duration::from_secs(4), "{right:?}");
    let started = std::time::Instant::now();
    assert!(connect_to(addr, "admin", "wrong").await.is_err());
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "a success forgets the failures"
    );
    proxy.control.shutdown().await;
    clean(test).await;
}

#[tokio::test]
async fn an_admin_port_beyond_loopback_with_the_sample_account_is_warned_about() {
    let test = "admin-sample";
    clean(test).await;
    let location = location(test);
    push(&location, &document(), None).await;
    let config = location.to_string();
    let wide = ServeProcess::start_with(
        &location,
        "sample-wide",
        &[
            "--config",
            &config,
            "--proxy-id",
            "sample-wide",
            "--admin-listen",
            "0.0.0.0:0",
        ],
    )
    .await;
    let local = ServeProcess::start(&location, "sample-local").await;
    let warning = "listens beyond loopback with the sample account admin/admin";
    // The admin port's task logs the warning right after "serving the admin
    // port", which may come after the registry entry `start` waits for.
    wait_until(
        "the warning of the wide proxy",
        Duration::from_secs(10),
        || wide.log_text().contains(warning),
    )
    .await;
    wait_until(
        "the local proxy's admin port",
        Duration::from_secs(10),
        || local.log_text().contains("serving the admin port"),
    )
    .await;
    assert!(!local.log_text().contains(warning), "{}", local.log_text());
    drop(wide);
    drop(local);
    clean(test).await;
}
