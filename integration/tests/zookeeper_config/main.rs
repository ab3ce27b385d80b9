//! The config document in ZooKeeper: proxies started from one znode follow
//! a `config push` within a second, refuse an invalid document and keep
//! serving, register themselves (`SHOW PROXIES`), take their own listen
//! addresses; `config push` loses to a concurrent writer; the CLI end to
//! end.
//!
//! Needs a ZooKeeper at `SHARDGATE_ZK` (default 127.0.0.1:2281:
//! `integration/zookeeper.sh start`) and the fleet. Each test works under
//! its own root, `/shardgate-test/<test>-<pid>`, and removes it at the end.

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod cli;
mod expiry;
mod fencing;
mod follow;
mod pause;
mod registry;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shardgate::control::zookeeper;
use shardgate::topology::bootstrap::ListenOverrides;
use shardgate::topology::source::{parse_source, ConfigSource, ZkLocation};
use zookeeper_client as zk;

/// The ensemble the tests use.
fn zk_hosts() -> String {
    std::env::var("SHARDGATE_ZK").unwrap_or_else(|_| "127.0.0.1:2281".to_owned())
}

/// The test's own root znode.
fn root(test: &str) -> String {
    format!("/shardgate-test/{test}-{}", std::process::id())
}

/// The config document's location under the test's root.
fn location(test: &str) -> ZkLocation {
    let text = format!("zookeeper://{}{}/config", zk_hosts(), root(test));
    match parse_source(&text) {
        Ok(ConfigSource::ZooKeeper(location)) => location,
        other => panic!("{text}: {other:?}"),
    }
}

/// A session of the test's own, failing clearly when nothing answers.
async fn raw_client() -> zk::Client {
    // The same connect as the proxy's (4 s session, fails at once when
    // nothing answers), on the test's root.
    match zookeeper::connect(&location("raw")).await {
        Ok(client) => client,
        Err(e) => panic!(
            "{e} (SHARDGATE_ZK={}); start it: integration/zookeeper.sh start",
            zk_hosts()
        ),
    }
}

/// Deletes `path` and everything under it.
async fn remove_tree(client: &zk::Client, path: &str) {
    let mut stack = vec![path.to_owned()];
    let mut order = Vec::new();
    while let Some(node) = stack.pop() {
        match client.list_children(&node).await {
            Ok(children) => stack.extend(children.into_iter().map(|c| format!("{node}/{c}"))),
            Err(zk::Error::NoNode) => continue,
            Err(e) => panic!("list {node}: {e}"),
        }
        order.push(node);
    }
    for node in order.into_iter().rev() {
        match client.delete(&node, None).await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(e) => panic!("delete {node}: {e}"),
        }
    }
}

/// Removes the test's root (left by an earlier run of the same pid, or at
/// the end).
async fn clean(test: &str) {
    remove_tree(&raw_client().await, &root(test)).await;
}

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

/// Pushes `yaml` with the library function `config push` uses.
async fn push(location: &ZkLocation, yaml: &str, expected: Option<i32>) -> zookeeper::Pushed {
    zookeeper::push(location, yaml.as_bytes(), "test.yaml", expected)
        .await
        .unwrap_or_else(|e| panic!("push to {location}: {e}"))
}

/// Starts a proxy from `location` as `id`, panicking if refused.
fn start(location: &ZkLocation, id: &str) -> RunningProxy {
    start_zk_server(location.clone(), id, ListenOverrides::default())
        .unwrap_or_else(|e| panic!("start proxy {id}: {e}"))
}

async fn rows(conn: &mut Conn, sql: &str) -> Vec<Row> {
    conn.query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn text(row: &Row, column: &str) -> Option<String> {
    row.get::<Option<String>, _>(column)
        .unwrap_or_else(|| panic!("no column {column}"))
}

/// `SHOW CONFIG` as name → value.
async fn show_config(proxy: &RunningProxy) -> std::collections::BTreeMap<String, String> {
    let mut conn = admin(proxy).await;
    let answer = rows(&mut conn, "SHOW CONFIG").await;
    conn.disconnect().await.ok();
    answer
        .iter()
        .map(|row| {
            (
                text(row, "name").unwrap_or_default(),
                text(row, "value").unwrap_or_default(),
            )
        })
        .collect()
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
