//! The ZooKeeper side of the integration tests: the test ensemble, a root
//! znode per test, a raw client, proxies started from a document, the
//! fleet-wide pause records and admin answers (`SHOW CONFIG`).
#![allow(dead_code)]

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use super::{start_zk_server, RunningProxy};
use shardgate::control::zookeeper;
use shardgate::topology::bootstrap::ListenOverrides;
use shardgate::topology::source::{parse_source, ConfigSource, ZkLocation};
use zookeeper_client as zk;

/// The ensemble the tests use.
pub fn zk_hosts() -> String {
    std::env::var("SHARDGATE_ZK").unwrap_or_else(|_| "127.0.0.1:2281".to_owned())
}

/// The test's own root znode.
pub fn root(test: &str) -> String {
    format!("/shardgate-test/{test}-{}", std::process::id())
}

/// The config document's location under the test's root.
pub fn location(test: &str) -> ZkLocation {
    let text = format!("zookeeper://{}{}/config", zk_hosts(), root(test));
    match parse_source(&text) {
        Ok(ConfigSource::ZooKeeper(location)) => location,
        other => panic!("{text}: {other:?}"),
    }
}

/// A session of the test's own, failing clearly when nothing answers.
pub async fn raw_client() -> zk::Client {
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
pub async fn remove_tree(client: &zk::Client, path: &str) {
    // Proxies still running may add znodes (registry entries, acks) while
    // the tree is deleted: a non-empty node is listed again.
    for _ in 0..20 {
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
        let mut again = false;
        for node in order.into_iter().rev() {
            match client.delete(&node, None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(zk::Error::NotEmpty) => again = true,
                Err(e) => panic!("delete {node}: {e}"),
            }
        }
        if !again {
            return;
        }
    }
    panic!("{path}: znodes kept appearing under it while it was deleted");
}

/// Removes the test's root (left by an earlier run of the same pid, or at
/// the end).
pub async fn clean(test: &str) {
    remove_tree(&raw_client().await, &root(test)).await;
}

/// Pushes `yaml` with the library function `config push` uses.
pub async fn push(location: &ZkLocation, yaml: &str, expected: Option<i32>) -> zookeeper::Pushed {
    zookeeper::push(location, yaml.as_bytes(), "test.yaml", expected)
        .await
        .unwrap_or_else(|e| panic!("push to {location}: {e}"))
}

/// Starts a proxy from `location` as `id`, panicking if refused.
pub fn start(location: &ZkLocation, id: &str) -> RunningProxy {
    start_zk_server(location.clone(), id, ListenOverrides::default())
        .unwrap_or_else(|e| panic!("start proxy {id}: {e}"))
}

/// The fleet-wide pause records under the document.
pub async fn pause_records(client: &zk::Client, location: &ZkLocation) -> Vec<String> {
    match client
        .list_children(&format!("{}/pauses", location.path))
        .await
    {
        Ok(ids) => ids,
        Err(zk::Error::NoNode) => Vec::new(),
        Err(e) => panic!("list the pauses: {e}"),
    }
}

/// The rows `sql` answers on `conn`, panicking on an error.
pub async fn rows(conn: &mut Conn, sql: &str) -> Vec<Row> {
    conn.query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// A text column of `row` (None for NULL), panicking if it has no such
/// column.
pub fn text(row: &Row, column: &str) -> Option<String> {
    row.get::<Option<String>, _>(column)
        .unwrap_or_else(|| panic!("no column {column}"))
}

/// `SHOW CONFIG` on an admin connection, as (name, value) rows in order.
pub async fn config_rows(conn: &mut Conn) -> Vec<(String, String)> {
    rows(conn, "SHOW CONFIG")
        .await
        .iter()
        .map(|row| {
            (
                text(row, "name").unwrap_or_default(),
                text(row, "value").unwrap_or_default(),
            )
        })
        .collect()
}
