//! The largest config the ID layout allows loads quickly and in bounded
//! memory, and routes: 65,536 shards over 2,048 masters (plus a mod-shard
//! fleet of 65,536 shards), written to a temporary file, read with
//! `Control::from_file` (parse, validate, build the routing table, create
//! the engine with one pool per host), then statements for shards at both
//! ends of the range. Needs no server: nothing connects.
//!
//! The heap is measured with a counting allocator (this binary's own), so
//! the bound is on bytes the load keeps, not on the process's RSS.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use shardgate::control::Control;
use shardgate::id::{compose, MAX_SHARD};
use shardgate::router::{route, Plan, RandomPlacement, RouteContext};
use shardgate::topology::Topology;

/// Counts the bytes the process holds on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SHARDS: u32 = MAX_SHARD + 1;
const MASTERS: u32 = 2048;
/// The load (debug build, shared machine) must take less than this.
const LOAD_LIMIT: Duration = Duration::from_secs(2);
/// Heap the loaded proxy state may keep (4.5 MiB when written): per host
/// its pool, state, counters, address and range, and the config's own copy.
const HEAP_LIMIT: isize = 12 * 1024 * 1024;

/// The config text: fleet `main` (65,536 shards, 32 per master, master `i`
/// at 10.x.y.z:3306) and fleet `mod` (65,536 shards on one host).
fn big_config() -> String {
    let mut yaml = String::from(
        "listen: 127.0.0.1:6033\n\
         users: [{ name: app, password: app }]\n\
         backend: { user: shard, password: shardpw, pool_max_per_host: 64 }\n\
         types: { pin: 1, board: 2 }\n\
         fleets:\n  main:\n    shards: 65536\n    database: \"db{:05}\"\n    hosts:\n",
    );
    let per_master = SHARDS / MASTERS;
    for i in 0..MASTERS {
        let (first, last) = (i * per_master, (i + 1) * per_master - 1);
        let _ = writeln!(
            yaml,
            "      - {{ range: [{first}, {last}], master: 10.1.{}.{}:3306 }}",
            i / 256,
            i % 256
        );
    }
    yaml.push_str(
        "  mod:\n    shards: 65536\n    database: \"msdb{:05}\"\n    hosts:\n      \
         - { range: [0, 65535], master: 10.2.0.1:3306 }\n\
         tables:\n  \
         pins: { fleet: main, object: pin }\n  \
         board_has_pins: { fleet: main, from: board_id }\n  \
         user_by_email: { fleet: mod, key: email }\n",
    );
    yaml
}

/// The shard database, master address and text a statement is sent with.
fn single_shard(topology: &Topology, sql: &str) -> (u32, String, String) {
    let plan = route(
        sql,
        topology,
        &RouteContext::default(),
        &mut RandomPlacement::new(),
    );
    let Plan::Shard(query) = plan else {
        panic!("{sql}: expected one shard, got {plan:?}");
    };
    let host = &topology.hosts[query.target.host].addr;
    (query.target.shard, host.clone(), query.sql.to_string())
}

#[test]
fn largest_config_loads_fast_in_bounded_memory_and_routes() {
    let dir = std::env::temp_dir().join(format!("shardgate-big-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("big.yaml");
    std::fs::write(&path, big_config()).expect("write config");

    let before = LIVE.load(Ordering::Relaxed);
    let started = Instant::now();
    let control = match Control::from_file(path.clone()) {
        Ok(control) => control,
        Err(errors) => panic!(
            "config should load:\n{}",
            Topology::describe_errors(&errors)
        ),
    };
    let took = started.elapsed();
    let kept = LIVE.load(Ordering::Relaxed) - before;
    eprintln!(
        "65,536 shards, {} hosts: loaded in {took:?}, heap kept {:.1} MiB",
        MASTERS + 1,
        kept as f64 / (1024.0 * 1024.0)
    );
    assert!(
        took < LOAD_LIMIT,
        "load took {took:?} (limit {LOAD_LIMIT:?})"
    );
    assert!(
        kept < HEAP_LIMIT,
        "the loaded config keeps {kept} bytes on the heap (limit {HEAP_LIMIT})"
    );

    let topology = control.engine.topology.load();
    assert_eq!(topology.hosts.len(), (MASTERS + 1) as usize);
    let main = topology.fleet_by_name("main").expect("fleet main");
    assert_eq!(topology.fleets[main].shard_count, SHARDS);
    assert_eq!(topology.fleets[main].ranges.len(), MASTERS as usize);

    for (shard, master) in [
        (0, "10.1.0.0:3306"),
        (31, "10.1.0.0:3306"),
        (32, "10.1.0.1:3306"),
        (32_768, "10.1.4.0:3306"),
        (65_503, "10.1.7.254:3306"),
        (65_504, "10.1.7.255:3306"),
        (MAX_SHARD, "10.1.7.255:3306"),
    ] {
        let pin = compose(shard, 1, 42);
        let (routed, host, sql) = single_shard(
            &topology,
            &format!("SELECT data FROM pins WHERE id = {pin}"),
        );
        assert_eq!(
            (routed, host.as_str()),
            (shard, master),
            "pin on shard {shard}"
        );
        assert_eq!(
            sql,
            format!("SELECT data FROM db{shard:05}.pins WHERE local_id = 42")
        );
        let board = compose(shard, 2, 7);
        let (routed, host, _) = single_shard(
            &topology,
            &format!("SELECT pin_id FROM board_has_pins WHERE board_id = {board}"),
        );
        assert_eq!(
            (routed, host.as_str()),
            (shard, master),
            "board on shard {shard}"
        );
    }
    let (shard, host, sql) = single_shard(
        &topology,
        "SELECT id FROM user_by_email WHERE email = 'a@example.com'",
    );
    assert_eq!(host, "10.2.0.1:3306");
    assert!(
        sql.contains(&format!("msdb{shard:05}.user_by_email")),
        "{sql}"
    );
    assert_eq!(
        topology.parse_database("db65535"),
        Some((main, MAX_SHARD)),
        "the last shard's database"
    );

    drop(topology);
    drop(control);
    let _ = std::fs::remove_dir_all(&dir);
}
