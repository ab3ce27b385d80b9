//! Health checks, automatic failover and statistics against the real fleet:
//! a master stopped and restarted is marked down and comes back by itself;
//! `auto_failover` points a dead master's range at its replica; statement
//! counts per kind and per host reach `stats::snapshot` and `GET /metrics`.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use shardgate::backend::health::HealthState;
use shardgate::control::reload::ReloadTrigger;
use shardgate::stats::{self, StatsRow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HEALTH_LINE: &str =
    "health: { interval_ms: 1000, timeout_ms: 1000, failures_before_down: 2, auto_failover: false }";

/// The test config with fast health checks (`auto_failover` as given).
fn yaml_with_fast_checks(auto_failover: bool) -> String {
    let yaml = test_config_yaml();
    assert!(
        yaml.contains(HEALTH_LINE),
        "config/shardgate.yaml changed its health line"
    );
    yaml.replace(
        HEALTH_LINE,
        &format!(
            "health: {{ interval_ms: 200, timeout_ms: 500, failures_before_down: 2, auto_failover: {auto_failover} }}"
        ),
    )
}

/// Replaces `proxy`'s config file with `yaml` and reloads it.
async fn reload_with(proxy: &RunningProxy, yaml: &str) {
    write_config(&proxy.config_path, yaml);
    proxy
        .control
        .reload(ReloadTrigger::Admin)
        .await
        .expect("reload");
}

/// Restarts master B however the test ends, so a failed assertion does not
/// leave the fleet broken for the other tests sharing it.
struct RestartHostB;

impl Drop for RestartHostB {
    fn drop(&mut self) {
        fleet_script(&["start-host", "3308"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_host_is_marked_down_fails_fast_and_comes_back_by_itself() {
    let _fleet = FLEET.lock().await;
    let proxy = start_server("health-restart", &yaml_with_fast_checks(false));
    let pool_b = proxy.engine.backends.pool("127.0.0.1:3308");
    let mut conn = app(&proxy).await;
    let on_b = insert_pin(&mut conn, 3001, "health b").await;
    let on_a = insert_pin(&mut conn, 12, "health a").await;
    wait_until("3308 checked up", Duration::from_secs(5), || {
        pool_b.health().state == HealthState::Up
    })
    .await;

    tokio::task::spawn_blocking(|| fleet_script(&["stop-host", "3308"]))
        .await
        .unwrap();
    let restart = RestartHostB;
    let took = wait_until("3308 marked down", Duration::from_secs(5), || {
        pool_b.health().state == HealthState::Down
    })
    .await;
    let health = pool_b.health();
    assert!(health.failures >= 2, "{health:?}");
    assert!(health.last_error.is_some(), "{health:?}");
    eprintln!("3308 marked down {took:?} after the stop returned");

    // New backend settings give every host a new pool; what was learnt
    // about the host (down, its statement counts) stays.
    let count_b = |engine: &shardgate::engine::Engine| {
        row(
            &stats::snapshot(&engine.stats, &engine.backends.figures()),
            "host",
            "127.0.0.1:3308",
        )
        .map(|r| r.count)
    };
    let counted = count_b(&proxy.engine);
    assert!(counted.is_some_and(|n| n >= 1), "{counted:?}");
    let resized = std::fs::read_to_string(&proxy.config_path)
        .unwrap()
        .replace("pool_max_per_host: 64", "pool_max_per_host: 32");
    reload_with(&proxy, &resized).await;
    let new_pool = proxy.engine.backends.pool("127.0.0.1:3308");
    assert!(!std::sync::Arc::ptr_eq(&new_pool, &pool_b), "a new pool");
    assert_eq!(new_pool.health().state, HealthState::Down);
    assert_eq!(count_b(&proxy.engine), counted);

    for _ in 0..3 {
        let started = Instant::now();
        let error = conn
            .query_drop(format!("SELECT data FROM pins WHERE id = {on_b}"))
            .await
            .expect_err("a statement for a shard of the down host must fail");
        let elapsed = started.elapsed();
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{message}");
        assert!(message.contains("shard 3001"), "{message}");
        assert!(message.contains("127.0.0.1:3308"), "{message}");
        assert!(
            message.contains("marked down by the health checker"),
            "{message}"
        );
        assert!(
            elapsed < Duration::from_millis(100),
            "failed in {elapsed:?}: {message}"
        );

        let data: Option<String> = conn
            .query_first(format!("SELECT data FROM pins WHERE id = {on_a}"))
            .await
            .expect("shards of 3307 keep working");
        assert_eq!(data.as_deref(), Some("health a"));
        // Statements naming no sharded table avoid the down master.
        let one: Option<u32> = conn.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
    }

    tokio::task::spawn_blocking(move || drop(restart))
        .await
        .unwrap();
    let took = wait_until("3308 back up", Duration::from_secs(10), || {
        pool_b.health().state == HealthState::Up
    })
    .await;
    eprintln!("3308 up again {took:?} after start-host returned");
    let data: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE id = {on_b}"))
        .await
        .expect("the host's shards work again without a proxy restart");
    assert_eq!(data.as_deref(), Some("health b"));
    conn.query_drop(format!("DELETE FROM pins WHERE id IN ({on_b})"))
        .await
        .unwrap();
    conn.query_drop(format!("DELETE FROM pins WHERE id IN ({on_a})"))
        .await
        .unwrap();
}

/// A reload that changes the backend account makes the checker log in
/// again: with a wrong password the host is marked down (as the data path
/// would find it), with the right one it is up again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_logs_in_again_when_the_backend_account_changes() {
    let _fleet = FLEET.lock().await;
    let yaml = yaml_with_fast_checks(false);
    let proxy = start_server("health-account", &yaml);
    let health = || {
        proxy
            .engine
            .backends
            .host("127.0.0.1:3310")
            .expect("3310 is in the topology")
            .health()
    };
    wait_until("3310 checked up", Duration::from_secs(5), || {
        health().state == HealthState::Up
    })
    .await;

    let wrong = yaml.replace("password: shardpw", "password: not-the-password");
    assert_ne!(wrong, yaml);
    reload_with(&proxy, &wrong).await;
    wait_until("3310 marked down", Duration::from_secs(10), || {
        health().state == HealthState::Down
    })
    .await;
    let error = health().last_error.unwrap_or_default();
    assert!(error.contains("Access denied"), "{error}");

    reload_with(&proxy, &yaml).await;
    wait_until("3310 up again", Duration::from_secs(10), || {
        health().state == HealthState::Up
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_failover_points_a_dead_masters_range_at_its_replica() {
    let _fleet = FLEET.lock().await;
    // A row on shard 13, written on 3307 and replicated to 3309.
    let marker = format!("failover {}", std::process::id());
    let mut master = direct(MASTER_A).await;
    master
        .exec_drop("INSERT INTO db00013.pins (data) VALUES (?)", (&marker,))
        .await
        .unwrap();
    let local_id = master.last_insert_id().unwrap();
    wait_for_pin_on(3309, 13, local_id, &marker).await;
    // The master "died": its replica must not see it either, or the
    // promotion is refused (the master may be alive behind a partition).
    let _start = RunOn3309WhenDropped("START SLAVE IO_THREAD");
    let mut replica = operations(3309).await;
    replica.query_drop("STOP SLAVE IO_THREAD").await.unwrap();
    drop(replica);

    let yaml = yaml_with_fast_checks(true).replace(
        "master: 127.0.0.1:3307, replica: 127.0.0.1:3309",
        "master: 127.0.0.1:3399, replica: 127.0.0.1:3309",
    );
    assert!(yaml.contains("127.0.0.1:3399"));
    let proxy = start_server("health-failover", &yaml);
    let master_of_13 = || {
        let topology = proxy.engine.topology.load();
        let fleet = topology.fleet_by_name("main").unwrap();
        let host = topology.master_of(fleet, 13).unwrap();
        topology.hosts[host].addr.clone()
    };
    assert_eq!(master_of_13(), "127.0.0.1:3399");
    let took = wait_until(
        "the range fails over to 3309",
        Duration::from_secs(10),
        || master_of_13() == "127.0.0.1:3309",
    )
    .await;
    eprintln!("failed over {took:?} after the proxy started");
    let down = proxy.engine.backends.all();
    assert!(
        down.iter()
            .all(|pool| pool.addr != "127.0.0.1:3309" || pool.health().state == HealthState::Up),
        "the replica was up when promoted"
    );

    let mut conn = app(&proxy).await;
    let data: Option<String> = conn
        .query_first(format!(
            "SELECT data FROM pins WHERE id = {}",
            pin_id(13, local_id)
        ))
        .await
        .expect("a read of shard 13 is served by the promoted replica");
    assert_eq!(data.as_deref(), Some(marker.as_str()));
    let written = std::fs::read_to_string(&proxy.config_path).unwrap();
    assert!(
        written.contains("127.0.0.1:3309") && !written.contains("master: 127.0.0.1:3399"),
        "the promotion is written to the config file:\n{written}"
    );

    master
        .query_drop(format!(
            "DELETE FROM db00013.pins WHERE local_id = {local_id}"
        ))
        .await
        .unwrap();
}

fn row<'a>(rows: &'a [StatsRow], scope: &str, name: &str) -> Option<&'a StatsRow> {
    rows.iter().find(|r| r.scope == scope && r.name == name)
}

/// A raw HTTP/1.1 request; returns the whole response.
async fn http(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
        .await
        .expect("the endpoint closes after answering")
        .unwrap();
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_are_counted_per_kind_and_host_and_served_on_metrics() {
    let _fleet = FLEET.lock().await;
    let proxy = start_server("stats", &yaml_with_fast_checks(false));
    let mut conn = app(&proxy).await;
    let host_a = |rows: &[StatsRow]| row(rows, "host", "127.0.0.1:3307").cloned();
    let before = stats::snapshot(&proxy.engine.stats, &proxy.engine.backends.figures());
    assert!(row(&before, "statement", "update").is_none(), "{before:?}");

    // Nothing else in this proxy sends UPDATEs: 5 good ones on shard 14
    // (3307) touching no row, and one the server refuses.
    let missing = pin_id(14, (1 << 36) - 1);
    for _ in 0..5 {
        conn.query_drop(format!(
            "UPDATE pins SET data = 'never' WHERE id = {missing}"
        ))
        .await
        .unwrap();
    }
    let error = conn
        .query_drop(format!(
            "UPDATE pins SET no_such_column = 1 WHERE id = {missing}"
        ))
        .await
        .expect_err("unknown column");
    assert_eq!(server_error(error).0, 1054);
    // A later answer means the commands before were recorded (one
    // session, in order): the UPDATEs, and the first ping.
    conn.ping().await.unwrap();
    conn.ping().await.unwrap();

    let after = stats::snapshot(&proxy.engine.stats, &proxy.engine.backends.figures());
    let update = row(&after, "statement", "update").expect("update counted");
    assert_eq!((update.count, update.errors), (6, 1), "{update:?}");
    assert!(
        update.p50_us > 0 && update.p99_us >= update.p50_us,
        "{update:?}"
    );
    let command = row(&after, "statement", "command").expect("ping counted");
    assert!(command.count >= 1 && command.errors == 0, "{command:?}");
    let (a0, a1) = (host_a(&before), host_a(&after).expect("3307 has a row"));
    let (count0, errors0) = a0.map_or((0, 0), |r| (r.count, r.errors));
    assert!(a1.count >= count0 + 6, "{a1:?}");
    assert_eq!(a1.errors, errors0 + 1, "{a1:?}");
    for host in ["127.0.0.1:3308", "127.0.0.1:3309", "127.0.0.1:3310"] {
        assert!(
            row(&after, "host", host).is_some(),
            "every host has a row: {after:?}"
        );
    }

    let metrics = proxy.listening.metrics.expect("metrics endpoint");
    let pool_a = proxy.engine.backends.pool("127.0.0.1:3307");
    wait_until("3307 checked up", Duration::from_secs(5), || {
        pool_a.health().state == HealthState::Up
    })
    .await;
    let host_count = host_a(&stats::snapshot(
        &proxy.engine.stats,
        &proxy.engine.backends.figures(),
    ))
    .unwrap()
    .count;
    let response = http(metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    for line in [
        "# TYPE shardgate_statements_total counter".to_owned(),
        "shardgate_statements_total{kind=\"update\"} 6".to_owned(),
        "shardgate_statement_errors_total{kind=\"update\"} 1".to_owned(),
        "shardgate_statement_duration_seconds_count{kind=\"update\"} 6".to_owned(),
        "shardgate_host_up{host=\"127.0.0.1:3307\"} 1".to_owned(),
        format!("shardgate_host_statements_total{{host=\"127.0.0.1:3307\"}} {host_count}"),
        format!(
            "shardgate_host_statement_errors_total{{host=\"127.0.0.1:3307\"}} {}",
            errors0 + 1
        ),
    ] {
        assert!(
            body.lines().any(|l| l == line),
            "missing `{line}` in:\n{body}"
        );
    }
    assert!(
        body.lines()
            .any(|l| l
                == "shardgate_statement_duration_seconds_bucket{kind=\"update\",le=\"+Inf\"} 6"),
        "{body}"
    );

    let not_found = http(metrics, b"GET /other HTTP/1.1\r\n\r\n").await;
    assert!(not_found.starts_with("HTTP/1.1 404"), "{not_found}");
    let garbage = http(metrics, b"\x00\xff garbage\r\n\r\n").await;
    assert!(garbage.starts_with("HTTP/1.1 404"), "{garbage}");
    // A client that connects and says nothing does not stop the endpoint.
    let _silent = tokio::net::TcpStream::connect(metrics).await.unwrap();
    let again = http(metrics, b"GET /metrics HTTP/1.0\r\n\r\n").await;
    assert!(again.starts_with("HTTP/1.1 200 OK"), "{again}");
}
