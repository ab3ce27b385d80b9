//! The statistics in the Prometheus text exposition format, version 0.0.4.

use std::fmt::{Display, Write};

use super::digest::RouteKind;
use super::histogram::{Snapshot, EXPORT_BOUNDS_US};
use super::operator::{unix_seconds, PromotionTrigger, ProxyFigures};
use super::shards::ShardOrder;
use super::{CommandClass, HostFigures, Stats};

/// Every statement kind of `stats`, every host of `hosts` and the proxy's
/// state `proxy`, as Prometheus text.
pub fn prometheus(stats: &Stats, hosts: &[HostFigures], proxy: &ProxyFigures) -> String {
    let mut out = Text::default();
    proxy_families(&mut out, stats, proxy);
    let kinds: Vec<(String, Snapshot)> = CommandClass::ALL
        .into_iter()
        .map(|kind| {
            let label = format!("kind=\"{}\"", kind.name());
            (label, stats.statement(kind).snapshot())
        })
        .collect();
    out.histograms(
        "shardgate_statements",
        "shardgate_statement",
        "client commands answered, by kind",
        &kinds,
    );

    let routes: Vec<(String, Snapshot)> = RouteKind::ALL
        .into_iter()
        .map(|route| {
            let label = format!("route=\"{}\"", route.name());
            (label, stats.route(route).snapshot())
        })
        .collect();
    out.histograms(
        "shardgate_route_statements",
        "shardgate_route_statement",
        "statements the router saw, by how they were routed",
        &routes,
    );

    let histograms: Vec<(String, Snapshot)> = hosts
        .iter()
        .map(|host| (host_label(host), host.statements.clone()))
        .collect();
    out.histograms(
        "shardgate_host_statements",
        "shardgate_host_statement",
        "statements sent to a backend host",
        &histograms,
    );

    let labels: Vec<&str> = histograms.iter().map(|(label, _)| label.as_str()).collect();
    out.family(
        "shardgate_host_up",
        "gauge",
        "1 if the last health checks found the host up, 0 if down or not checked yet.",
        &labels,
        hosts.iter().map(|h| u8::from(h.up)),
    );
    out.family(
        "shardgate_host_check_latency_seconds",
        "gauge",
        "Duration of the last successful health check (connect if needed, then ping).",
        &labels,
        hosts.iter().map(|h| {
            h.check_latency
                .map_or_else(|| "NaN".to_owned(), |d| d.as_secs_f64().to_string())
        }),
    );
    out.family(
        "shardgate_host_checks_total",
        "counter",
        "Health checks run.",
        &labels,
        hosts.iter().map(|h| h.checks),
    );
    out.family(
        "shardgate_host_check_failures_total",
        "counter",
        "Health checks that failed.",
        &labels,
        hosts.iter().map(|h| h.check_failures),
    );
    out.family(
        "shardgate_host_pool_checkouts_total",
        "counter",
        "Connections checked out of the host's pool to run a statement.",
        &labels,
        hosts.iter().map(|h| h.checkouts),
    );
    out.family(
        "shardgate_host_pool_checkout_timeouts_total",
        "counter",
        "Checkouts that found no connection free within backend.checkout_timeout_ms (the pool or the session's share).",
        &labels,
        hosts.iter().map(|h| h.checkout_timeouts),
    );
    let waits: Vec<(String, Snapshot)> = hosts
        .iter()
        .map(|host| (host_label(host), host.pool_wait.clone()))
        .collect();
    out.histogram(
        "shardgate_host_pool_wait_seconds",
        "Time a checkout waited for a place in the host's pool (timed-out waits included).",
        &waits,
    );
    out.family(
        "shardgate_host_errors_total",
        "counter",
        "Failed connects and broken connections to the host.",
        &labels,
        hosts.iter().map(|h| h.errors),
    );
    out.family(
        "shardgate_host_pool_in_use",
        "gauge",
        "Connections to the host checked out now.",
        &labels,
        hosts.iter().map(|h| h.in_use),
    );
    out.family(
        "shardgate_host_pool_idle",
        "gauge",
        "Idle connections in the host's pool.",
        &labels,
        hosts.iter().map(|h| h.idle),
    );

    replica_families(&mut out, hosts);

    out.single(
        "shardgate_digests",
        "gauge",
        "Statement digests held (SHOW DIGESTS), at most stats.max_digests.",
        stats.digests.len(),
    );
    out.single(
        "shardgate_digest_evictions_total",
        "counter",
        "Statement digests evicted (least recently seen) to stay within stats.max_digests.",
        stats.digests.evictions(),
    );
    let hot = stats.shards.top(ShardOrder::Statements, HOT_SHARDS);
    let labels: Vec<String> = hot
        .iter()
        .enumerate()
        .map(|(rank, row)| {
            format!(
                "fleet=\"{}\",shard=\"{}\",rank=\"{}\"",
                escape_label(&row.fleet),
                row.shard,
                rank + 1
            )
        })
        .collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    out.family(
        "shardgate_hot_shard_statements",
        "gauge",
        "Statements run on each of the 10 virtual shards that ran the most (rank 1 the most).",
        &labels,
        hot.iter().map(|row| row.statements),
    );
    out.family(
        "shardgate_hot_shard_errors",
        "gauge",
        "Statements answered with an error on each of the 10 busiest virtual shards.",
        &labels,
        hot.iter().map(|row| row.errors),
    );
    out.family(
        "shardgate_hot_shard_seconds",
        "gauge",
        "Time of the statements run on each of the 10 busiest virtual shards.",
        &labels,
        hot.iter().map(|row| seconds(row.time_us)),
    );
    out.text
}

/// Client connections, config, fence, pauses, promotions, stops and the
/// build.
fn proxy_families(out: &mut Text, stats: &Stats, proxy: &ProxyFigures) {
    out.family(
        "shardgate_build_info",
        "gauge",
        "Always 1; the version of this shardgate build.",
        &[format!("version=\"{}\"", env!("CARGO_PKG_VERSION")).as_str()],
        [1],
    );
    out.single(
        "shardgate_client_connections",
        "gauge",
        "Client sessions logged in now.",
        proxy.clients,
    );
    let ops = &stats.operator;
    out.single(
        "shardgate_client_connections_refused_total",
        "counter",
        "Client connections answered 1040 Too many connections (limits.max_client_connections).",
        ops.refused_connections(),
    );
    out.single(
        "shardgate_client_logins_failed_total",
        "counter",
        "Client logins refused (wrong account or password, TLS required, malformed login).",
        ops.logins_failed(),
    );
    out.family(
        "shardgate_config_info",
        "gauge",
        "Always 1; the version (MD5) of the config in force.",
        &[format!("version=\"{}\"", escape_label(&proxy.config_version)).as_str()],
        [1],
    );
    out.single(
        "shardgate_config_loaded_timestamp_seconds",
        "gauge",
        "When the config in force was loaded (Unix time).",
        unix_seconds(proxy.config_loaded_at),
    );
    out.family(
        "shardgate_config_reloads_total",
        "counter",
        "Config reloads, by result: applied (a new config in force) or refused (the config in force stayed).",
        &["result=\"applied\"", "result=\"refused\""],
        [proxy.reloads_applied, proxy.reloads_refused],
    );
    out.single(
        "shardgate_fenced",
        "gauge",
        "1 while writes are refused because this proxy cannot prove its ZooKeeper session.",
        u8::from(proxy.fenced_since.is_some()),
    );
    out.single(
        "shardgate_fenced_since_timestamp_seconds",
        "gauge",
        "When the fence went up (Unix time), 0 while it is down.",
        unix_seconds(proxy.fenced_since),
    );
    out.single(
        "shardgate_paused_shards",
        "gauge",
        "Virtual shards paused now (PAUSE SHARDS, moves, promotions).",
        proxy.paused_shards,
    );
    out.single(
        "shardgate_oldest_pause_seconds",
        "gauge",
        "Age of the oldest pause in force, 0 when none.",
        proxy.oldest_pause.map_or(0.0, |d| d.as_secs_f64()),
    );
    let triggers = [PromotionTrigger::Auto, PromotionTrigger::Admin];
    let labels: Vec<String> = triggers
        .iter()
        .map(|t| format!("trigger=\"{}\"", t.name()))
        .collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    out.family(
        "shardgate_failovers_total",
        "counter",
        "Replicas promoted, by trigger (auto: health.auto_failover; admin: PROMOTE REPLICA).",
        &labels,
        triggers.iter().map(|&t| ops.promotions(t)),
    );
    out.family(
        "shardgate_failovers_refused_lag_total",
        "counter",
        "Promotions refused because the replica was behind by more than health.max_promote_lag_ms.",
        &labels,
        triggers.iter().map(|&t| ops.promotions_refused_for_lag(t)),
    );
    out.family(
        "shardgate_sessions_drained_total",
        "counter",
        "Client sessions closed by a graceful stop: idle at once, or after finishing their statement or transaction.",
        &["when=\"idle\"", "when=\"after_work\""],
        [proxy.drained.0, proxy.drained.1],
    );
    out.single(
        "shardgate_sessions_handed_off_total",
        "counter",
        "Client sessions handed off to a new process (serve --takeover).",
        ops.handed_off_sessions(),
    );
}

/// The lag of every host that is a replica.
fn replica_families(out: &mut Text, hosts: &[HostFigures]) {
    let replicas: Vec<(String, super::LagFigures)> = hosts
        .iter()
        .filter_map(|h| Some((host_label(h), h.lag?)))
        .collect();
    let labels: Vec<&str> = replicas.iter().map(|(label, _)| label.as_str()).collect();
    let or_nan = |value: Option<f64>| value.map_or_else(|| "NaN".to_owned(), |v| v.to_string());
    out.family(
        "shardgate_replica_lag_seconds",
        "gauge",
        "How long the replica has been missing a transaction its master had (at least Seconds_Behind_Master); NaN when not read.",
        &labels,
        replicas
            .iter()
            .map(|(_, lag)| or_nan(lag.lag.map(|d| d.as_secs_f64()))),
    );
    out.family(
        "shardgate_replica_seconds_behind_master",
        "gauge",
        "Seconds_Behind_Master of SHOW SLAVE STATUS; NaN when NULL (a replication thread stopped).",
        &labels,
        replicas
            .iter()
            .map(|(_, lag)| or_nan(lag.seconds_behind_master.map(|s| s as f64))),
    );
    out.family(
        "shardgate_replica_gtid_behind_transactions",
        "gauge",
        "Transactions of the master's @@gtid_binlog_pos not in the replica's @@gtid_slave_pos; NaN when unknown.",
        &labels,
        replicas
            .iter()
            .map(|(_, lag)| or_nan(lag.gtid_behind.map(|b| b as f64))),
    );
    out.family(
        "shardgate_replica_sql_running",
        "gauge",
        "1 if the replica's SQL thread runs.",
        &labels,
        replicas.iter().map(|(_, lag)| u8::from(lag.sql_running)),
    );
}

/// Shards of the `shardgate_hot_shard_*` gauges.
pub const HOT_SHARDS: usize = 10;

/// `host="...",fleet="...",role="..."`, escaped.
fn host_label(host: &HostFigures) -> String {
    format!(
        "host=\"{}\",fleet=\"{}\",role=\"{}\"",
        escape_label(&host.addr),
        escape_label(&host.fleet),
        host.role
    )
}

/// A label value escaped as the text format requires (`\`, `"`, newline).
pub fn escape_label(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// Prometheus text being written.
#[derive(Default)]
struct Text {
    text: String,
}

impl Text {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// A metric family of one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Display) {
        self.header(name, kind, help);
        let _ = writeln!(self.text, "{name} {value}");
    }

    /// One metric family: a sample per label set, with the value at the
    /// same position.
    fn family<V: Display>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        labels: &[&str],
        values: impl IntoIterator<Item = V>,
    ) {
        self.header(name, kind, help);
        for (labels, value) in labels.iter().zip(values) {
            let _ = writeln!(self.text, "{name}{{{labels}}} {value}");
        }
    }

    /// For histograms labelled by `rows`' label sets: `<counter>_total`,
    /// `<prefix>_errors_total` and the histogram `<prefix>_duration_seconds`
    /// (`_bucket` cumulative at [`EXPORT_BOUNDS_US`] and `+Inf`, `_sum`,
    /// `_count`).
    fn histograms(&mut self, counter: &str, prefix: &str, what: &str, rows: &[(String, Snapshot)]) {
        let labels: Vec<&str> = rows.iter().map(|(label, _)| label.as_str()).collect();
        self.family(
            &format!("{counter}_total"),
            "counter",
            &format!("Count of {what}."),
            &labels,
            rows.iter().map(|(_, s)| s.count()),
        );
        self.family(
            &format!("{prefix}_errors_total"),
            "counter",
            &format!("Count of {what} answered with an error."),
            &labels,
            rows.iter().map(|(_, s)| s.errors()),
        );
        self.histogram(
            &format!("{prefix}_duration_seconds"),
            &format!("Latency of {what}."),
            rows,
        );
    }

    /// The histogram `name` (`_bucket` cumulative at [`EXPORT_BOUNDS_US`]
    /// and `+Inf`, `_sum`, `_count`) labelled by `rows`' label sets.
    fn histogram(&mut self, name: &str, help: &str, rows: &[(String, Snapshot)]) {
        self.header(name, "histogram", help);
        for (labels, s) in rows {
            let count = s.count();
            let bounds = EXPORT_BOUNDS_US.iter().map(|&us| seconds(us).to_string());
            let below = bounds
                .zip(s.cumulative())
                .chain([("+Inf".to_owned(), count)]);
            for (le, values) in below {
                let _ = writeln!(self.text, "{name}_bucket{{{labels},le=\"{le}\"}} {values}");
            }
            let _ = writeln!(self.text, "{name}_sum{{{labels}}} {}", seconds(s.sum_us()));
            let _ = writeln!(self.text, "{name}_count{{{labels}}} {count}");
        }
    }
}

fn seconds(micros: u64) -> f64 {
    micros as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Histogram;
    use std::time::Duration;

    /// A host of the config as the pools show it before any check:
    /// no statement, not checked, no connection.
    fn host(addr: &str, statements: &Histogram) -> HostFigures {
        HostFigures {
            statements: statements.snapshot(),
            fleet: "main".to_owned(),
            role: "master",
            ..HostFigures::unchecked(addr)
        }
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
        assert_eq!(
            host_label(&HostFigures::unchecked("10.0.0.1:3306")),
            "host=\"10.0.0.1:3306\",fleet=\"\",role=\"retired\""
        );
    }

    #[test]
    fn text_format_has_every_family_with_help_and_type() {
        let stats = Stats::new();
        stats.record(CommandClass::Insert, Duration::from_micros(1500), false);
        stats.record(CommandClass::Insert, Duration::from_micros(1500), true);
        let statements = Histogram::new();
        statements.record(Duration::from_millis(2), false);
        let text = prometheus(
            &stats,
            &[host("127.0.0.1:3307", &statements)],
            &ProxyFigures::default(),
        );

        assert!(
            text.contains("shardgate_statements_total{kind=\"insert\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("shardgate_statements_total{kind=\"select\"} 0\n"));
        assert!(text.contains("shardgate_statement_errors_total{kind=\"insert\"} 1\n"));
        assert!(text.contains("shardgate_statement_duration_seconds_count{kind=\"insert\"} 2\n"));
        assert!(text.contains("shardgate_statement_duration_seconds_sum{kind=\"insert\"} 0.003\n"));
        let buckets: Vec<(f64, u64)> = text
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(
                    "shardgate_statement_duration_seconds_bucket{kind=\"insert\",le=\"",
                )?;
                let (le, value) = rest.split_once("\"} ")?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                Some((le, value.parse().unwrap()))
            })
            .collect();
        assert_eq!(buckets.len(), EXPORT_BOUNDS_US.len() + 1, "{text}");
        assert!(buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(buckets[0], (0.000064, 0));
        // 1500 µs: counted from the 2048 µs bound up.
        let at = |le: f64| buckets.iter().find(|b| b.0 == le).map(|b| b.1);
        assert_eq!(at(0.001024), Some(0));
        assert_eq!(at(0.002048), Some(2));
        assert_eq!(at(f64::INFINITY), Some(2));
        assert!(buckets.last().is_some_and(|b| b.0.is_infinite()));
        assert!(text.contains(
            "shardgate_statement_duration_seconds_bucket{kind=\"select\",le=\"+Inf\"} 0\n"
        ));
        assert!(text.contains("shardgate_statement_duration_seconds_count{kind=\"select\"} 0\n"));
        assert!(text.contains(
            "shardgate_host_statement_duration_seconds_bucket{host=\"127.0.0.1:3307\",fleet=\"main\",role=\"master\",le=\"0.004096\"} 1\n"
        ));

        let host = "{host=\"127.0.0.1:3307\",fleet=\"main\",role=\"master\"}";
        for line in [
            format!("shardgate_host_statements_total{host} 1"),
            format!("shardgate_host_statement_errors_total{host} 0"),
            format!("shardgate_host_up{host} 0"),
            format!("shardgate_host_check_latency_seconds{host} NaN"),
            format!("shardgate_host_checks_total{host} 0"),
            format!("shardgate_host_pool_checkouts_total{host} 0"),
            format!("shardgate_host_pool_checkout_timeouts_total{host} 0"),
            format!("shardgate_host_pool_wait_seconds_count{host} 0"),
            format!("shardgate_host_errors_total{host} 0"),
            format!("shardgate_host_pool_in_use{host} 0"),
            format!("shardgate_host_pool_idle{host} 0"),
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }

        // Every sample belongs to a family announced just before it, once.
        let mut announced: Vec<String> = Vec::new();
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap().to_owned();
                assert!(!announced.contains(&name), "{name} announced twice");
                announced.push(name);
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split(' ');
                let name = parts.next().unwrap();
                assert_eq!(Some(name), announced.last().map(String::as_str));
                assert!(matches!(
                    parts.next(),
                    Some("counter" | "gauge" | "histogram")
                ));
                typed.insert(name.to_owned());
            } else {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = announced.last().expect("a sample before any HELP");
                assert!(
                    name == family
                        || name == format!("{family}_bucket")
                        || name == format!("{family}_sum")
                        || name == format!("{family}_count"),
                    "{line} after {family}"
                );
                let value = line.rsplit(' ').next().unwrap();
                assert!(value == "NaN" || value.parse::<f64>().is_ok(), "{line}");
            }
        }
        assert_eq!(typed.len(), announced.len());
    }
}
