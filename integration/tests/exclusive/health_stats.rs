//! Health checks, automatic failover and statistics against the real fleet:
//! a master stopped and restarted is marked down and comes back by itself;
//! `auto_failover` points a dead master's range at its replica; statement
//! counts per kind and per host reach `stats::snapshot` and `GET /metrics`;
//! `/ready` and `/healthz`, `shardgate health`, and the graceful stop a
//! SIGTERM starts on a real `shardgate serve` process; statement digests,
//! per-shard statistics, the slow-statement log and JSON log lines.

use crate::common;
use common::file_serve;

use std::collections::HashMap;
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
            &stats::snapshot(
                &engine.stats,
                &engine.backends.figures(&engine.topology.load()),
            ),
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
    let before = stats::snapshot(
        &proxy.engine.stats,
        &proxy.engine.backends.figures(&proxy.engine.topology.load()),
    );
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

    let after = stats::snapshot(
        &proxy.engine.stats,
        &proxy.engine.backends.figures(&proxy.engine.topology.load()),
    );
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
        &proxy.engine.backends.figures(&proxy.engine.topology.load()),
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
        "shardgate_host_up{host=\"127.0.0.1:3307\",fleet=\"main\",role=\"master\"} 1".to_owned(),
        format!("shardgate_host_statements_total{{host=\"127.0.0.1:3307\",fleet=\"main\",role=\"master\"}} {host_count}"),
        format!(
            "shardgate_host_statement_errors_total{{host=\"127.0.0.1:3307\",fleet=\"main\",role=\"master\"}} {}",
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

/// `GET /ready` and `GET /healthz`: the status and the JSON body.
async fn probe(addr: std::net::SocketAddr, path: &str) -> (u16, serde_json::Value) {
    let response = http(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
    .await;
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let json = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    (status, json)
}

/// `shardgate health` with `args`: its exit code and its output.
fn health_command(args: &[&str]) -> (Option<i32>, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .arg("health")
        .args(args)
        .output()
        .expect("run shardgate health");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

/// A ready proxy answers 200 on `/ready` and `/healthz`, and `shardgate
/// health` exits 0 (address from the flag or from the config file); a
/// draining or fenced one answers 503 saying so, and `health` exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_and_healthz_say_whether_the_proxy_serves() {
    let _fleet = FLEET.lock().await;
    let yaml = yaml_with_fast_checks(false);
    let proxy = start_server("ready", &yaml);
    let metrics = proxy.listening.metrics.expect("a metrics listener");
    let mut conn = app(&proxy).await;
    let one: Option<i64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    let (status, live) = probe(metrics, "/healthz").await;
    assert_eq!(status, 200, "{live}");
    assert_eq!(live["alive"], true, "{live}");
    let (status, ready) = probe(metrics, "/ready").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(ready["reasons"], serde_json::json!([]), "{ready}");

    let addr = metrics.to_string();
    let (code, out) = health_command(&["--metrics-listen", &addr]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ready: "), "{out}");
    // The address from a config file's `metrics.listen`.
    let named = yaml.replace(
        "metrics: { listen: 127.0.0.1:0 }",
        &format!("metrics: {{ listen: {addr} }}"),
    );
    assert_ne!(named, yaml, "the test config's metrics line changed");
    let config = proxy.config_path.with_file_name("health.yaml");
    std::fs::write(&config, named).unwrap();
    let (code, out) = health_command(&["--config", &config.display().to_string()]);
    assert_eq!(code, Some(0), "{out}");

    // Draining.
    proxy.control.process.start_draining();
    let (status, ready) = probe(metrics, "/ready").await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["ready"], false, "{ready}");
    assert!(
        ready["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("draining"),
        "{ready}"
    );
    let (code, out) = health_command(&["--metrics-listen", &addr]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("draining"), "{out}");
    // Still alive.
    assert_eq!(probe(metrics, "/healthz").await.0, 200);

    // Fenced (what the control plane does when it loses its ZooKeeper
    // session), on a proxy that is not draining.
    let proxy = start_server("ready-fenced", &yaml);
    let metrics = proxy.listening.metrics.expect("a metrics listener");
    assert_eq!(probe(metrics, "/ready").await.0, 200);
    assert!(proxy.engine.fence.raise(std::time::SystemTime::now()));
    let (status, ready) = probe(metrics, "/ready").await;
    assert_eq!(status, 503, "{ready}");
    assert!(
        ready["reasons"][0].as_str().unwrap().starts_with("fenced"),
        "{ready}"
    );
    assert!(proxy.engine.fence.lower(proxy.engine.fence.raises()));
    assert_eq!(probe(metrics, "/ready").await.0, 200);

    // Nothing listening there: exit 1 saying so.
    drop(conn);
    let (code, out) = health_command(&["--metrics-listen", "127.0.0.1:1"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("127.0.0.1:1/ready"), "{out}");
}

/// A fleet whose every master is unreachable (here pointed at a closed
/// port) makes `/ready` answer 503 naming the fleet; the other fleet's
/// statements still run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_names_a_fleet_without_a_reachable_master() {
    let _fleet = FLEET.lock().await;
    let yaml = yaml_with_fast_checks(false);
    let master = "{ range: [0, 4095], master: 127.0.0.1:3310 }";
    assert!(yaml.contains(master), "the test config's mod fleet changed");
    let closed = yaml.replace(master, "{ range: [0, 4095], master: 127.0.0.1:1 }");
    let proxy = start_server("ready-closed", &closed);
    let metrics = proxy.listening.metrics.expect("a metrics listener");
    let mut last = serde_json::Value::Null;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (status, ready) = probe(metrics, "/ready").await;
        if status == 503 {
            last = ready;
            break;
        }
        last = ready;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["ready"], false, "{last}");
    assert_eq!(
        last["fleets_unreachable"],
        serde_json::json!(["mod"]),
        "{last}"
    );
    let reason = last["reasons"][0].as_str().unwrap();
    assert!(
        reason.starts_with("fleet mod: no master reachable (127.0.0.1:1: "),
        "{last}"
    );
    let (code, out) = health_command(&["--metrics-listen", &metrics.to_string()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("fleet mod"), "{out}");
    // Alive, and fleet main serves.
    assert_eq!(probe(metrics, "/healthz").await.0, 200);
    let mut conn = app(&proxy).await;
    let id = insert_pin(&mut conn, 14, "ready-closed").await;
    assert_eq!(pin_on_host(id).await.as_deref(), Some("ready-closed"));
    conn.query_drop(format!("DELETE FROM pins WHERE id = {id}"))
        .await
        .unwrap();
}

/// The test config for a `shardgate serve` process of its own, with
/// `shutdown.drain_timeout_ms: 10000`.
fn stop_config() -> String {
    format!(
        "{}\nshutdown: {{ drain_timeout_ms: 10000 }}\n",
        test_config_yaml()
    )
}

/// SIGTERM on a real `shardgate serve`: no new client is accepted, a
/// running statement (`SELECT SLEEP(1)`) and an open transaction both
/// complete (the transaction's rows are on the master), an idle session
/// gets 1053, and the process exits 0 with its summary line once every
/// session closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_statements_and_transactions_finish_and_closes_idle_sessions() {
    let _fleet = FLEET.lock().await;
    let mut server = file_serve::FileServe::start("graceful-stop", "true", &stop_config());
    let tag = format!("graceful-stop-{}", std::process::id());
    let login = || connect_to(server.client, APP_USER, APP_PASSWORD);
    let mut in_transaction = login().await.expect("log in");
    let mut sleeper = login().await.expect("log in");
    let mut idle = login().await.expect("log in");
    let one: Option<i64> = idle.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    in_transaction.query_drop("BEGIN").await.unwrap();
    let id = insert_pin(&mut in_transaction, 14, &tag).await;
    let sleeping = tokio::spawn(async move {
        let slept: mysql_async::Result<Option<i64>> = sleeper.query_first("SELECT SLEEP(1)").await;
        (slept, sleeper)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.signal("TERM");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        login().await.is_err(),
        "a new client was accepted while stopping"
    );
    // The running statement completes.
    let (slept, mut sleeper) = sleeping.await.unwrap();
    assert_eq!(slept.expect("SELECT SLEEP(1) after SIGTERM"), Some(0));
    // Then its session was closed at that boundary, with a whole 1053.
    let error = sleeper.query_drop("SELECT 1").await.unwrap_err();
    assert_eq!(server_error(error).0, 1053);
    // The open transaction goes on and commits.
    in_transaction
        .query_drop(format!("UPDATE pins SET data = '{tag}-2' WHERE id = {id}"))
        .await
        .expect("a statement of the open transaction after SIGTERM");
    in_transaction
        .query_drop("COMMIT")
        .await
        .expect("COMMIT after SIGTERM");
    assert_eq!(pin_on_host(id).await, Some(format!("{tag}-2")));
    // The idle session was closed with 1053.
    let error = idle.query_drop("SELECT 1").await.unwrap_err();
    assert_eq!(server_error(error).0, 1053);
    let (code, log) = server.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("sessions drained 2, closed 1, cut 0"), "{log}");
    let mut master = direct(main_master_port(14)).await;
    master
        .query_drop(format!("DELETE FROM db00014.pins WHERE data LIKE '{tag}%'"))
        .await
        .unwrap();
}

/// A second SIGTERM ends the drain at once: the session still in its
/// transaction is cut (its rows never commit) and the process exits 1
/// saying so, long before `shutdown.drain_timeout_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_cuts_the_sessions_left() {
    let _fleet = FLEET.lock().await;
    let mut server = file_serve::FileServe::start("graceful-stop-twice", "true", &stop_config());
    let tag = format!("graceful-stop-twice-{}", std::process::id());
    let mut in_transaction = connect_to(server.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    in_transaction.query_drop("BEGIN").await.unwrap();
    let id = insert_pin(&mut in_transaction, 14, &tag).await;
    let started = Instant::now();
    server.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.signal("TERM");
    let (code, log) = server.wait_exit(Duration::from_secs(5));
    assert!(started.elapsed() < Duration::from_secs(5), "{log}");
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("cut 1 (a second signal ended the drain)"),
        "{log}"
    );
    assert_eq!(pin_on_host(id).await, None, "the cut transaction committed");
}

/// The test config with `stats` set to `section` (a YAML flow mapping).
fn yaml_with_stats(section: &str) -> String {
    format!("{}\nstats: {section}\n", yaml_with_fast_checks(false))
}

/// `SHOW DIGESTS ...` on `proxy`'s admin port: each row as column → value.
async fn admin_rows(proxy: &RunningProxy, command: &str) -> Vec<HashMap<String, String>> {
    let mut admin = admin(proxy).await;
    let rows: Vec<mysql_async::Row> = admin.query(command).await.unwrap();
    rows.into_iter()
        .map(|row| {
            let columns = row.columns();
            columns
                .iter()
                .enumerate()
                .map(|(i, column)| {
                    let value: Option<String> = row.get(i);
                    (column.name_str().into_owned(), value.unwrap_or_default())
                })
                .collect()
        })
        .collect()
}

/// The row of `rows` whose `text` is `text`.
fn digest<'a>(rows: &'a [HashMap<String, String>], text: &str) -> &'a HashMap<String, String> {
    rows.iter()
        .find(|row| row["text"] == text)
        .unwrap_or_else(|| panic!("no digest `{text}` in {rows:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_are_counted_under_their_digest_with_rows_and_route() {
    let _fleet = FLEET.lock().await;
    let proxy = start_server("digests", &yaml_with_stats("{ max_digests: 1000 }"));
    let mut conn = app(&proxy).await;
    let tag = format!("digest-{}", std::process::id());
    // Three pins on three shards, two masters.
    let ids = [
        insert_pin(&mut conn, 31, &tag).await,
        insert_pin(&mut conn, 32, &tag).await,
        insert_pin(&mut conn, 3000, &tag).await,
    ];
    for id in ids {
        let got: Vec<(u64, String)> = conn
            .query(format!("SELECT id, data FROM pins WHERE id = {id}"))
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
    }
    let got: Vec<u64> = conn
        .query(format!(
            "SELECT id FROM pins WHERE id IN ({}, {}, {}) ORDER BY id",
            ids[0], ids[1], ids[2]
        ))
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    conn.query_drop(format!(
        "UPDATE pins SET data = '{tag}-x' WHERE id = {}",
        ids[2]
    ))
    .await
    .unwrap();
    let refused = conn.query_drop("SELECT FOUND_ROWS()").await;
    assert!(refused.is_err(), "FOUND_ROWS() is refused");
    conn.query_drop("SELECT 1").await.unwrap();
    // The UPDATE reached master B.
    assert_eq!(
        pin_on_host(ids[2]).await.as_deref(),
        Some(format!("{tag}-x").as_str())
    );

    let rows = admin_rows(&proxy, "SHOW DIGESTS ORDER BY count").await;
    let insert = digest(&rows, "INSERT INTO pins (data) VALUES (?)");
    assert_eq!(
        (
            &insert["count"][..],
            &insert["rows_affected"][..],
            &insert["routes"][..]
        ),
        ("3", "3", "shard:3"),
        "{insert:?}"
    );
    let point = digest(&rows, "SELECT id, data FROM pins WHERE id = ?");
    assert_eq!(
        (
            &point["count"][..],
            &point["errors"][..],
            &point["rows_sent"][..],
            &point["shards"][..],
            &point["routes"][..]
        ),
        ("3", "0", "3", "3", "shard:3"),
        "{point:?}"
    );
    assert!(point["max_ms"].parse::<f64>().unwrap() > 0.0, "{point:?}");
    let split = digest(
        &rows,
        "SELECT id FROM pins WHERE id IN (?, ...) ORDER BY id",
    );
    assert_eq!(
        (
            &split["count"][..],
            &split["rows_sent"][..],
            &split["shards"][..],
            &split["routes"][..]
        ),
        ("1", "3", "3", "in_split:1"),
        "{split:?}"
    );
    let update = digest(&rows, "UPDATE pins SET data = ? WHERE id = ?");
    assert_eq!(
        (&update["rows_affected"][..], &update["routes"][..]),
        ("1", "shard:1"),
        "{update:?}"
    );
    let found_rows = digest(&rows, "SELECT FOUND_ROWS ()");
    assert_eq!(
        (&found_rows["errors"][..], &found_rows["routes"][..]),
        ("1", "refused:1"),
        "{found_rows:?}"
    );
    let one = digest(&rows, "SELECT ?");
    assert_eq!(&one["routes"][..], "any_host:1", "{one:?}");
    // Ordered by count, highest first.
    let counts: Vec<u64> = rows.iter().map(|r| r["count"].parse().unwrap()).collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    assert_eq!(admin_rows(&proxy, "SHOW DIGESTS LIMIT 2").await.len(), 2);

    let reset = admin_rows(&proxy, "RESET DIGESTS").await;
    assert_eq!(reset[0]["forgotten"], rows.len().to_string());
    assert!(admin_rows(&proxy, "SHOW DIGESTS").await.is_empty());
    delete_pins(MASTER_A, &[31, 32], &tag).await;
    delete_pins(MASTER_B, &[3000], &tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_statement_is_logged_once_when_the_threshold_is_set_and_not_when_off() {
    let _fleet = FLEET.lock().await;
    captured_log("shardgate::slow");
    let tag = format!("slow-{}", std::process::id());
    let on = start_server("slow-on", &yaml_with_stats("{ slow_statement_ms: 200 }"));
    let off = start_server("slow-off", &test_config_yaml());
    let mut conn = app(&on).await;
    let id = insert_pin(&mut conn, 41, &tag).await;
    let slept: Vec<(u64, u8)> = conn
        .query(format!(
            "SELECT id, SLEEP(0.3) AS slow_on FROM pins WHERE id = {id}"
        ))
        .await
        .unwrap();
    assert_eq!(slept.len(), 1);
    conn.query_drop(format!("SELECT id AS fast_on FROM pins WHERE id = {id}"))
        .await
        .unwrap();
    let mut off_conn = app(&off).await;
    off_conn
        .query_drop(format!(
            "SELECT id, SLEEP(0.3) AS slow_off FROM pins WHERE id = {id}"
        ))
        .await
        .unwrap();

    let log = captured_log("shardgate::slow");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("slow statement"))
        .collect();
    let slow: Vec<&&str> = lines.iter().filter(|l| l.contains("AS slow_on")).collect();
    assert_eq!(slow.len(), 1, "one line for the slow statement: {log}");
    let line = slow[0];
    for field in [
        "text=SELECT id, SLEEP (?) AS slow_on FROM pins WHERE id = ?",
        "user=app",
        "client=127.0.0.1",
        "route=\"shard\"",
        "shard=main/41",
        "host=127.0.0.1:3307",
        "rows_sent=1",
    ] {
        assert!(line.contains(field), "`{field}` missing in {line}");
    }
    assert!(
        !line.contains(&id.to_string()),
        "literals are masked: {line}"
    );
    let time_ms: f64 = line
        .split("time_ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("time_ms in {line}"));
    assert!(time_ms >= 300.0, "{line}");
    assert!(
        !log.contains("fast_on"),
        "a fast statement is not logged: {log}"
    );
    assert!(!log.contains("slow_off"), "off by default: {log}");
    delete_pins(MASTER_A, &[41], &tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_on_one_shard_puts_it_on_top_of_shard_stats_and_metrics() {
    let _fleet = FLEET.lock().await;
    let proxy = start_server("shard-stats", &test_config_yaml());
    let mut conn = app(&proxy).await;
    for _ in 0..40 {
        conn.query_drop(format!(
            "SELECT data FROM pins WHERE id = {}",
            pin_id(2077, 1)
        ))
        .await
        .unwrap();
    }
    for shard in [5, 6, 7] {
        conn.query_drop(format!(
            "SELECT data FROM pins WHERE id = {}",
            pin_id(shard, 1)
        ))
        .await
        .unwrap();
    }
    for _ in 0..2 {
        let error = conn
            .query_drop(format!(
                "UPDATE pins SET no_such_column = 1 WHERE id = {}",
                pin_id(9, 1)
            ))
            .await
            .expect_err("unknown column");
        assert_eq!(server_error(error).0, 1054);
    }
    let top = admin_rows(&proxy, "SHOW SHARD STATS TOP 3").await;
    assert_eq!(top.len(), 3, "{top:?}");
    assert_eq!(
        (
            &top[0]["fleet"][..],
            &top[0]["shard"][..],
            &top[0]["statements"][..]
        ),
        ("main", "2077", "40"),
        "{top:?}"
    );
    let by_errors = admin_rows(&proxy, "SHOW SHARD STATS TOP 1 ORDER BY errors").await;
    assert_eq!(
        (&by_errors[0]["shard"][..], &by_errors[0]["errors"][..]),
        ("9", "2"),
        "{by_errors:?}"
    );
    let metrics = proxy.listening.metrics.expect("metrics endpoint");
    let response = http(metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let line = "shardgate_hot_shard_statements{fleet=\"main\",shard=\"2077\",rank=\"1\"} 40";
    assert!(
        response.lines().any(|l| l == line),
        "missing `{line}` in:\n{response}"
    );
    let hot = response
        .lines()
        .filter(|l| l.starts_with("shardgate_hot_shard_statements{"))
        .count();
    assert_eq!(
        hot, 5,
        "one sample per shard that ran a statement, at most 10"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_statement_shapes_keep_the_digest_table_at_its_bound() {
    let _fleet = FLEET.lock().await;
    let proxy = start_server("digest-bound", &yaml_with_stats("{ max_digests: 32 }"));
    let mut conn = app(&proxy).await;
    let shapes = 500;
    for i in 0..shapes {
        conn.query_drop(format!("SELECT {i} AS c{i}"))
            .await
            .unwrap();
    }
    let rows = admin_rows(&proxy, "SHOW DIGESTS").await;
    assert!(rows.len() <= 32, "{} digests kept", rows.len());
    assert!(!rows.is_empty());
    // The most recent shape is kept.
    digest(&rows, &format!("SELECT ? AS c{}", shapes - 1));
    let metrics = proxy.listening.metrics.expect("metrics endpoint");
    let response = http(metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let value = |name: &str| -> u64 {
        response
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {response}"))
    };
    assert_eq!(value("shardgate_digests"), rows.len() as u64);
    // The client's own statements at login are digests too.
    let evicted = value("shardgate_digest_evictions_total");
    let beyond = shapes - rows.len() as u64;
    assert!(
        (beyond..beyond + 5).contains(&evicted),
        "every shape beyond the bound evicted one: {evicted}, {beyond}"
    );
}

/// A `shardgate serve --log-format json` process: its log lines, parsed,
/// as they come; killed on drop.
struct JsonServe {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    seen: Vec<serde_json::Value>,
}

impl Drop for JsonServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl JsonServe {
    /// The first line (waiting up to 20 s) for which `wanted` holds.
    fn line(
        &mut self,
        what: &str,
        wanted: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        if let Some(found) = self.seen.iter().find(|line| wanted(line)) {
            return found.clone();
        }
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no log line {what} in {:#?}", self.seen));
            self.seen.push(line.clone());
            if wanted(&line) {
                return line;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_log_lines_carry_the_sessions_connection_id_and_user() {
    use std::io::BufRead;
    let _fleet = FLEET.lock().await;
    let config = file_serve::write_config("json-log", &test_config_yaml());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["serve", "--log-format", "json", "--config"])
        .arg(&config)
        .env(
            "RUST_LOG",
            "info,shardgate::frontend=debug,shardgate::engine=debug",
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start shardgate serve");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let parsed = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            if tx.send(parsed).is_err() {
                break;
            }
        }
    });
    let mut serve = JsonServe {
        child,
        lines: rx,
        seen: Vec::new(),
    };
    let message = |line: &serde_json::Value| line["fields"]["message"].as_str().map(str::to_owned);
    let started = serve.line("`shardgate started`", |l| {
        message(l).as_deref() == Some("shardgate started")
    });
    let client: std::net::SocketAddr = started["fields"]["client"]
        .as_str()
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("client address in {started}"));
    let mut conn = connect_to(client, APP_USER, APP_PASSWORD).await.unwrap();
    let id: u32 = conn
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    conn.query_drop(format!(
        "SELECT data FROM pins WHERE id IN ({}, {})",
        pin_id(3, 1),
        pin_id(2100, 1)
    ))
    .await
    .unwrap();
    let session = |line: &serde_json::Value| {
        line["spans"]
            .as_array()
            .and_then(|spans| spans.iter().find(|span| span["name"] == "session"))
            .cloned()
    };
    let logged_in = serve.line("`logged in`", |l| {
        message(l).as_deref() == Some("logged in")
    });
    let span = session(&logged_in).unwrap_or_else(|| panic!("a session span in {logged_in}"));
    assert_eq!(span["connection_id"], u64::from(id), "{logged_in}");
    assert_eq!(span["user"], APP_USER, "{logged_in}");
    let read = serve.line("`multi-shard read`", |l| {
        message(l).as_deref() == Some("multi-shard read")
    });
    let span = session(&read).unwrap_or_else(|| panic!("a session span in {read}"));
    assert_eq!(span["connection_id"], u64::from(id), "{read}");
    assert_eq!(span["user"], APP_USER, "{read}");
    let statement = read["spans"]
        .as_array()
        .and_then(|spans| spans.iter().find(|span| span["name"] == "statement"))
        .unwrap_or_else(|| panic!("a statement span in {read}"));
    assert_eq!(statement["command"], "Query", "{read}");
}
