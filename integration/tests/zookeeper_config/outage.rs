//! A ZooKeeper outage, on a private server this test starts and stops
//! through `integration/zookeeper.sh` (never the shared one): two proxy
//! processes keep serving reads and writes on the config they have until
//! their fence, then only reads; once ZooKeeper is back (same data
//! directory) they write again and are registered again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use shardgate::topology::source::{parse_source, ConfigSource};

use super::pause::{count_on, marker};
use super::serve::{acked_on, app_on, config_of, ServeProcess};
use super::*;

/// The shard the test writes on (master A).
const SHARD: u32 = 1780;
/// How long ZooKeeper stays down: past the client's own session expiry
/// (1.4 x the 4 s session timeout), so the proxies need new sessions.
const OUTAGE: Duration = Duration::from_secs(8);
/// A write must be refused this long after ZooKeeper stopped answering
/// (the fence rises at the last answered heartbeat + 4 s - 400 ms).
const FENCED_BY: Duration = Duration::from_millis(4500);
/// A generous bound for writing again after ZooKeeper is back and serving.
/// Measured 0.05-4.2 s: a proxy whose session expired retries a new one
/// with a doubling pause (0.25 s up to 10 s), so it may be asleep when
/// ZooKeeper returns.
const RECOVERED_BY: Duration = Duration::from_secs(20);

/// A ZooKeeper of this test's own on a free port, stopped and its data
/// directory removed when dropped.
struct PrivateZooKeeper {
    port: u16,
    dir: PathBuf,
}

impl PrivateZooKeeper {
    fn start(test: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = repo_root()
            .join("target/test-zookeeper")
            .join(format!("{test}-{}", std::process::id()));
        let zookeeper = Self { port, dir };
        zookeeper.script("wipe");
        zookeeper.script("start");
        zookeeper
    }

    /// Runs `integration/zookeeper.sh <command>` on this instance.
    fn script(&self, command: &str) {
        let output = self.run(command);
        assert!(
            output.status.success(),
            "zookeeper.sh {command} (port {}): {}",
            self.port,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn run(&self, command: &str) -> std::process::Output {
        Command::new(repo_root().join("integration/zookeeper.sh"))
            .arg(command)
            .env("SHARDGATE_ZK_PORT", self.port.to_string())
            .env("SHARDGATE_ZK_DIR", &self.dir)
            // Never stop whatever else holds the port.
            .env_remove("SHARDGATE_ZK_REPLACE")
            .output()
            .expect("run integration/zookeeper.sh")
    }

    /// The document's location on this server.
    fn location(&self, test: &str) -> ZkLocation {
        let text = format!("zookeeper://127.0.0.1:{}{}/config", self.port, root(test));
        match parse_source(&text) {
            Ok(ConfigSource::ZooKeeper(location)) => location,
            other => panic!("{text}: {other:?}"),
        }
    }
}

impl Drop for PrivateZooKeeper {
    fn drop(&mut self) {
        let output = self.run("wipe");
        if !output.status.success() {
            eprintln!(
                "zookeeper.sh wipe (port {}): {}",
                self.port,
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

/// One proxy process with a session that reads and one that writes.
struct Proxy {
    served: ServeProcess,
    reader: Conn,
    writer: Conn,
    /// The rows it wrote: `<mark>-<id>`.
    data: String,
    /// Writes it acknowledged.
    acknowledged: usize,
    /// The pin every read looks up.
    pin: u64,
}

impl Proxy {
    async fn new(served: ServeProcess, mark: &str) -> Self {
        let data = format!("{mark}-{}", served.id);
        let mut writer = app_on(&served).await;
        let pin = insert_pin(&mut writer, SHARD, &data).await;
        Self {
            reader: app_on(&served).await,
            served,
            writer,
            data,
            acknowledged: 1,
            pin,
        }
    }

    /// A plain read through the proxy, which must be served.
    async fn read(&mut self, when: &str) {
        let found: Option<String> = self
            .reader
            .query_first(format!("SELECT data FROM pins WHERE id = {}", self.pin))
            .await
            .unwrap_or_else(|e| panic!("a read through {} {when}: {e}", self.served.id));
        assert_eq!(found.as_deref(), Some(self.data.as_str()));
    }

    /// One insert through the proxy.
    async fn write(&mut self) -> Result<(), mysql_async::Error> {
        try_insert_pin(&mut self.writer, SHARD, &self.data).await?;
        self.acknowledged += 1;
        Ok(())
    }

    async fn zookeeper_state(&self) -> String {
        config_of(&self.served).await["zookeeper"].clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_zookeeper_outage_proxies_serve_then_fence_then_write_again() {
    let test = "outage";
    let zookeeper = PrivateZooKeeper::start(test);
    let location = zookeeper.location(test);
    push(&location, &document(), None).await;
    let mark = marker("outage");
    let mut proxies = Vec::new();
    for id in ["outage-1", "outage-2"] {
        proxies.push(Proxy::new(ServeProcess::start(&location, id).await, &mark).await);
    }
    for proxy in &proxies {
        assert_eq!(proxy.zookeeper_state().await, "connected");
    }

    let stopping = Instant::now();
    zookeeper.script("stop");
    // The server has exited: nothing answers from here on.
    let stopped = Instant::now();
    println!("ZooKeeper took {:?} to stop", stopped - stopping);
    while stopped.elapsed() < Duration::from_secs(1) {
        for proxy in &mut proxies {
            proxy.read("in the first second of the outage").await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for proxy in &mut proxies {
        proxy.read("1 s into the outage").await;
        proxy.write().await.unwrap_or_else(|e| {
            panic!(
                "a write through {} 1 s into the outage: {e}",
                proxy.served.id
            )
        });
        let state = proxy.zookeeper_state().await;
        assert!(state.starts_with("disconnected since"), "{state}");
    }
    assert!(
        stopped.elapsed() < Duration::from_secs(2),
        "the writes at 1 s took until {:?}",
        stopped.elapsed()
    );

    let mut fenced: BTreeMap<String, Duration> = BTreeMap::new();
    while fenced.len() < proxies.len() {
        assert!(
            stopped.elapsed() < FENCED_BY,
            "writes still served {:?} after ZooKeeper stopped (fenced: {fenced:?})",
            stopped.elapsed()
        );
        for proxy in &mut proxies {
            proxy.read("during the outage").await;
            if fenced.contains_key(&proxy.served.id) {
                continue;
            }
            if let Err(error) = proxy.write().await {
                let (code, message) = server_error(error);
                assert_eq!(code, 1105, "{message}");
                assert!(message.contains("lost its ZooKeeper session"), "{message}");
                fenced.insert(proxy.served.id.clone(), stopped.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("writes refused {fenced:?} after ZooKeeper stopped");
    for proxy in &mut proxies {
        let state = proxy.zookeeper_state().await;
        assert!(state.starts_with("fenced since"), "{state}");
        let refused = proxy.write().await;
        assert!(
            refused.is_err(),
            "{} wrote again while fenced",
            proxy.served.id
        );
    }
    while stopped.elapsed() < OUTAGE {
        for proxy in &mut proxies {
            proxy.read("while fenced").await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    zookeeper.script("start");
    let restarted = Instant::now();
    let mut recovered: BTreeMap<String, Duration> = BTreeMap::new();
    while recovered.len() < proxies.len() {
        assert!(
            restarted.elapsed() < RECOVERED_BY,
            "writes still refused {:?} after ZooKeeper was back (recovered: {recovered:?})",
            restarted.elapsed()
        );
        for proxy in &mut proxies {
            proxy.read("after ZooKeeper is back").await;
            if !recovered.contains_key(&proxy.served.id) && proxy.write().await.is_ok() {
                recovered.insert(proxy.served.id.clone(), restarted.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("writes served again {recovered:?} after ZooKeeper was back");
    let deadline = Deadline::new("both proxies registered again", Duration::from_secs(10));
    for proxy in &proxies {
        loop {
            let listed = acked_on(&proxy.served).await;
            if listed.keys().eq(["outage-1", "outage-2"].iter()) {
                break;
            }
            deadline.retry(listed).await;
        }
        assert_eq!(proxy.zookeeper_state().await, "connected");
    }
    for proxy in &proxies {
        assert_eq!(
            count_on(MASTER_A, SHARD, &proxy.data).await,
            proxy.acknowledged,
            "writes through {} acknowledged but missing, or refused but written",
            proxy.served.id
        );
    }

    for proxy in proxies {
        proxy.served.terminate().await;
    }
    delete_pins(MASTER_A, &[SHARD], &mark).await;
}
