//! `shardgate serve --config zookeeper://...` as a real process: started
//! from the built binary, found through its registry entry (the ports it
//! bound), stopped with SIGTERM (SIGKILL if it does not exit) when dropped.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use shardgate::control::process::{Addresses, ProxyEntry};
use shardgate::control::zookeeper;
use shardgate::topology::source::ZkLocation;

/// How long a process may take to register with its ports.
const START_LIMIT: Duration = Duration::from_secs(20);
/// How long a process may take to exit after SIGTERM.
const STOP_LIMIT: Duration = Duration::from_secs(10);

/// A running `shardgate serve` process.
pub struct ServeProcess {
    /// Its proxy id.
    pub id: String,
    /// Its client port.
    pub client: SocketAddr,
    /// Its admin port.
    pub admin: SocketAddr,
    /// Its registry entry once it listened.
    pub entry: ProxyEntry,
    child: Child,
    log: PathBuf,
}

impl ServeProcess {
    /// Starts `shardgate serve` on the document at `location` as proxy
    /// `id` (every port the document's, `127.0.0.1:0` in the test
    /// documents), its log in `target/test-configs/`; returns once its
    /// registry entry shows its client and admin ports.
    pub async fn start(location: &ZkLocation, id: &str) -> Self {
        let config = location.to_string();
        Self::start_with(location, id, &["--config", &config, "--proxy-id", id]).await
    }

    /// Starts `shardgate serve <args>`, which must register as `id` under
    /// `location` (read on the ZooKeeper `location` names, which may be a
    /// test's own); returns once its registry entry shows its client and
    /// admin ports.
    pub async fn start_with(location: &ZkLocation, id: &str, args: &[&str]) -> Self {
        let dir = crate::common::repo_root()
            .join("target/test-configs")
            .join(format!("zk-serve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let log = dir.join(format!("{id}.log"));
        let log_file =
            std::fs::File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let child = Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .arg("serve")
            .args(args)
            // The test documents are open to anyone (no credentials).
            .arg("--zk-allow-open-acl")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start shardgate serve");
        let mut process = Self {
            id: id.to_owned(),
            client: SocketAddr::from(([0, 0, 0, 0], 0)),
            admin: SocketAddr::from(([0, 0, 0, 0], 0)),
            entry: ProxyEntry {
                id: id.to_owned(),
                pid: child.id(),
                addresses: Addresses::default(),
                config_version: String::new(),
                znode_version: None,
                started_at: 0,
            },
            child,
            log,
        };
        let entry = process.registered(location).await;
        let address = |text: Option<String>, what: &str| -> SocketAddr {
            text.and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("{id} registered no {what} address: {entry:?}"))
        };
        process.client = address(entry.addresses.client.clone(), "client");
        process.admin = address(entry.addresses.admin.clone(), "admin");
        process.entry = entry;
        process
    }

    /// Waits for this process's registry entry with its client address.
    async fn registered(&mut self, location: &ZkLocation) -> ProxyEntry {
        let client = zookeeper::connect(location)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let path = location.registry_entry(&self.id);
        let started = Instant::now();
        loop {
            if let Ok((data, _)) = client.get_data(&path).await {
                if let Some(entry) = ProxyEntry::from_json(&data) {
                    if entry.pid == self.child.id() && entry.addresses.client.is_some() {
                        return entry;
                    }
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited ({status}): {}", self.id, self.log_text());
            }
            assert!(
                started.elapsed() < START_LIMIT,
                "{} never registered: {}",
                self.id,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What the process logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` (a `kill` name: KILL, TERM, STOP, CONT).
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} {}", self.id);
    }

    /// Whether the process has not exited yet.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits (10 s at most) for the process to exit; its status.
    pub async fn exited(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for serve") {
                return status;
            }
            assert!(
                started.elapsed() < STOP_LIMIT,
                "{} did not exit: {}",
                self.id,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGTERM and the wait for the exit, which must be clean (the proxy
    /// left the registry).
    pub async fn terminate(mut self) {
        self.signal("TERM");
        let status = self.exited().await;
        assert!(
            status.success(),
            "{} on SIGTERM: {status}: {}",
            self.id,
            self.log_text()
        );
    }

    /// SIGTERM, then SIGKILL if it has not exited within 10 s.
    pub fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let stopping = Instant::now();
        while stopping.elapsed() < STOP_LIMIT {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
