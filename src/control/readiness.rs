//! Liveness and readiness of a running proxy (`GET /healthz`, `GET /ready`
//! on the metrics listener) and `shardgate health`, which asks `/ready`.
//!
//! - Alive: a heartbeat task on the runtime moves a timestamp every
//!   [`HEARTBEAT_EVERY`]; older than [`HEARTBEAT_STALE`] means the runtime
//!   no longer turns its loops (503).
//! - Ready: the client listener runs, the process is not draining (a
//!   SIGTERM came), the fence is down (a ZooKeeper-sourced proxy proves its
//!   session), and every fleet has a master the health checker has not
//!   marked down (nor a connection attempt failed on). The JSON body lists
//!   every reason it is not.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::Control;
use crate::stats::http::Probe;
use crate::stats::operator::ProxyFigures;
use crate::topology::Topology;

/// The proxy's state as `/metrics` shows it: sessions, config, fence,
/// pauses, graceful stop.
pub fn figures(control: &Control) -> ProxyFigures {
    let engine = &control.engine;
    let config = control.config_status.snapshot();
    let (reloads_applied, reloads_refused) = control.config_status.reload_counts();
    let paused = engine.pauses.paused();
    ProxyFigures {
        clients: engine.sessions.count(),
        reloads_applied,
        reloads_refused,
        config_version: config.version,
        config_loaded_at: Some(config.loaded_at),
        fenced_since: engine.fence.raised_times().map(|(_, raised)| raised),
        paused_shards: paused
            .iter()
            .map(|p| u64::from(p.last.saturating_sub(p.first)) + 1)
            .sum(),
        oldest_pause: paused.iter().filter_map(|p| p.since.elapsed().ok()).max(),
        drained: engine.sessions.shutdown_closed(),
    }
}

/// How often the heartbeat task beats.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(500);
/// A heartbeat older than this makes `/healthz` answer 503.
pub const HEARTBEAT_STALE: Duration = Duration::from_secs(5);

/// The runtime's heartbeat: milliseconds since `started` at the last beat.
#[derive(Debug)]
pub struct Heartbeat {
    started: Instant,
    last_ms: AtomicU64,
}

impl Heartbeat {
    /// A heartbeat moved by a task spawned on the current runtime; the task
    /// ends when the last other holder drops it.
    pub fn spawn() -> Arc<Heartbeat> {
        let heartbeat = Arc::new(Heartbeat {
            started: Instant::now(),
            last_ms: AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&heartbeat);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(HEARTBEAT_EVERY);
            loop {
                ticks.tick().await;
                let Some(heartbeat) = weak.upgrade() else {
                    return;
                };
                heartbeat.beat();
            }
        });
        heartbeat
    }

    fn beat(&self) {
        let now = self.started.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Release);
    }

    /// Time since the last beat.
    pub fn age(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        self.started.elapsed().saturating_sub(last)
    }

    /// `GET /healthz`.
    pub fn liveness(&self) -> Probe {
        let age = self.age();
        let alive = age < HEARTBEAT_STALE;
        let mut body = json!({
            "alive": alive,
            "heartbeat_age_ms": age.as_millis() as u64,
        });
        if !alive {
            body["reason"] = json!(format!(
                "the runtime's heartbeat is {} ms old (stale after {} ms): its loops are not turning",
                age.as_millis(),
                HEARTBEAT_STALE.as_millis()
            ));
        }
        Probe {
            ok: alive,
            body: body.to_string(),
        }
    }
}

/// `GET /ready`: `listening` says whether the client listener still runs.
pub fn readiness(control: &Control, listening: bool) -> Probe {
    let engine = &control.engine;
    let topology = engine.topology.load();
    let mut reasons = Vec::new();
    if !listening {
        reasons.push("not listening: the client listener stopped".to_owned());
    }
    if control.process.is_draining() {
        reasons.push("draining: the proxy is stopping (SIGTERM)".to_owned());
    }
    if engine.fence.is_raised() || engine.fence.deadline().passed() {
        reasons.push(
            "fenced: the proxy cannot prove its ZooKeeper session; writes are refused".to_owned(),
        );
    }
    let fleets = fleets_without_master(&topology, |addr| {
        let pool = engine.backends.pool(addr);
        pool.is_down().then(|| {
            pool.unavailable()
                .unwrap_or_else(|| "its last connection attempt failed".to_owned())
        })
    });
    for (fleet, down) in &fleets {
        reasons.push(format!(
            "fleet {fleet}: no master reachable ({})",
            down.join("; ")
        ));
    }
    let ready = reasons.is_empty();
    let body = json!({
        "ready": ready,
        "reasons": reasons,
        "config_version": control.config_status.snapshot().version,
        "fleets_unreachable": fleets.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(),
    });
    Probe {
        ok: ready,
        body: body.to_string(),
    }
}

/// Fleets none of whose masters is reachable (`down` gives why a master's
/// address is not, `None` when it is), each with its masters' reasons.
fn fleets_without_master(
    topology: &Topology,
    down: impl Fn(&str) -> Option<String>,
) -> Vec<(String, Vec<String>)> {
    let mut unreachable = Vec::new();
    for fleet in &topology.fleets {
        let mut masters: Vec<&str> = Vec::new();
        for range in &fleet.ranges {
            if let Some(host) = topology.hosts.get(range.master) {
                if !masters.contains(&host.addr.as_str()) {
                    masters.push(&host.addr);
                }
            }
        }
        let mut reasons = Vec::new();
        for addr in &masters {
            match down(addr) {
                Some(reason) => reasons.push(format!("{addr}: {reason}")),
                None => break,
            }
        }
        if !masters.is_empty() && reasons.len() == masters.len() {
            unreachable.push((fleet.name.clone(), reasons));
        }
    }
    unreachable
}

/// How long `shardgate health` waits for the answer.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// `shardgate health`: asks `GET /ready` of the proxy whose metrics
/// listener is `metrics_listen`, or the one the config file at `config`
/// names (`metrics.listen`). `Ok` with the body when it answers 200;
/// `Err` saying why not (the body of a 503, or why it could not ask).
pub fn check_ready(config: Option<&Path>, metrics_listen: Option<&str>) -> Result<String, String> {
    let listen = match (metrics_listen, config) {
        (Some(listen), _) => listen.to_owned(),
        (None, Some(path)) => {
            let topology = Topology::load(path).map_err(|errors| format!("{errors}"))?;
            topology.config.metrics.map(|m| m.listen).ok_or_else(|| {
                format!(
                    "{} has no `metrics` section: /ready is served on the metrics listener \
                     (add `metrics: {{ listen: ... }}` or give --metrics-listen)",
                    path.display()
                )
            })?
        }
        (None, None) => return Err("give --config FILE or --metrics-listen ADDR".to_owned()),
    };
    let addr = dial_addr(&listen)?;
    let (status, body) =
        get(addr, "/ready").map_err(|e| format!("GET http://{addr}/ready: {e}"))?;
    match status {
        200 => Ok(body),
        _ => Err(format!("not ready (HTTP {status}): {}", body.trim_end())),
    }
}

/// The address to connect to for a listen address: a wildcard listen
/// address (`0.0.0.0`, `[::]`) is reached on loopback.
fn dial_addr(listen: &str) -> Result<SocketAddr, String> {
    let mut addr = listen
        .to_socket_addrs()
        .map_err(|e| format!("metrics listen address {listen}: {e}"))?
        .next()
        .ok_or_else(|| format!("metrics listen address {listen} resolves to nothing"))?;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    Ok(addr)
}

/// A plain HTTP/1.1 GET: the status code and the body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, CHECK_TIMEOUT)?;
    stream.set_read_timeout(Some(CHECK_TIMEOUT))?;
    stream.set_write_timeout(Some(CHECK_TIMEOUT))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.take(1 << 20).read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP answer"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or_else(String::new, |(_, body)| body.to_owned());
    Ok((status, body))
}

/// Whether the client listener task still runs; cleared when it ends.
#[derive(Debug, Default)]
pub struct ListenerUp(AtomicBool);

impl ListenerUp {
    /// Marks it running (`true`) or ended.
    pub fn set(&self, running: bool) {
        self.0.store(running, Ordering::Release);
    }

    /// Whether it runs.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{load, SPEC_YAML};

    #[test]
    fn a_fleet_is_unready_only_when_every_master_is_down() {
        let topology = load(SPEC_YAML);
        assert!(fleets_without_master(&topology, |_| None).is_empty());
        let all = fleets_without_master(&topology, |addr| Some(format!("{addr} refused")));
        let names: Vec<&str> = all.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names.len(), topology.fleets.len(), "{all:?}");
        // One master of a fleet down, another up: the fleet still serves.
        let first = &topology.fleets[0];
        let first_master = &topology.hosts[first.ranges[0].master].addr;
        let masters: std::collections::BTreeSet<usize> =
            first.ranges.iter().map(|r| r.master).collect();
        let one_down = fleets_without_master(&topology, |addr| {
            (addr == first_master).then(|| "refused".to_owned())
        });
        let first_unready = one_down.iter().any(|(name, _)| name == &first.name);
        assert_eq!(first_unready, masters.len() == 1, "{one_down:?}");
        if first_unready {
            assert!(one_down[0].1[0].starts_with(first_master.as_str()));
        }
    }

    #[test]
    fn a_wildcard_listen_address_is_reached_on_loopback() {
        assert_eq!(
            dial_addr("0.0.0.0:9104").unwrap(),
            "127.0.0.1:9104".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            dial_addr("[::]:9104").unwrap(),
            "[::1]:9104".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            dial_addr("10.1.2.3:9104").unwrap(),
            "10.1.2.3:9104".parse::<SocketAddr>().unwrap()
        );
        assert!(dial_addr("no port").is_err());
    }

    #[tokio::test]
    async fn the_heartbeat_goes_stale_when_its_task_stops_beating() {
        let heartbeat = Heartbeat::spawn();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(heartbeat.liveness().ok, "{}", heartbeat.liveness().body);
        let stale = Heartbeat {
            started: Instant::now() - HEARTBEAT_STALE * 2,
            last_ms: AtomicU64::new(0),
        };
        let probe = stale.liveness();
        assert!(!probe.ok);
        assert!(probe.body.contains("not turning"), "{}", probe.body);
    }
}
