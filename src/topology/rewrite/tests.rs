use super::*;

/// The config above `fleets:` every edit test shares.
pub(super) const HEAD: &str = "\
# The operator's own comment.
listen: 127.0.0.1:6033
users: [{ name: app, password: app }]
backend: { user: shard, password: shardpw }
types: { pin: 1 }
tables:
  pins: { fleet: main, object: pin }
fleets:
";

fn promote(text: &str, master: &str) -> Result<Promoted, RewriteError> {
    promote_replica(text, "test.yaml", master)
}

fn note(master: &str, replica: &str, first: u32, last: u32) -> String {
    format!("# PROMOTE REPLICA {master}: its replica {replica} became the master of shards {first}-{last} (written by shardgate)")
}

#[test]
fn flow_entry_keeps_comments_and_layout() {
    let text = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      # lower half, with a replica for failover
      - {{ range: [0, 3],    master: 10.0.0.1:3306, replica: 10.0.0.2:3306 }}   # pair A
      - {{ range: [4, 7],    master: 10.0.0.3:3306 }}
"
    );
    let promoted = promote(&text, "10.0.0.1:3306").unwrap();
    let expected = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      # lower half, with a replica for failover
      {}
      - {{ range: [0, 3],    master: 10.0.0.2:3306 }}   # pair A
      - {{ range: [4, 7],    master: 10.0.0.3:3306 }}
",
        note("10.0.0.1:3306", "10.0.0.2:3306", 0, 3)
    );
    assert_eq!(promoted.text, expected);
    let hosts = &promoted.config.fleets["main"].hosts;
    assert_eq!(hosts[0].master, "10.0.0.2:3306");
    assert_eq!(hosts[0].replica, None);
    assert_eq!(hosts[1].master, "10.0.0.3:3306");
    assert_eq!(
        promoted.entries,
        vec![PromotedEntry {
            fleet: "main".into(),
            first: 0,
            last: 3,
            master: "10.0.0.1:3306".into(),
            replica: "10.0.0.2:3306".into(),
        }]
    );
}

#[test]
fn flow_entry_with_replica_first_and_quotes() {
    let text = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      - {{ replica: \"[::1]:3309\", range: [0, 7], master: \"[::1]:3307\" }}
"
    );
    let promoted = promote(&text, "[::1]:3307").unwrap();
    assert!(
        promoted
            .text
            .contains("      - { range: [0, 7], master: \"[::1]:3309\" }\n"),
        "{}",
        promoted.text
    );
    assert_eq!(promoted.config.fleets["main"].hosts[0].master, "[::1]:3309");
}

#[test]
fn block_entries_in_two_fleets() {
    let text = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      - range: [0, 3]
        master: \"10.0.0.1:3306\"     # master of pair A
        replica: '10.0.0.2:3306'    # its GTID replica
        # end of pair A
      - range: [4, 7]
        master: 10.0.0.3:3306
  other:
    shards: 2
    database: \"odb{{:05}}\"
    hosts:
    - master: 10.0.0.1:3306
      replica: 10.0.0.9:3306
      range: [0, 1]
"
    );
    let promoted = promote(&text, " 10.0.0.1:3306 ").unwrap();
    let expected = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      {}
      - range: [0, 3]
        master: '10.0.0.2:3306'     # master of pair A
        # end of pair A
      - range: [4, 7]
        master: 10.0.0.3:3306
  other:
    shards: 2
    database: \"odb{{:05}}\"
    hosts:
    {}
    - master: 10.0.0.9:3306
      range: [0, 1]
",
        note("10.0.0.1:3306", "10.0.0.2:3306", 0, 3),
        note("10.0.0.1:3306", "10.0.0.9:3306", 0, 1)
    );
    assert_eq!(promoted.text, expected);
    let fleets: Vec<&str> = promoted.entries.iter().map(|e| e.fleet.as_str()).collect();
    assert_eq!(fleets, ["main", "other"]);
    assert_eq!(
        promoted.config.fleets["other"].hosts[0].master,
        "10.0.0.9:3306"
    );
    assert_eq!(promoted.config.fleets["other"].hosts[0].replica, None);
}

#[test]
fn crlf_line_endings_are_kept() {
    let text = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      - {{ range: [0, 7], master: a:1, replica: b:1 }}
"
    )
    .replace('\n', "\r\n");
    let promoted = promote(&text, "a:1").unwrap();
    assert!(!promoted.text.replace("\r\n", "").contains('\n'));
    assert!(promoted
        .text
        .contains("\r\n      - { range: [0, 7], master: b:1 }\r\n"));
}

#[test]
fn unknown_master_and_missing_replica_are_refused() {
    let text = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      - {{ range: [0, 3], master: a:1, replica: b:1 }}
      - {{ range: [4, 7], master: c:1 }}
"
    );
    match promote(&text, "z:1") {
        Err(RewriteError::NotAMaster { master, masters }) => {
            assert_eq!(master, "z:1");
            assert_eq!(masters, ["a:1", "c:1"]);
        }
        other => panic!("{other:?}"),
    }
    let error = promote(&text, "c:1").unwrap_err();
    assert!(
        matches!(
            error,
            RewriteError::NoReplica {
                first: 4,
                last: 7,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("no replica"), "{error}");
}

#[test]
fn shapes_the_edit_cannot_handle_are_refused() {
    let flow_list = format!(
        "{HEAD}  main:
    shards: 8
    hosts: [{{ range: [0, 7], master: a:1, replica: b:1 }}]
"
    );
    let multi_line = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      - {{ range: [0, 7], master: a:1,
          replica: b:1 }}
"
    );
    let replica_first = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      - replica: b:1
        range: [0, 7]
        master: a:1
"
    );
    for text in [flow_list, multi_line, replica_first] {
        let error = promote(&text, "a:1").unwrap_err();
        assert!(matches!(error, RewriteError::Unsupported { .. }), "{error}");
        let message = error.to_string();
        assert!(message.contains("`master: b:1`"), "{message}");
        assert!(message.contains("shards 0-7 of fleet main"), "{message}");
    }
}

#[test]
fn an_edit_that_would_load_differently_is_refused() {
    // `replica:` holds a plain scalar folded over two lines: removing its
    // first line leaves the second one hanging under `range:`.
    let text = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      - range: [0, 7]
        replica: b:1
          x
        master: a:1
"
    );
    let error = promote(&text, "a:1").unwrap_err();
    assert!(matches!(error, RewriteError::Unproven { .. }), "{error}");
    assert!(error.to_string().contains("was not written"), "{error}");
}

#[test]
fn proof_compares_the_whole_config() {
    let text = format!(
        "{HEAD}  main:
    shards: 8
    hosts:
      - {{ range: [0, 7], master: b:1 }}
"
    );
    let (mut intended, _) = validate::parse(&text, "t").unwrap();
    assert!(prove(&text, "t", &intended).is_ok());
    intended.fleets.get_mut("main").unwrap().hosts[0].master = "c:1".into();
    let error = prove(&text, "t", &intended).unwrap_err();
    assert!(error.to_string().contains("fleet main"), "{error}");
    let (mut intended, _) = validate::parse(&text, "t").unwrap();
    intended.listen = "x:1".into();
    let error = prove(&text, "t", &intended).unwrap_err();
    assert!(error.to_string().contains("other than `fleets`"), "{error}");
}
