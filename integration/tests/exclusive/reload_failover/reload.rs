//! Hot reloads: a client that sees no error through reloads and a promotion,
//! invalid configs refused, retired pools, renumbered fleets, ConfigMap swaps.

use super::*;

#[tokio::test]
async fn a_client_sees_no_error_through_three_reloads_and_a_promotion() {
    let _serial = serial().await;
    let tag = format!("reload-a-{}", std::process::id());
    let yaml = base_yaml();
    let proxy = start_server("reload-a", &yaml);
    let engine = proxy.engine.clone();
    let control = proxy.control.clone();
    let mut conn = app(&proxy).await;

    let a_shards = [10u32, 700, 1500];
    let b_shards = [2500u32, 3900];
    let mut reads = Vec::new();
    for shard in a_shards.iter().chain(&b_shards) {
        let data = format!("{tag}-{shard}");
        reads.push((insert_pin(&mut conn, *shard, &data).await, data));
    }
    let mut placed = Vec::new();
    let load = start_load(&proxy, reads.clone(), tag.clone()).await;
    load.wait_rounds(3).await;

    // 1. The file is replaced like an editor does; the watcher reloads it.
    let yaml1 = yaml.replace(OPEN_LINE, "    open: [3000, 3999]");
    let before = control.config_status();
    write_config(&proxy.config_path, &yaml1);
    wait_for_version(&control, "the watcher's reload", &yaml1).await;
    let status = control.config_status();
    assert!(status.loaded_at > before.loaded_at);
    let attempt = status.last_reload.expect("a reload was recorded");
    assert_eq!(attempt.trigger, ReloadTrigger::FileChange);
    let summary = attempt.result.expect("the reload succeeded");
    assert!(
        summary.contains("fleet main: open shards 0-4095 -> 3000-3999"),
        "{summary}"
    );
    for shard in placed_shards(&mut conn, 6, &format!("{tag}-placed")).await {
        assert!((3000..=3999).contains(&shard), "placed on shard {shard}");
        placed.push(shard);
    }
    load.wait_rounds(3).await;

    // 2. SIGHUP. The file is changed through a hard link in another
    // directory, so the directory watch sees nothing and only the signal
    // can load it.
    let yaml2 = yaml1.replace("    open: [3000, 3999]", "    open: [4000, 4095]");
    let link_dir = proxy.config_path.parent().unwrap().with_extension("link");
    std::fs::create_dir_all(&link_dir).unwrap();
    let link = link_dir.join("shardgate.yaml");
    let _ = std::fs::remove_file(&link);
    std::fs::hard_link(&proxy.config_path, &link).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    std::fs::write(&link, &yaml2).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        control.config_status().version,
        version_of(yaml1.as_bytes()),
        "the watcher must not have seen the write through the link"
    );
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for_version(&control, "the SIGHUP reload", &yaml2).await;
    let attempt = control.config_status().last_reload.unwrap();
    assert_eq!(attempt.trigger, ReloadTrigger::Signal);
    assert!(attempt
        .result
        .unwrap()
        .contains("open shards 3000-3999 -> 4000-4095"));
    for shard in placed_shards(&mut conn, 6, &format!("{tag}-placed")).await {
        assert!((4000..=4095).contains(&shard), "placed on shard {shard}");
        placed.push(shard);
    }
    std::fs::remove_dir_all(&link_dir).unwrap();
    load.wait_rounds(3).await;

    // 3. RELOAD CONFIG on the admin port, right after the file changed
    // (before the watcher's debounce ends).
    let yaml3 = yaml2.replace(
        "  users:           { fleet: main, object: user }\n",
        "  users:           { fleet: main, object: user }\n  reload_probe:    { fleet: main, object: pin }\n",
    );
    assert_ne!(yaml3, yaml2);
    let mut admin = admin(&proxy).await;
    write_config(&proxy.config_path, &yaml3);
    let row: Option<(String, String, String)> = admin.query_first("RELOAD CONFIG").await.unwrap();
    let (result, version, changes) = row.expect("a row");
    assert_eq!(result, "reloaded", "{changes}");
    assert_eq!(version, version_of(yaml3.as_bytes()));
    assert!(changes.contains("tables added: reload_probe"), "{changes}");
    assert!(engine.topology.load().table("reload_probe").is_some());
    let (code, message) = server_error(
        conn.query_drop(format!(
            "SELECT data FROM reload_probe WHERE id = {}",
            (1u64 << 36) | 1
        ))
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 1146, "routed to the shard database now: {message}");
    assert!(message.contains("db00000.reload_probe"), "{message}");
    load.wait_rounds(3).await;

    // 4. PROMOTE REPLICA 127.0.0.1:3307 while the reads go on.
    let writable = Writable(MASTER_A);
    let report = control
        .promote_replica("127.0.0.1:3307", KEEP_REPLICATION)
        .await
        .expect("promotion");
    eprintln!("promotion: {report:#?}");
    assert_eq!(report.master, "127.0.0.1:3307");
    assert_eq!(report.replica, "127.0.0.1:3309");
    assert_eq!(report.ranges, ["main 0-2047"]);
    assert!(!report.replication_stopped);
    assert_noted(&report.notes, |n| {
        n.contains("had applied all of its transactions")
    });
    assert_noted(&report.notes, |n| {
        n.starts_with("shards main 0-2047 were paused for ")
    });
    assert!(proxy.engine.pauses.paused().is_empty(), "the pause ended");
    assert_noted(&report.notes, |n| {
        n.starts_with("the old master 127.0.0.1:3307 was set read_only = 1")
    });
    assert_eq!(
        read_only(MASTER_A).await,
        Some(1),
        "the old master is fenced"
    );
    drop(writable);
    let written = report.config_written.expect("the config file was written");
    assert_eq!(written, std::fs::canonicalize(&proxy.config_path).unwrap());

    let on_disk = std::fs::read_to_string(&proxy.config_path).unwrap();
    assert!(
        on_disk.contains("      - { range: [0, 2047],    master: 127.0.0.1:3309 }\n"),
        "{on_disk}"
    );
    assert!(on_disk
        .contains("# master-a holds the lower half; 3309 is its GTID replica (failover target)."));
    assert!(on_disk.contains("# PROMOTE REPLICA 127.0.0.1:3307: its replica 127.0.0.1:3309"));
    assert!(
        on_disk.contains("reload_probe"),
        "the promotion kept the loaded edits"
    );
    let reloaded = Topology::load(&proxy.config_path).unwrap();
    let fleet = reloaded.fleet_by_name("main").unwrap();
    assert_eq!(
        reloaded.hosts[reloaded.master_of(fleet, 0).unwrap()].addr,
        "127.0.0.1:3309"
    );
    assert_eq!(reloaded.fleets[fleet].ranges[0].replica, None);

    assert_eq!(main_master(&engine, 1500), "127.0.0.1:3309");
    let status = control.config_status();
    assert_eq!(status.version, version_of(on_disk.as_bytes()));
    assert_eq!(
        status.last_reload.as_ref().unwrap().trigger,
        ReloadTrigger::Promotion
    );

    // Reads of shards 0-2047 are now served by 3309 (no writes go there).
    let on_3309 = checkouts_on(&engine, "127.0.0.1:3309").unwrap_or(0);
    for (id, data) in &reads[..a_shards.len()] {
        assert_eq!(
            read_pin(&mut conn, *id).await.unwrap().as_deref(),
            Some(data.as_str())
        );
    }
    assert!(checkouts_on(&engine, "127.0.0.1:3309").unwrap() >= on_3309 + a_shards.len() as u64);
    load.wait_rounds(3).await;
    assert!(
        engine
            .backends
            .all()
            .iter()
            .all(|p| p.addr != "127.0.0.1:3307"),
        "3307 left the topology: its pool is retired"
    );
    // The watcher's echo of our own rename changed nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        control.config_status().last_reload.unwrap().trigger,
        ReloadTrigger::Promotion
    );

    let (rounds, errors) = load.finish().await;
    eprintln!(
        "client loop: {rounds} rounds, last config change: {:?}",
        control.config_status()
    );
    assert!(errors.is_empty(), "the client saw errors: {errors:?}");
    assert!(rounds >= 15, "only {rounds} rounds");
    conn.disconnect().await.ok();
    admin.disconnect().await.ok();

    delete_pins(MASTER_A, &a_shards, &tag).await;
    let mut b_used: Vec<u32> = b_shards.to_vec();
    b_used.push(2600);
    b_used.extend(placed);
    delete_pins(MASTER_B, &b_used, &tag).await;
}

#[tokio::test]
async fn an_invalid_config_is_refused_and_the_old_one_keeps_routing() {
    let _serial = serial().await;
    let tag = format!("reload-b-{}", std::process::id());
    let yaml = base_yaml();
    let proxy = start_server("reload-b", &yaml);
    let engine = proxy.engine.clone();
    let control = proxy.control.clone();
    let mut conn = app(&proxy).await;
    let id = insert_pin(&mut conn, 3001, &tag).await;
    let version = control.config_status().version;

    // Overlapping ranges, picked up by the watcher.
    let overlapping = yaml.replace(
        MAIN_B_LINE,
        "      - { range: [2000, 4095], master: 127.0.0.1:3308 }\n",
    );
    let bad_line = overlapping
        .lines()
        .position(|l| l.contains("range: [2000, 4095]"))
        .unwrap()
        + 1;
    let good_line = overlapping
        .lines()
        .position(|l| l.contains("range: [0, 2047]"))
        .unwrap()
        + 1;
    write_config(&proxy.config_path, &overlapping);
    let reason = refused_file_change(&control, "the refused reload").await;
    let expected = format!(
        "shardgate.yaml:{bad_line}: fleet main: range [2000, 4095] overlaps range [0, 2047] on line {good_line}"
    );
    assert!(reason.contains(&expected), "{reason}\nexpected: {expected}");
    assert!(
        reason.contains(&format!("version {version}) keeps serving")),
        "{reason}"
    );
    assert_eq!(control.config_status().version, version);
    assert_eq!(engine.topology.load().fleets[0].ranges[1].first, 2048);
    assert_eq!(
        read_pin(&mut conn, id).await.unwrap().as_deref(),
        Some(tag.as_str())
    );

    // Broken YAML, through RELOAD CONFIG on the admin port.
    let broken = yaml.replace(
        "types: { pin: 1, board: 2, user: 3, photo: 4 }",
        "types: { pin: 1, board: 2, user: 3, photo: 4",
    );
    std::fs::write(&proxy.config_path, &broken).unwrap();
    match control.reload(ReloadTrigger::Admin).await {
        Err(ReloadError::Invalid {
            errors,
            version: in_force,
        }) => {
            assert_eq!(in_force, version);
            assert!(errors.0.iter().all(|e| e.line > 0), "{errors}");
        }
        other => panic!("expected the broken file to be refused, got {other:?}"),
    }
    let mut admin = admin(&proxy).await;
    let (code, message) = server_error(admin.query_drop("RELOAD CONFIG").await.unwrap_err());
    assert!(message.contains("shardgate.yaml:"), "{code}: {message}");
    assert_eq!(
        read_pin(&mut conn, id).await.unwrap().as_deref(),
        Some(tag.as_str())
    );
    assert_eq!(control.config_status().version, version);

    // A valid file is accepted again.
    let fixed = yaml.replace(OPEN_LINE, "    open: [3001, 3001]");
    write_config(&proxy.config_path, &fixed);
    wait_for_version(&control, "the accepted reload", &fixed).await;
    assert!(control.config_status().last_reload.unwrap().result.is_ok());
    assert_eq!(placed_shards(&mut conn, 2, &tag).await, [3001, 3001]);
    assert_eq!(
        read_pin(&mut conn, id).await.unwrap().as_deref(),
        Some(tag.as_str())
    );

    conn.disconnect().await.ok();
    admin.disconnect().await.ok();
    delete_pins(MASTER_B, &[3001], &tag).await;
}

#[tokio::test]
async fn a_host_that_leaves_has_its_pool_retired_after_its_last_statement() {
    let _serial = serial().await;
    let tag = format!("reload-c-{}", std::process::id());
    // A row on shard 10, written on 3307 (it replicates to 3309).
    let mut a = direct(MASTER_A).await;
    a.query_drop(format!("INSERT INTO db00010.pins (data) VALUES ('{tag}')"))
        .await
        .unwrap();
    let local: u64 = a.last_insert_id().unwrap();
    let id = (10u64 << 46) | (1 << 36) | local;
    wait_for_pin_on(3309, 10, local, &tag).await;

    // 3309 serves shards 0-2047 (reads only), then a reload drops it.
    let yaml = base_yaml();
    let on_3309 = yaml.replace(
        MAIN_A_LINE,
        "      - { range: [0, 2047], master: 127.0.0.1:3309 }\n",
    );
    let proxy = start_server("reload-c", &on_3309);
    let engine = proxy.engine.clone();
    let control = proxy.control.clone();
    let mut conn = app(&proxy).await;
    assert_eq!(
        read_pin(&mut conn, id).await.unwrap().as_deref(),
        Some(tag.as_str())
    );
    let pool = engine
        .backends
        .all()
        .into_iter()
        .find(|p| p.addr == "127.0.0.1:3309")
        .expect("a pool for 3309");
    assert_eq!(pool.idle_count(), 1);
    let weak = Arc::downgrade(&pool);
    drop(pool);

    let mut slow = app(&proxy).await;
    let long_read = tokio::spawn(async move {
        let row: Option<(String, i64)> = slow
            .query_first(format!("SELECT data, SLEEP(1.5) FROM pins WHERE id = {id}"))
            .await
            .expect("the running statement finishes on the old table");
        slow.disconnect().await.ok();
        row
    });
    wait_until("the long read to start", Duration::from_secs(5), || {
        weak.upgrade().is_some_and(|p| p.in_use() == 1)
    })
    .await;

    let without_3309 = yaml.replace(
        MAIN_A_LINE,
        "      - { range: [0, 2047], master: 127.0.0.1:3307 }\n",
    );
    std::fs::write(&proxy.config_path, &without_3309).unwrap();
    let summary = control.reload(ReloadTrigger::Admin).await.expect("reload");
    assert!(summary.changed);
    assert!(
        summary.description.contains("hosts added: 127.0.0.1:3307"),
        "{}",
        summary.description
    );
    assert!(
        summary
            .description
            .contains("hosts removed: 127.0.0.1:3309"),
        "{}",
        summary.description
    );
    assert!(
        summary
            .description
            .contains("pools closed (once their last statement finishes): 127.0.0.1:3309"),
        "{}",
        summary.description
    );
    assert!(engine
        .backends
        .all()
        .iter()
        .all(|p| p.addr != "127.0.0.1:3309"));
    let retired = weak.upgrade().expect("still in use by the long read");
    assert!(retired.is_retired());
    let mut admin = admin(&proxy).await;
    let hosts: Vec<mysql_async::Row> = admin.query("SHOW HOSTS").await.unwrap();
    let row = hosts
        .iter()
        .find(|row| row.get::<String, _>("host").as_deref() == Some("127.0.0.1:3309"))
        .expect("SHOW HOSTS lists the host that left while its pool is in use");
    assert_eq!(row.get::<String, _>("role").as_deref(), Some("retired"));
    assert_eq!(row.get::<u64, _>("pool_in_use"), Some(1));
    admin.disconnect().await.ok();
    assert_eq!(
        retired.idle_count(),
        0,
        "idle connections are closed at once"
    );
    assert_eq!(retired.in_use(), 1);
    drop(retired);

    let row = long_read.await.unwrap().expect("the row");
    assert_eq!(row, (tag.clone(), 0));
    wait_until(
        "the retired pool to be freed",
        Duration::from_secs(5),
        || weak.upgrade().is_none(),
    )
    .await;

    // New statements go to 3307 now.
    let before = checkouts_on(&engine, "127.0.0.1:3307").unwrap_or(0);
    assert_eq!(
        read_pin(&mut conn, id).await.unwrap().as_deref(),
        Some(tag.as_str())
    );
    assert_eq!(checkouts_on(&engine, "127.0.0.1:3307"), Some(before + 1));

    conn.disconnect().await.ok();
    a.query_drop(format!("DELETE FROM db00010.pins WHERE data = '{tag}'"))
        .await
        .unwrap();
    a.disconnect().await.ok();
}

/// A session's `USE` names a database, not a fleet number: a reload that
/// puts a new fleet before `main` (renumbering the fleets) leaves the
/// session on the same database.
#[tokio::test]
async fn a_use_selection_survives_a_reload_that_renumbers_the_fleets() {
    let _serial = serial().await;
    let tag = format!("reload-use-{}", std::process::id());
    let yaml = base_yaml();
    let proxy = start_server("reload-use", &yaml);
    let mut conn = app(&proxy).await;
    conn.query_drop("USE db00077").await.unwrap();
    conn.query_drop(format!("INSERT INTO pins (data) VALUES ('{tag}')"))
        .await
        .unwrap();
    let local = decode(conn.last_insert_id().unwrap()).local_id;

    let renumbered = yaml.replacen(
        "fleets:\n",
        "fleets:\n  extra:\n    shards: 16\n    database: \"xdb{:05}\"\n    hosts:\n      - { range: [0, 15], master: 127.0.0.1:3310 }\n",
        1,
    );
    assert_ne!(renumbered, yaml, "the config has a `fleets:` line");
    write_config(&proxy.config_path, &renumbered);
    proxy
        .control
        .reload(ReloadTrigger::Admin)
        .await
        .expect("reload");
    let topology = proxy.engine.topology.load();
    assert_eq!(
        topology.fleet_by_name("extra"),
        Some(0),
        "main is renumbered"
    );

    let database: Option<String> = conn.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(database.as_deref(), Some("db00077"));
    let data: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE local_id = {local}"))
        .await
        .expect("the session still reads db00077");
    assert_eq!(data.as_deref(), Some(tag.as_str()));
    delete_pins(MASTER_A, &[77], &tag).await;
}

/// A Kubernetes ConfigMap mount: the config path is a symlink through a
/// `..data` symlink to a timestamped directory, and an update swaps
/// `..data` (no event names the file). Both that swap and an edit in the
/// target directory are picked up by the watcher.
#[tokio::test]
async fn a_configmap_style_symlink_swap_is_reloaded() {
    let _serial = serial().await;
    let yaml = base_yaml();
    let proxy = start_server("reload-configmap", &yaml);
    let engine = proxy.engine.clone();
    let control = proxy.control.clone();
    let dir = proxy.config_path.parent().unwrap().to_owned();
    let name = proxy.config_path.file_name().unwrap().to_owned();
    let symlink = |target: &str, link: &Path| std::os::unix::fs::symlink(target, link).unwrap();

    // Turn the file into a ConfigMap layout with the same text.
    let first = dir.join("..2024_01");
    std::fs::create_dir(&first).unwrap();
    std::fs::write(first.join(&name), &yaml).unwrap();
    symlink("..2024_01", &dir.join("..data"));
    let temp_link = dir.join(".link.tmp");
    symlink("..data/shardgate.yaml", &temp_link);
    std::fs::rename(&temp_link, &proxy.config_path).unwrap();
    let resolved = std::fs::canonicalize(&proxy.config_path).unwrap();
    assert_eq!(
        resolved.parent(),
        Some(std::fs::canonicalize(&first).unwrap().as_path())
    );

    // The update: a new directory, then `..data` renamed over.
    let yaml1 = yaml.replace(OPEN_LINE, "    open: [3000, 3099]");
    let second = dir.join("..2024_02");
    std::fs::create_dir(&second).unwrap();
    std::fs::write(second.join(&name), &yaml1).unwrap();
    symlink("..2024_02", &dir.join("..data_tmp"));
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(&first).unwrap();
    wait_for_version(&control, "the reload of the swapped ConfigMap", &yaml1).await;
    assert_eq!(engine.topology.load().fleets[0].open, Some((3000, 3099)));

    // An edit inside the target directory (the watcher follows the link).
    let yaml2 = yaml.replace(OPEN_LINE, "    open: [3100, 3199]");
    write_config(&second.join(&name), &yaml2);
    wait_for_version(&control, "the reload of the edited target", &yaml2).await;
    assert_eq!(engine.topology.load().fleets[0].open, Some((3100, 3199)));
    let attempt = control.config_status().last_reload.unwrap();
    assert_eq!(attempt.trigger, ReloadTrigger::FileChange);
}

/// A file that would send existing data to other shards (here the mod
/// fleet's shard count doubled, so `md5(email) % shards` changes) is refused
/// by the watcher, SIGHUP and `RELOAD CONFIG` alike, and the old table keeps
/// routing (checked on the server); `RELOAD CONFIG FORCE` loads it.
#[tokio::test]
async fn a_reload_that_rehomes_data_is_refused_unless_forced() {
    use shardgate::id::mod_shard;
    const MOD_FLEET: &str = "    shards: 4096\n    database: \"msdb{:05}\"\n    hosts:\n      - { range: [0, 4095], master: 127.0.0.1:3310 }\n";
    let _serial = serial().await;
    let yaml = base_yaml();
    assert!(yaml.contains(MOD_FLEET), "config/shardgate.yaml changed");
    let rehoming = yaml.replace(
        MOD_FLEET,
        &MOD_FLEET
            .replace("shards: 4096", "shards: 8192")
            .replace("[0, 4095]", "[0, 8191]"),
    );
    let proxy = start_server("reload-rehome", &yaml);
    let control = proxy.control.clone();
    let version = control.config_status().version;
    let pid = std::process::id();
    let email = (0..)
        .map(|i| format!("rehome-{pid}-{i}@example.com"))
        .find(|e| mod_shard(e.as_bytes(), 4096) != mod_shard(e.as_bytes(), 8192))
        .unwrap();
    let old_db = format!("msdb{:05}", mod_shard(email.as_bytes(), 4096));
    let new_db = format!("msdb{:05}", mod_shard(email.as_bytes(), 8192));
    let change = "fleet mod: shard count 4096 -> 8192";

    // The watcher refuses it.
    write_config(&proxy.config_path, &rehoming);
    let reason = refused_file_change(&control, "the refused file change").await;
    assert!(
        reason.contains(change) && reason.contains("RELOAD CONFIG FORCE"),
        "{reason}"
    );

    // So does SIGHUP.
    let status = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_until("the refused SIGHUP reload", Duration::from_secs(5), || {
        control
            .config_status()
            .last_reload
            .is_some_and(|a| a.trigger == ReloadTrigger::Signal && a.result.is_err())
    })
    .await;

    // And RELOAD CONFIG, with error 1105 naming the change.
    let mut admin = admin(&proxy).await;
    let (code, message) = server_error(admin.query_drop("RELOAD CONFIG").await.unwrap_err());
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains(change), "{message}");
    assert_eq!(control.config_status().version, version);

    // The old table still routes: the row lands in the 4096-shard database.
    let mut conn = app(&proxy).await;
    conn.query_drop(format!(
        "INSERT INTO user_by_email (email, user_id) VALUES ('{email}', 7)"
    ))
    .await
    .expect("insert through the proxy");
    conn.disconnect().await.ok();
    let mut server = operations(MOD_HOST).await;
    let count =
        |db: &str| format!("SELECT COUNT(*) FROM {db}.user_by_email WHERE email = '{email}'");
    let landed: Option<u64> = server.query_first(count(&old_db)).await.unwrap();
    assert_eq!(landed, Some(1), "the row should be in {old_db} on 3310");
    server
        .query_drop(format!(
            "DELETE FROM {old_db}.user_by_email WHERE email = '{email}'"
        ))
        .await
        .unwrap();
    server.disconnect().await.ok();

    // FORCE loads it: the key now routes to the 8192-shard database.
    let answer: Vec<(String, String, String)> = admin
        .query("RELOAD CONFIG FORCE")
        .await
        .expect("forced reload");
    assert_eq!(answer[0].0, "reloaded", "{answer:?}");
    assert_eq!(
        control.config_status().version,
        version_of(rehoming.as_bytes())
    );
    let statement = format!("SELECT user_id FROM user_by_email WHERE email = '{email}'");
    assert_eq!(
        explain_route_database(&mut admin, &statement).await,
        Some(new_db.clone())
    );
    admin.disconnect().await.ok();
}

/// Waits until the file watcher's reload is refused; its reason.
async fn refused_file_change(control: &Control, what: &str) -> String {
    wait_until(what, Duration::from_secs(5), || {
        control
            .config_status()
            .last_reload
            .is_some_and(|a| a.result.is_err())
    })
    .await;
    let attempt = control.config_status().last_reload.expect("a reload");
    assert_eq!(attempt.trigger, ReloadTrigger::FileChange);
    attempt.result.expect_err("refused")
}
