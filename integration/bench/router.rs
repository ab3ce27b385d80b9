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
