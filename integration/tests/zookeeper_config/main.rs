//! The config document in ZooKeeper: proxies started from one znode follow
//! a `config push` within a second, refuse an invalid document and keep
//! serving, register themselves (`SHOW PROXIES`), take their own listen
//! addresses; `config push` loses to a concurrent writer; the CLI end to
//! end; proxy processes killed, or started, during a fleet-wide pause; a
//! ZooKeeper outage on a private server.
//!
//! Needs a ZooKeeper at `SHARDGATE_ZK` (default 127.0.0.1:2281:
//! `integration/zookeeper.sh start`) and the fleet. Each test works under
//! its own root, `/shardgate-test/<test>-<pid>`, and removes it at the end.

#[path = "../common/mod.rs"]
mod common;
use common::zk_harness;
use common::zk_serve;

mod auth;
mod cli;
mod cutover_guard;
mod expiry;
mod fencing;
mod figures;
mod follow;
mod outage;
mod pause;
mod pause_process;
mod push_race;
mod registry;
mod serve;
mod takeover;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shardgate::control::zookeeper;
use shardgate::topology::bootstrap::ListenOverrides;
use shardgate::topology::source::ZkLocation;
use zk_harness::*;
use zookeeper_client as zk;

/// The test fleet's config with every listen address on a free port.
fn document() -> String {
    test_config_yaml()
}

/// `document()` with one more client account, `zkcore_<tag>`: a change a
/// login shows.
fn document_with_account(tag: &str) -> String {
    let yaml = document();
    let users = "users: [{ name: app, password: app }]";
    assert!(yaml.contains(users), "the test config's users line moved");
    yaml.replace(
        users,
        &format!(
            "users: [{{ name: app, password: app }}, {{ name: zkcore_{tag}, password: pw_{tag} }}]"
        ),
    )
}

/// `SHOW CONFIG` as name → value.
async fn show_config(proxy: &RunningProxy) -> std::collections::BTreeMap<String, String> {
    show_config_at(admin_addr(proxy)).await
}

/// `SHOW CONFIG` on the admin port at `addr` as name → value.
async fn show_config_at(addr: std::net::SocketAddr) -> std::collections::BTreeMap<String, String> {
    let mut conn = connect_to(addr, "admin", "admin")
        .await
        .unwrap_or_else(|e| panic!("admin login to {addr}: {e}"));
    let answer = config_rows(&mut conn).await;
    conn.disconnect().await.ok();
    answer.into_iter().collect()
}

/// Whether `user`/`password` can log in to the proxy's client port.
async fn can_log_in(proxy: &RunningProxy, user: &str, password: &str) -> bool {
    match connect_to(proxy.listening.client, user, password).await {
        Ok(conn) => {
            conn.disconnect().await.ok();
            true
        }
        Err(_) => false,
    }
}
