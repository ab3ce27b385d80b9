//! The `shardgate serve` binary under a low open-file `ulimit`: the limit is
//! raised, or the client connection cap is lowered to fit it, or, when it
//! leaves room for no client, the start is refused.

use super::*;
use crate::common::file_serve::{strip_ansi, FileServe};

#[tokio::test]
async fn the_open_file_limit_is_raised_or_lowers_the_client_cap() {
    let _turn = serial().await;
    let yaml = format!(
        "{}\nlimits: {{ handshake_timeout_ms: 2000 }}\n",
        test_config_yaml().replace("pool_max_per_host: 64", "pool_max_per_host: 2")
    );
    assert!(yaml.contains("pool_max_per_host: 2"));

    // A soft limit under the hard one is raised to it.
    let raised = FileServe::start("fd-raised", "ulimit -Sn 300", &yaml);
    let hard = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_owned();
    assert!(
        raised
            .log
            .contains(&format!("found=300 soft={hard} hard={hard}")),
        "{}",
        raised.log
    );
    drop(raised);

    // A hard limit of 300 with 4 hosts x (2 + 1) backend descriptors, 64
    // admin connections and 128 spare: at most 96 clients, said at start.
    let tight = FileServe::start("fd-tight", "ulimit -n 300", &yaml);
    assert!(
        tight.log.contains("does not fit the open file limit")
            && tight.log.contains("effective=96"),
        "{}",
        tight.log
    );
    let mut app = connect_to(tight.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    select_one(&mut app).await;
    let mut greeted = Vec::new();
    let mut refused = 0;
    for _ in 0..150 {
        let mut stream = TcpStream::connect(tight.client).await.unwrap();
        let (_, first) = read_packet(&mut stream).await.unwrap();
        match err_code(&first) {
            Some(1040) => refused += 1,
            None => greeted.push(stream),
            other => panic!("unexpected answer {other:?}"),
        }
    }
    println!(
        "ulimit -n 300: {} idle sockets greeted, {refused} answered 1040",
        greeted.len()
    );
    assert_eq!(
        greeted.len(),
        95,
        "the cap of 96 holds the logged-in client too"
    );
    // The logged-in client still reaches the backends: descriptors were
    // kept for the pools.
    for shard in [1u32, 3000] {
        let started = Instant::now();
        let _: Vec<u64> = app
            .query(format!(
                "SELECT id FROM pins WHERE id = {}",
                pin_id(shard, 1)
            ))
            .await
            .expect("a read on a shard");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
    assert!(select_one(&mut app).await < Duration::from_secs(2));
    // When the idle sockets time out, clients get in again.
    for stream in &mut greeted {
        assert!(closed_within(stream, Duration::from_secs(4))
            .await
            .is_some());
    }
    let mut later = connect_to(tight.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in after the idle sockets were closed");
    select_one(&mut later).await;
}

/// A hard limit that leaves no descriptor for a client beside the pools,
/// the admin port and the headroom stops `serve` with a non-zero exit
/// that names the limit it needs; one more descriptor and it starts.
#[tokio::test]
async fn an_open_file_limit_with_room_for_no_client_stops_the_start() {
    let _turn = serial().await;
    let yaml = test_config_yaml().replace("pool_max_per_host: 64", "pool_max_per_host: 2");
    assert!(yaml.contains("pool_max_per_host: 2"));
    // 4 hosts x (2 + 1) backend descriptors, 64 admin connections, 128 spare.
    let reserved = 4 * 3 + 64 + 128;
    let mut child = FileServe::spawn("fd-none", &format!("ulimit -n {reserved}"), &yaml);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("shardgate serve under `ulimit -n {reserved}` did not exit");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    let log = strip_ansi(&log);
    assert!(!status.success(), "{status}: {log}");
    assert!(
        log.contains(&format!(
            "open file limit (RLIMIT_NOFILE, `ulimit -n`) of {reserved} "
        )) && log.contains(&format!("at least {} to serve one client", reserved + 1)),
        "{log}"
    );
    assert!(!log.contains("shardgate started"), "{log}");

    // Room for one client: it starts and serves that client.
    let one = FileServe::start("fd-one", &format!("ulimit -n {}", reserved + 1), &yaml);
    assert!(one.log.contains("effective=1"), "{}", one.log);
    let mut app = connect_to(one.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    select_one(&mut app).await;
}
