//! The config document in ZooKeeper: proxies started from one znode follow
//! a `config push` within a second, refuse an invalid document and keep
//! serving, register themselves (`SHOW PROXIES`), take their own listen
//! addresses; `config push` loses to a concurrent writer; the CLI end to
//! end.
//!
//! Needs a ZooKeeper (see `zk_harness`) and the fleet.

#[path = "../common/mod.rs"]
mod common;
#[path = "../zk_harness/mod.rs"]
mod zk_harness;

mod cli;
mod expiry;
mod fencing;
mod follow;
mod pause;
mod registry;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Row;
use shardgate::control::zookeeper;
use shardgate::topology::bootstrap::ListenOverrides;
use shardgate::topology::source::ZkLocation;
use zk_harness::*;

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

/// Starts a proxy from `location` as `id`, panicking if refused.
fn start(location: &ZkLocation, id: &str) -> RunningProxy {
    start_zk_server(location.clone(), id, ListenOverrides::default())
        .unwrap_or_else(|e| panic!("start proxy {id}: {e}"))
}

/// `SHOW CONFIG` as name → value.
async fn show_config(proxy: &RunningProxy) -> std::collections::BTreeMap<String, String> {
    let mut conn = admin(proxy).await;
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
