//! Sessions and admin commands on real `shardgate serve` processes
//! ([`ServeProcess`], started and stopped by the shared harness).

use std::collections::BTreeMap;
use std::net::SocketAddr;

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
