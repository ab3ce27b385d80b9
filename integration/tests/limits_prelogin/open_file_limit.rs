//! The `shardgate serve` binary under a low open-file `ulimit`: the limit is
//! raised, or the client connection cap is lowered to fit it, or, when it
//! leaves room for no client, the start is refused.

use super::*;

/// A `shardgate serve` process started under a shell `ulimit`; killed on drop.
struct ServeProcess {
    child: std::process::Child,
    client: SocketAddr,
    /// Its log up to "shardgate started", ANSI colours removed.
    log: String,
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the `shardgate` binary on `yaml` after the shell command `ulimit`.
fn serve_under(name: &str, ulimit: &str, yaml: &str) -> ServeProcess {
    use std::io::BufRead;
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo_root().join("config/schema.sql"),
        dir.join("schema.sql"),
    )
    .unwrap();
    let config = dir.join("shardgate.yaml");
    std::fs::write(&config, yaml).unwrap();
    let mut child = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("{ulimit} && exec \"$0\" serve --config \"$1\""),
            env!("CARGO_BIN_EXE_shardgate"),
            &config.display().to_string(),
        ])
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start shardgate serve");
    let stderr = child.stderr.take().unwrap();
    // Killed on drop from here on, also when it does not start.
    let mut process = ServeProcess {
        child,
        client: SocketAddr::from(([0, 0, 0, 0], 0)),
        log: String::new(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(strip_ansi(&line)).is_err() {
                break;
            }
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("shardgate did not start:\n{}", process.log));
        process.log.push_str(&line);
        process.log.push('\n');
        if line.contains("shardgate started") {
            process.client = line
                .split_whitespace()
                .find_map(|field| field.strip_prefix("client="))
                .and_then(|addr| addr.parse().ok())
                .unwrap_or_else(|| panic!("no client address in {line}"));
        }
        // The client listener's task logs its cap, maybe after the start.
        let cap_logged = process.log.contains("client connection cap")
            || process.log.contains("does not fit the open file limit");
        if cap_logged && process.client.port() != 0 {
            return process;
        }
    }
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test]
async fn the_open_file_limit_is_raised_or_lowers_the_client_cap() {
    let _turn = serial().await;
    let yaml = format!(
        "{}\nlimits: {{ handshake_timeout_ms: 2000 }}\n",
        test_config_yaml().replace("pool_max_per_host: 64", "pool_max_per_host: 2")
    );
    assert!(yaml.contains("pool_max_per_host: 2"));

    // A soft limit under the hard one is raised to it.
    let raised = serve_under("fd-raised", "ulimit -Sn 300", &yaml);
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
    let tight = serve_under("fd-tight", "ulimit -n 300", &yaml);
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
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("fd-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo_root().join("config/schema.sql"),
        dir.join("schema.sql"),
    )
    .unwrap();
    let config = dir.join("shardgate.yaml");
    std::fs::write(&config, &yaml).unwrap();
    let mut child = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("ulimit -n {reserved} && exec \"$0\" serve --config \"$1\""),
            env!("CARGO_BIN_EXE_shardgate"),
            &config.display().to_string(),
        ])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start shardgate serve");
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
    let one = serve_under("fd-one", &format!("ulimit -n {}", reserved + 1), &yaml);
    assert!(one.log.contains("effective=1"), "{}", one.log);
    let mut app = connect_to(one.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    select_one(&mut app).await;
}
