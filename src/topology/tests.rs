//! Unit tests for config loading, validation and the routing table.
//!
//! [`SPEC_YAML`] and [`load`] are shared with other modules' tests (the
//! router's build on the same example).

use super::*;

/// The reference example config: every section with its documented shape.
pub(crate) const SPEC_YAML: &str = r#"listen: 127.0.0.1:6033
admin:
  listen: 127.0.0.1:6032
  users: [{ name: admin, password: admin }]
users: [{ name: app, password: app }]        # client accounts (mysql_native_password)
backend: { user: shard, password: shardpw, pool_max_per_host: 64 }
types: { pin: 1, board: 2, user: 3 }
fleets:
  main:
    shards: 4096
    database: "db{:05}"
    open: [0, 4095]                            # shards new objects may be placed in
    hosts:
      - { range: [0, 2047],    master: 127.0.0.1:3307, replica: 127.0.0.1:3309 }
      - { range: [2048, 4095], master: 127.0.0.1:3308 }
  mod:
    shards: 4096
    database: "msdb{:05}"
    hosts:
      - { range: [0, 4095], master: 127.0.0.1:3310 }
tables:
  pins:            { fleet: main, object: pin }
  boards:          { fleet: main, object: board }
  users:           { fleet: main, object: user }
  board_has_pins:  { fleet: main, from: board_id }
  user_likes_pins: { fleet: main, from: user_id }
  user_by_email:   { fleet: mod,  key: email }
"#;

/// The routing table of a config text; panics with its errors if it does
/// not load.
pub(crate) fn load(text: &str) -> Topology {
    match Topology::from_yaml_str(text, "test.yaml") {
        Ok(t) => t,
        Err(e) => panic!("config should load:\n{e}"),
    }
}

fn errors(text: &str) -> Vec<(usize, String)> {
    match Topology::from_yaml_str(text, "test.yaml") {
        Ok(_) => panic!("config should be rejected"),
        Err(e) => e.0.into_iter().map(|e| (e.line, e.message)).collect(),
    }
}

/// Asserts one error on `line` whose message contains `needle`.
fn has(errs: &[(usize, String)], line: usize, needle: &str) {
    assert!(
        errs.iter().any(|(l, m)| *l == line && m.contains(needle)),
        "expected an error on line {line} containing {needle:?}; got {errs:#?}"
    );
}

#[test]
fn spec_example_loads() {
    let t = load(SPEC_YAML);
    assert_eq!(t.config.listen, "127.0.0.1:6033");
    assert_eq!(t.config.backend.connect_timeout_ms, 1000);
    assert_eq!(t.config.backend.checkout_timeout_ms, 5000);
    assert_eq!(t.config.placement, config::Placement::Random);
    assert_eq!(t.fleets.len(), 2);
    assert_eq!(t.fleets[0].name, "main");
    assert_eq!(t.fleets[1].name, "mod");
    let main = t.fleet_by_name("main").expect("main fleet");
    let ms = t.fleet_by_name("mod").expect("mod fleet");
    assert_eq!(t.fleets[main].open, Some((0, 4095)));
    assert_eq!(t.fleets[ms].open_range(), (0, 4095));
    let addrs: Vec<&str> = t.hosts.iter().map(|h| h.addr.as_str()).collect();
    assert_eq!(
        addrs,
        [
            "127.0.0.1:3307",
            "127.0.0.1:3309",
            "127.0.0.1:3308",
            "127.0.0.1:3310"
        ]
    );
    let r = t.host_range(main, 3429).expect("range");
    assert_eq!((r.first, r.last), (2048, 4095));
    assert_eq!(t.hosts[r.master].addr, "127.0.0.1:3308");
    assert_eq!(r.replica, None);
    let r = t.host_range(main, 0).expect("range");
    assert_eq!(
        r.replica.map(|h| t.hosts[h].addr.as_str()),
        Some("127.0.0.1:3309")
    );
    assert_eq!(
        t.master_of(ms, 1537).map(|h| t.hosts[h].addr.as_str()),
        Some("127.0.0.1:3310")
    );
    assert_eq!(t.master_of(main, 4096), None);
    assert_eq!(t.master_of(7, 0), None);

    assert_eq!(
        t.table("PINS").map(|r| &r.kind),
        Some(&TableKind::Object { type_id: 1 })
    );
    assert_eq!(
        t.table("board_has_pins").map(|r| &r.kind),
        Some(&TableKind::Mapping {
            from_column: "board_id".into()
        })
    );
    let email = t.table("user_by_email").expect("table");
    assert_eq!(email.fleet, ms);
    assert_eq!(
        email.kind,
        TableKind::ModShard {
            key_column: "email".into()
        }
    );
    assert!(t.table("nope").is_none());
    assert_eq!(t.fleets[main].database_name(3429), "db03429");
    assert_eq!(t.fleets[ms].database_name(12), "msdb00012");
}

#[test]
fn repo_config_loads_if_present() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/shardgate.yaml");
    if path.exists() {
        if let Err(e) = Topology::load(&path) {
            panic!("{e}");
        }
    }
}

#[test]
fn missing_file_is_one_error() {
    let e = Topology::load(std::path::Path::new("/nonexistent/shardgate.yaml"))
        .expect_err("no such file");
    assert_eq!(e.0.len(), 1);
    assert!(e.0[0].message.contains("cannot read"));
}

#[test]
fn parse_database_cases() {
    let t = load(SPEC_YAML);
    let main = t.fleet_by_name("main");
    let ms = t.fleet_by_name("mod");
    assert_eq!(t.parse_database("db03429").map(|x| x.1), Some(3429));
    assert_eq!(t.parse_database("db03429").map(|x| Some(x.0)), Some(main));
    assert_eq!(t.parse_database("DB03429").map(|x| x.1), Some(3429));
    assert_eq!(t.parse_database("db00000").map(|x| x.1), Some(0));
    assert_eq!(t.parse_database("db04095").map(|x| x.1), Some(4095));
    assert_eq!(t.parse_database("db04096"), None);
    assert_eq!(t.parse_database("db4096"), None);
    assert_eq!(t.parse_database("db3429"), None);
    assert_eq!(t.parse_database("db003429"), None);
    assert_eq!(t.parse_database("db"), None);
    assert_eq!(t.parse_database("db0342x"), None);
    assert_eq!(t.parse_database("db+3429"), None);
    assert_eq!(t.parse_database("mysql"), None);
    assert_eq!(t.parse_database("dé03429"), None);
    assert_eq!(
        t.parse_database("msdb00012").map(|x| (Some(x.0), x.1)),
        Some((ms, 12))
    );
    assert_eq!(t.parse_database("MsDb01537").map(|x| x.1), Some(1537));
}

#[test]
fn database_format_parse_and_match() {
    let f = DatabaseFormat::parse("db{:05}").expect("valid");
    assert_eq!(
        (f.prefix.as_str(), f.width, f.suffix.as_str()),
        ("db", 5, "")
    );
    assert_eq!(f.format(3429), "db03429");
    assert_eq!(f.format(123456), "db123456");
    assert_eq!(f.match_name("db123456"), Some(123456));
    assert_eq!(f.match_name("db0123456"), None);

    let plain = DatabaseFormat::parse("shard_{}_x").expect("valid");
    assert_eq!(plain.width, 0);
    assert_eq!(plain.format(7), "shard_7_x");
    assert_eq!(plain.match_name("SHARD_7_X"), Some(7));
    assert_eq!(plain.match_name("shard_0_x"), Some(0));
    assert_eq!(plain.match_name("shard_07_x"), None);
    assert_eq!(plain.match_name("shard__x"), None);
    assert_eq!(plain.match_name("shard_99999999999_x"), None);

    for bad in [
        "db",
        "db{:5}",
        "db{:05",
        "{:05}",
        "db{:05}{}",
        "d-b{:05}",
        "db1{:05}",
        "db{:x}",
        "db{:011}",
        "db{:00}",
    ] {
        assert!(
            DatabaseFormat::parse(bad).is_none(),
            "{bad} should be rejected"
        );
    }
}

fn big_yaml(shards: u32, hosts: u32) -> String {
    let per = shards / hosts;
    let mut y = String::from(
        "listen: 127.0.0.1:6033\nusers: [{ name: app, password: app }]\nbackend: { user: u }\nfleets:\n  main:\n    shards: ",
    );
    y.push_str(&format!("{shards}\n    hosts:\n"));
    // Written in reverse to check that ranges get sorted.
    for h in (0..hosts).rev() {
        y.push_str(&format!(
            "      - {{ range: [{}, {}], master: 10.0.{}.{}:3306 }}\n",
            h * per,
            h * per + per - 1,
            h / 200,
            h % 200 + 1
        ));
    }
    y
}

#[test]
fn full_id_space_over_256_hosts() {
    let t = load(&big_yaml(65536, 256));
    let fleet = &t.fleets[0];
    assert_eq!(fleet.shard_count, 65536);
    assert_eq!(fleet.ranges.len(), 256);
    assert_eq!(t.hosts.len(), 256);
    assert!(fleet.ranges.windows(2).all(|w| w[0].last + 1 == w[1].first));
    let addr = |shard| t.master_of(0, shard).map(|h| t.hosts[h].addr.clone());
    for h in [0u32, 1, 127, 199, 200, 254, 255] {
        let want = Some(format!("10.0.{}.{}:3306", h / 200, h % 200 + 1));
        assert_eq!(addr(h * 256), want, "first shard of host {h}");
        assert_eq!(addr(h * 256 + 255), want, "last shard of host {h}");
        assert_eq!(addr(h * 256 + 100), want);
    }
    assert_eq!(addr(65535), Some("10.0.1.56:3306".into()));
    assert_eq!(addr(65536), None);
    assert_eq!(t.parse_database("db65535").map(|x| x.1), Some(65535));
    for shard in 0..65536 {
        let r = t.host_range(0, shard).expect("covered");
        assert!(r.first <= shard && shard <= r.last);
        assert_eq!(
            t.hosts[r.master].addr,
            format!(
                "10.0.{}.{}:3306",
                (shard / 256) / 200,
                (shard / 256) % 200 + 1
            )
        );
    }
}

const BASE: &str = "listen: 127.0.0.1:6033
users: [{ name: app, password: app }]
backend: { user: u }
types: { pin: 1 }
";

#[test]
fn overlapping_ranges() {
    let y = format!(
        "{BASE}fleets:
  main:
    shards: 16
    hosts:
      - {{ range: [0, 9], master: a:1 }}
      - {{ range: [8, 15], master: b:1 }}
"
    );
    let e = errors(&y);
    has(
        &e,
        10,
        "range [8, 15] overlaps range [0, 9] on line 9 (shards 8-9 on both)",
    );
    assert_eq!(e.len(), 1, "{e:?}");
}

#[test]
fn missing_ranges_reported_as_gaps() {
    let y = format!(
        "{BASE}fleets:
  main:
    hosts:
      - {{ range: [0, 99], master: a:1 }}
      - {{ range: [200, 2047], master: b:1 }}
      - {{ range: [2100, 4094], master: b:1 }}
"
    );
    let e = errors(&y);
    has(&e, 7, "shards 100-199 of fleet main have no host");
    has(&e, 7, "shards 2048-2099 of fleet main have no host");
    has(&e, 7, "shard 4095 of fleet main has no host");
    assert_eq!(e.len(), 3, "{e:?}");
}

#[test]
fn ranges_beyond_count_and_reversed() {
    let y = format!(
        "{BASE}fleets:
  main:
    shards: 16
    hosts:
      - range: [0, 7]
        master: a:1
      - range: [8, 16]
        master: b:1
      - range: [9, 3]
        master: c:1
"
    );
    let e = errors(&y);
    has(
        &e,
        11,
        "range [8, 16] goes beyond the fleet's 16 shards (last shard is 15)",
    );
    has(&e, 13, "range [9, 3] is reversed");
    assert_eq!(e.len(), 2, "{e:?}");
}

#[test]
fn bad_shard_count_and_format_and_open() {
    let y = format!(
        "{BASE}fleets:
  a:
    shards: 0
    hosts: [{{ range: [0, 0], master: a:1 }}]
  b:
    shards: 70000
    database: \"x{{:05}}\"
    hosts: [{{ range: [0, 69999], master: a:1 }}]
  c:
    shards: 4096
    database: \"cdb{{:03}}\"
    open: [100, 5000]
    hosts: [{{ range: [0, 4095], master: a:1 }}]
  d:
    database: \"ddb{{:5}}\"
    hosts: [{{ range: [0, 4095], master: a:1 }}]
"
    );
    let e = errors(&y);
    has(&e, 7, "fleet a: shards is 0; it must be 1-65536");
    has(&e, 10, "fleet b: shards is 70000; it must be 1-65536");
    has(&e, 15, "too narrow for 4096 shards");
    has(
        &e,
        16,
        "fleet c: open [100, 5000] must be a range inside 0-4095",
    );
    has(
        &e,
        19,
        "fleet d: database format `ddb{:5}` has placeholder `{:5}`",
    );
}

#[test]
fn bad_addresses() {
    let y = "listen: 127.0.0.1
admin: { listen: \"[::1]:6032\", users: [{ name: admin }] }
users: [{ name: app, password: 1234 }]
backend: { user: u }
fleets:
  main:
    shards: 8
    hosts:
      - { range: [0, 0], master: 10.0.0.1:0 }
      - { range: [1, 1], master: 10.0.0.300:3306 }
      - { range: [2, 2], master: \"::1:3306\" }
      - { range: [3, 3], master: \"[::1]:3306\", replica: db-2.example.com:3306 }
      - { range: [4, 4], master: host_1:3306 }
      - { range: [5, 5], master: a:1, replica: a:1 }
      - { range: [6, 6], master: a:99999 }
      - { range: [7, 7], master: -bad:1 }
";
    let e = errors(y);
    has(&e, 1, "has no port");
    has(&e, 9, "port must be 1-65535");
    has(&e, 10, "not a valid IPv4 address");
    has(&e, 11, "in brackets");
    has(&e, 13, "not a valid host name");
    has(&e, 14, "the same host as the master");
    has(&e, 15, "must be a number 1-65535");
    has(&e, 16, "not a valid host name");
    assert_eq!(e.len(), 8, "{e:#?}");
}

#[test]
fn tables_unknown_names_and_kinds() {
    let y = format!(
        "{BASE}fleets:
  main:
    hosts: [{{ range: [0, 4095], master: a:1 }}]
tables:
  pins: {{ fleet: main, object: pin }}
  boards: {{ fleet: mian, object: board }}
  both: {{ fleet: main, object: pin, key: email }}
  none: {{ fleet: main }}
  nofleet: {{ from: board_id }}
  Pins: {{ fleet: main, object: pin }}
"
    );
    let e = errors(&y);
    has(&e, 10, "table boards: unknown fleet `mian` (fleets: main)");
    has(&e, 10, "table boards: unknown type `board` (types: pin)");
    has(&e, 11, "table both: give exactly one of");
    has(&e, 12, "table none: give exactly one of");
    has(&e, 13, "table nofleet: `fleet` is missing");
    has(&e, 14, "duplicate table `Pins`: same as `pins` on line 9");
    assert_eq!(e.len(), 6, "{e:#?}");
}

#[test]
fn duplicate_tables_types_and_ids() {
    let y = "listen: 127.0.0.1:6033
users: [{ name: app }]
backend: { user: u }
types:
  pin: 1
  board: 2
  pin: 3
  user: 2
fleets:
  main:
    hosts: [{ range: [0, 4095], master: a:1 }]
tables:
  pins: { fleet: main, object: pin }
  pins: { fleet: main, object: board }
";
    let e = errors(y);
    has(&e, 7, "duplicate type `pin` (first defined on line 5)");
    has(&e, 8, "types `board` and `user` have the same id 2");
    has(&e, 14, "duplicate table `pins` (first defined on line 13)");
    assert_eq!(e.len(), 3, "{e:#?}");
}

#[test]
fn missing_users_backend_and_fleets() {
    let e = errors("listen: 127.0.0.1:6033\nusers: []\nbackend: { pool_max_per_host: 0 }\n");
    has(&e, 2, "no client users");
    has(&e, 3, "backend: `user` is missing");
    has(&e, 3, "`pool_max_per_host` must be at least 1");
    has(&e, 0, "no fleets configured");
    let e = errors("users: [{ name: a }, { name: a }]\nbackend: { user: u }\n");
    has(&e, 0, "`listen` is missing");
    has(&e, 1, "duplicate user `a`");
}

#[test]
fn shutdown_drain_timeout_is_bounded() {
    let lines = SPEC_YAML.lines().count();
    let with = |ms: u64| format!("{SPEC_YAML}shutdown: {{ drain_timeout_ms: {ms} }}\n");
    assert_eq!(load(&with(0)).config.shutdown.drain_timeout_ms, 0);
    assert_eq!(
        load(&with(3_600_000)).config.shutdown.drain_timeout_ms,
        3_600_000
    );
    assert_eq!(load(SPEC_YAML).config.shutdown.drain_timeout_ms, 30_000);
    let e = errors(&with(3_600_001));
    has(
        &e,
        lines + 1,
        "`drain_timeout_ms` 3600001 is more than an hour",
    );
    assert_eq!(e.len(), 1, "{e:#?}");
}

#[test]
fn operations_account_needs_a_user_when_present() {
    let with = |section: &str| format!("{SPEC_YAML}{section}\n");
    let e = errors(&with("operations: { password: x }"));
    has(&e, 28, "operations: `user` is missing");
    assert_eq!(e.len(), 1, "{e:#?}");
    let t = load(&with(
        "operations: { user: shardops, password: shardopspw }",
    ));
    let ops = t.config.operations.as_ref().expect("operations section");
    assert_eq!(
        (ops.user.as_str(), ops.password.as_str()),
        ("shardops", "shardopspw")
    );
    assert_eq!(ops, &t.config.operations_account());
    let without = load(SPEC_YAML).config;
    assert_eq!(without.operations, None);
    let fallback = without.operations_account();
    assert_eq!(
        (fallback.user.as_str(), fallback.password.as_str()),
        ("shard", "shardpw"),
        "without the section the control plane uses the backend account"
    );
}

#[test]
fn unknown_key_is_reported_with_its_line() {
    let y = format!(
        "{BASE}fleets:
  main:
    hostz: [{{ range: [0, 4095], master: a:1 }}]
tables:
  pins: {{ fleet: main, object: pin }}
  pins: {{ fleet: main, object: pin }}
"
    );
    let e = errors(&y);
    has(&e, 7, "unknown field `hostz`");
    has(&e, 10, "duplicate table `pins`");
    assert!(!e[0].1.contains(" at line "), "{e:?}");
}

#[test]
fn syntax_error_has_a_line() {
    let e = errors("listen: 127.0.0.1:6033\nusers: [{ name: app }\nbackend: {}\n");
    assert!(e.len() == 1 && e[0].0 >= 2, "{e:?}");
}

#[test]
fn many_errors_at_once_in_line_order() {
    let y = "listen: nowhere
users: [{ name: app }]
backend: { user: u }
types: { pin: 1 }
fleets:
  main:
    shards: 100
    hosts:
      - { range: [0, 60], master: a:1 }
      - { range: [50, 98], master: b:x }
tables:
  pins: { fleet: main, object: pin }
  pins: { fleet: main, object: pinn }
  maps: { fleet: other, from: board_id }
";
    let err = Topology::from_yaml_str(y, "many.yaml").expect_err("invalid");
    let lines: Vec<usize> = err.0.iter().map(|e| e.line).collect();
    assert_eq!(lines, [1, 8, 10, 10, 13, 13, 14], "{err}");
    let text = Topology::describe_errors(&err);
    assert_eq!(text.lines().count(), 7);
    assert!(text.lines().all(|l| l.starts_with("many.yaml:")), "{text}");
    assert!(
        text.contains("many.yaml:8: shard 99 of fleet main has no host"),
        "{text}"
    );
}

#[test]
fn mod_fleet_database_defaults_to_msdb() {
    let y = format!(
        "{BASE}fleets:
  main:
    hosts: [{{ range: [0, 4095], master: a:1 }}]
  lookup:
    shards: 16
    hosts: [{{ range: [0, 15], master: b:1 }}]
tables:
  pins: {{ fleet: main, object: pin }}
  by_email: {{ fleet: lookup, key: email }}
"
    );
    let t = load(&y);
    let lookup = t.fleet_by_name("lookup").expect("fleet");
    assert_eq!(t.fleets[lookup].database_name(3), "msdb00003");
    assert_eq!(t.parse_database("msdb00015"), Some((lookup, 15)));
    assert_eq!(t.parse_database("msdb00016"), None);
    assert_eq!(
        t.fleets[t.fleet_by_name("main").expect("main")].database_name(3),
        "db00003"
    );
}

#[test]
fn colliding_database_formats_rejected() {
    let y = format!(
        "{BASE}fleets:
  main:
    hosts: [{{ range: [0, 4095], master: a:1 }}]
  other:
    shards: 16
    hosts: [{{ range: [0, 15], master: b:1 }}]
"
    );
    let e = errors(&y);
    has(
        &e,
        8,
        "fleets main and other have database names that can be the same",
    );
}

#[test]
fn from_config_and_default() {
    let mut config = Config::default();
    assert!(Topology::from_config(config.clone(), "code").is_err());
    config.listen = "127.0.0.1:0".into();
    config.users.push(config::UserConfig {
        name: "app".into(),
        password: String::new(),
    });
    config.backend.user = "u".into();
    config.fleets.insert(
        "main".into(),
        config::FleetConfig {
            shards: 2,
            hosts: vec![config::HostConfig {
                range: [0, 1],
                master: "localhost:3306".into(),
                replica: None,
            }],
            ..Default::default()
        },
    );
    let t = Topology::from_config(config, "code").expect("valid");
    assert_eq!(t.master_of(0, 1), Some(0));
    assert_eq!(t.parse_database("db00001"), Some((0, 1)));
}

#[test]
fn idle_transactions_are_ended_after_a_minute_unless_configured() {
    assert!(!SPEC_YAML.contains("idle_in_transaction_timeout_ms"));
    let t = load(SPEC_YAML);
    assert_eq!(t.config.limits.idle_in_transaction_timeout_ms, 60_000);
    let off = load(&format!(
        "{SPEC_YAML}\nlimits: {{ idle_in_transaction_timeout_ms: 0 }}\n"
    ));
    assert_eq!(off.config.limits.idle_in_transaction_timeout_ms, 0);
}

#[test]
fn the_process_merge_budget_is_at_least_one_merges() {
    let e = errors(
        "users: []\nbackend: { user: u }\nlimits:\n  max_merge_bytes: 1000\n  max_merge_bytes_total: 999\n",
    );
    has(
        &e,
        5,
        "`max_merge_bytes_total` (999) must be at least `max_merge_bytes` (1000)",
    );
    assert_eq!(
        crate::topology::config::LimitsConfig::default().max_merge_bytes_total,
        1024 * 1024 * 1024
    );
}

/// A fleet's `id_layout`: a time layout builds (its object tables route by
/// the stored `id`), and each problem is reported on the line it is on.
#[test]
fn id_layouts_are_validated_with_their_lines() {
    const FLEET: &str = "  mod:\n    shards: 4096\n    database: \"msdb{:05}\"\n";
    const TIME: &str = "    id_layout:\n      epoch_ms: 1767225600000\n      fields:\n        time_ms: { shift: 23, bits: 40 }\n        shard: { shift: 10, bits: 13 }\n        sequence: { shift: 0, bits: 10 }\n";
    assert!(SPEC_YAML.contains(FLEET));
    let time = SPEC_YAML.replace(FLEET, &format!("{FLEET}{TIME}")).replace(
        "  user_by_email:   { fleet: mod,  key: email }\n",
        "  user_by_email:   { fleet: mod,  key: email }\n  photos: { fleet: mod, object: pin }\n",
    );
    let t = load(&time);
    let fleet = &t.fleets[t.fleet_by_name("mod").unwrap()];
    assert!(fleet.mints_ids());
    assert_eq!(
        fleet.layout.describe(),
        "time_ms 62-23, shard 22-10, sequence 9-0, epoch_ms 1767225600000"
    );
    assert_eq!(
        t.table("photos").unwrap().kind,
        TableKind::Mapping {
            from_column: "id".into()
        }
    );
    assert!(!t.fleets[t.fleet_by_name("main").unwrap()].mints_ids());
    assert!(t.fleets[t.fleet_by_name("main").unwrap()]
        .layout
        .is_pinterest());

    let fleet_line = SPEC_YAML
        .lines()
        .position(|l| l == "  mod:")
        .expect("mod fleet")
        + 1;
    let bad = SPEC_YAML.replace(
        FLEET,
        &format!(
            "{FLEET}{}",
            TIME.replace("shift: 23, bits: 40", "shift: 23, bits: 41")
                .replace(
                    "sequence: { shift: 0, bits: 10 }",
                    "sequence: { shift: 5, bits: 10 }\n        color: { shift: 0, bits: 1 }"
                )
        ),
    );
    let found = errors(&bad);
    let at = |offset: usize| fleet_line + 3 + offset;
    assert!(
        found.contains(&(
            at(6),
            "fleet mod: id_layout field `color` is not one of shard, type, local, time_ms, sequence".to_owned()
        )),
        "{found:?}"
    );
    assert!(
        found.contains(&(
            at(3),
            "fleet mod: id_layout: field time_ms (bits 63-23) does not fit in 63 bits: the highest bit an ID may use is 62".to_owned()
        )),
        "{found:?}"
    );
    assert!(
        found.contains(&(
            at(5),
            "fleet mod: id_layout: fields shard (bits 22-10) and sequence (bits 14-5) overlap"
                .to_owned()
        )),
        "{found:?}"
    );
    let narrow = SPEC_YAML.replace(
        FLEET,
        &format!(
            "{FLEET}{}",
            TIME.replace(
                "shard: { shift: 10, bits: 13 }",
                "shard: { shift: 10, bits: 11 }"
            )
            .replace("shift: 23, bits: 40", "shift: 21, bits: 40")
        ),
    );
    assert_eq!(
        errors(&narrow),
        vec![(
            fleet_line + 3 + 4,
            "fleet mod: id_layout: the shard field's 11 bits hold shards 0-2047, but the fleet has 4096 shards".to_owned()
        )]
    );
}
