use super::*;

use crate::topology::rewrite::tests::HEAD;

fn fleet(hosts: &str) -> String {
    format!("{HEAD}  main:\n    shards: 4096\n    hosts:\n{hosts}  other:\n    shards: 16\n    hosts:\n      - {{ range: [0, 15], master: 10.0.0.9:3306 }}\n")
}

fn note(first: u32, last: u32, from: &str, to: &str, entry: [u32; 2]) -> String {
    format!(
        "      # MOVE SHARDS {first}-{last}: from {from} to {to} (entry {}-{} split, written by shardgate)\n",
        entry[0], entry[1]
    )
}

fn ranges(config: &Config, fleet: &str) -> Vec<(u32, u32, String, Option<String>)> {
    config.fleets[fleet]
        .hosts
        .iter()
        .map(|h| (h.range[0], h.range[1], h.master.clone(), h.replica.clone()))
        .collect()
}

#[test]
fn upper_half_to_the_replica_splits_the_flow_entry_and_drops_the_replica() {
    let text = fleet(
        "      # lower half, with a replica for failover\n      - { range: [0, 2047],    master: 127.0.0.1:3307, replica: 127.0.0.1:3309 }   # pair A\n      - { range: [2048, 4095], master: 127.0.0.1:3308 }\n",
    );
    let moved = move_shards(&text, "t.yaml", "main", 1024, 2047, "127.0.0.1:3309").unwrap();
    let expected = fleet(&format!(
        "      # lower half, with a replica for failover\n{}      - {{ range: [0, 1023], master: 127.0.0.1:3307 }}   # pair A\n      - {{ range: [1024, 2047], master: 127.0.0.1:3309 }}\n      - {{ range: [2048, 4095], master: 127.0.0.1:3308 }}\n",
        note(1024, 2047, "127.0.0.1:3307", "127.0.0.1:3309", [0, 2047])
    ));
    assert_eq!(moved.text, expected);
    assert_eq!(
        ranges(&moved.config, "main"),
        vec![
            (0, 1023, "127.0.0.1:3307".into(), None),
            (1024, 2047, "127.0.0.1:3309".into(), None),
            (2048, 4095, "127.0.0.1:3308".into(), None),
        ]
    );
    assert_eq!(
        moved.moved,
        MovedRange {
            fleet: "main".into(),
            first: 1024,
            last: 2047,
            from: "127.0.0.1:3307".into(),
            to: "127.0.0.1:3309".into(),
            entry: [0, 2047],
            replica_dropped: Some("127.0.0.1:3309".into()),
        }
    );
    let (in_memory, what) = move_in_config(
        &validate::parse(&text, "t").unwrap().0,
        "main",
        1024,
        2047,
        "127.0.0.1:3309",
    )
    .unwrap();
    assert_eq!(in_memory, moved.config);
    assert_eq!(what, moved.moved);
}

#[test]
fn a_middle_range_of_a_block_entry_becomes_three_entries_keeping_another_replica() {
    let text = fleet(
        "      - range: [0, 2047]\n        master: 127.0.0.1:3307\n        # its replica\n        replica: 127.0.0.1:3309\n\n      - range: [2048, 4095]\n        master: 127.0.0.1:3308\n",
    );
    let moved = move_shards(&text, "t.yaml", "main", 100, 199, "10.1.1.1:3306").unwrap();
    assert_eq!(
        ranges(&moved.config, "main"),
        vec![
            (
                0,
                99,
                "127.0.0.1:3307".into(),
                Some("127.0.0.1:3309".into())
            ),
            (100, 199, "10.1.1.1:3306".into(), None),
            (
                200,
                2047,
                "127.0.0.1:3307".into(),
                Some("127.0.0.1:3309".into())
            ),
            (2048, 4095, "127.0.0.1:3308".into(), None),
        ]
    );
    assert!(moved
        .text
        .contains("        # its replica\n      - { range: [0, 99]"));
    assert!(moved
        .text
        .contains("\n\n      - range: [2048, 4095]\n        master: 127.0.0.1:3308\n"));
    assert_eq!(moved.moved.replica_dropped, None);
}

#[test]
fn a_whole_entry_moved_keeps_one_entry() {
    let text = fleet(
        "      - { range: [0, 2047], master: 127.0.0.1:3307, replica: 127.0.0.1:3309 }\n      - { range: [2048, 4095], master: 127.0.0.1:3308 }\n",
    );
    let moved = move_shards(&text, "t.yaml", "main", 2048, 4095, "[::1]:3306").unwrap();
    assert!(moved
        .text
        .contains("- { range: [2048, 4095], master: \"[::1]:3306\" }"));
    assert_eq!(
        ranges(&moved.config, "main")[1],
        (2048, 4095, "[::1]:3306".into(), None)
    );
    let again = move_shards(&text, "t.yaml", "main", 0, 2047, "127.0.0.1:3309").unwrap();
    assert_eq!(again.moved.replica_dropped, None);
    assert_eq!(
        ranges(&again.config, "main")[0],
        (0, 2047, "127.0.0.1:3309".into(), None)
    );
}

#[test]
fn moves_that_cannot_be_written_are_refused_with_the_reason() {
    let text = fleet(
        "      - { range: [0, 2047], master: 127.0.0.1:3307 }\n      - { range: [2048, 4095], master: 127.0.0.1:3308 }\n",
    );
    let why = |fleet: &str, first: u32, last: u32, target: &str| match move_shards(
        &text, "t.yaml", fleet, first, last, target,
    ) {
        Err(RewriteError::NotMovable { why, .. }) => why,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(why("main", 2000, 2100, "h:1")
        .contains("0-2047 on 127.0.0.1:3307, 2048-4095 on 127.0.0.1:3308"));
    assert!(why("nope", 0, 1, "h:1").contains("fleets: main, other"));
    assert!(why("main", 5, 4, "h:1").contains("after"));
    assert!(why("main", 0, 4096, "h:1").contains("0-4095"));
    assert!(why("main", 0, 10, " 127.0.0.1:3307 ").contains("already"));
    assert!(why("main", 0, 10, "  ").contains("no target"));
}

#[test]
fn the_example_config_moves_half_of_master_a_to_its_replica() {
    let text = include_str!("../../../../config/shardgate.yaml");
    let moved = move_shards(text, "shardgate.yaml", "main", 1024, 2047, "127.0.0.1:3309").unwrap();
    assert_eq!(
        ranges(&moved.config, "main"),
        vec![
            (0, 1023, "127.0.0.1:3307".into(), None),
            (1024, 2047, "127.0.0.1:3309".into(), None),
            (2048, 4095, "127.0.0.1:3308".into(), None),
        ]
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
            + 1,
        moved
            .text
            .lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
    );
}
