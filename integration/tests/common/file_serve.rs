//! `shardgate serve --config <file>` as a real process of its own (its
//! memory and descriptors are its own, unlike a proxy started in the test
//! process): started from the built binary after a shell command (a
//! `ulimit`), its client port read from its log, killed when dropped.
#![allow(dead_code)]

use std::io::BufRead;
use std::net::SocketAddr;
use std::time::Duration;

/// A `shardgate serve` process; killed on drop.
pub struct FileServe {
    child: std::process::Child,
    /// Its client port.
    pub client: SocketAddr,
    /// Its log up to the client connection cap's line, ANSI colours removed.
    pub log: String,
    /// The lines it logs after that.
    lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for FileServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl FileServe {
    /// Spawns `shardgate serve` on `yaml` (written as [`Self::start`] does)
    /// after the shell command `before`, its log on a piped stderr; the
    /// caller owns the process.
    pub fn spawn(name: &str, before: &str, yaml: &str) -> std::process::Child {
        Self::spawn_with(name, before, yaml, &[])
    }

    /// [`Self::spawn`] with more `serve` flags (`--takeover`).
    pub fn spawn_with(name: &str, before: &str, yaml: &str, flags: &[&str]) -> std::process::Child {
        let config = write_config(name, yaml);
        std::process::Command::new("sh")
            .args([
                "-c",
                &format!(
                    "{before} && exec \"$0\" serve --config \"$1\" {}",
                    flags.join(" ")
                ),
                env!("CARGO_BIN_EXE_shardgate"),
                &config.display().to_string(),
            ])
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start shardgate serve")
    }

    /// Runs the `shardgate` binary on `yaml` (written to a directory of its
    /// own under `target/test-configs`, `schema.sql` beside it) after the
    /// shell command `before` (`true` for none); returns once it logged
    /// its client address and its client connection cap.
    pub fn start(name: &str, before: &str, yaml: &str) -> Self {
        Self::start_with(name, before, yaml, &[])
    }

    /// [`Self::start`] with more `serve` flags (`--takeover`).
    pub fn start_with(name: &str, before: &str, yaml: &str, flags: &[&str]) -> Self {
        let mut child = Self::spawn_with(name, before, yaml, flags);
        let stderr = child.stderr.take().expect("piped stderr");
        // Killed on drop from here on, also when it does not start.
        let (tx, rx) = std::sync::mpsc::channel();
        let mut process = Self {
            child,
            client: SocketAddr::from(([0, 0, 0, 0], 0)),
            log: String::new(),
            lines: rx,
        };
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(strip_ansi(&line)).is_err() {
                    break;
                }
            }
        });
        loop {
            let line = process
                .lines
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

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends it `signal` (`TERM`, `INT`, ...) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {}", self.pid());
    }

    /// Waits up to `timeout` for it to exit; its exit code (`None` if it
    /// was still running or died of a signal) and what it logged meanwhile.
    pub fn wait_exit(&mut self, timeout: Duration) -> (Option<i32>, String) {
        let deadline = std::time::Instant::now() + timeout;
        let mut log = String::new();
        loop {
            while let Ok(line) = self.lines.try_recv() {
                log.push_str(&line);
                log.push('\n');
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // The rest of its log.
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    log.push_str(&line);
                    log.push('\n');
                }
                return (status.code(), log);
            }
            if std::time::Instant::now() > deadline {
                return (None, log);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process's peak resident set size so far (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// The process's resident set size now (VmRSS), in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let path = format!("/proc/{}/status", self.child.id());
        let status = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {path}"))
    }
}

/// Writes `yaml` as `shardgate.yaml` in a fresh directory named after
/// `name` under `target/test-configs`, `schema.sql` beside it; its path.
pub fn write_config(name: &str, yaml: &str) -> std::path::PathBuf {
    let config = config_path(name);
    let dir = config.parent().expect("a directory").to_owned();
    std::fs::create_dir_all(&dir).expect("create the test config directory");
    std::fs::copy(
        crate::common::repo_root().join("config/schema.sql"),
        dir.join("schema.sql"),
    )
    .expect("copy schema.sql");
    std::fs::write(&config, yaml).expect("write the test config");
    config
}

/// Where [`write_config`] writes the config of `name`.
pub fn config_path(name: &str) -> std::path::PathBuf {
    crate::common::repo_root()
        .join("target/test-configs")
        .join(format!("{name}-{}", std::process::id()))
        .join("shardgate.yaml")
}

/// `line` without its ANSI escape sequences.
pub fn strip_ansi(line: &str) -> String {
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
