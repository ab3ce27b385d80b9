//! Replication lag and the metrics an operator alerts on, against the real
//! fleet: a replica whose SQL thread is stopped shows its lag in `SHOW
//! HOSTS` and `/metrics` and is not promoted; refused logins, 1040s,
//! reloads, pauses and pool checkouts move their `/metrics` families.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

const HEALTH_LINE: &str =
    "health: { interval_ms: 1000, timeout_ms: 1000, failures_before_down: 2, auto_failover: false }";

/// The test config with checks every 200 ms and `max_promote_lag_ms`.
fn yaml_with_max_lag(max_promote_lag_ms: u64) -> String {
    let yaml = test_config_yaml();
    assert!(
        yaml.contains(HEALTH_LINE),
        "config/shardgate.yaml changed its health line"
    );
    yaml.replace(
        HEALTH_LINE,
        &format!(
            "health: {{ interval_ms: 200, timeout_ms: 1000, failures_before_down: 2, auto_failover: false, max_promote_lag_ms: {max_promote_lag_ms} }}"
        ),
    )
}

/// `SHOW HOSTS`' row of `host`, by column name.
async fn host_row(admin: &mut Conn, host: &str) -> BTreeMap<String, Option<String>> {
    let rows: Vec<Row> = admin.query("SHOW HOSTS").await.expect("SHOW HOSTS");
    rows.into_iter()
        .map(|row| {
            let columns = row.columns();
            let row: Vec<Option<String>> = (0..columns.len())
                .map(|i| {
                    row.get_opt::<Option<String>, _>(i)
                        .and_then(Result::ok)
                        .flatten()
                })
                .collect();
            columns
                .iter()
                .map(|c| c.name_str().into_owned())
                .zip(row)
                .collect::<BTreeMap<_, _>>()
        })
        .find(|row| row.get("host").cloned().flatten().as_deref() == Some(host))
        .unwrap_or_else(|| panic!("SHOW HOSTS has no {host}"))
}

fn number(row: &BTreeMap<String, Option<String>>, column: &str) -> Option<u64> {
    row.get(column)
        .unwrap_or_else(|| panic!("SHOW HOSTS has no column {column}: {row:?}"))
        .as_deref()
        .map(|v| v.parse().unwrap_or_else(|e| panic!("{column} = {v}: {e}")))
}

const REPLICA: &str = "{host=\"127.0.0.1:3309\",fleet=\"main\",role=\"replica\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_sql_thread_stopped_shows_its_lag_and_is_not_promoted() {
    let _fleet = serial().await;
    let proxy = start_server("lag", &yaml_with_max_lag(1000));
    let mut admin = admin(&proxy).await;
    let mut conn = app(&proxy).await;
    let replica = proxy.engine.backends.pool("127.0.0.1:3309");
    wait_until(
        "3309's lag read, caught up",
        Duration::from_secs(10),
        || {
            replica
                .health()
                .lag
                .is_some_and(|lag| lag.sql_running && lag.gtid_behind == Some(0))
        },
    )
    .await;
    let row = host_row(&mut admin, "127.0.0.1:3309").await;
    assert_eq!(number(&row, "gtid_behind"), Some(0), "{row:?}");
    assert!(
        number(&row, "replication_lag_ms").is_some_and(|ms| ms < 1000),
        "{row:?}"
    );
    assert_eq!(number(&row, "seconds_behind_master"), Some(0), "{row:?}");
    let master = host_row(&mut admin, "127.0.0.1:3307").await;
    assert_eq!(
        number(&master, "replication_lag_ms"),
        None,
        "a master has no lag: {master:?}"
    );

    let mut replica_conn = operations(3309).await;
    replica_conn
        .query_drop("STOP SLAVE SQL_THREAD")
        .await
        .unwrap();
    // Puts the replica back however the test ends (other tests use it).
    let _restart = RunOn3309WhenDropped("START SLAVE SQL_THREAD");
    let local_id = decode(insert_pin(&mut conn, 12, "lag test").await).local_id;
    insert_pin(&mut conn, 13, "lag test").await;

    let waited = Duration::from_secs(10);
    let lagging = common::Deadline::new("3309's lag past 1000 ms in SHOW HOSTS", waited);
    let row = loop {
        let row = host_row(&mut admin, "127.0.0.1:3309").await;
        if number(&row, "replication_lag_ms").is_some_and(|ms| ms > 1200) {
            break row;
        }
        lagging.retry(format!("{row:?}")).await;
    };
    assert!(
        number(&row, "gtid_behind").is_some_and(|n| n >= 2),
        "{row:?}"
    );
    assert_eq!(
        number(&row, "seconds_behind_master"),
        None,
        "NULL: SQL thread stopped: {row:?}"
    );

    let samples = scrape_metrics(&proxy).await;
    assert!(metric_sample(&samples, &format!("shardgate_replica_lag_seconds{REPLICA}")) > 1.0);
    assert!(
        metric_sample(
            &samples,
            &format!("shardgate_replica_gtid_behind_transactions{REPLICA}")
        ) >= 2.0
    );
    assert!(metric_sample(
        &samples,
        &format!("shardgate_replica_seconds_behind_master{REPLICA}")
    )
    .is_nan());
    assert_eq!(
        metric_sample(&samples, &format!("shardgate_replica_sql_running{REPLICA}")),
        0.0
    );
    assert!(
        !samples
            .keys()
            .any(|k| k.starts_with("shardgate_replica_lag_seconds{host=\"127.0.0.1:3307\"")),
        "a master exports no lag"
    );
    let refused_before = metric_sample(
        &samples,
        "shardgate_failovers_refused_lag_total{trigger=\"admin\"}",
    );

    let config_before = std::fs::read_to_string(&proxy.config_path).unwrap();
    let error = admin
        .query_drop("PROMOTE REPLICA 127.0.0.1:3307")
        .await
        .expect_err("a lagging replica is not promoted");
    let (code, message) = server_error(error);
    assert_eq!(code, 1105, "{message}");
    for part in [
        "replica 127.0.0.1:3309 is not promoted",
        "health.max_promote_lag_ms (1000 ms)",
        "SQL thread stopped",
        "nothing was changed",
    ] {
        assert!(message.contains(part), "`{part}` in {message}");
    }
    assert_eq!(
        std::fs::read_to_string(&proxy.config_path).unwrap(),
        config_before
    );
    assert!(proxy.engine.topology.load().is_master("127.0.0.1:3307"));
    let mut master_conn = operations(3307).await;
    let read_only: Option<u8> = master_conn.query_first("SELECT @@read_only").await.unwrap();
    assert_eq!(read_only, Some(0), "the old master was not fenced");
    let samples = scrape_metrics(&proxy).await;
    assert_eq!(
        metric_sample(
            &samples,
            "shardgate_failovers_refused_lag_total{trigger=\"admin\"}"
        ),
        refused_before + 1.0
    );
    assert_eq!(
        metric_sample(&samples, "shardgate_failovers_total{trigger=\"admin\"}"),
        0.0
    );

    replica_conn
        .query_drop("START SLAVE SQL_THREAD")
        .await
        .unwrap();
    wait_for_pin_on(3309, 12, local_id, "lag test").await;
    wait_until("3309 caught up again", Duration::from_secs(10), || {
        replica.health().lag.is_some_and(|lag| {
            lag.sql_running && lag.gtid_behind == Some(0) && lag.lag == Some(Duration::ZERO)
        })
    })
    .await;
    let row = host_row(&mut admin, "127.0.0.1:3309").await;
    assert_eq!(number(&row, "replication_lag_ms"), Some(0), "{row:?}");
    delete_pins(MASTER_A, &[12, 13], "lag test").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_metrics_move_when_provoked() {
    let _fleet = serial().await;
    let yaml = with_limits(&test_config_yaml(), "  max_client_connections: 2\n");
    let proxy = start_server("operator-metrics", &yaml);
    let before = scrape_metrics(&proxy).await;
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        metric_sample(
            &before,
            &format!("shardgate_build_info{{version=\"{version}\"}}")
        ),
        1.0
    );
    let old_version = proxy.control.config_status.snapshot().version;
    assert_eq!(
        metric_sample(
            &before,
            &format!("shardgate_config_info{{version=\"{old_version}\"}}")
        ),
        1.0
    );
    assert_eq!(metric_sample(&before, "shardgate_fenced"), 0.0);
    assert_eq!(
        metric_sample(&before, "shardgate_fenced_since_timestamp_seconds"),
        0.0
    );
    assert_eq!(
        metric_sample(&before, "shardgate_sessions_handed_off_total"),
        0.0
    );
    assert_eq!(
        metric_sample(&before, "shardgate_sessions_drained_total{when=\"idle\"}"),
        0.0
    );
    assert_eq!(metric_sample(&before, "shardgate_paused_shards"), 0.0);
    let host_a = "{host=\"127.0.0.1:3307\",fleet=\"main\",role=\"master\"}";

    // A statement: a pool checkout on 3307, its wait, a one-shard route.
    let mut conn = app(&proxy).await;
    insert_pin(&mut conn, 12, "operator metrics").await;
    let after_insert = scrape_metrics(&proxy).await;
    for family in [
        format!("shardgate_host_pool_checkouts_total{host_a}"),
        format!("shardgate_host_pool_wait_seconds_count{host_a}"),
        "shardgate_route_statements_total{route=\"shard\"}".to_owned(),
    ] {
        assert!(
            metric_sample(&after_insert, &family) > before.get(&family).copied().unwrap_or(0.0),
            "{family} did not move"
        );
    }
    assert_eq!(
        metric_sample(
            &after_insert,
            &format!("shardgate_host_pool_checkout_timeouts_total{host_a}")
        ),
        0.0
    );
    assert_eq!(
        metric_sample(&after_insert, "shardgate_client_connections"),
        1.0
    );

    // A refused login.
    let error = connect_to(proxy.listening.client, APP_USER, "wrong")
        .await
        .expect_err("a wrong password is refused");
    assert_eq!(server_error(error).0, 1045);
    // A 1040: the cap is 2, two clients hold it.
    let _second = app(&proxy).await;
    let error = connect_to(proxy.listening.client, APP_USER, APP_PASSWORD)
        .await
        .expect_err("a third client is refused");
    assert_eq!(server_error(error).0, 1040);
    let refused = scrape_metrics(&proxy).await;
    assert_eq!(
        metric_sample(&refused, "shardgate_client_logins_failed_total"),
        metric_sample(&before, "shardgate_client_logins_failed_total") + 1.0
    );
    assert_eq!(
        metric_sample(&refused, "shardgate_client_connections_refused_total"),
        metric_sample(&before, "shardgate_client_connections_refused_total") + 1.0
    );
    assert_eq!(metric_sample(&refused, "shardgate_client_connections"), 2.0);

    // A reload applied, then one refused.
    let mut admin = admin(&proxy).await;
    let applied = "shardgate_config_reloads_total{result=\"applied\"}";
    let refused_reloads = "shardgate_config_reloads_total{result=\"refused\"}";
    write_config(
        &proxy.config_path,
        &yaml.replace("timeout_ms: 5000, drain", "timeout_ms: 4000, drain"),
    );
    admin.query_drop("RELOAD CONFIG").await.expect("reload");
    write_config(&proxy.config_path, &format!("{yaml}\nno_such_key: 1\n"));
    let error = admin
        .query_drop("RELOAD CONFIG")
        .await
        .expect_err("an unknown key is refused");
    assert_eq!(server_error(error).0, 1105);
    let reloaded = scrape_metrics(&proxy).await;
    assert_eq!(
        metric_sample(&reloaded, applied),
        metric_sample(&before, applied) + 1.0
    );
    assert_eq!(
        metric_sample(&reloaded, refused_reloads),
        metric_sample(&before, refused_reloads) + 1.0
    );
    let new_version = proxy.control.config_status.snapshot().version;
    assert_ne!(new_version, old_version);
    assert_eq!(
        metric_sample(
            &reloaded,
            &format!("shardgate_config_info{{version=\"{new_version}\"}}")
        ),
        1.0
    );
    assert!(!reloaded.contains_key(&format!(
        "shardgate_config_info{{version=\"{old_version}\"}}"
    )));
    assert!(
        metric_sample(&reloaded, "shardgate_config_loaded_timestamp_seconds")
            >= metric_sample(&before, "shardgate_config_loaded_timestamp_seconds")
    );

    // A pause of 100 shards.
    admin
        .query_drop("PAUSE SHARDS 100-199 IN main")
        .await
        .expect("pause");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let paused = scrape_metrics(&proxy).await;
    admin
        .query_drop("RESUME SHARDS 100-199 IN main")
        .await
        .expect("resume");
    assert_eq!(metric_sample(&paused, "shardgate_paused_shards"), 100.0);
    assert!(metric_sample(&paused, "shardgate_oldest_pause_seconds") >= 0.3);
    let resumed = scrape_metrics(&proxy).await;
    assert_eq!(metric_sample(&resumed, "shardgate_paused_shards"), 0.0);
    assert_eq!(
        metric_sample(&resumed, "shardgate_oldest_pause_seconds"),
        0.0
    );

    delete_pins(MASTER_A, &[12], "operator metrics").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_failover_refuses_a_lagging_replica_and_counts_it() {
    let _fleet = serial().await;
    // 3309 receives 3307's writes but does not apply them.
    let mut replica_conn = operations(3309).await;
    replica_conn
        .query_drop("STOP SLAVE SQL_THREAD")
        .await
        .unwrap();
    let _restart = RunOn3309WhenDropped("START SLAVE SQL_THREAD");
    let mut master = direct(MASTER_A).await;
    master
        .exec_drop(
            "INSERT INTO db00013.pins (data) VALUES (?)",
            ("auto lag test",),
        )
        .await
        .unwrap();
    // The range's master is an address nothing answers on (dead at once);
    // the replica is 3309.
    let yaml = yaml_with_max_lag(100)
        .replace("auto_failover: false", "auto_failover: true")
        .replace(
            "master: 127.0.0.1:3307, replica: 127.0.0.1:3309",
            "master: 127.0.0.1:3399, replica: 127.0.0.1:3309",
        );
    assert!(yaml.contains("127.0.0.1:3399") && yaml.contains("auto_failover: true"));
    let proxy = start_server("auto-lag", &yaml);
    let refused = "shardgate_failovers_refused_lag_total{trigger=\"auto\"}";
    let deadline = common::Deadline::new(
        "the automatic promotion refused for lag",
        Duration::from_secs(20),
    );
    loop {
        let samples = scrape_metrics(&proxy).await;
        if metric_sample(&samples, refused) >= 1.0 {
            assert_eq!(
                metric_sample(&samples, "shardgate_failovers_total{trigger=\"auto\"}"),
                0.0
            );
            break;
        }
        deadline.retry(metric_sample(&samples, refused)).await;
    }
    let topology = proxy.engine.topology.load();
    assert!(topology.is_master("127.0.0.1:3399"), "nothing was promoted");
    let written = std::fs::read_to_string(&proxy.config_path).unwrap();
    assert!(
        written.contains("master: 127.0.0.1:3399, replica: 127.0.0.1:3309"),
        "{written}"
    );
    let lag = proxy
        .engine
        .backends
        .pool("127.0.0.1:3309")
        .health()
        .lag
        .expect("lag read");
    assert!(!lag.sql_running && lag.gtid_behind >= Some(1), "{lag:?}");

    replica_conn
        .query_drop("START SLAVE SQL_THREAD")
        .await
        .unwrap();
    delete_pins(MASTER_A, &[13], "auto lag test").await;
}
