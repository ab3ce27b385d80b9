//! The router (`router::route`, and `route_prepare` / `split_statements` /
//! `placeholders` on the same text) on arbitrary text against the topology
//! of `config/shardgate.yaml`, in a session context taken from the input
//! (a `USE` shard, sql_mode flags, character set, server version), on a
//! stack the size of a runtime worker's.
//!
//! Checks: no panic, no stack overflow; the plan is well formed (targets
//! exist and name the shard's master, multi-shard plans are reads over
//! distinct shards of one fleet in shard order, merge columns in range,
//! errors with a code and SQLSTATE); and the executable-comment oracle:
//! the openers of the MariaDB executable comments (`/*!`, `/*!NNNNN`,
//! `/*M!`) found, outside literals, quoted identifiers and comments, in any
//! SQL text of the plan are, in order, openers the input has: the router
//! never creates or splits one (it may edit inside one it expanded). The scanner is `shardgate_fuzz::scan`,
//! written independently of the router.
//!
//! The fast path oracle: each input is routed with the router's
//! statement-shape fast path off (the reference), then four times with it
//! on, on a table held as the proxy holds it (cold, seen, learned, from the
//! template), and once more with every ASCII digit of the input turned to
//! the next one (a statement of the same shape with other literals, routed
//! from the template when one was learned); every plan must equal the
//! reference of its text exactly.
//!
//! `SHARDGATE_FUZZ_COMMENT_ORACLE=0` turns the comment oracle off (to look
//! for other failures while a known oracle finding is open).
//!
//! Input: a flags byte (bit 0 NO_BACKSLASH_ESCAPES, bit 1 ANSI_QUOTES,
//! bits 2-4 character set, bit 5 a USE shard, bit 6 also route_prepare,
//! bit 7 also split_statements and placeholders), a byte choosing the
//! server version, the USE fleet and the placement, a 2-byte USE shard,
//! then the statement bytes (routed as bytes, as the proxy does).
#![no_main]
#![feature(cfg_sanitize)]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

use shardgate::router::{
    clear_fast_path, placeholders, route, route_prepare, set_fast_path, split_statements,
    ClientCharset, LexMode, Placement, Plan, RouteContext, SessionAction, Target, TrailCharset,
};
use shardgate::topology::{SharedTopology, Topology};
use shardgate_fuzz::input::Input;
use shardgate_fuzz::scan::{self, executable_comments, LexFlags};

/// The stack of a tokio runtime worker (its default), where the proxy
/// routes statements. ASan's redzones make frames several times larger,
/// so an instrumented build gets more.
const STACK: usize = if cfg!(sanitize = "address") {
    8 << 20
} else {
    2 << 20
};

static TOPOLOGY: LazyLock<Topology> = LazyLock::new(|| {
    Topology::from_yaml_str(
        include_str!("../../config/shardgate.yaml"),
        "config/shardgate.yaml",
    )
    .unwrap_or_else(|errors| panic!("harness: config/shardgate.yaml does not load: {errors}"))
});

/// The same table as held by a running proxy (an identity: the fast path
/// keeps templates for it).
static HELD: LazyLock<Arc<Topology>> =
    LazyLock::new(|| SharedTopology::new(TOPOLOGY.clone()).load());

const VERSIONS: [u32; 6] = [100_000, 100_500, 101_100, 101_119, 110_400, 50_744];

/// Places an object INSERT at a fixed point of the open range.
struct Fixed(u32);

impl Placement for Fixed {
    fn choose(&mut self, first: u32, last: u32) -> u32 {
        self.0.clamp(first, last)
    }
}

fn check_target(target: &Target, topo: &Topology) {
    let Some(fleet) = topo.fleet(target.fleet) else {
        panic!("plan names fleet {} that does not exist", target.fleet);
    };
    assert!(
        target.shard < fleet.shard_count,
        "shard {} past fleet {}'s {} shards",
        target.shard,
        fleet.name,
        fleet.shard_count
    );
    assert_eq!(
        topo.master_of(target.fleet, target.shard),
        Some(target.host),
        "target {target:?} is not the shard's master"
    );
}

/// The plan's SQL texts, after checking its shape.
fn check_plan<'p>(plan: &'p Plan, topo: &Topology) -> Vec<&'p [u8]> {
    #[allow(unreachable_patterns)]
    match plan {
        Plan::Shard(query) => {
            check_target(&query.target, topo);
            vec![query.sql.as_bytes()]
        }
        Plan::MultiShard(multi) => {
            assert!(!multi.parts.is_empty(), "a multi-shard plan with no part");
            let fleet = multi.parts[0].target.fleet;
            for pair in multi.parts.windows(2) {
                assert!(
                    pair[0].target.shard < pair[1].target.shard,
                    "parts not in shard order or repeated: {} then {}",
                    pair[0].target.shard,
                    pair[1].target.shard
                );
            }
            for part in &multi.parts {
                check_target(&part.target, topo);
                assert_eq!(part.target.fleet, fleet, "parts on several fleets");
                assert_eq!(
                    part.kind,
                    shardgate::router::StatementKind::Read,
                    "a {:?} fans out",
                    part.kind
                );
                assert_eq!(part.compose_insert_id, None);
            }
            if let Some(aggregation) = &multi.merge.aggregation {
                let columns = aggregation.columns.len();
                assert!(multi.merge.hidden_columns <= columns);
                for key in &multi.merge.order_by {
                    assert!(
                        key.column < columns,
                        "sort key {} of {columns} columns",
                        key.column
                    );
                }
            }
            multi.parts.iter().map(|part| part.sql.as_bytes()).collect()
        }
        Plan::AnyHost { sql, .. } | Plan::Diagnostics { sql, .. } => vec![sql.as_bytes()],
        Plan::Session(action) => match action {
            SessionAction::Use { fleet, shard } => {
                let fleet = topo
                    .fleet(*fleet)
                    .expect("USE of a fleet that does not exist");
                assert!(*shard < fleet.shard_count);
                Vec::new()
            }
            SessionAction::Begin { sql }
            | SessionAction::SetSession { sql, .. }
            | SessionAction::SetNextTransaction { sql }
            | SessionAction::Savepoint { sql } => vec![sql.as_bytes()],
            _ => Vec::new(),
        },
        Plan::Reject(error) => {
            assert!(error.code() >= 1000, "error code {}", error.code());
            assert_eq!(error.sql_state().len(), 5);
            assert!(!error.to_string().is_empty());
            Vec::new()
        }
        _ => Vec::new(),
    }
}

static COMMENT_ORACLE: LazyLock<bool> =
    LazyLock::new(|| std::env::var("SHARDGATE_FUZZ_COMMENT_ORACLE").as_deref() != Ok("0"));

/// The opening marker of an executable comment with its version digits
/// (`/*!`, `/*!40101`, `/*M!100500`).
fn opener(comment: &[u8]) -> &[u8] {
    let marker = if comment.starts_with(b"/*M!") { 4 } else { 3 };
    let digits = comment
        .iter()
        .skip(marker)
        .take_while(|b| b.is_ascii_digit())
        .count();
    &comment[..(marker + digits).min(comment.len())]
}

/// The executable-comment oracle (see the module comment). The router
/// expands executable comments and may edit inside them (`WHERE /*!id = X*/`
/// routes by X and sends `/*!local_id = L*/`), so the comments' contents may
/// change; their openers may not: the openers of each text of the plan, in
/// order, must be a subsequence of the input's, so the router never creates
/// or splits one, nor turns text outside a comment into one.
fn check_comments(plan: &Plan, texts: &[&[u8]], input: &[u8], lex: &LexFlags) {
    if !*COMMENT_ORACLE {
        return;
    }
    let input_openers: Vec<&[u8]> = executable_comments(input, lex)
        .into_iter()
        .map(|range| opener(&input[range]))
        .collect();
    for text in texts {
        let mut remaining = input_openers.iter();
        for range in executable_comments(text, lex) {
            let found = opener(&text[range]);
            assert!(
                remaining.any(|o| *o == found),
                "the plan's text has an executable comment opened by {:?} that the input does not have at that place\ninput: {:?}\nplan: {plan:?}",
                String::from_utf8_lossy(found),
                String::from_utf8_lossy(input)
            );
        }
    }
}

fn check_route(sql: &[u8], ctx: &RouteContext, lex: &LexFlags, placement: u32) {
    let topo = &*TOPOLOGY;
    let plan = route(sql, topo, ctx, &mut Fixed(placement));
    let texts = check_plan(&plan, topo);
    check_comments(&plan, &texts, sql, lex);
    check_fast_path(sql, ctx, placement);
}

/// The fast path oracle (see the module comment).
fn check_fast_path(sql: &[u8], ctx: &RouteContext, placement: u32) {
    let held = &**HELD;
    let ordinary = |text: &[u8]| {
        set_fast_path(false);
        let plan = route(text, held, ctx, &mut Fixed(placement));
        set_fast_path(true);
        plan
    };
    clear_fast_path();
    let reference = ordinary(sql);
    for round in 0..4 {
        let fast = route(sql, held, ctx, &mut Fixed(placement));
        assert_eq!(
            fast,
            reference,
            "fast path round {round} differs\ninput: {:?}",
            String::from_utf8_lossy(sql)
        );
    }
    let other: Vec<u8> = sql
        .iter()
        .map(|&b| match b {
            b'9' => b'0',
            b'0'..=b'8' => b + 1,
            _ => b,
        })
        .collect();
    if other != sql {
        let fast = route(&other, held, ctx, &mut Fixed(placement));
        let reference = ordinary(&other);
        assert_eq!(
            fast,
            reference,
            "fast path differs on a look-alike\nlearned: {:?}\ninput: {:?}",
            String::from_utf8_lossy(sql),
            String::from_utf8_lossy(&other)
        );
    }
}

fn run(sql: &[u8], flags: u8, ctx: RouteContext, lex: LexFlags, placement: u32) {
    check_route(sql, &ctx, &lex, placement);
    if flags & 0x40 != 0 {
        let plan = route_prepare(sql, &TOPOLOGY, &ctx);
        let texts = check_plan(&plan, &TOPOLOGY);
        check_comments(&plan, &texts, sql, &lex);
    }
    if flags & 0x80 != 0 {
        let pieces = split_statements(sql, &ctx.lex);
        let mut end = 0;
        for range in &pieces {
            assert!(
                range.start >= end && range.start <= range.end,
                "split ranges {pieces:?}"
            );
            end = range.end;
            let Some(piece) = sql.get(range.clone()) else {
                panic!(
                    "split range {range:?} is outside the text ({} bytes)",
                    sql.len()
                );
            };
            if pieces.len() > 1 {
                check_route(piece, &ctx, &lex, placement);
            }
        }
        if let Ok(markers) = placeholders(sql, &ctx.lex) {
            for range in markers {
                assert_eq!(
                    sql.get(range.clone()),
                    Some(&b"?"[..]),
                    "placeholder {range:?}"
                );
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let choice = input.u8();
    let use_shard = u32::from(input.u16());
    let sql = input.rest().to_vec();

    let (charset, trail) = match (flags >> 2) & 7 {
        1 => (ClientCharset::AsciiSafe, None),
        2 => (
            ClientCharset::AsciiTrail(TrailCharset::Big5),
            Some(scan::TrailCharset::Big5),
        ),
        3 => (
            ClientCharset::AsciiTrail(TrailCharset::Gbk),
            Some(scan::TrailCharset::Gbk),
        ),
        4 => (
            ClientCharset::AsciiTrail(TrailCharset::Sjis),
            Some(scan::TrailCharset::Sjis),
        ),
        _ => (ClientCharset::Utf8, None),
    };
    let lex = LexFlags {
        no_backslash_escapes: flags & 1 != 0,
        ansi_quotes: flags & 2 != 0,
        trail,
    };
    let topo = &*TOPOLOGY;
    let use_fleet = usize::from(choice >> 7) % topo.fleets.len();
    let current_db = (flags & 0x20 != 0).then(|| {
        let count = topo.fleets[use_fleet].shard_count.max(1);
        (use_fleet, use_shard % count)
    });
    let ctx = RouteContext {
        current_db,
        lex: LexMode {
            no_backslash_escapes: lex.no_backslash_escapes,
            ansi_quotes: lex.ansi_quotes,
            charset,
            server_version: VERSIONS[usize::from(choice & 7) % VERSIONS.len()],
        },
        ..RouteContext::default()
    };
    let placement = u32::from(choice >> 3 & 0x0F) * 300;

    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(STACK)
            .spawn_scoped(scope, || run(&sql, flags, ctx, lex, placement))
            .expect("harness: cannot start the routing thread")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
});
