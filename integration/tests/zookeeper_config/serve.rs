//! Real `shardgate serve` processes started from a znode, for the tests
//! that kill, stop or start a whole proxy: where each listens is read from
//! its registry entry; a process still running when its handle is dropped
//! is killed (also when a test fails).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use shardgate::control::process::ProxyEntry;

use super::pause::acked_at;
use super::*;

/// How long a process may take to register with its client port.
const START_LIMIT: Duration = Duration::from_secs(20);

/// One `shardgate serve` process.
pub(super) struct Served {
    /// Its registry id.
    pub(super) id: String,
    /// Its client port.
    pub(super) client: SocketAddr,
    /// Its admin port.
    pub(super) admin: SocketAddr,
    /// Its registry entry once it listened.
    pub(super) entry: ProxyEntry,
    child: Child,
    log: PathBuf,
}

/// An address from a registry entry.
fn address(id: &str, what: &str, text: Option<&String>) -> SocketAddr {
    let text = text.unwrap_or_else(|| panic!("{id} registered without a {what} address"));
    text.parse()
        .unwrap_or_else(|e| panic!("{id}'s {what} address {text}: {e}"))
}

/// Starts `shardgate serve --config <location> --proxy-id <id>` (the
/// document's listen addresses, port 0 in the tests) and waits until its
/// registry entry names its client port.
pub(super) async fn serve(location: &ZkLocation, id: &str) -> Served {
    let config = location.to_string();
    serve_with(location, id, &["--config", &config, "--proxy-id", id]).await
}

/// Starts `shardgate serve <args> --threads 1`, which must register as
/// `id` under `location`, and waits until its registry entry names its
/// client port.
pub(super) async fn serve_with(location: &ZkLocation, id: &str, args: &[&str]) -> Served {
    let dir = repo_root().join("target/test-configs");
    std::fs::create_dir_all(&dir).expect("create target/test-configs");
    let log = dir.join(format!("serve-{id}-{}.log", std::process::id()));
    let child = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .arg("serve")
        .args(args)
        .args(["--threads", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        // A file, not a pipe nobody reads while it runs.
        .stderr(std::fs::File::create(&log).expect("create the serve log"))
        .spawn()
        .expect("start shardgate serve");
    // Until it registered: killed if the wait fails.
    let mut starting = Starting { child: Some(child) };
    let registry = zookeeper::connect(location)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let path = location.registry_entry(id);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let started = Instant::now();
    let entry = loop {
        let child = starting.child.as_mut().expect("the child");
        if let Ok((data, _)) = registry.get_data(&path).await {
            let entry = ProxyEntry::from_json(&data).expect("a registry entry");
            if entry.pid == child.id() && entry.addresses.client.is_some() {
                break entry;
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{id} exited ({status}): {}", log_text());
        }
        assert!(
            started.elapsed() < START_LIMIT,
            "{id} did not register within {START_LIMIT:?}: {}",
            log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    Served {
        id: id.to_owned(),
        client: address(id, "client", entry.addresses.client.as_ref()),
        admin: address(id, "admin", entry.addresses.admin.as_ref()),
        entry,
        child: starting.child.take().expect("the child"),
        log,
    }
}

/// A process not registered yet, killed if dropped.
struct Starting {
    child: Option<Child>,
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            child.kill().ok();
            child.wait().ok();
        }
    }
}

/// Runs `sql` on the admin port at `addr`; the rows or the error.
pub(super) async fn admin_on(addr: SocketAddr, sql: &str) -> Result<Vec<Row>, mysql_async::Error> {
    let mut conn = connect_to(addr, "admin", "admin")
        .await
        .unwrap_or_else(|e| panic!("admin login to {addr}: {e}"));
    let answer = conn.query(sql).await;
    conn.disconnect().await.ok();
    answer
}

impl Served {
    /// Its log so far (stderr).
    pub(super) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A session on its client port as the app account.
    pub(super) async fn app(&self) -> Conn {
        connect_to(self.client, APP_USER, APP_PASSWORD)
            .await
            .unwrap_or_else(|e| panic!("log in to {}: {e}", self.id))
    }

    /// Runs `sql` on its admin port; the rows or the error.
    pub(super) async fn admin(&self, sql: &str) -> Result<Vec<Row>, mysql_async::Error> {
        admin_on(self.admin, sql).await
    }

    /// `SHOW CONFIG` as name → value.
    pub(super) async fn show_config(&self) -> std::collections::BTreeMap<String, String> {
        show_config_at(self.admin).await
    }

    /// `SHOW PROXIES` as id → pauses_acked.
    pub(super) async fn proxies(&self) -> std::collections::BTreeMap<String, String> {
        acked_at(self.admin).await
    }

    /// Sends `signal` (a `kill` name: KILL, TERM, STOP, CONT).
    pub(super) fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} {}", self.id);
    }

    /// Waits (10 s at most) for the process to exit; its status.
    pub(super) async fn exited(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for serve") {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{} did not exit: {}",
                self.id,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGTERM (it leaves the registry) and the wait for its exit, which
    /// must be clean.
    pub(super) async fn stop(mut self) {
        self.signal("TERM");
        let status = self.exited().await;
        assert!(status.success(), "{} on SIGTERM: {status}", self.id);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.child.kill().ok();
            self.child.wait().ok();
        }
        if !std::thread::panicking() {
            std::fs::remove_file(&self.log).ok();
        }
    }
}
