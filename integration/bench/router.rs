//! Cost of routing: a point lookup and its parsing parts, multi-shard plans,
//! and oversized `IN` lists against the token cap. The router is pure, so
//! these need no fleet: the topology is `config/shardgate.yaml`.
//!
//! ```text
//! cargo bench --bench router                       # all but the oversized inputs
//! cargo bench --bench router -- --include-ignored  # + 8 MiB IN lists (peak RSS printed)
//! cargo bench --bench router -- point              # only names matching `point`
//! cargo test --bench router                        # each benchmark once (debug build)
//! ```

use std::hint::black_box;
use std::path::Path;

use divan::Bencher;
use shardgate::id::compose;
use shardgate::router::{route, Plan, RandomPlacement, RouteContext};
use shardgate::topology::Topology;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Tokenizer;

fn main() {
    divan::main();
}

/// The routing table of the repository's example configuration.
fn topology() -> Topology {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/shardgate.yaml");
    match Topology::load(&path) {
        Ok(topology) => topology,
        Err(errors) => panic!("{}", Topology::describe_errors(&errors)),
    }
}

/// A pin (type 1) on shard 3429: routed to one shard by its ID.
fn point_lookup() -> String {
    format!(
        "SELECT data FROM pins WHERE id = {}",
        compose(3429, 1, 7_075_733)
    )
}

/// `route` of a point lookup by a pin's ID.
#[divan::bench]
fn route_point_lookup(bencher: Bencher) {
    let topology = topology();
    let ctx = RouteContext::default();
    let sql = point_lookup();
    let mut placement = RandomPlacement::default();
    bencher.bench_local(|| route(black_box(&sql), &topology, &ctx, &mut placement));
}

/// The statement-shape fast path (issue 23): a point lookup planned from
/// its template (`hit`, 64 IDs on 64 shards in turn) and the same lookups
/// with the fast path off (`planned`), in one run, on a routing table held
/// by a `SharedTopology` as the proxy holds it.
#[divan::bench_group]
mod point_lookup_fast_path {
    use super::*;
    use shardgate::router::{clear_fast_path, set_fast_path};
    use shardgate::topology::SharedTopology;

    fn lookups() -> Vec<String> {
        (0..64u32)
            .map(|i| {
                format!(
                    "SELECT data FROM pins WHERE id = {}",
                    compose(i * 61, 1, 7_075_733 + u64::from(i))
                )
            })
            .collect()
    }

    fn run(bencher: Bencher, fast: bool) {
        let shared = SharedTopology::new(topology());
        let topology = shared.load();
        let ctx = RouteContext::default();
        let sql = lookups();
        let mut placement = RandomPlacement::default();
        clear_fast_path();
        set_fast_path(fast);
        for text in sql.iter().chain(&sql) {
            route(text, &topology, &ctx, &mut placement);
        }
        let mut next = 0;
        bencher.bench_local(|| {
            next = (next + 1) % sql.len();
            route(black_box(&sql[next]), &topology, &ctx, &mut placement)
        });
        set_fast_path(true);
    }

    #[divan::bench]
    fn hit(bencher: Bencher) {
        run(bencher, true);
    }

    #[divan::bench]
    fn planned(bencher: Bencher) {
        run(bencher, false);
    }
}

/// What the statistics add to a point lookup (issue 22), beside
/// `route_point_lookup` in the same run: routing with the digest taken
/// (`route_digested`), then that plus what the engine does once the
/// statement ended (`Digests::record` of a known digest, `ShardStats::record`
/// of its shard, the topology loaded for `stats.max_digests`).
#[divan::bench_group]
mod point_lookup_statistics {
    use super::*;
    use bytes::Bytes;
    use shardgate::router::route_digested;
    use shardgate::stats::digest::{Digests, Observation, RouteKind};
    use shardgate::stats::shards::ShardStats;
    use shardgate::topology::SharedTopology;
    use std::time::{Duration, Instant};

    #[divan::bench]
    fn route_digested_only(bencher: Bencher) {
        let topology = topology();
        let ctx = RouteContext::default();
        let sql = Bytes::from(point_lookup());
        let mut placement = RandomPlacement::default();
        bencher.bench_local(|| route_digested(black_box(&sql), &topology, &ctx, &mut placement));
    }

    /// After: what `run_statement` and `observe` do now: a clock read,
    /// `route_digested`, a second topology load, the two records.
    #[divan::bench]
    fn route_digested_and_recorded(bencher: Bencher) {
        let shared = SharedTopology::new(topology());
        let ctx = RouteContext::default();
        let sql = Bytes::from(point_lookup());
        let mut placement = RandomPlacement::default();
        let digests = Digests::new();
        let shards = ShardStats::new();
        bencher.bench_local(|| {
            let started = Instant::now();
            let topology = shared.load();
            let (plan, digest) = route_digested(black_box(&sql), &topology, &ctx, &mut placement);
            let Plan::Shard(query) = &plan else {
                panic!("a point lookup routes to one shard")
            };
            let elapsed = started.elapsed().max(Duration::from_micros(1));
            let target = query.target;
            let seen = Observation {
                digest: digest.unwrap_or(0),
                elapsed,
                error: false,
                rows_sent: 1,
                rows_affected: 0,
                shards: 1,
                route: RouteKind::OneShard,
            };
            let loaded = shared.load();
            let max = loaded.config.stats.max_digests as usize;
            digests.record(&seen, max, String::new);
            let fleet = &loaded.fleets[target.fleet];
            shards.record(
                (target.fleet, &fleet.name, fleet.shard_count),
                target.shard,
                elapsed,
                false,
            );
            plan
        });
    }

    /// One digest recorded by one and by two threads at once (the same
    /// digest: the same part's lock, the worst case).
    #[divan::bench(threads = [1, 2])]
    fn digest_record_same_digest(bencher: Bencher) {
        let digests = Digests::new();
        let seen = Observation {
            digest: 0x1234_5678_9abc_def0,
            elapsed: Duration::from_micros(150),
            error: false,
            rows_sent: 1,
            rows_affected: 0,
            shards: 1,
            route: RouteKind::OneShard,
        };
        bencher.bench(|| digests.record(black_box(&seen), 10_000, String::new));
    }

    /// Before: `route` on a loaded topology, as `run_statement` did.
    #[divan::bench]
    fn route_with_load(bencher: Bencher) {
        let shared = SharedTopology::new(topology());
        let ctx = RouteContext::default();
        let sql = point_lookup();
        let mut placement = RandomPlacement::default();
        bencher.bench_local(|| {
            let topology = shared.load();
            route(black_box(&sql), &topology, &ctx, &mut placement)
        });
    }
}

/// Where a point lookup's time goes: sqlparser's tokenizer alone, then
/// tokenizer and parser.
#[divan::bench_group]
mod point_lookup_parts {
    use super::*;

    #[divan::bench]
    fn tokenize(bencher: Bencher) {
        let sql = point_lookup();
        bencher.bench_local(|| {
            Tokenizer::new(&MySqlDialect {}, black_box(&sql))
                .tokenize_with_location()
                .ok()
        });
    }

    #[divan::bench]
    fn tokenize_and_parse(bencher: Bencher) {
        let sql = point_lookup();
        bencher.bench_local(|| {
            let dialect = MySqlDialect {};
            let tokens = Tokenizer::new(&dialect, black_box(&sql))
                .tokenize_with_location()
                .unwrap_or_default();
            Parser::new(&dialect)
                .with_tokens_with_locations(tokens)
                .parse_statements()
                .ok()
        });
    }
}

/// Multi-shard plans: a 50-ID `IN` list over 50 shards, and a scatter over
/// the 4096 shards of the main fleet.
#[divan::bench_group]
mod multi_shard {
    use super::*;

    #[divan::bench]
    fn in_list_50_ids_over_50_shards(bencher: Bencher) {
        let topology = topology();
        let ctx = RouteContext::default();
        let ids: Vec<String> = (0..50)
            .map(|i| compose(i * 81, 1, u64::from(i) + 1).to_string())
            .collect();
        let sql = format!("SELECT id, data FROM pins WHERE id IN ({})", ids.join(", "));
        let mut placement = RandomPlacement::default();
        bencher.bench_local(|| route(black_box(&sql), &topology, &ctx, &mut placement));
    }

    #[divan::bench(sample_count = 20)]
    fn scatter_over_4096_shards(bencher: Bencher) {
        let topology = topology();
        let ctx = RouteContext::default();
        let sql = "SELECT /*+ SCATTER */ COUNT(*) FROM pins";
        let mut placement = RandomPlacement::default();
        bencher.bench_local(|| route(black_box(sql), &topology, &ctx, &mut placement));
    }
}

/// Oversized `IN (1,1,...)` lists: refused by the default token cap in
/// linear time, parsed in full just under it, and parsed without the cap
/// (what the cap prevents). Ignored by default (seconds per sample, and
/// gigabytes without the cap); each prints the process's peak RSS so far.
#[divan::bench_group(sample_count = 3, sample_size = 1, ignore)]
mod huge_in_list {
    use super::*;

    /// `SELECT 1 FROM pins WHERE id IN (1,1,...)` of at least 8 MiB.
    fn eight_mib() -> String {
        let mut huge = String::from("SELECT 1 FROM pins WHERE id IN (1");
        while huge.len() < 8 << 20 {
            huge.push_str(",1");
        }
        huge.push(')');
        huge
    }

    fn run(bencher: Bencher, sql: &str, ctx: &RouteContext, label: &str) {
        let topology = topology();
        let mut placement = RandomPlacement::default();
        let mut outcome = String::new();
        bencher.bench_local(|| {
            let plan = route(black_box(sql), &topology, ctx, &mut placement);
            outcome = match &plan {
                Plan::Reject(e) => e.to_string(),
                _ => "routed".to_owned(),
            };
            plan
        });
        eprintln!("{label}: {} ({outcome})", peak_rss());
    }

    #[divan::bench]
    fn eight_mib_default_cap(bencher: Bencher) {
        run(
            bencher,
            &eight_mib(),
            &RouteContext::default(),
            "8 MiB, default cap",
        );
    }

    #[divan::bench]
    fn just_under_default_cap(bencher: Bencher) {
        let sql = format!(
            "SELECT 1 FROM pins WHERE id IN ({})",
            vec!["1"; 240_000].join(",")
        );
        run(
            bencher,
            &sql,
            &RouteContext::default(),
            "480k tokens, default cap",
        );
    }

    #[divan::bench]
    fn eight_mib_no_cap(bencher: Bencher) {
        let ctx = RouteContext {
            max_tokens: u64::MAX,
            ..RouteContext::default()
        };
        run(bencher, &eight_mib(), &ctx, "8 MiB, no cap");
    }

    /// The `VmHWM` line of `/proc/self/status` (empty elsewhere).
    fn peak_rss() -> String {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM"))
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    }
}
