//! The multi-get benchmark client: seeds pins, then times gets by ID through
//! the proxy against the same lookups sent straight to the masters.

use std::collections::BTreeMap;
use std::sync::Arc;

use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;

use super::*;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not valid")),
        _ => default,
    }
}

struct Config {
    proxy_port: u16,
    proxy_pid: Option<u32>,
    seconds: f64,
    warmup: f64,
    rounds: usize,
    concurrency: Vec<usize>,
    per_get: usize,
    shards: u32,
    rows_per_shard: usize,
    pool_max: usize,
    quiet_busy: u64,
    quiet_wait: u64,
    seed: u64,
    /// Only the direct half (tests the harness without a proxy).
    direct_only: bool,
}

fn config() -> Config {
    Config {
        proxy_port: env("MULTI_GET_PROXY_PORT", 6033),
        proxy_pid: std::env::var("MULTI_GET_PROXY_PID")
            .ok()
            .and_then(|p| p.parse().ok()),
        seconds: env("MULTI_GET_SECONDS", 10.0),
        warmup: env("MULTI_GET_WARMUP", 3.0),
        rounds: env("MULTI_GET_ROUNDS", 3),
        concurrency: env("MULTI_GET_CONCURRENCY", "1 8".to_owned())
            .split_whitespace()
            .map(|c| c.parse().expect("concurrency"))
            .collect(),
        per_get: env("MULTI_GET_IDS", 50),
        shards: env("MULTI_GET_SHARDS", 4096),
        rows_per_shard: env("MULTI_GET_ROWS", 4),
        pool_max: env("MULTI_GET_POOL_MAX", 64),
        quiet_busy: env("MULTI_GET_QUIET_BUSY", 25),
        quiet_wait: env("MULTI_GET_QUIET_WAIT", 120),
        seed: env("MULTI_GET_SEED", 20240601),
        direct_only: env("MULTI_GET_DIRECT_ONLY", 0u8) == 1,
    }
}

fn pool(port: u16, user: &str, password: &str, max: usize) -> Pool {
    let opts: Opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false)
        // As an application's pool: connections are kept between gets
        // and handed out again without a COM_RESET_CONNECTION round trip.
        .pool_opts(
            PoolOpts::default()
                .with_constraints(PoolConstraints::new(0, max).expect("constraints"))
                .with_reset_connection(false)
                .with_inactive_connection_ttl(Duration::from_secs(3600)),
        )
        .into();
    Pool::new(opts)
}

/// One seeded pin: global ID, shard, local id.
#[derive(Clone, Copy)]
struct Pin {
    id: u64,
    shard: u32,
    local: u64,
}

/// Seeds `rows_per_shard` pins (data 'mget:...', 100 bytes) on each of
/// `shards` shards spread evenly over 0..4096, straight on the masters;
/// rows of an earlier run are reused. Returns the pins.
async fn seed(cfg: &Config, masters: &BTreeMap<u16, Pool>) -> Vec<Pin> {
    let step = 4096 / cfg.shards;
    let wanted: Vec<u32> = (0..cfg.shards).map(|i| i * step).collect();
    let mut set = JoinSet::new();
    let chunks: Vec<Vec<u32>> = wanted
        .chunks(wanted.len().div_ceil(8))
        .map(<[u32]>::to_vec)
        .collect();
    for chunk in chunks {
        let masters = masters.clone();
        let rows = cfg.rows_per_shard;
        set.spawn(async move {
            let mut pins = Vec::new();
            for shard in chunk {
                let mut conn = masters[&main_master_port(shard)].get_conn().await.expect("master");
                let read = format!(
                    "SELECT local_id FROM db{shard:05}.pins WHERE data LIKE 'mget:%' ORDER BY local_id LIMIT {rows}"
                );
                let mut locals: Vec<u64> = conn.query(&read).await.expect("read seeded rows");
                if locals.len() < rows {
                    let values = (locals.len()..rows)
                        .map(|r| {
                            let data = format!("mget:{shard}:{r}:{}", "x".repeat(100));
                            format!("('{}')", &data[..100])
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    conn.query_drop(format!("INSERT INTO db{shard:05}.pins (data) VALUES {values}"))
                        .await
                        .expect("seed rows");
                    locals = conn.query(&read).await.expect("read seeded rows");
                }
                for local in locals {
                    let id = ObjectId { shard, type_id: PIN_TYPE, local_id: local }
                        .encode()
                        .unwrap();
                    pins.push(Pin { id, shard, local });
                }
            }
            pins
        });
    }
    let mut pins = Vec::new();
    while let Some(part) = set.join_next().await {
        pins.extend(part.expect("seed task"));
    }
    pins.sort_by_key(|p| p.id);
    assert_eq!(pins.len(), wanted.len() * cfg.rows_per_shard, "seeded rows");
    pins
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Direct,
    Proxy,
}

/// One 50-get through the proxy: one statement; returns the rows.
async fn get_via_proxy(proxy: &Pool, pins: &[Pin]) -> Vec<(u64, String)> {
    let ids: Vec<u64> = pins.iter().map(|p| p.id).collect();
    let mut conn = proxy.get_conn().await.expect("proxy connection");
    conn.query(format!(
        "SELECT id, data FROM pins WHERE id IN ({})",
        id_list(&ids)
    ))
    .await
    .expect("proxy multi-get")
}

/// The same get as an application does it without the proxy: group by
/// shard, one query per shard on its master, all in parallel.
async fn get_direct(masters: &Arc<BTreeMap<u16, Pool>>, pins: &[Pin]) -> Vec<(u64, String)> {
    let mut by_shard: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for pin in pins {
        by_shard.entry(pin.shard).or_default().push(pin.local);
    }
    let mut set = JoinSet::new();
    for (shard, locals) in by_shard {
        let pool = masters[&main_master_port(shard)].clone();
        set.spawn(async move {
            let mut conn = pool.get_conn().await.expect("master connection");
            let rows: Vec<(u64, String)> = conn
                .query(format!(
                    "SELECT local_id, data FROM db{shard:05}.pins WHERE local_id IN ({})",
                    id_list(&locals)
                ))
                .await
                .expect("direct per-shard get");
            rows.into_iter()
                .map(|(local, data)| {
                    let id = ObjectId {
                        shard,
                        type_id: PIN_TYPE,
                        local_id: local,
                    }
                    .encode()
                    .unwrap();
                    (id, data)
                })
                .collect::<Vec<_>>()
        });
    }
    let mut rows = Vec::with_capacity(pins.len());
    while let Some(part) = set.join_next().await {
        rows.extend(part.expect("per-shard task"));
    }
    rows
}

/// Picks `n` distinct pins at random.
fn pick(rng: &mut StdRng, all: &[Pin], n: usize) -> Vec<Pin> {
    let mut chosen: Vec<Pin> = Vec::with_capacity(n);
    while chosen.len() < n {
        let pin = all[rng.random_range(0..all.len())];
        if !chosen.iter().any(|c| c.id == pin.id) {
            chosen.push(pin);
        }
    }
    chosen
}

struct RunResult {
    gets: usize,
    secs: f64,
    p50_us: f64,
    p95_us: f64,
    p99_us: f64,
    shards_per_get: f64,
    cpu: Cpu,
    busy_before: u64,
}

/// CPU time in clock ticks of the processes involved, and of the machine.
#[derive(Default, Clone, Copy)]
struct Cpu {
    proxy: u64,
    mariadbd: u64,
    client: u64,
    machine_process: u64,
    machine_softirq: u64,
    machine_total: u64,
}

fn proc_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            // Fields 14 and 15 (utime, stime) are 12 and 13 after ")".
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

/// (busy, total, process, irq+softirq) ticks of the whole machine.
fn machine_ticks() -> (u64, u64, u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or("");
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let g = |i: usize| v.get(i).copied().unwrap_or(0);
    let busy = g(0) + g(1) + g(2) + g(5) + g(6) + g(7);
    (busy, busy + g(3) + g(4), g(0) + g(1) + g(2), g(5) + g(6))
}

fn mariadbd_pids() -> Vec<u32> {
    let fleet = repo_root().join("integration/.fleet");
    let fleet = std::env::var("SHARDGATE_FLEET_DIR")
        .map(Into::into)
        .unwrap_or(fleet);
    [MASTER_A, MASTER_B]
        .iter()
        .filter_map(|port| {
            std::fs::read_to_string(fleet.join(port.to_string()).join("mariadbd.pid"))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
        .collect()
}

fn snapshot(proxy_pid: Option<u32>) -> Cpu {
    let (_, total, process, softirq) = machine_ticks();
    Cpu {
        proxy: proxy_pid.map(proc_ticks).unwrap_or(0),
        mariadbd: mariadbd_pids().into_iter().map(proc_ticks).sum(),
        client: proc_ticks(std::process::id()),
        machine_process: process,
        machine_softirq: softirq,
        machine_total: total,
    }
}

fn diff(a: Cpu, b: Cpu) -> Cpu {
    Cpu {
        proxy: b.proxy.saturating_sub(a.proxy),
        mariadbd: b.mariadbd.saturating_sub(a.mariadbd),
        client: b.client.saturating_sub(a.client),
        machine_process: b.machine_process.saturating_sub(a.machine_process),
        machine_softirq: b.machine_softirq.saturating_sub(a.machine_softirq),
        machine_total: b.machine_total.saturating_sub(a.machine_total),
    }
}

/// Waits (up to `wait` s) for the machine to be under `busy` % busy over
/// a second; returns the last measured %.
async fn wait_quiet(busy_limit: u64, wait: u64) -> u64 {
    let mut waited = 0;
    loop {
        let (b0, t0, _, _) = machine_ticks();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (b1, t1, _, _) = machine_ticks();
        let busy = (b1 - b0) * 100 / (t1 - t0).max(1);
        if busy < busy_limit || waited >= wait {
            return busy;
        }
        if waited % 30 == 0 {
            eprintln!("[multi_get] machine {busy}% busy; waiting for a quieter moment");
        }
        waited += 1;
    }
}

/// What the clients read and where from.
struct Clients {
    pins: Arc<Vec<Pin>>,
    masters: Arc<BTreeMap<u16, Pool>>,
    proxy: Pool,
}

/// One timed run of `workers` clients in `mode`, each looping over gets
/// of random ID sets (seeded by `seed`, so both modes get the same sets).
async fn run_mode(
    cfg: &Config,
    clients: &Clients,
    mode: Mode,
    workers: usize,
    secs: f64,
    seed: u64,
) -> RunResult {
    let busy_before = if secs >= 1.0 {
        wait_quiet(cfg.quiet_busy, cfg.quiet_wait).await
    } else {
        0
    };
    let before = snapshot(cfg.proxy_pid);
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    let mut set = JoinSet::new();
    for w in 0..workers {
        let pins = clients.pins.clone();
        let masters = clients.masters.clone();
        let proxy = clients.proxy.clone();
        let per_get = cfg.per_get;
        set.spawn(async move {
            // The same seed in both modes: both fetch the same ID sets.
            let mut rng = StdRng::seed_from_u64(seed ^ (w as u64 * 0x9e37_79b9));
            let mut latencies = Vec::new();
            let mut shards = 0usize;
            while Instant::now() < deadline {
                let chosen = pick(&mut rng, &pins, per_get);
                let t = Instant::now();
                let rows = match mode {
                    Mode::Proxy => get_via_proxy(&proxy, &chosen).await,
                    Mode::Direct => get_direct(&masters, &chosen).await,
                };
                latencies.push(t.elapsed());
                assert_eq!(rows.len(), per_get, "{mode:?}: every ID is found once");
                let mut wanted: Vec<u64> = chosen.iter().map(|p| p.id).collect();
                let mut got: Vec<u64> = rows.iter().map(|r| r.0).collect();
                wanted.sort_unstable();
                got.sort_unstable();
                assert_eq!(got, wanted, "{mode:?}: the rows of the asked IDs");
                let distinct: BTreeSet<u32> = chosen.iter().map(|p| p.shard).collect();
                shards += distinct.len();
            }
            (latencies, shards)
        });
    }
    let mut latencies = Vec::new();
    let mut shards = 0;
    while let Some(r) = set.join_next().await {
        let (l, s) = r.expect("worker");
        latencies.extend(l);
        shards += s;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = diff(before, snapshot(cfg.proxy_pid));
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies[((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1]
            .as_secs_f64()
            * 1e6
    };
    RunResult {
        gets: latencies.len(),
        secs: elapsed,
        p50_us: pct(0.50),
        p95_us: pct(0.95),
        p99_us: pct(0.99),
        shards_per_get: shards as f64 / latencies.len() as f64,
        cpu,
        busy_before,
    }
}

/// The modes of a round, in the order they run: alternating per round
/// so drift favours neither.
fn modes(cfg: &Config, round: usize) -> Vec<Mode> {
    if cfg.direct_only {
        vec![Mode::Direct]
    } else if round.is_multiple_of(2) {
        vec![Mode::Direct, Mode::Proxy]
    } else {
        vec![Mode::Proxy, Mode::Direct]
    }
}

pub(super) async fn run() {
    let cfg = config();
    let hz: f64 = env("MULTI_GET_CLK_TCK", 100.0);
    let masters: Arc<BTreeMap<u16, Pool>> = Arc::new(
        [MASTER_A, MASTER_B]
            .into_iter()
            .map(|port| (port, pool(port, "shard", "shardpw", cfg.pool_max)))
            .collect(),
    );
    let proxy = pool(cfg.proxy_port, APP_USER, APP_PASSWORD, cfg.pool_max);
    eprintln!(
        "[multi_get] seeding / reading {} shards x {} rows",
        cfg.shards, cfg.rows_per_shard
    );
    let pins = Arc::new(seed(&cfg, &masters).await);
    eprintln!("[multi_get] {} pins", pins.len());

    // Correctness first: a few gets, both ways, give the same rows.
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    for _ in 0..if cfg.direct_only { 0 } else { 5 } {
        let chosen = pick(&mut rng, &pins, cfg.per_get);
        let mut a = get_via_proxy(&proxy, &chosen).await;
        let mut b = get_direct(&masters, &chosen).await;
        a.sort();
        b.sort();
        assert_eq!(a.len(), cfg.per_get);
        assert_eq!(a, b, "the proxy and the masters return the same rows");
    }
    let clients = Clients {
        pins,
        masters,
        proxy,
    };

    let mut out = String::new();
    let mut shards_per_get = Vec::new();
    for &workers in &cfg.concurrency {
        if cfg.warmup > 0.0 {
            for mode in modes(&cfg, 0) {
                run_mode(&cfg, &clients, mode, workers, cfg.warmup, cfg.seed).await;
            }
        }
        out.push_str(&format!("\n### {workers} concurrent client(s)\n\n"));
        out.push_str("| round | direct gets/s | proxy gets/s | ratio | direct p50 / p95 / p99 (µs) | proxy p50 / p95 / p99 (µs) | CPU µs / get, direct: mariadbd + client + softirq | CPU µs / get, proxy: proxy + mariadbd + client + softirq | others' CPU during, direct / proxy |\n");
        out.push_str("|---|---|---|---|---|---|---|---|---|\n");
        let mut ratios = Vec::new();
        for round in 0..cfg.rounds {
            let order = modes(&cfg, round);
            let seed = cfg.seed + round as u64 * 7919;
            let mut results = BTreeMap::new();
            for mode in order {
                let r = run_mode(&cfg, &clients, mode, workers, cfg.seconds, seed).await;
                eprintln!(
                    "[multi_get] {workers} clients round {} {mode:?}: {:.0} gets/s p50 {:.0} µs p95 {:.0} µs ({:.1} shards/get; busy before {}%)",
                    round + 1,
                    r.gets as f64 / r.secs,
                    r.p50_us,
                    r.p95_us,
                    r.shards_per_get,
                    r.busy_before
                );
                shards_per_get.push(r.shards_per_get);
                results.insert(mode == Mode::Proxy, r);
            }
            let d = &results[&false];
            let Some(p) = results.get(&true) else {
                out.push_str(&format!(
                    "| {} | {:.0} | - | - | {:.0} / {:.0} / {:.0} | - | - | - | - |\n",
                    round + 1,
                    d.gets as f64 / d.secs,
                    d.p50_us,
                    d.p95_us,
                    d.p99_us
                ));
                continue;
            };
            let (dr, pr) = (d.gets as f64 / d.secs, p.gets as f64 / p.secs);
            let per_get = |ticks: u64, gets: usize| ticks as f64 * 1e6 / hz / gets as f64;
            let others = |r: &RunResult, own: u64| {
                let o = r.cpu.machine_process.saturating_sub(own) as f64 * 100.0
                    / r.cpu.machine_total.max(1) as f64;
                o.max(0.0)
            };
            let dc = (
                per_get(d.cpu.mariadbd, d.gets),
                per_get(d.cpu.client, d.gets),
                per_get(d.cpu.machine_softirq, d.gets),
            );
            let pc = (
                per_get(p.cpu.proxy, p.gets),
                per_get(p.cpu.mariadbd, p.gets),
                per_get(p.cpu.client, p.gets),
                per_get(p.cpu.machine_softirq, p.gets),
            );
            out.push_str(&format!(
                "| {} | {:.0} | {:.0} | {:.3} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} / {:.0} | {:.0} + {:.0} + {:.0} = {:.0} | {:.0} + {:.0} + {:.0} + {:.0} = {:.0} | {:.0}% / {:.0}% |\n",
                round + 1, dr, pr, pr / dr,
                d.p50_us, d.p95_us, d.p99_us, p.p50_us, p.p95_us, p.p99_us,
                dc.0, dc.1, dc.2, dc.0 + dc.1 + dc.2,
                pc.0, pc.1, pc.2, pc.3, pc.0 + pc.1 + pc.2 + pc.3,
                others(d, d.cpu.mariadbd + d.cpu.client),
                others(p, p.cpu.proxy + p.cpu.mariadbd + p.cpu.client),
            ));
            ratios.push(pr / dr);
        }
        if ratios.is_empty() {
            continue;
        }
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        out.push_str(&format!(
            "\nMedian proxy/direct gets/s ratio with {workers} concurrent client(s): **{median:.3}** (range {:.3} - {:.3}).\n",
            ratios[0],
            ratios[ratios.len() - 1]
        ));
    }
    println!("MULTI_GET_REPORT_BEGIN");
    println!(
        "{} pins: {} rows on each of {} shards ({}, both masters), 100-byte data; \
         {} distinct random IDs per get, on {:.1} distinct shards on average; \
         {} s per run, {} rounds, {} s warm-up per mode; client pools of up to {} connections per host.",
        clients.pins.len(),
        cfg.rows_per_shard,
        cfg.shards,
        match 4096 / cfg.shards {
            1 => "every shard".to_owned(),
            step => format!("shards 0, {step}, {}, ..., {}", 2 * step, 4096 - step),
        },
        cfg.per_get,
        shards_per_get.iter().sum::<f64>() / shards_per_get.len().max(1) as f64,
        cfg.seconds,
        cfg.rounds,
        cfg.warmup,
        cfg.pool_max
    );
    println!("{out}");
    println!("MULTI_GET_REPORT_END");
    drop(clients.proxy.disconnect().await);
    if let Ok(masters) = Arc::try_unwrap(clients.masters) {
        for (_, pool) in masters {
            drop(pool.disconnect().await);
        }
    }
}
