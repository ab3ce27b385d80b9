//! Proxies following the document: a push reaches both within a second;
//! an invalid document is refused by both while the old one serves.

use std::time::{Duration, Instant};

use shardgate::control::reload::ReloadTrigger;
use zookeeper_client as zk;

use super::*;

#[tokio::test]
async fn both_proxies_run_a_pushed_document_within_a_second() {
    let test = "follow";
    clean(test).await;
    let location = location(test);
    let first = push(&location, &document(), None).await;
    assert_eq!(first.previous, None, "the push created the znode");
    assert_eq!(first.znode_version, 0);
    let proxies = [start(&location, "follow-a"), start(&location, "follow-b")];
    for proxy in &proxies {
        let status = proxy.control.config_status();
        assert_eq!(status.version, first.version);
        assert_eq!(status.znode_version, Some(0));
        assert!(!can_log_in(proxy, "zkcore_follow", "pw_follow").await);
    }

    let pushed_at = Instant::now();
    let second = push(&location, &document_with_account("follow"), Some(0)).await;
    assert_eq!((second.previous, second.znode_version), (Some(0), 1));
    let mut took = Vec::new();
    for proxy in &proxies {
        while proxy.control.config_status().version != second.version {
            assert!(
                pushed_at.elapsed() < Duration::from_secs(5),
                "proxy {} still runs {} 5 s after the push",
                proxy.control.process.id,
                proxy.control.config_status().version
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        took.push(pushed_at.elapsed());
    }
    println!("push to both proxies running it: {took:?}");
    assert!(
        took.iter().all(|t| *t < Duration::from_secs(1)),
        "a proxy took a second or more: {took:?}"
    );

    for proxy in &proxies {
        assert!(
            can_log_in(proxy, "zkcore_follow", "pw_follow").await,
            "the pushed account logs in"
        );
        let config = show_config(proxy).await;
        assert_eq!(config["source"], location.to_string());
        assert_eq!(config["version"], second.version);
        assert_eq!(config["znode_version"], "1");
        assert_eq!(config["last_reload_trigger"], "znode change");
        assert!(
            config["last_reload_result"].contains("client accounts changed"),
            "{config:?}"
        );
        let attempt = proxy.control.config_status().last_reload.unwrap();
        assert_eq!(attempt.trigger, ReloadTrigger::ZnodeChange);
    }
    for proxy in &proxies {
        proxy.control.shutdown().await;
    }
    clean(test).await;
}

#[tokio::test]
async fn an_invalid_document_is_refused_and_the_old_one_keeps_serving() {
    let test = "invalid";
    clean(test).await;
    let location = location(test);
    let valid = push(&location, &document(), None).await;
    let proxies = [start(&location, "invalid-a"), start(&location, "invalid-b")];

    // Straight to the znode, past push's validation: a broken flow map and
    // a fleet with an unknown master field.
    let broken = document().replace(
        "types: { pin: 1, board: 2, user: 3, photo: 4 }",
        "types: { pin: 1, board: 2, user: 3, photo: 4",
    );
    let client = raw_client().await;
    let stat = client
        .set_data(&location.path, broken.as_bytes(), Some(valid.znode_version))
        .await
        .expect("write the broken document");
    assert_eq!(stat.version, 1);
    for proxy in &proxies {
        let started = Instant::now();
        loop {
            let status = proxy.control.config_status();
            if let Some(Err(message)) = status.last_reload.as_ref().map(|a| a.result.clone()) {
                assert!(message.contains("znode version 1"), "{message}");
                assert!(message.contains(&location.path), "{message}");
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "no refusal recorded: {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let status = proxy.control.config_status();
        assert_eq!(
            status.version, valid.version,
            "the old document stays in force"
        );
        assert_eq!(status.znode_version, Some(0));
        let config = show_config(proxy).await;
        assert!(
            config["last_reload_result"]
                .starts_with("refused (the previous config stays in force)"),
            "{config:?}"
        );
        assert!(
            config["last_reload_result"].contains("problem(s)"),
            "{config:?}"
        );
        let mut app = app(proxy).await;
        let one: Option<u32> = app.query_first("SELECT 1").await.expect("still serving");
        assert_eq!(one, Some(1));
        app.disconnect().await.ok();
    }

    // RELOAD CONFIG reads the znode again and says why it refuses.
    let mut conn = admin(&proxies[0]).await;
    let (code, message) = server_error(conn.query_drop("RELOAD CONFIG").await.unwrap_err());
    assert_eq!(code, 1105);
    assert!(
        message.contains("znode version 1") && message.contains("invalid"),
        "{message}"
    );
    // A promotion starts from the document in the znode: refused while it
    // is invalid.
    let (_, message) = server_error(
        conn.query_drop("PROMOTE REPLICA 127.0.0.1:3307")
            .await
            .unwrap_err(),
    );
    assert!(message.contains("is invalid"), "{message}");
    assert!(message.contains("nothing was changed"), "{message}");
    conn.disconnect().await.ok();

    let fixed = push(&location, &document_with_account("invalid"), Some(1)).await;
    assert_eq!(fixed.znode_version, 2);
    for proxy in &proxies {
        let started = Instant::now();
        while proxy.control.config_status().version != fixed.version {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the valid push was not taken"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(proxy.control.config_status().znode_version, Some(2));
        assert!(can_log_in(proxy, "zkcore_invalid", "pw_invalid").await);
    }
    drop(client);
    for proxy in &proxies {
        proxy.control.shutdown().await;
    }
    clean(test).await;
}

#[tokio::test]
async fn a_proxy_refuses_to_start_on_an_invalid_or_missing_document() {
    let test = "refuse";
    clean(test).await;
    let location = location(test);
    let error = start_zk_server(location.clone(), "refuse-a", ListenOverrides::default())
        .err()
        .expect("no znode: refused");
    assert!(
        error.contains("does not exist") && error.contains("config push"),
        "{error}"
    );

    let client = raw_client().await;
    client
        .mkdir(
            &root(test),
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let broken = document().replace("fleets:", "fleetz:");
    client
        .create(
            &location.path,
            broken.as_bytes(),
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let error = start_zk_server(location.clone(), "refuse-a", ListenOverrides::default())
        .err()
        .expect("invalid: refused");
    assert!(
        error.contains("is invalid") && error.contains("fleetz"),
        "{error}"
    );
    assert!(
        client
            .list_children(&location.registry_path())
            .await
            .unwrap_or_default()
            .is_empty(),
        "a refused proxy is not registered"
    );
    drop(client);
    clean(test).await;
}

/// A document nested `[[[...]]]` `levels` deep (2 bytes a level) in the
/// value of `listen`.
fn deeply_nested(levels: usize) -> String {
    format!("listen: {}{}\n", "[".repeat(levels), "]".repeat(levels))
}

/// Waits until `proxy` runs `version`, at most `limit`; how long it took.
async fn runs_within(proxy: &RunningProxy, version: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    while proxy.control.config_status().version != version {
        assert!(
            started.elapsed() < limit,
            "proxy {} still runs {} {limit:?} after the write: {:?}",
            proxy.control.process.id,
            proxy.control.config_status().version,
            proxy.control.config_status().last_reload
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

#[tokio::test]
async fn a_hostile_document_is_refused_at_once_and_never_delays_the_next() {
    let test = "hostile";
    clean(test).await;
    let location = location(test);
    let valid = push(&location, &document(), None).await;
    let proxy = start(&location, "hostile-a");
    let client = raw_client().await;
    // 200,000 levels (400 KB, under ZooKeeper's 1 MB), written straight to
    // the znode past push's own checks: it took the parser a minute.
    let hostile = deeply_nested(200_000);
    let written = Instant::now();
    client
        .set_data(&location.path, hostile.as_bytes(), None)
        .await
        .expect("write the hostile document");
    let refused = loop {
        if let Some(Err(message)) = proxy
            .control
            .config_status()
            .last_reload
            .map(|attempt| attempt.result)
        {
            break message;
        }
        assert!(
            written.elapsed() < Duration::from_secs(3),
            "no refusal within 3 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let to_refuse = written.elapsed();
    assert!(refused.contains("nested more than 32 deep"), "{refused}");
    assert_eq!(proxy.control.config_status().version, valid.version);
    let config = show_config(&proxy).await;
    assert!(
        config["last_reload_result"].contains("nested more than 32 deep"),
        "{config:?}"
    );

    // The hostile document again, then at once a valid one: the valid one
    // runs within a second or two, not after the hostile one's parse.
    client
        .set_data(&location.path, deeply_nested(199_999).as_bytes(), None)
        .await
        .expect("write the hostile document again");
    let good = document_with_account("hostile");
    client
        .set_data(&location.path, good.as_bytes(), None)
        .await
        .expect("write the valid document");
    let took = runs_within(
        &proxy,
        &shardgate::control::reload::version_of(good.as_bytes()),
        Duration::from_secs(3),
    )
    .await;
    println!("hostile document refused in {to_refuse:?}; the valid one after it ran in {took:?}");
    assert!(can_log_in(&proxy, "zkcore_hostile", "pw_hostile").await);
    proxy.control.shutdown().await;
    clean(test).await;
}
