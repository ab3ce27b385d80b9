//! The registry: `SHOW PROXIES` on either proxy of a document, a stopped
//! proxy leaving it, a duplicate id refused; listen addresses per process.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use super::*;

/// `SHOW PROXIES` rows as id → (column → value).
async fn show_proxies(proxy: &RunningProxy) -> BTreeMap<String, BTreeMap<String, Option<String>>> {
    let mut conn = admin(proxy).await;
    let answer = rows(&mut conn, "SHOW PROXIES").await;
    conn.disconnect().await.ok();
    let columns = [
        "client",
        "admin",
        "metrics",
        "config_version",
        "znode_version",
        "runs_current",
        "started_at",
        "this",
    ];
    answer
        .iter()
        .map(|row| {
            let id = text(row, "id").expect("an id");
            let fields = columns
                .iter()
                .map(|c| ((*c).to_owned(), text(row, c)))
                .collect();
            (id, fields)
        })
        .collect()
}

fn field<'a>(
    listed: &'a BTreeMap<String, BTreeMap<String, Option<String>>>,
    id: &str,
    column: &str,
) -> Option<&'a str> {
    listed
        .get(id)
        .unwrap_or_else(|| panic!("{id} not listed: {listed:?}"))[column]
        .as_deref()
}

#[tokio::test]
async fn show_proxies_lists_every_proxy_of_the_document() {
    let test = "registry";
    clean(test).await;
    let location = location(test);
    let first = push(&location, &document(), None).await;
    let alpha = start(&location, "alpha");
    let beta = start(&location, "beta");

    for (proxy, own) in [(&alpha, "alpha"), (&beta, "beta")] {
        let listed = show_proxies(proxy).await;
        assert_eq!(
            listed.keys().collect::<Vec<_>>(),
            ["alpha", "beta"],
            "{listed:?}"
        );
        for (id, other) in [("alpha", &alpha), ("beta", &beta)] {
            assert_eq!(
                field(&listed, id, "config_version"),
                Some(first.version.as_str())
            );
            assert_eq!(field(&listed, id, "znode_version"), Some("0"));
            assert_eq!(field(&listed, id, "runs_current"), Some("yes"));
            assert_eq!(
                field(&listed, id, "client"),
                Some(other.listening.client.to_string().as_str())
            );
            assert_eq!(
                field(&listed, id, "this"),
                Some(if id == own { "yes" } else { "no" })
            );
        }
    }

    // A second live proxy with the same id is refused before it listens.
    let error = start_zk_server(location.clone(), "alpha", ListenOverrides::default())
        .err()
        .expect("a duplicate id is refused");
    assert!(
        error.contains("proxy id `alpha` is already registered"),
        "{error}"
    );
    assert!(error.contains("--proxy-id"), "{error}");

    // After a push, both entries carry the new version.
    let second = push(&location, &document_with_account("registry"), Some(0)).await;
    let started = Instant::now();
    loop {
        let listed = show_proxies(&alpha).await;
        let now =
            ["alpha", "beta"].map(|id| field(&listed, id, "config_version").map(str::to_owned));
        if now
            .iter()
            .all(|v| v.as_deref() == Some(second.version.as_str()))
        {
            assert_eq!(field(&listed, "beta", "znode_version"), Some("1"));
            assert_eq!(field(&listed, "beta", "runs_current"), Some("yes"));
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "entries not updated: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A document written behind the proxies' backs that they refuse:
    // their entries no longer run the znode's version.
    let client = raw_client().await;
    client
        .set_data(&location.path, b"listen: [", None)
        .await
        .expect("write a broken document");
    let started = Instant::now();
    while alpha
        .control
        .config_status()
        .last_reload
        .and_then(|a| a.result.err())
        .is_none()
    {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "alpha did not refuse it"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let listed = show_proxies(&beta).await;
    assert_eq!(
        field(&listed, "alpha", "runs_current"),
        Some("no"),
        "{listed:?}"
    );
    assert_eq!(
        field(&listed, "alpha", "config_version"),
        Some(second.version.as_str())
    );

    // A proxy shut down leaves the registry.
    beta.control.shutdown().await;
    let listed = show_proxies(&alpha).await;
    assert_eq!(listed.keys().collect::<Vec<_>>(), ["alpha"], "{listed:?}");
    drop(client);
    alpha.control.shutdown().await;
    clean(test).await;
}

#[tokio::test]
async fn a_file_sourced_proxy_lists_itself() {
    let proxy = start_server("zk-file-proxies", &document());
    let listed = show_proxies(&proxy).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let (id, fields) = listed.iter().next().unwrap();
    assert_eq!(id, &proxy.control.process.id);
    assert_eq!(fields["this"].as_deref(), Some("yes"));
    assert_eq!(
        fields["config_version"].as_deref(),
        Some(proxy.control.config_status().version.as_str())
    );
    assert_eq!(fields["znode_version"], None);
    assert_eq!(
        fields["client"].as_deref(),
        Some(proxy.listening.client.to_string().as_str())
    );
}

/// A port free now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test]
async fn two_proxies_of_one_document_listen_where_they_are_told() {
    let test = "listen";
    clean(test).await;
    let location = location(test);
    // The document names fixed ports: without overrides the second proxy
    // could not bind them.
    let yaml = document()
        .replacen(
            "listen: 127.0.0.1:0",
            &format!("listen: 127.0.0.1:{}", free_port()),
            1,
        )
        .replacen(
            "  listen: 127.0.0.1:0",
            &format!("  listen: 127.0.0.1:{}", free_port()),
            1,
        );
    push(&location, &yaml, None).await;
    let mut proxies = Vec::new();
    for id in ["listen-a", "listen-b"] {
        let ports = [free_port(), free_port(), free_port()];
        let overrides = ListenOverrides {
            listen: Some(format!("127.0.0.1:{}", ports[0])),
            admin_listen: Some(format!("127.0.0.1:{}", ports[1])),
            metrics_listen: Some(format!("127.0.0.1:{}", ports[2])),
        };
        let proxy = start_zk_server(location.clone(), id, overrides)
            .unwrap_or_else(|e| panic!("start {id}: {e}"));
        assert_eq!(proxy.listening.client.port(), ports[0]);
        assert_eq!(admin_addr(&proxy).port(), ports[1]);
        assert_eq!(proxy.listening.metrics.map(|m| m.port()), Some(ports[2]));
        let mut app = app(&proxy).await;
        let one: Option<u32> = app.query_first("SELECT 1").await.expect("serves");
        assert_eq!(one, Some(1));
        app.disconnect().await.ok();
        proxies.push(proxy);
    }
    let listed = show_proxies(&proxies[0]).await;
    assert_eq!(
        field(&listed, "listen-b", "admin"),
        Some(admin_addr(&proxies[1]).to_string().as_str())
    );
    // A new document keeps the addresses: the overrides apply to it too,
    // so its routing table reports no listen change.
    push(&location, &format!("{yaml}\n# edited\n"), Some(0)).await;
    let started = Instant::now();
    while proxies[1].control.config_status().znode_version != Some(1) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the edit was not taken"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let config = proxies[1].engine.topology.load().config.clone();
    assert_eq!(
        config.listen,
        format!("127.0.0.1:{}", proxies[1].listening.client.port())
    );
    let result = proxies[1]
        .control
        .config_status()
        .last_reload
        .unwrap()
        .result;
    assert!(!result.as_ref().unwrap().contains("listen"), "{result:?}");
    for proxy in &proxies {
        proxy.control.shutdown().await;
    }
    clean(test).await;
}
