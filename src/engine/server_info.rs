//! What the proxy tells clients about "the server": the backends' version
//! marked as the proxy's (`10.11.19-MariaDB-shardgate`), used in the
//! greeting, `VERSION()` and `@@version`, and the servers' default idle
//! timeouts. Read from a master when the client port starts.

use std::time::Duration;

use mysql_common::constants::CapabilityFlags;
use tracing::{info, warn};

use super::lex_state::read_row;
use super::Engine;
use crate::backend::{BackendConn, ConnKey, Dialer};
use crate::protocol::packets::UTF8MB4_GENERAL_CI;
use crate::topology::config::BackendConfig;

/// The version assumed when no master answered at start.
const FALLBACK_BACKEND_VERSION: &str = "10.11.0";

/// A server's default `wait_timeout` and `interactive_timeout` (8 hours).
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 28_800;

/// What the proxy presents as its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// `VERSION()`, e.g. `10.11.19-MariaDB-shardgate`.
    pub version: String,
    /// The servers' `@@global.wait_timeout`, in seconds.
    pub wait_timeout: u64,
    /// The servers' `@@global.interactive_timeout`, in seconds.
    pub interactive_timeout: u64,
}

impl Default for ServerInfo {
    fn default() -> Self {
        Self {
            version: proxy_version(FALLBACK_BACKEND_VERSION),
            wait_timeout: DEFAULT_IDLE_TIMEOUT_SECS,
            interactive_timeout: DEFAULT_IDLE_TIMEOUT_SECS,
        }
    }
}

impl ServerInfo {
    /// The version string of the greeting: with the `5.5.5-` prefix that
    /// MariaDB servers before 11 send so that MySQL clients take them for
    /// a 5.5 server.
    pub fn greeting_version(&self) -> String {
        let major: u32 = self
            .version
            .split('.')
            .next()
            .and_then(|major| major.parse().ok())
            .unwrap_or(0);
        if major < 11 {
            format!("5.5.5-{}", self.version)
        } else {
            self.version.clone()
        }
    }

    /// The idle timeout a new session starts with: `interactive_timeout`
    /// for a client that said it is interactive, else `wait_timeout`.
    pub fn idle_timeout(&self, interactive: bool) -> Duration {
        Duration::from_secs(if interactive {
            self.interactive_timeout
        } else {
            self.wait_timeout
        })
    }
}

/// The proxy's version for a backend's `VERSION()`: its number with
/// `-MariaDB-shardgate` (`10.11.19-MariaDB-0+deb12u1-log` gives
/// `10.11.19-MariaDB-shardgate`).
pub fn proxy_version(backend: &str) -> String {
    let backend = backend.strip_prefix("5.5.5-").unwrap_or(backend);
    let end = backend
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(backend.len());
    let number = backend[..end].trim_end_matches('.');
    let number = if number.is_empty() {
        FALLBACK_BACKEND_VERSION
    } else {
        number
    };
    format!("{number}-MariaDB-shardgate")
}

impl Engine {
    /// What the proxy presents as its server: as read at start
    /// ([`Engine::probe_server`]), or the defaults.
    pub fn server_info(&self) -> &ServerInfo {
        static DEFAULT: std::sync::OnceLock<ServerInfo> = std::sync::OnceLock::new();
        self.server
            .get()
            .unwrap_or_else(|| DEFAULT.get_or_init(ServerInfo::default))
    }

    /// Reads the version and the idle timeouts from the first master that
    /// answers (once; later calls do nothing). Without an answer the
    /// defaults stay ([`FALLBACK_BACKEND_VERSION`], 28800 s).
    pub async fn probe_server(&self) {
        if self.server.get().is_some() {
            return;
        }
        let topology = self.topology.load();
        let backend = &topology.config.backend;
        for host in topology.masters() {
            let addr = super::checkout::host_addr(&topology, host);
            let read = on_control_connection(self.backends.dialer(), backend, addr, async |conn| {
                read_row(
                    conn,
                    b"SELECT VERSION(), @@global.wait_timeout, @@global.interactive_timeout",
                )
                .await
            });
            let values = match read.await {
                Ok(values) => values,
                Err(error) => {
                    warn!(host = addr, %error, "could not read the server version");
                    continue;
                }
            };
            let number = |index: usize| {
                values
                    .get(index)
                    .cloned()
                    .flatten()
                    .and_then(|text| text.parse().ok())
                    .unwrap_or(DEFAULT_IDLE_TIMEOUT_SECS)
            };
            let found = ServerInfo {
                version: proxy_version(values.first().cloned().flatten().as_deref().unwrap_or("")),
                wait_timeout: number(1),
                interactive_timeout: number(2),
            };
            info!(version = %found.version, host = addr, "server version");
            let _ = self.server.set(found);
            return;
        }
        warn!("no master answered; presenting the default server version");
    }
}

/// Runs `work` on a control connection of its own to `addr` (the data
/// account, utf8mb4, no client framing): opening it and the work together
/// get twice the connect timeout. `Err` says what failed.
pub(super) async fn on_control_connection<T>(
    dialer: &dyn Dialer,
    backend: &BackendConfig,
    addr: &str,
    work: impl AsyncFnOnce(&mut BackendConn) -> Result<T, String>,
) -> Result<T, String> {
    let key = ConnKey {
        framing: CapabilityFlags::empty(),
        collation: UTF8MB4_GENERAL_CI as u8,
    };
    let timeout = Duration::from_millis(backend.connect_timeout_ms);
    let run = async {
        let mut conn =
            BackendConn::connect_via(dialer, addr, &backend.user, &backend.password, key, timeout)
                .await
                .map_err(|error| error.to_string())?;
        work(&mut conn).await
    };
    tokio::time::timeout(timeout * 2, run)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {:?}", timeout * 2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backends_number_becomes_the_proxys_version() {
        assert_eq!(
            proxy_version("10.11.19-MariaDB-0+deb12u1-log"),
            "10.11.19-MariaDB-shardgate"
        );
        assert_eq!(
            proxy_version("5.5.5-10.6.2-MariaDB"),
            "10.6.2-MariaDB-shardgate"
        );
        assert_eq!(proxy_version("junk"), "10.11.0-MariaDB-shardgate");
    }

    #[test]
    fn the_greeting_has_the_prefix_before_11() {
        let info = ServerInfo::default();
        assert_eq!(info.greeting_version(), "5.5.5-10.11.0-MariaDB-shardgate");
        let eleven = ServerInfo {
            version: proxy_version("11.4.2-MariaDB"),
            ..ServerInfo::default()
        };
        assert_eq!(eleven.greeting_version(), "11.4.2-MariaDB-shardgate");
        assert_eq!(info.idle_timeout(false), Duration::from_secs(28_800));
    }
}
