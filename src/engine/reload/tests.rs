use std::path::PathBuf;
use std::sync::Arc;

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

#[test]
fn a_proxy_without_a_file_has_nothing_to_reload() {
    let engine = Engine::new(load(SPEC_YAML), None);
    assert!(matches!(
        engine.reload(ReloadTrigger::Admin),
        Err(ReloadError::NoConfigFile)
    ));
}

#[test]
fn reload_swaps_refuses_and_records() {
    let path = temp_config("swap", SPEC_YAML);
    let engine = Engine::new(load(SPEC_YAML), Some(path.clone()));
    let first = engine.topology.load();

    // The version in force: a file event is not even recorded, an operator's
    // reload is.
    let summary = engine.reload(ReloadTrigger::FileChange).unwrap();
    assert!(!summary.changed);
    assert!(engine.config_status().last_reload.is_none());
    engine.reload(ReloadTrigger::Admin).unwrap();
    let attempt = engine.config_status().last_reload.unwrap();
    assert!(attempt.result.unwrap().starts_with("no change"));

    // Overlapping ranges: refused with the line, the old table stays.
    let bad = SPEC_YAML.replace("range: [2048, 4095]", "range: [2000, 4095]");
    std::fs::write(&path, &bad).unwrap();
    let error = engine.reload(ReloadTrigger::Signal).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(
            "shardgate.yaml:15: fleet main: range [2000, 4095] overlaps range [0, 2047] on line 14"
        ),
        "{message}"
    );
    assert!(Arc::ptr_eq(&engine.topology.load(), &first));
    let status = engine.config_status();
    assert_eq!(status.version, version_of(SPEC_YAML.as_bytes()));
    let attempt = status.last_reload.unwrap();
    assert_eq!(attempt.trigger, ReloadTrigger::Signal);
    assert_eq!(attempt.result.unwrap_err(), message);

    // Back to the version in force: recorded, so the failure is not shown
    // as the last word.
    std::fs::write(&path, SPEC_YAML).unwrap();
    assert!(!engine.reload(ReloadTrigger::FileChange).unwrap().changed);
    assert!(engine.config_status().last_reload.unwrap().result.is_ok());

    // A valid change is swapped in.
    let next = SPEC_YAML.replace("open: [0, 4095]", "open: [5, 6]");
    std::fs::write(&path, &next).unwrap();
    let summary = engine.reload(ReloadTrigger::FileChange).unwrap();
    assert!(summary.changed);
    assert_eq!(summary.version, version_of(next.as_bytes()));
    assert_eq!(summary.description, "fleet main: open shards 0-4095 -> 5-6");
    assert_eq!(engine.topology.load().fleets[0].open, Some((5, 6)));
    assert_eq!(engine.config_status().version, summary.version);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn pools_of_hosts_that_left_are_retired() {
    let path = temp_config("retire", SPEC_YAML);
    let engine = Engine::new(load(SPEC_YAML), Some(path.clone()));
    let kept = engine.backends.pool("127.0.0.1:3307");
    let leaving = engine.backends.pool("127.0.0.1:3309");

    let text = SPEC_YAML.replace(
        MAIN_A,
        "      - { range: [0, 2047],    master: 127.0.0.1:3307 }",
    );
    std::fs::write(&path, &text).unwrap();
    let summary = engine.reload(ReloadTrigger::Admin).unwrap();
    assert!(
        summary
            .description
            .ends_with("pools closed (once their last statement finishes): 127.0.0.1:3309"),
        "{}",
        summary.description
    );
    assert!(leaving.is_retired());
    assert!(!kept.is_retired());
    assert!(Arc::ptr_eq(&engine.backends.pool("127.0.0.1:3307"), &kept));
    let addrs: Vec<String> = engine
        .backends
        .all()
        .iter()
        .map(|p| p.addr.clone())
        .collect();
    assert_eq!(addrs, ["127.0.0.1:3307"]);
    // A statement still on the old table gets a one-off pool, not kept.
    let one_off = engine.backends.pool("127.0.0.1:3309");
    assert!(one_off.is_retired());
    assert_eq!(engine.backends.all().len(), 1);

    // New backend settings: every pool is made again with them.
    let text = text.replace("pool_max_per_host: 64", "pool_max_per_host: 8");
    std::fs::write(&path, &text).unwrap();
    let summary = engine.reload(ReloadTrigger::Admin).unwrap();
    assert!(
        summary.description.contains("backend settings changed"),
        "{}",
        summary.description
    );
    assert!(kept.is_retired());
    assert!(engine.backends.all().is_empty());
    assert!(!engine.backends.pool("127.0.0.1:3307").is_retired());
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
