//! A fleet with time-sortable IDs: INSERT mints `id` on the server, reads
//! route by the layout's shard field, a range of IDs needs SCATTER or SHARD.

use super::*;

const PHOTOS: &str = r#"  photos:
    shards: 16
    database: "ph{:02}"
    open: [0, 15]
    id_layout:
      epoch_ms: 1767225600000
      fields:
        time_ms: { shift: 23, bits: 40 }
        shard: { shift: 10, bits: 13 }
        sequence: { shift: 0, bits: 10 }
    hosts:
      - { range: [0, 15], master: 127.0.0.1:3310 }
"#;

fn photos_topology() -> Topology {
    let yaml = SPEC_YAML
        .replacen("user: 3 }", "user: 3, photo: 4 }", 1)
        .replacen("\ntables:\n", &format!("\n{PHOTOS}tables:\n"), 1)
        + "  photos:          { fleet: photos, object: photo }\n";
    load(&yaml)
}

/// The ID minted at `time_ms` on `shard` with sequence `seq`.
const fn photo(time_ms: u64, shard: u64, seq: u64) -> u64 {
    (time_ms << 23) | (shard << 10) | seq
}

fn mint(shard: u32) -> String {
    let t = photos_topology();
    let fleet = &t.fleets[t.fleet_by_name("photos").unwrap()];
    fleet
        .layout
        .mint_sql(shard, &format!("ph{shard:02}"), Some(0))
        .unwrap()
}

#[test]
fn time_layout_inserts_mint_ids_and_reads_route_by_the_shard_field() {
    let id = photo(123_456, 7, 9);
    let other = photo(123_999, 12, 1);
    run_cases(
        &photos_topology(),
        vec![
            c(
                "INSERT /*+ SHARD(7) */ INTO photos (data) VALUES ('a'), ('b')",
                write(
                    "ph07",
                    format!(
                        "INSERT INTO ph07.photos (`id`, data) VALUES ({m}, 'a'), ({m}, 'b')",
                        m = mint(7)
                    ),
                ),
            ),
            c(
                "INSERT INTO photos SET data = 'x'",
                write(
                    "ph15",
                    format!(
                        "INSERT INTO ph15.photos SET `id` = {}, data = 'x'",
                        mint(15)
                    ),
                ),
            ),
            c(
                format!("INSERT INTO photos (id, data) VALUES ({id}, 'a')"),
                write(
                    "ph07",
                    format!("INSERT INTO ph07.photos (id, data) VALUES ({id}, 'a')"),
                ),
            ),
            c(
                "INSERT INTO photos VALUES (1, 'a')",
                reject("Unsupported", "without a column list"),
            ),
            c(
                "REPLACE INTO photos (data) VALUES ('a')",
                reject("Unsupported", "with REPLACE"),
            ),
            c(
                "INSERT IGNORE INTO photos (data) VALUES ('a')",
                reject("Unsupported", "with IGNORE"),
            ),
            c(
                "INSERT INTO photos (data) SELECT 'a'",
                reject("Unsupported", "from a SELECT"),
            ),
            c(
                format!("SELECT data FROM photos WHERE id = {id}"),
                shard(
                    "ph07",
                    format!("SELECT data FROM ph07.photos WHERE id = {id}"),
                ),
            ),
            c(
                format!("SELECT * FROM photos WHERE id = '{id}'"),
                shard(
                    "ph07",
                    format!("SELECT * FROM ph07.photos WHERE id = '{id}'"),
                ),
            ),
            c(
                format!("SELECT data FROM photos WHERE id = {}", 1u64 << 63),
                reject("BadId", "bit 63 is set but belongs to no field"),
            ),
            c(
                format!("SELECT data FROM photos WHERE id IN ({id}, {other})"),
                Expect::Multi(
                    vec![
                        (
                            "ph07".into(),
                            format!("SELECT data FROM ph07.photos WHERE id = {id}"),
                        ),
                        (
                            "ph12".into(),
                            format!("SELECT data FROM ph12.photos WHERE id = {other}"),
                        ),
                    ],
                    concat(),
                ),
            ),
            c(
                format!("SELECT /*+ COLOCATE({other}) */ data FROM photos WHERE data = 'a'"),
                shard("ph12", "SELECT data FROM ph12.photos WHERE data = 'a'"),
            ),
            c(
                format!("SELECT id FROM photos WHERE id BETWEEN {id} AND {other}"),
                reject(
                    "NoShardKey",
                    "add /*+ SCATTER */ to read them all or /*+ SHARD(n) */ for one",
                ),
            ),
            c(
                format!("SELECT /*+ SHARD(3) */ id FROM photos WHERE id BETWEEN {id} AND {other}"),
                shard(
                    "ph03",
                    format!("SELECT id FROM ph03.photos WHERE id BETWEEN {id} AND {other}"),
                ),
            ),
        ],
        false,
    );
}

#[test]
fn a_sessions_previous_id_on_the_shard_bounds_the_minted_time() {
    let t = photos_topology();
    let fleet = &t.fleets[t.fleet_by_name("photos").unwrap()];
    let previous = photo(500, 7, 1023);
    let sql = fleet.layout.mint_sql(7, "ph07", Some(previous)).unwrap();
    assert!(sql.contains("GREATEST("), "{sql}");
    assert!(sql.contains("LEAST(501, "), "{sql}");
    let elsewhere = fleet.layout.mint_sql(8, "ph08", Some(previous)).unwrap();
    assert!(!elsewhere.contains("GREATEST("), "{elsewhere}");
}

/// A minted INSERT's text holds the session's previous ID on its shard:
/// once the fast path has seen the statement in one session, another
/// session's plan is still its own.
#[test]
fn minted_inserts_are_planned_for_the_sessions_own_previous_id() {
    use crate::router::{clear_fast_path, set_fast_path};
    let t = photos_topology();
    let ctx = |previous: u64| RouteContext {
        last_insert_id: previous,
        ..RouteContext::default()
    };
    for sql in [
        "INSERT /*+ SHARD(5) */ INTO photos (data) VALUES ('x')",
        "INSERT /*+ SHARD(5) */ INTO photos (data) VALUES ('y')",
    ] {
        clear_fast_path();
        for previous in [
            photo(1_000, 5, 1),
            photo(1_000, 5, 1),
            photo(9_000, 5, 2),
            0,
        ] {
            for _ in 0..3 {
                let fast = route(sql, &t, &ctx(previous), &mut Fixed(0));
                set_fast_path(false);
                let ordinary = route(sql, &t, &ctx(previous), &mut Fixed(0));
                set_fast_path(true);
                assert_eq!(fast, ordinary, "{sql} after {previous}");
            }
        }
        let Plan::Shard(query) = route(sql, &t, &ctx(photo(9_000, 5, 2)), &mut Fixed(0)) else {
            panic!("one shard");
        };
        assert!(
            String::from_utf8_lossy(&query.sql.0).contains("LEAST(9001,"),
            "the previous ID's time bounds the minted one: {:?}",
            query.sql
        );
    }
}
