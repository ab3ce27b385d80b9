use std::path::PathBuf;
use std::sync::Arc;

use super::watch::changes_something;
use super::*;
use crate::topology::tests::{load, SPEC_YAML};

const MAIN_A: &str =
    "      - { range: [0, 2047],    master: 127.0.0.1:3307, replica: 127.0.0.1:3309 }";

fn temp_config(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shardgate-reload-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("shardgate.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn changes_are_described_one_by_one() {
    let old = load(SPEC_YAML);
    let text = SPEC_YAML
        .replace("listen: 127.0.0.1:6033", "listen: 127.0.0.1:7000")
        .replace(MAIN_A, "      - { range: [0, 2047],    master: 127.0.0.1:3307 }")
        .replace("open: [0, 4095]", "open: [0, 1000]")
        .replace(
            "  user_by_email:   { fleet: mod,  key: email }",
            "  user_by_email:   { fleet: mod,  key: email }\n  likes: { fleet: main, from: user_id }",
        )
        .replace("users: [{ name: app, password: app }]", "users: [{ name: app, password: other }]");
    let changes = describe_changes(&old, &load(&text));
    assert_eq!(
        changes,
        [
            "hosts removed: 127.0.0.1:3309",
            "fleet main: open shards 0-4095 -> 0-1000",
            "fleet main: 0-2047 on 127.0.0.1:3307 now",
            "tables added: likes",
            "client accounts changed (checked at each login)",
            "listen address changed: takes effect after a restart (still the old one)",
        ]
    );
    assert!(describe_changes(&old, &load(SPEC_YAML)).is_empty());
}

#[tokio::test]
async fn a_proxy_without_a_file_has_nothing_to_reload() {
    let control = Control::new(load(SPEC_YAML), None);
    assert!(matches!(
        control.reload(ReloadTrigger::Admin).await,
        Err(ReloadError::NoConfigFile)
    ));
}

#[tokio::test]
async fn reload_swaps_refuses_and_records() {
    let path = temp_config("swap", SPEC_YAML);
    let control = Control::new(load(SPEC_YAML), Some(path.clone()));
    let first = control.engine.topology.load();

    // The version in force: a file event is not even recorded, an operator's
    // reload is.
    let summary = control.reload(ReloadTrigger::FileChange).await.unwrap();
    assert!(!summary.changed);
    assert!(control.config_status().last_reload.is_none());
    control.reload(ReloadTrigger::Admin).await.unwrap();
    let attempt = control.config_status().last_reload.unwrap();
    assert!(attempt.result.unwrap().starts_with("no change"));

    // Overlapping ranges: refused with the line, the old table stays.
    let bad = SPEC_YAML.replace("range: [2048, 4095]", "range: [2000, 4095]");
    std::fs::write(&path, &bad).unwrap();
    let error = control.reload(ReloadTrigger::Signal).await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(
            "shardgate.yaml:15: fleet main: range [2000, 4095] overlaps range [0, 2047] on line 14"
        ),
        "{message}"
    );
    assert!(Arc::ptr_eq(&control.engine.topology.load(), &first));
    let status = control.config_status();
    assert_eq!(status.version, version_of(SPEC_YAML.as_bytes()));
    let attempt = status.last_reload.unwrap();
    assert_eq!(attempt.trigger, ReloadTrigger::Signal);
    assert_eq!(attempt.result.unwrap_err(), message);

    // Back to the version in force: recorded, so the failure is not shown
    // as the last word.
    std::fs::write(&path, SPEC_YAML).unwrap();
    assert!(
        !control
            .reload(ReloadTrigger::FileChange)
            .await
            .unwrap()
            .changed
    );
    assert!(control.config_status().last_reload.unwrap().result.is_ok());

    // A valid change is swapped in.
    let next = SPEC_YAML.replace("open: [0, 4095]", "open: [5, 6]");
    std::fs::write(&path, &next).unwrap();
    let summary = control.reload(ReloadTrigger::FileChange).await.unwrap();
    assert!(summary.changed);
    assert_eq!(summary.version, version_of(next.as_bytes()));
    assert_eq!(summary.description, "fleet main: open shards 0-4095 -> 5-6");
    assert_eq!(control.engine.topology.load().fleets[0].open, Some((5, 6)));
    assert_eq!(control.config_status().version, summary.version);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[tokio::test]
async fn a_rehoming_file_is_refused_unless_forced() {
    let path = temp_config("rehome", SPEC_YAML);
    let control = Control::new(load(SPEC_YAML), Some(path.clone()));
    let first = control.engine.topology.load();
    let text = SPEC_YAML.replace(
        "user_by_email:   { fleet: mod,  key: email }",
        "user_by_email:   { fleet: mod,  key: login }",
    );
    std::fs::write(&path, &text).unwrap();
    for trigger in [ReloadTrigger::Signal, ReloadTrigger::Admin] {
        let error = control.reload(trigger).await.unwrap_err();
        assert!(matches!(&error, ReloadError::Rehome { changes, .. } if changes.len() == 1));
        let message = error.to_string();
        assert!(
            message.contains("table user_by_email: key column email -> login")
                && message.contains("RELOAD CONFIG FORCE"),
            "{message}"
        );
        assert!(Arc::ptr_eq(&control.engine.topology.load(), &first));
        let status = control.config_status();
        assert_eq!(status.version, version_of(SPEC_YAML.as_bytes()));
        assert_eq!(status.last_reload.unwrap().result.unwrap_err(), message);
    }
    let summary = control
        .reload_with(ReloadTrigger::Admin, Force::Rehome)
        .await
        .unwrap();
    assert!(summary.changed);
    assert_eq!(summary.description, "tables changed: user_by_email");
    assert_eq!(control.config_status().version, version_of(text.as_bytes()));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[tokio::test]
async fn pools_of_hosts_that_left_are_retired() {
    let path = temp_config("retire", SPEC_YAML);
    let control = Control::new(load(SPEC_YAML), Some(path.clone()));
    let addrs = |pools: Vec<Arc<crate::backend::HostPool>>| -> Vec<String> {
        pools.iter().map(|p| p.addr.clone()).collect()
    };
    assert_eq!(
        addrs(control.engine.backends.all()),
        [
            "127.0.0.1:3307",
            "127.0.0.1:3308",
            "127.0.0.1:3309",
            "127.0.0.1:3310"
        ],
        "every host of the first topology has its pool"
    );
    let kept = control.engine.backends.pool("127.0.0.1:3307");
    let leaving = control.engine.backends.pool("127.0.0.1:3309");

    let text = SPEC_YAML.replace(
        MAIN_A,
        "      - { range: [0, 2047],    master: 127.0.0.1:3307 }",
    );
    std::fs::write(&path, &text).unwrap();
    let summary = control.reload(ReloadTrigger::Admin).await.unwrap();
    assert!(
        summary
            .description
            .ends_with("pools closed (once their last statement finishes): 127.0.0.1:3309"),
        "{}",
        summary.description
    );
    assert!(leaving.is_retired());
    assert!(!kept.is_retired());
    assert!(Arc::ptr_eq(
        &control.engine.backends.pool("127.0.0.1:3307"),
        &kept
    ));
    assert_eq!(
        addrs(control.engine.backends.all()),
        ["127.0.0.1:3307", "127.0.0.1:3308", "127.0.0.1:3310"]
    );
    assert!(control.engine.backends.host("127.0.0.1:3309").is_none());
    assert_eq!(addrs(control.engine.backends.retired()), ["127.0.0.1:3309"]);
    // A statement still on the old table gets the retired pool while it
    // lives, then one new retired pool that later ones share.
    assert!(Arc::ptr_eq(
        &control.engine.backends.pool("127.0.0.1:3309"),
        &leaving
    ));
    drop(leaving);
    assert!(control.engine.backends.retired().is_empty());
    let late = control.engine.backends.pool("127.0.0.1:3309");
    assert!(late.is_retired());
    assert!(Arc::ptr_eq(
        &control.engine.backends.pool("127.0.0.1:3309"),
        &late
    ));
    assert_eq!(control.engine.backends.all().len(), 3);
    drop(late);

    // New backend settings: every host gets a new pool, but keeps what was
    // learnt about it (health, counters).
    kept.statements
        .record(std::time::Duration::from_millis(1), false);
    kept.host_health.record_failure("refused".into(), 1);
    let text = text.replace("pool_max_per_host: 64", "pool_max_per_host: 8");
    std::fs::write(&path, &text).unwrap();
    let summary = control.reload(ReloadTrigger::Admin).await.unwrap();
    assert!(
        summary.description.contains("backend settings changed"),
        "{}",
        summary.description
    );
    assert!(kept.is_retired());
    let fresh = control.engine.backends.pool("127.0.0.1:3307");
    assert!(!fresh.is_retired());
    assert!(!Arc::ptr_eq(&fresh, &kept));
    assert!(Arc::ptr_eq(fresh.host(), kept.host()));
    assert!(fresh.host_health.is_down(), "a down host stays down");
    assert_eq!(fresh.statements.summary().count, 1);
    assert_eq!(control.engine.backends.all().len(), 3);
    // Retired for new settings, not departed: SHOW HOSTS' retired rows
    // filter these out by role; the list still has them while used.
    assert_eq!(addrs(control.engine.backends.retired()), ["127.0.0.1:3307"]);

    // A host the next reload adds has its pool before the swap.
    let text = text.replace(
        "      - { range: [0, 2047],    master: 127.0.0.1:3307 }",
        "      - { range: [0, 2047],    master: 127.0.0.1:3307, replica: 127.0.0.1:3311 }",
    );
    std::fs::write(&path, &text).unwrap();
    control.reload(ReloadTrigger::Admin).await.unwrap();
    let added = control.engine.backends.pool("127.0.0.1:3311");
    assert!(!added.is_retired());
    assert!(control.engine.backends.host("127.0.0.1:3311").is_some());
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn any_change_in_the_directory_counts_but_reads_do_not() {
    use notify::event::{
        AccessKind, AccessMode, CreateKind, EventKind, ModifyKind, RemoveKind, RenameMode,
    };
    let event = |kind| notify::Event::new(kind).add_path(PathBuf::from("/etc/cfg/..data_tmp"));
    for kind in [
        EventKind::Create(CreateKind::Any),
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
        EventKind::Remove(RemoveKind::Any),
        EventKind::Access(AccessKind::Close(AccessMode::Write)),
        EventKind::Any,
    ] {
        assert!(changes_something(&event(kind)), "{kind:?}");
    }
    for kind in [
        EventKind::Access(AccessKind::Open(AccessMode::Any)),
        EventKind::Access(AccessKind::Close(AccessMode::Read)),
        EventKind::Access(AccessKind::Read),
    ] {
        assert!(!changes_something(&event(kind)), "{kind:?}");
    }
}

#[test]
fn an_engine_from_a_file_has_the_version_of_the_bytes_it_parsed() {
    let path = temp_config("from-file", SPEC_YAML);
    let control = Control::from_file(path.clone()).unwrap();
    assert_eq!(
        control.config_status().version,
        version_of(SPEC_YAML.as_bytes())
    );
    assert_eq!(
        control.engine.topology.load().config,
        load(SPEC_YAML).config
    );
    std::fs::write(&path, "listen: [").unwrap();
    let errors = Control::from_file(path.clone()).err().unwrap();
    assert!(errors.to_string().contains("shardgate.yaml"), "{errors}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    let missing = Control::from_file(path).err().unwrap();
    assert!(
        missing.to_string().contains("cannot read the config file"),
        "{missing}"
    );
}

#[tokio::test]
async fn a_reload_keeps_the_columns_read_and_asks_for_a_new_reading() {
    use crate::topology::columns::TableColumns;
    let path = temp_config("columns", SPEC_YAML);
    let control = Control::new(load(SPEC_YAML), Some(path.clone()));
    let shared = Arc::clone(&control.engine.topology.load().columns);
    let mut read = TableColumns::default();
    read.insert("main", "pins", vec!["local_id".into(), "data".into()]);
    shared.store(read);

    let next = SPEC_YAML.replace("open: [0, 4095]", "open: [5, 6]");
    std::fs::write(&path, &next).unwrap();
    assert!(control.reload(ReloadTrigger::Admin).await.unwrap().changed);
    let topology = control.engine.topology.load();
    assert!(Arc::ptr_eq(&topology.columns, &shared));
    let pins = topology.table("pins").expect("pins");
    assert_eq!(
        topology.object_columns(pins).as_deref(),
        Some(&["local_id".to_owned(), "data".to_owned()][..])
    );
    tokio::time::timeout(
        std::time::Duration::from_secs(1),
        shared.refresh_requested(),
    )
    .await
    .expect("the reload asked for a new reading");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
