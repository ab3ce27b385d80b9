//! Verification against catalogs built in memory.

use super::compare::column_difference;
use super::*;
use crate::topology::HostId;

const SCHEMA: &str = include_str!("../../../config/schema.sql");

fn topology() -> Topology {
    Topology::from_yaml_str(include_str!("../../../config/shardgate.yaml"), "test").unwrap()
}

fn host(t: &Topology, addr: &str) -> HostId {
    t.hosts.iter().position(|h| h.addr == addr).unwrap()
}

/// What a healthy fleet holds: every master its shards with the
/// schema's tables, the replica a copy of its master.
fn clean(t: &Topology, schema: &ExpectedSchema) -> BTreeMap<HostId, HostCatalog> {
    let mut hosts: BTreeMap<HostId, HostCatalog> = (0..t.hosts.len())
        .map(|h| {
            (
                h,
                HostCatalog {
                    databases: Vec::new(),
                    tables: Some(Tables::new()),
                    collations: BTreeMap::new(),
                },
            )
        })
        .collect();
    for (fid, fleet) in t.fleets.iter().enumerate() {
        for range in &fleet.ranges {
            for shard in range.first..=range.last {
                let db = fleet.database_name(shard);
                let tables: BTreeMap<String, Vec<String>> = schema[&fid]
                    .tables
                    .iter()
                    .map(|t| (t.name.clone(), t.columns.clone()))
                    .collect();
                for h in std::iter::once(range.master).chain(range.replica) {
                    let c = hosts.get_mut(&h).unwrap();
                    c.databases.push(db.clone());
                    c.tables
                        .as_mut()
                        .unwrap()
                        .insert(db.clone(), tables.clone());
                }
            }
        }
    }
    hosts
}

fn run(
    t: &Topology,
    schema: Option<&ExpectedSchema>,
    hosts: BTreeMap<HostId, HostCatalog>,
) -> Vec<Problem> {
    let found: Vec<_> = hosts.into_iter().map(|(h, c)| (h, Ok(c))).collect();
    let mut p = compare(t, schema, &found);
    p.sort();
    p
}

fn rows(problems: &[Problem]) -> Vec<(&str, &str, &str)> {
    problems
        .iter()
        .map(|p| (p.host.as_str(), p.database.as_str(), p.kind))
        .collect()
}

#[test]
fn schema_tables_go_to_their_fleet() {
    let t = topology();
    let (schema, missing) = expected_schema(&t, SCHEMA).unwrap();
    assert!(missing.is_empty());
    let main = t.fleet_by_name("main").unwrap();
    let modf = t.fleet_by_name("mod").unwrap();
    let names = |f| {
        schema[&f]
            .tables
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(main),
        [
            "pins",
            "boards",
            "users",
            "board_has_pins",
            "user_likes_pins"
        ]
    );
    assert_eq!(names(modf), ["user_by_email"]);
    assert_eq!(schema[&modf].tables[0].columns, ["email", "user_id"]);
}

#[test]
fn clean_fleet_has_no_problem() {
    let t = topology();
    let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
    assert_eq!(run(&t, Some(&schema), clean(&t, &schema)), []);
    assert_eq!(run(&t, None, clean(&t, &schema)), []);
}

#[test]
fn orphan_on_a_master_shows_on_its_replica_too() {
    let t = topology();
    let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
    let mut hosts = clean(&t, &schema);
    for a in ["127.0.0.1:3307", "127.0.0.1:3309"] {
        hosts
            .get_mut(&host(&t, a))
            .unwrap()
            .databases
            .push("db03000".into());
    }
    let p = run(&t, Some(&schema), hosts);
    assert_eq!(
        rows(&p),
        [
            ("127.0.0.1:3307", "db03000", kind::ORPHAN_DATABASE),
            ("127.0.0.1:3309", "db03000", kind::ORPHAN_DATABASE)
        ]
    );
    assert!(
        p[0].detail.contains("belongs on 127.0.0.1:3308"),
        "{}",
        p[0].detail
    );
    assert!(!p[0].detail.contains("replicated"), "{}", p[0].detail);
    assert!(
        p[1].detail.contains("a replicated copy: 127.0.0.1:3307"),
        "{}",
        p[1].detail
    );
}

#[test]
fn missing_database_and_misspelt_name() {
    let t = topology();
    let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
    let mut hosts = clean(&t, &schema);
    let b = hosts.get_mut(&host(&t, "127.0.0.1:3308")).unwrap();
    b.databases.retain(|d| d != "db04094");
    b.databases.push("DB04093".into());
    let p = run(&t, Some(&schema), hosts);
    assert_eq!(
        rows(&p),
        [
            ("127.0.0.1:3308", "DB04093", kind::ORPHAN_DATABASE),
            ("127.0.0.1:3308", "db04094", kind::MISSING_DATABASE)
        ]
    );
    assert!(
        p[0].detail.contains("the proxy uses `db04093`"),
        "{}",
        p[0].detail
    );
    assert!(
        p[1].detail
            .contains("shard 4094 of fleet main (range 2048-4095)"),
        "{}",
        p[1].detail
    );
}

#[test]
fn table_problems_are_exact() {
    let t = topology();
    let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
    let mut hosts = clean(&t, &schema);
    let b = hosts.get_mut(&host(&t, "127.0.0.1:3308")).unwrap();
    let tables = b.tables.as_mut().unwrap();
    tables.get_mut("db04091").unwrap().remove("boards");
    tables
        .get_mut("db04092")
        .unwrap()
        .insert("extra".into(), vec!["x".into()]);
    tables
        .get_mut("db04093")
        .unwrap()
        .get_mut("users")
        .unwrap()
        .push("added".into());
    // Case differences are not problems (lower_case_table_names).
    let pins = tables.get_mut("db04090").unwrap().remove("pins").unwrap();
    tables.get_mut("db04090").unwrap().insert(
        "PINS".into(),
        pins.iter().map(|c| c.to_uppercase()).collect(),
    );
    let p = run(&t, Some(&schema), hosts);
    assert_eq!(
        rows(&p),
        [
            ("127.0.0.1:3308", "db04091", kind::MISSING_TABLE),
            ("127.0.0.1:3308", "db04092", kind::UNEXPECTED_TABLE),
            ("127.0.0.1:3308", "db04093", kind::COLUMNS_DIFFER)
        ]
    );
    assert_eq!(p[0].detail, "`boards` (schema line 18) is absent");
    assert_eq!(p[1].detail, "`extra` is not in the schema");
    assert_eq!(
        p[2].detail,
        "`users`: not in the schema: `added` (position 4); \
         expected (local_id, data, ts), found (local_id, data, ts, added)"
    );
    // Without a schema only databases are compared.
    let mut hosts = clean(&t, &schema);
    for c in hosts.values_mut() {
        c.tables = None;
    }
    assert_eq!(run(&t, None, hosts), []);
}

#[test]
fn tables_the_schema_leaves_out_are_not_compared_on_their_fleet() {
    let t = topology();
    let (full, _) = expected_schema(&t, SCHEMA).unwrap();
    let partial_sql = &SCHEMA[..SCHEMA.find("CREATE TABLE IF NOT EXISTS users").unwrap()];
    let (partial, missing) = expected_schema(&t, partial_sql).unwrap();
    assert_eq!(
        missing,
        [
            "board_has_pins",
            "photos",
            "user_by_email",
            "user_likes_pins",
            "users"
        ]
    );
    let mut hosts = clean(&t, &full);
    // A table of the mod fleet in a main shard database is still unexpected.
    hosts
        .get_mut(&host(&t, "127.0.0.1:3308"))
        .unwrap()
        .tables
        .as_mut()
        .unwrap()
        .get_mut("db04090")
        .unwrap()
        .insert("user_by_email".into(), vec!["email".into()]);
    let p = run(&t, Some(&partial), hosts);
    assert_eq!(
        rows(&p),
        [("127.0.0.1:3308", "db04090", kind::UNEXPECTED_TABLE)]
    );
    assert_eq!(
        p[0].detail,
        "`user_by_email` is a table of fleet mod, not of fleet main"
    );
}

#[test]
fn column_differences_say_which() {
    let v = |s: &[&str]| s.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    let e = v(&["a", "b", "c"]);
    assert_eq!(column_difference(&e, &v(&["A", "b", "c"])), None);
    assert_eq!(
        column_difference(&e, &v(&["a", "c"])).unwrap(),
        "missing `b`; expected (a, b, c), found (a, c)"
    );
    assert_eq!(
        column_difference(&e, &v(&["a", "c", "b"])).unwrap(),
        "columns in another order; expected (a, b, c), found (a, c, b)"
    );
    assert_eq!(
        column_difference(&e, &v(&["z", "c", "a"])).unwrap(),
        "missing `b`; not in the schema: `z` (position 1); columns in another order; \
         expected (a, b, c), found (z, c, a)"
    );
}

#[test]
fn unreachable_host_is_a_row_and_its_shards_are_not_missing() {
    let t = topology();
    let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
    let b = host(&t, "127.0.0.1:3308");
    let found: Vec<_> = clean(&t, &schema)
        .into_iter()
        .map(|(h, c)| {
            if h == b {
                (
                    h,
                    Err("cannot connect to 127.0.0.1:3308: refused".to_string()),
                )
            } else {
                (h, Ok(c))
            }
        })
        .collect();
    let p = compare(&t, Some(&schema), &found);
    assert_eq!(
        p,
        [Problem {
            host: "127.0.0.1:3308".into(),
            database: String::new(),
            kind: kind::UNREACHABLE_HOST,
            detail: "cannot connect to 127.0.0.1:3308: refused".into(),
        }]
    );
    assert_eq!(
        p[0].to_string(),
        "127.0.0.1:3308: unreachable host: cannot connect to 127.0.0.1:3308: refused"
    );
}

#[test]
fn promoted_replica_is_checked_as_the_master() {
    let yaml = include_str!("../../../config/shardgate.yaml").replace(
        "master: 127.0.0.1:3307, replica: 127.0.0.1:3309",
        "master: 127.0.0.1:3309",
    );
    let t = Topology::from_yaml_str(&yaml, "promoted").unwrap();
    let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
    assert!(t.hosts.iter().all(|h| h.addr != "127.0.0.1:3307"));
    assert_eq!(run(&t, Some(&schema), clean(&t, &schema)), []);
}

#[test]
fn like_patterns_escape_the_prefix() {
    use crate::topology::tests::SPEC_YAML;
    let t = Topology::from_yaml_str(SPEC_YAML, "spec").unwrap();
    assert_eq!(like_patterns(&t), ["db%", "msdb%"]);
    let yaml = SPEC_YAML.replace("msdb{:05}", "m_s{:05}");
    let t = Topology::from_yaml_str(&yaml, "odd").unwrap();
    assert_eq!(like_patterns(&t), ["db%", "m\\_s%"]);
}

#[test]
fn report_display_counts_by_kind() {
    let mut r = VerifyReport {
        hosts_checked: 4,
        expected: 8192,
        schema_compared: true,
        elapsed: Duration::from_millis(420),
        ..VerifyReport::default()
    };
    assert_eq!(
        r.to_string(),
        "4 hosts checked, 8192 shard databases expected, tables compared with the schema: ok in 0.42s"
    );
    r.problems = vec![
        Problem {
            host: "h".into(),
            database: "db1".into(),
            kind: kind::ORPHAN_DATABASE,
            detail: "x".into(),
        },
        Problem {
            host: "h".into(),
            database: "db2".into(),
            kind: kind::ORPHAN_DATABASE,
            detail: "x".into(),
        },
    ];
    assert!(!r.is_ok());
    assert_eq!(r.count(kind::ORPHAN_DATABASE), 2);
    assert!(
        r.to_string().contains("2 problems (2 orphan database) in"),
        "{r}"
    );
}

#[test]
fn mod_keys_whose_collation_equates_different_bytes_are_warned_about() {
    let t = topology();
    let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
    let modf = t.fleet_by_name("mod").unwrap();
    let mod_master = t.fleets[modf].ranges[0].master;
    let key = ("user_by_email".to_owned(), "email".to_owned());
    let warnings_with = |collation: &str| {
        let mut hosts = clean(&t, &schema);
        for (h, catalog) in hosts.iter_mut() {
            // The same column name on a host of another fleet is no key.
            let name = if *h == mod_master {
                collation
            } else {
                "latin1_swedish_ci"
            };
            catalog
                .collations
                .insert(key.clone(), [name.to_owned()].into());
        }
        let found: Vec<_> = hosts.into_iter().map(|(h, c)| (h, Ok(c))).collect();
        mod_key_warnings(&t, &found)
    };
    let warned = warnings_with("utf8mb4_general_ci");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("user_by_email.email")
            && warned[0].contains("utf8mb4_general_ci")
            && warned[0].contains(&t.hosts[mod_master].addr),
        "{warned:?}"
    );
    // PAD SPACE: 'a' and 'a ' are one key to the server.
    assert_eq!(warnings_with("utf8mb4_bin").len(), 1);
    assert!(warnings_with("utf8mb4_nopad_bin").is_empty());
    assert!(warnings_with("binary").is_empty());
}
