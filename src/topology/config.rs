//! The YAML config model: the serde types of the config file.
//!
//! This is the file as written; [`crate::topology::Topology`] is the
//! validated routing table built from it. Maps are `BTreeMap`s so iteration
//! order is deterministic.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

/// Default `backend.pool_max_per_host`.
pub const DEFAULT_POOL_MAX_PER_HOST: u32 = 64;
/// Default `backend.connect_timeout_ms`.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 1000;
/// Default `backend.checkout_timeout_ms`.
pub const DEFAULT_CHECKOUT_TIMEOUT_MS: u64 = 5000;
/// Default `limits.handshake_timeout_ms`.
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// Default `limits.max_client_connections`.
pub const DEFAULT_MAX_CLIENT_CONNECTIONS: u32 = 10_000;
/// Default `limits.max_login_packet`.
pub const DEFAULT_MAX_LOGIN_PACKET: u32 = 64 * 1024;
/// Default `limits.max_allowed_packet` (what MariaDB 10.11 defaults to).
pub const DEFAULT_MAX_ALLOWED_PACKET: u64 = 16 * 1024 * 1024;
/// Default `limits.max_statement_analysis_bytes`.
pub const DEFAULT_MAX_STATEMENT_ANALYSIS_BYTES: u64 = 64 * 1024 * 1024;
/// Default `limits.max_statement_tokens`.
pub const DEFAULT_MAX_STATEMENT_TOKENS: u64 = 100_000;
/// Default `limits.blocking_analysis_bytes`.
pub const DEFAULT_BLOCKING_ANALYSIS_BYTES: u64 = 64 * 1024;
/// Default `limits.max_prepared_statements`.
pub const DEFAULT_MAX_PREPARED_STATEMENTS: u32 = 1_000;
/// Default `limits.max_session_settings`.
pub const DEFAULT_MAX_SESSION_SETTINGS: u32 = 64;
/// Default `limits.max_session_settings_bytes`.
pub const DEFAULT_MAX_SESSION_SETTINGS_BYTES: u64 = 64 * 1024;
/// Default `limits.max_merge_bytes`.
pub const DEFAULT_MAX_MERGE_BYTES: u64 = 256 * 1024 * 1024;
/// Default `limits.backend_prepared_statements`: a statement per shard
/// shape for 64 shards on each connection; 64 connections per host
/// (`backend.pool_max_per_host`) keep at most 4096, a quarter of MariaDB's
/// default `max_prepared_stmt_count` (16382), and a server past three
/// quarters of its maximum gets no new ones (decision 0039).
pub const DEFAULT_BACKEND_PREPARED_STATEMENTS: usize = 64;
/// Default `limits.max_merge_bytes_total`.
pub const DEFAULT_MAX_MERGE_BYTES_TOTAL: u64 = 1024 * 1024 * 1024;
/// Default `limits.multi_shard_part_timeout_ms`.
pub const DEFAULT_MULTI_SHARD_PART_TIMEOUT_MS: u64 = 10_000;
/// Default `limits.idle_in_transaction_timeout_ms`: a minute, long past
/// any think time of an application, short enough that a forgotten
/// transaction does not keep its connection (one of the host's pool) and
/// its locks, nor a pause of its shards, for long.
pub const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 60_000;
/// Default `limits.max_host_share_percent`.
pub const DEFAULT_MAX_HOST_SHARE_PERCENT: u32 = 50;
/// Default `fleets.<name>.shards`.
pub const DEFAULT_SHARDS: u32 = 4096;
/// Default database format of a fleet.
pub const DEFAULT_DATABASE: &str = "db{:05}";
/// Default database format of a fleet that holds only mod-shard (`key`) tables.
pub const DEFAULT_MOD_DATABASE: &str = "msdb{:05}";

/// The parsed config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Client-facing listen address, `host:port` (port 0 picks a free port).
    #[serde(default)]
    pub listen: String,
    /// The admin port; `None` when the file has no `admin` section.
    #[serde(default)]
    pub admin: Option<AdminConfig>,
    /// Client accounts (mysql_native_password).
    #[serde(default)]
    pub users: Vec<UserConfig>,
    /// How shardgate logs in to the backends, and pool limits.
    #[serde(default)]
    pub backend: BackendConfig,
    /// Object type ids by type name (`pin: 1`).
    #[serde(default)]
    pub types: BTreeMap<String, u32>,
    /// Fleets by name.
    #[serde(default)]
    pub fleets: BTreeMap<String, FleetConfig>,
    /// Logical tables by name, as written in the file.
    #[serde(default)]
    pub tables: BTreeMap<String, TableConfig>,
    /// Where hint-less object inserts go.
    #[serde(default)]
    pub placement: Placement,
    /// TLS offered to clients; `None` when the file has no `tls` section.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// How hosts are health-checked, and whether a dead master fails over.
    #[serde(default)]
    pub health: HealthConfig,
    /// How long statements for paused shards wait (`PAUSE SHARDS`).
    #[serde(default)]
    pub pause: PauseConfig,
    /// How a SIGTERM stops the proxy.
    #[serde(default)]
    pub shutdown: ShutdownConfig,
    /// Where `serve --takeover` finds the running proxy (section `takeover`).
    #[serde(default)]
    pub takeover: TakeoverConfig,
    /// The Prometheus `/metrics` endpoint; `None` when the file has no
    /// `metrics` section.
    #[serde(default)]
    pub metrics: Option<MetricsConfig>,
    /// The operations account (fleet init, VERIFY FLEET, PROMOTE REPLICA):
    /// more privileges than the data path's `backend` account, used only by
    /// the control plane. When absent, the `backend` account is used.
    #[serde(default)]
    pub operations: Option<AccountConfig>,
    /// Bounds on what one client can make the proxy hold (section `limits`).
    #[serde(default)]
    pub limits: LimitsConfig,
    /// The per-shard schema (`schema.sql`) that `VERIFY FLEET` compares every
    /// shard database with; a relative path is taken from the directory of
    /// the config file.
    #[serde(default)]
    pub schema: Option<String>,
    /// Statement digests, per-shard statistics and the slow-statement log
    /// (section `stats`).
    #[serde(default)]
    pub stats: StatsConfig,
}

/// Default `stats.max_digests`.
pub const DEFAULT_MAX_DIGESTS: u64 = 10_000;
/// Default `stats.slow_log_per_second`.
pub const DEFAULT_SLOW_LOG_PER_SECOND: u32 = 10;
/// Least `stats.max_digests` accepted (the digest table's parts, each of
/// which holds at least one).
pub const MIN_MAX_DIGESTS: u64 = 16;
/// Most `stats.max_digests` accepted.
pub const MAX_MAX_DIGESTS: u64 = 1_000_000;

/// The `stats` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatsConfig {
    /// Most statement digests kept (`SHOW DIGESTS`); past it the least
    /// recently seen are evicted.
    pub max_digests: u64,
    /// A statement slower than this many milliseconds is logged; 0 is off.
    pub slow_statement_ms: u64,
    /// Most slow-statement lines logged per second; the rest are counted
    /// and reported by the next line.
    pub slow_log_per_second: u32,
}

impl Default for StatsConfig {
    fn default() -> Self {
        Self {
            max_digests: DEFAULT_MAX_DIGESTS,
            slow_statement_ms: 0,
            slow_log_per_second: DEFAULT_SLOW_LOG_PER_SECOND,
        }
    }
}

impl Config {
    /// The account the control plane (fleet init, VERIFY FLEET, PROMOTE
    /// REPLICA, failover) logs in to the hosts with: `operations`, or the
    /// data path's `backend` account when the section is absent.
    pub fn operations_account(&self) -> AccountConfig {
        self.operations.clone().unwrap_or_else(|| AccountConfig {
            user: self.backend.user.clone(),
            password: self.backend.password.clone(),
        })
    }
}

/// Default `health.interval_ms`.
pub const DEFAULT_HEALTH_INTERVAL_MS: u64 = 1000;
/// Default `health.timeout_ms`.
pub const DEFAULT_HEALTH_TIMEOUT_MS: u64 = 1000;
/// Default `health.columns_refresh_ms`.
pub const DEFAULT_COLUMNS_REFRESH_MS: u64 = 30_000;
/// Default `health.max_promote_lag_ms`.
pub const DEFAULT_MAX_PROMOTE_LAG_MS: u64 = 10_000;
/// Default `health.failures_before_down`.
pub const DEFAULT_FAILURES_BEFORE_DOWN: u32 = 2;
/// Default `pause.timeout_ms`.
pub const DEFAULT_PAUSE_TIMEOUT_MS: u64 = 5000;
/// Default `pause.drain_timeout_ms`.
pub const DEFAULT_PAUSE_DRAIN_TIMEOUT_MS: u64 = 5000;

/// The `health` section: the checker that pings every master and replica.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// Time between two checks of a host, in milliseconds.
    #[serde(default = "default_health_interval_ms")]
    pub interval_ms: u64,
    /// How long one check (connect + ping) may take, in milliseconds.
    #[serde(default = "default_health_timeout_ms")]
    pub timeout_ms: u64,
    /// Consecutive failed checks after which a host is marked down.
    #[serde(default = "default_failures_before_down")]
    pub failures_before_down: u32,
    /// Promote a down master's replica by itself (off unless set).
    #[serde(default)]
    pub auto_failover: bool,
    /// Time between two readings of the object tables' columns (for
    /// `SELECT *`), in milliseconds; a reload reads them at once.
    #[serde(default = "default_columns_refresh_ms")]
    pub columns_refresh_ms: u64,
    /// A replica further behind its master than this (milliseconds, as the
    /// health checker last read it) is not promoted.
    #[serde(default = "default_max_promote_lag_ms")]
    pub max_promote_lag_ms: u64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            interval_ms: DEFAULT_HEALTH_INTERVAL_MS,
            timeout_ms: DEFAULT_HEALTH_TIMEOUT_MS,
            failures_before_down: DEFAULT_FAILURES_BEFORE_DOWN,
            auto_failover: false,
            columns_refresh_ms: DEFAULT_COLUMNS_REFRESH_MS,
            max_promote_lag_ms: DEFAULT_MAX_PROMOTE_LAG_MS,
        }
    }
}

/// The `pause` section: bounds of a cutover pause.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseConfig {
    /// Longest a statement for a paused shard waits before it fails, in
    /// milliseconds.
    #[serde(default = "default_pause_timeout_ms")]
    pub timeout_ms: u64,
    /// Longest `PAUSE SHARDS` waits for running statements and open
    /// transactions on those shards to finish, in milliseconds.
    #[serde(default = "default_pause_drain_timeout_ms")]
    pub drain_timeout_ms: u64,
}

impl Default for PauseConfig {
    fn default() -> Self {
        Self {
            timeout_ms: DEFAULT_PAUSE_TIMEOUT_MS,
            drain_timeout_ms: DEFAULT_PAUSE_DRAIN_TIMEOUT_MS,
        }
    }
}

/// Default `shutdown.drain_timeout_ms`.
pub const DEFAULT_SHUTDOWN_DRAIN_TIMEOUT_MS: u64 = 30_000;
/// Largest `shutdown.drain_timeout_ms` (an hour).
pub const MAX_SHUTDOWN_DRAIN_TIMEOUT_MS: u64 = 3_600_000;

/// The `shutdown` section: the graceful stop a SIGTERM starts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownConfig {
    /// Longest a stop waits for running statements and open transactions
    /// to finish before it cuts the sessions left, in milliseconds.
    #[serde(default = "default_shutdown_drain_timeout_ms")]
    pub drain_timeout_ms: u64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            drain_timeout_ms: DEFAULT_SHUTDOWN_DRAIN_TIMEOUT_MS,
        }
    }
}

fn default_shutdown_drain_timeout_ms() -> u64 {
    DEFAULT_SHUTDOWN_DRAIN_TIMEOUT_MS
}

/// The `takeover` section: the local socket over which a new process
/// (`serve --takeover`) takes the listeners and sessions of the running one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TakeoverConfig {
    /// Path of the Unix socket; default derived from the client port
    /// (`$XDG_RUNTIME_DIR` or `/tmp`, `shardgate-takeover-PORT.sock`).
    #[serde(default)]
    pub socket: Option<String>,
}

/// The `metrics` section: where Prometheus text is served over HTTP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Listen address of the HTTP endpoint, `host:port` (`GET /metrics`).
    #[serde(default)]
    pub listen: String,
}

/// The `tls` section: the certificate clients are offered, and whether
/// clients must use TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM file with the server certificate chain (leaf first); a path
    /// relative to the working directory of the process.
    #[serde(default, deserialize_with = "scalar_string")]
    pub cert: String,
    /// PEM file with the certificate's private key (PKCS#8, PKCS#1 RSA or
    /// SEC1 EC).
    #[serde(default, deserialize_with = "scalar_string")]
    pub key: String,
    /// Refuse clients that do not switch to TLS (MySQL's
    /// `require_secure_transport`).
    #[serde(default)]
    pub require: bool,
}

/// The `admin` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Admin listen address, `host:port`.
    #[serde(default)]
    pub listen: String,
    /// Admin accounts.
    #[serde(default)]
    pub users: Vec<UserConfig>,
}

/// A client or admin account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// Account name.
    #[serde(deserialize_with = "scalar_string")]
    pub name: String,
    /// Clear-text password (empty allowed).
    #[serde(default, deserialize_with = "scalar_string")]
    pub password: String,
}

/// The `backend` section: the account and limits used towards the hosts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// Account shardgate logs in to every host with.
    #[serde(default, deserialize_with = "scalar_string")]
    pub user: String,
    /// Password of that account.
    #[serde(default, deserialize_with = "scalar_string")]
    pub password: String,
    /// Most open connections per host.
    #[serde(default = "default_pool_max_per_host")]
    pub pool_max_per_host: u32,
    /// How long a connect to a host may take, in milliseconds.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// How long a statement waits for a free pooled connection, in milliseconds.
    #[serde(default = "default_checkout_timeout_ms")]
    pub checkout_timeout_ms: u64,
}

impl Default for BackendConfig {
    fn default() -> Self {
        Self {
            user: String::new(),
            password: String::new(),
            pool_max_per_host: DEFAULT_POOL_MAX_PER_HOST,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            checkout_timeout_ms: DEFAULT_CHECKOUT_TIMEOUT_MS,
        }
    }
}

/// An account on the backends (`operations`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    /// Account name.
    #[serde(default, deserialize_with = "scalar_string")]
    pub user: String,
    /// Its password.
    #[serde(default, deserialize_with = "scalar_string")]
    pub password: String,
}

/// The `limits` section: every resource a client can make the proxy hold,
/// bounded. Sizes are bytes, times milliseconds; a timeout of 0 is off.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Longest a client may take from TCP accept to the end of its login
    /// (TLS handshake included).
    pub handshake_timeout_ms: u64,
    /// Most client connections at once (logged in or not); past it a new
    /// connection is answered 1040 Too many connections and closed.
    pub max_client_connections: u32,
    /// Largest login packet (handshake response) accepted.
    pub max_login_packet: u32,
    /// Largest client packet (a statement, long data of one parameter,
    /// a prepared statement's text); past it 1153.
    pub max_allowed_packet: u64,
    /// Largest statement the router analyses; larger ones are refused (1105).
    pub max_statement_analysis_bytes: u64,
    /// Most tokens the router analyses in one statement (1105 past it).
    pub max_statement_tokens: u64,
    /// Statements at least this long are analysed on the blocking pool,
    /// not on a runtime worker.
    pub blocking_analysis_bytes: u64,
    /// Most prepared statements one session may hold.
    pub max_prepared_statements: u32,
    /// Most recorded session `SET`s.
    pub max_session_settings: u32,
    /// Most bytes of recorded session `SET` text.
    pub max_session_settings_bytes: u64,
    /// Most bytes a multi-shard read may buffer (rows, column definitions
    /// and per-part overhead).
    pub max_merge_bytes: u64,
    /// Most bytes all multi-shard reads of the process may buffer at once;
    /// a read that would go past it fails. At least `max_merge_bytes`.
    pub max_merge_bytes_total: u64,
    /// Longest one shard's part of a multi-shard read may take (its
    /// connection, settings and whole result); past it the statement fails
    /// naming this limit. 0 is off.
    pub multi_shard_part_timeout_ms: u64,
    /// Most of one host's pool a single session may hold at once, in
    /// percent of `backend.pool_max_per_host` (at least one connection).
    pub max_host_share_percent: u32,
    /// Statement timeout on the backends (MariaDB's `max_statement_time`);
    /// 0 is off.
    pub statement_timeout_ms: u64,
    /// A session idle inside an open transaction longer than this is
    /// closed (its transaction rolled back); 0 is off. Default
    /// [`DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS`].
    pub idle_in_transaction_timeout_ms: u64,
    /// Most prepared statements one backend connection keeps on its server
    /// for later executes of the same planned text (least recently used
    /// closed first); 0 prepares, executes and closes each execute at once.
    /// Default [`DEFAULT_BACKEND_PREPARED_STATEMENTS`].
    pub backend_prepared_statements: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            handshake_timeout_ms: DEFAULT_HANDSHAKE_TIMEOUT_MS,
            max_client_connections: DEFAULT_MAX_CLIENT_CONNECTIONS,
            max_login_packet: DEFAULT_MAX_LOGIN_PACKET,
            max_allowed_packet: DEFAULT_MAX_ALLOWED_PACKET,
            max_statement_analysis_bytes: DEFAULT_MAX_STATEMENT_ANALYSIS_BYTES,
            max_statement_tokens: DEFAULT_MAX_STATEMENT_TOKENS,
            blocking_analysis_bytes: DEFAULT_BLOCKING_ANALYSIS_BYTES,
            max_prepared_statements: DEFAULT_MAX_PREPARED_STATEMENTS,
            max_session_settings: DEFAULT_MAX_SESSION_SETTINGS,
            max_session_settings_bytes: DEFAULT_MAX_SESSION_SETTINGS_BYTES,
            max_merge_bytes: DEFAULT_MAX_MERGE_BYTES,
            max_merge_bytes_total: DEFAULT_MAX_MERGE_BYTES_TOTAL,
            multi_shard_part_timeout_ms: DEFAULT_MULTI_SHARD_PART_TIMEOUT_MS,
            max_host_share_percent: DEFAULT_MAX_HOST_SHARE_PERCENT,
            statement_timeout_ms: 0,
            idle_in_transaction_timeout_ms: DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS,
            backend_prepared_statements: DEFAULT_BACKEND_PREPARED_STATEMENTS,
        }
    }
}

/// One fleet: its shard count, database name format and hosts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// Number of virtual shards (1-65536).
    #[serde(default = "default_shards")]
    pub shards: u32,
    /// Database name format (`db{:05}`); when absent, `msdb{:05}` for a fleet
    /// holding only mod-shard tables, else `db{:05}`.
    #[serde(default)]
    pub database: Option<String>,
    /// Shards new objects may be placed in, `[first, last]` inclusive;
    /// when absent, every shard is open.
    #[serde(default)]
    pub open: Option<[u32; 2]>,
    /// Host pairs, one per contiguous shard range.
    #[serde(default)]
    pub hosts: Vec<HostConfig>,
    /// Which bits of the fleet's IDs hold which field; when absent,
    /// Pinterest's layout (shard 61-46, type 45-36, local 35-0).
    #[serde(default)]
    pub id_layout: Option<IdLayoutConfig>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            shards: DEFAULT_SHARDS,
            database: None,
            open: None,
            hosts: Vec::new(),
            id_layout: None,
        }
    }
}

/// A fleet's `id_layout`: named fields and the epoch of `time_ms`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdLayoutConfig {
    /// Unix milliseconds that the `time_ms` field counts from.
    #[serde(default)]
    pub epoch_ms: u64,
    /// Fields by name (`shard`, `type`, `local`, `time_ms`, `sequence`).
    #[serde(default)]
    pub fields: BTreeMap<String, IdFieldConfig>,
}

/// One field of an `id_layout`: `bits` wide, its lowest bit at `shift`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdFieldConfig {
    /// Position of the field's lowest bit (0 is the lowest bit of the ID).
    pub shift: u32,
    /// Width in bits.
    pub bits: u32,
}

/// A host pair serving one contiguous shard range.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// `[first, last]` shard, inclusive.
    pub range: [u32; 2],
    /// Master address, `host:port`.
    #[serde(default)]
    pub master: String,
    /// Replica address, `host:port`, kept for failover.
    #[serde(default)]
    pub replica: Option<String>,
}

/// A logical table: its fleet and exactly one of `object`, `from`, `key`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableConfig {
    /// Name of the fleet the table lives on.
    #[serde(default)]
    pub fleet: String,
    /// Object table: the type name (a key of `types`).
    #[serde(default)]
    pub object: Option<String>,
    /// Mapping table: the column holding the from-ID.
    #[serde(default)]
    pub from: Option<String>,
    /// Mod-shard table: the column holding the lookup key.
    #[serde(default)]
    pub key: Option<String>,
}

/// Placement policy for object inserts without a shard hint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Uniformly random among the fleet's open shards.
    #[default]
    Random,
}

fn default_pool_max_per_host() -> u32 {
    DEFAULT_POOL_MAX_PER_HOST
}

fn default_connect_timeout_ms() -> u64 {
    DEFAULT_CONNECT_TIMEOUT_MS
}

fn default_checkout_timeout_ms() -> u64 {
    DEFAULT_CHECKOUT_TIMEOUT_MS
}

fn default_health_interval_ms() -> u64 {
    DEFAULT_HEALTH_INTERVAL_MS
}

fn default_columns_refresh_ms() -> u64 {
    DEFAULT_COLUMNS_REFRESH_MS
}

fn default_max_promote_lag_ms() -> u64 {
    DEFAULT_MAX_PROMOTE_LAG_MS
}

fn default_health_timeout_ms() -> u64 {
    DEFAULT_HEALTH_TIMEOUT_MS
}

fn default_failures_before_down() -> u32 {
    DEFAULT_FAILURES_BEFORE_DOWN
}

fn default_pause_timeout_ms() -> u64 {
    DEFAULT_PAUSE_TIMEOUT_MS
}

fn default_pause_drain_timeout_ms() -> u64 {
    DEFAULT_PAUSE_DRAIN_TIMEOUT_MS
}

fn default_shards() -> u32 {
    DEFAULT_SHARDS
}

/// Accepts any YAML scalar as a string, so `password: 1234` works.
fn scalar_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    struct Visitor;
    impl serde::de::Visitor<'_> for Visitor {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E: serde::de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
    }
    deserializer.deserialize_any(Visitor)
}
