//! Shared pieces of the integration tests: the running local fleet
//! (`integration/fleet.sh start` + `shardgate fleet init`), a proxy started
//! in-process on a free port, and clients.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use mysql_common::constants::CapabilityFlags;
use shardgate::backend::{BackendConn, ConnKey};
use shardgate::control::Control;
use shardgate::engine::Engine;
use shardgate::id::ObjectId;
use shardgate::topology::Topology;

pub mod file_serve;
pub mod move_load;
pub mod tls_certificates;
#[path = "zookeeper.rs"]
pub mod zk_harness;
pub mod zk_serve;

/// Client account from config/shardgate.yaml.
pub const APP_USER: &str = "app";
/// Client password from config/shardgate.yaml.
pub const APP_PASSWORD: &str = "app";
/// Main-fleet master A (shards 0-2047).
pub const MASTER_A: u16 = 3307;
/// Main-fleet master B (shards 2048-4095).
pub const MASTER_B: u16 = 3308;
/// Mod-shard host.
pub const MOD_HOST: u16 = 3310;
/// The data path's backend account (`backend` in config/shardgate.yaml):
/// DML on the shard databases only.
pub const BACKEND_USER: &str = "shard";
/// Its password.
pub const BACKEND_PASSWORD: &str = "shardpw";
/// The operations account (`operations` in config/shardgate.yaml): all
/// privileges, for setup and inspection beyond DML on the shard databases.
pub const OPS_USER: &str = "shardops";
/// Its password.
pub const OPS_PASSWORD: &str = "shardopspw";

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fleet config the tests run against.
pub fn config_path() -> PathBuf {
    repo_root().join("config/shardgate.yaml")
}

/// The fleet's topology.
pub fn topology() -> Topology {
    Topology::load(&config_path()).expect("config/shardgate.yaml is valid")
}

/// Starts the proxy once per test binary and returns its address.
pub fn proxy_addr() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| start_proxy(topology()))
}

/// Starts a proxy for `topology` on a free port, on its own runtime thread
/// so it outlives each test's runtime, and returns its address.
pub fn start_proxy(topology: Topology) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    proxy_thread(move || {
        let runtime = proxy_runtime();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send");
            let engine = Arc::new(Engine::new(topology));
            // As `server::run` does: the object tables' columns, for `SELECT *`.
            shardgate::backend::columns::refresh(&*engine).await;
            shardgate::frontend::serve(engine, listener)
                .await
                .expect("serve");
        });
    });
    rx.recv().expect("proxy started")
}

/// A whole proxy (client port, admin port, metrics, health checker, config
/// watcher) started from a config file of its own.
pub struct RunningProxy {
    /// The addresses it listens on.
    pub listening: shardgate::server::Listening,
    /// Its config file (in a directory of its own, so a test may rewrite it).
    pub config_path: PathBuf,
    /// The control plane (reload, promotion, config status).
    pub control: Arc<Control>,
    /// The engine (`control.engine`), to look inside.
    pub engine: Arc<Engine>,
}

/// The runtime a test proxy runs on: one thread, as `shardgate serve` runs
/// on a 2-core machine (its default there), so every session and backend
/// connection shares one event loop and a blocking call would show.
fn proxy_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Starts `run` on a thread of its own with the proxy's stack size (8 MiB,
/// as `shardgate serve` gives its threads).
fn proxy_thread(run: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .name("test-proxy".to_owned())
        .stack_size(8 << 20)
        .spawn(run)
        .expect("spawn the proxy thread");
}

/// `config/shardgate.yaml` with every listen address on a free port
/// (`127.0.0.1:0`), for [`start_server`].
pub fn test_config_yaml() -> String {
    std::fs::read_to_string(config_path())
        .expect("read config/shardgate.yaml")
        .replace("127.0.0.1:6033", "127.0.0.1:0")
        .replace("127.0.0.1:6032", "127.0.0.1:0")
        .replace("127.0.0.1:9104", "127.0.0.1:0")
}

/// Writes `yaml` to a fresh directory under `target/` (named after `name`)
/// and starts a whole proxy from it on its own runtime thread. `schema.sql`
/// is copied beside it, so `schema: schema.sql` works.
pub fn start_server(name: &str, yaml: &str) -> RunningProxy {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the test config directory");
    std::fs::copy(
        repo_root().join("config/schema.sql"),
        dir.join("schema.sql"),
    )
    .expect("copy schema.sql");
    let config_path = dir.join("shardgate.yaml");
    std::fs::write(&config_path, yaml).expect("write the test config");
    let topology = Topology::load(&config_path).unwrap_or_else(|e| panic!("test config: {e}"));
    let control = Arc::new(Control::new(topology, Some(config_path.clone())));
    let engine = control.engine.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let started = control.clone();
    proxy_thread(move || {
        let runtime = proxy_runtime();
        runtime.block_on(async move {
            let listening = shardgate::server::start(started).await.expect("start");
            tx.send(listening).expect("send");
            std::future::pending::<()>().await;
        });
    });
    let listening = rx.recv().expect("proxy started");
    RunningProxy {
        listening,
        config_path,
        control,
        engine,
    }
}

/// Starts a whole proxy from the config document in the znode at
/// `location`, as `serve --config zookeeper://...` does (the session opened
/// inside the proxy's runtime), with registry id `id` and `overrides` laid
/// over the document's listen addresses; the start's error if refused.
/// `config_path` is empty. Its listeners run until the test binary ends;
/// `control.shutdown()` makes it leave the registry.
pub fn start_zk_server(
    location: shardgate::topology::source::ZkLocation,
    id: &str,
    overrides: shardgate::topology::bootstrap::ListenOverrides,
) -> Result<RunningProxy, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut process = shardgate::control::process::Process::new(id.to_owned(), overrides);
    // The test documents are pushed without credentials, open to anyone:
    // intended here, as `--zk-allow-open-acl` says.
    process.allow_open_acl = true;
    proxy_thread(move || {
        let runtime = proxy_runtime();
        runtime.block_on(async move {
            let started = match Control::from_zookeeper(location, process).await {
                Ok(control) => {
                    let control = Arc::new(control);
                    shardgate::server::start(control.clone())
                        .await
                        .map(|listening| (listening, control))
                        .map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            let failed = started.is_err();
            let _ = tx.send(started);
            if !failed {
                std::future::pending::<()>().await;
            }
        });
    });
    let (listening, control) = rx.recv().expect("the proxy thread answers")?;
    Ok(RunningProxy {
        listening,
        config_path: PathBuf::new(),
        engine: control.engine.clone(),
        control,
    })
}

/// A mysql_async connection to `addr` (a proxy's client or admin port).
pub async fn connect_to(addr: SocketAddr, user: &str, password: &str) -> mysql_async::Result<Conn> {
    Conn::new(opts(addr.port(), user, password)).await
}

fn opts(port: u16, user: &str, password: &str) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false)
        .into()
}

/// A mysql_async client connected to the proxy as the app account.
pub async fn client() -> Conn {
    let addr = proxy_addr();
    Conn::new(opts(addr.port(), APP_USER, APP_PASSWORD))
        .await
        .expect("connect to the proxy")
}

/// A mysql_async client of the proxy (app account) that sends a file of
/// `files` when a `LOAD DATA LOCAL INFILE` asks for it.
pub async fn client_with_local_files(files: &[PathBuf]) -> Conn {
    let addr = proxy_addr();
    let opts = OptsBuilder::from_opts(opts(addr.port(), APP_USER, APP_PASSWORD))
        .local_infile_handler(Some(mysql_async::WhiteListFsHandler::new(files.to_vec())));
    Conn::new(opts).await.expect("connect to the proxy")
}

/// A mysql_async connection straight to a backend (bypassing the proxy) as
/// the data path's account, to check where rows landed (DML on the shard
/// databases only).
pub async fn direct(port: u16) -> Conn {
    Conn::new(opts(port, BACKEND_USER, BACKEND_PASSWORD))
        .await
        .unwrap_or_else(|e| panic!("connect to backend {port}: {e}"))
}

/// A mysql_async connection straight to a backend as the operations
/// account, for what the data path's account may not do: replication
/// control and status, `sql_log_bin`, DDL, other schemas, the whole catalog.
pub async fn operations(port: u16) -> Conn {
    Conn::new(opts(port, OPS_USER, OPS_PASSWORD))
        .await
        .unwrap_or_else(|e| panic!("connect to backend {port} as {OPS_USER}: {e}"))
}

/// The master port serving main-fleet `shard`.
pub fn main_master_port(shard: u32) -> u16 {
    if shard < 2048 {
        MASTER_A
    } else {
        MASTER_B
    }
}

/// Decodes an ID, panicking on a malformed one.
pub fn decode(id: u64) -> ObjectId {
    ObjectId::decode(id).expect("valid id")
}

/// The `data` of the pin with this 64-bit ID, read straight from the
/// master of its shard, or None.
pub async fn pin_on_host(id: u64) -> Option<String> {
    let fields = decode(id);
    row_on_host(
        main_master_port(fields.shard),
        "pins",
        fields.shard,
        fields.local_id,
    )
    .await
}

/// The `data` of an object row read straight from its master, or None.
pub async fn row_on_host(port: u16, table: &str, shard: u32, local_id: u64) -> Option<String> {
    let mut conn = direct(port).await;
    let sql = format!("SELECT data FROM db{shard:05}.{table} WHERE local_id = {local_id}");
    let row: Option<String> = conn.query_first(sql).await.expect("direct read");
    conn.disconnect().await.ok();
    row
}

/// Whether database `name` exists on the host at `port` (asked as the
/// operations account, which sees every database).
pub async fn database_exists(port: u16, name: &str) -> bool {
    let mut conn = operations(port).await;
    let found: Option<String> = conn
        .query_first(format!(
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name = '{name}'"
        ))
        .await
        .expect("schemata");
    conn.disconnect().await.ok();
    found.is_some()
}

/// The shard database the admin port's `EXPLAIN ROUTE <statement>` names.
pub async fn explain_route_database(admin: &mut Conn, statement: &str) -> Option<String> {
    let route: mysql_async::Row = admin
        .query_first(format!("EXPLAIN ROUTE {statement}"))
        .await
        .expect("EXPLAIN ROUTE")
        .expect("a route");
    route.get::<String, _>("database")
}

/// The MySQL error code and message of a failed statement.
pub fn server_error(error: mysql_async::Error) -> (u16, String) {
    match error {
        mysql_async::Error::Server(e) => (e.code, e.message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// Runs the stock `mariadb` CLI against the proxy (with `--comments` so
/// hints reach it) and returns its output.
pub fn mariadb_cli(sql: &str) -> Output {
    mariadb_cli_at(proxy_addr(), &[], sql)
}

/// Runs the stock `mariadb` CLI as the app account against `addr`, with
/// `--comments --batch --skip-column-names` and extra `options`.
pub fn mariadb_cli_at(addr: SocketAddr, options: &[&str], sql: &str) -> Output {
    Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &addr.port().to_string(),
            "-u",
            APP_USER,
            &format!("-p{APP_PASSWORD}"),
            "--comments",
            "--batch",
            "--skip-column-names",
        ])
        .args(options)
        .args(["-e", sql])
        .output()
        .expect("run the mariadb CLI")
}

/// Runs `integration/fleet.sh` with arguments, asserting success.
pub fn fleet_script(args: &[&str]) {
    let status = Command::new(repo_root().join("integration/fleet.sh"))
        .args(args)
        .status()
        .expect("run fleet.sh");
    assert!(status.success(), "fleet.sh {args:?} failed");
}

/// `proxy`'s admin port.
pub fn admin_addr(proxy: &RunningProxy) -> SocketAddr {
    proxy
        .listening
        .admin
        .expect("the test config has an admin section")
}

/// A mysql_async connection to `proxy`'s admin port as admin/admin.
pub async fn admin(proxy: &RunningProxy) -> Conn {
    connect_to(admin_addr(proxy), "admin", "admin")
        .await
        .expect("admin login")
}

/// A mysql_async connection to `proxy`'s client port as the app account.
pub async fn app(proxy: &RunningProxy) -> Conn {
    connect_to(proxy.listening.client, APP_USER, APP_PASSWORD)
        .await
        .expect("client login")
}

/// The 64-bit ID of pin `local_id` on `shard` (type 1).
pub fn pin_id(shard: u32, local_id: u64) -> u64 {
    ObjectId {
        shard,
        type_id: 1,
        local_id,
    }
    .encode()
    .expect("valid id")
}

/// Inserts a pin on `shard` (a `SHARD` hint) through `conn`; its 64-bit ID.
pub async fn try_insert_pin(conn: &mut Conn, shard: u32, data: &str) -> mysql_async::Result<u64> {
    conn.query_drop(format!(
        "INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('{data}')"
    ))
    .await?;
    Ok(conn.last_insert_id().expect("an INSERT reports its ID"))
}

/// [`try_insert_pin`], panicking on an error.
pub async fn insert_pin(conn: &mut Conn, shard: u32, data: &str) -> u64 {
    try_insert_pin(conn, shard, data)
        .await
        .unwrap_or_else(|e| panic!("insert a pin on shard {shard}: {e}"))
}

/// Runs on `conn`, in the background, an UPDATE of pin `id` that takes
/// `seconds` on the server (its row stays locked meanwhile); the task gives
/// the connection back with the statement's answer.
pub fn update_pin_slowly(
    mut conn: Conn,
    id: u64,
    seconds: f64,
) -> tokio::task::JoinHandle<(Conn, mysql_async::Result<()>)> {
    tokio::spawn(async move {
        let answer = conn
            .query_drop(format!(
                "UPDATE pins SET data = IF(SLEEP({seconds}) = 0, data, data) WHERE id = {id}"
            ))
            .await;
        (conn, answer)
    })
}

/// Replaces the file at `path` the way editors do: a temporary file beside
/// it, renamed over it, so a watcher never reads half a file.
pub fn write_config(path: &std::path::Path, text: &str) {
    let name = path.file_name().expect("a file path").to_string_lossy();
    let temp = path.with_file_name(format!(".{name}.swp"));
    std::fs::write(&temp, text).unwrap_or_else(|e| panic!("write {}: {e}", temp.display()));
    std::fs::rename(&temp, path).unwrap_or_else(|e| panic!("rename to {}: {e}", path.display()));
}

/// The end of a poll loop: `retry` at the end of each attempt that did not
/// see the condition yet; it fails the test once `limit` has passed.
pub struct Deadline {
    what: String,
    limit: std::time::Duration,
    started: std::time::Instant,
    interval: std::time::Duration,
}

impl Deadline {
    /// Waiting for `what` (said in the failure) for at most `limit`,
    /// polling every 20 ms.
    pub fn new(what: impl Into<String>, limit: std::time::Duration) -> Self {
        Self {
            what: what.into(),
            limit,
            started: std::time::Instant::now(),
            interval: std::time::Duration::from_millis(20),
        }
    }

    /// Polls every `interval` instead.
    pub fn every(self, interval: std::time::Duration) -> Self {
        Self { interval, ..self }
    }

    /// Whether `limit` has passed.
    pub fn passed(&self) -> bool {
        self.started.elapsed() >= self.limit
    }

    /// Time since the wait began.
    pub fn elapsed(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// Fails the test (showing `last`, what the attempt saw) if `limit`
    /// has passed; else sleeps one interval.
    pub async fn retry(&self, last: impl std::fmt::Debug) {
        assert!(
            !self.passed(),
            "{}: not within {:?} (last seen: {last:?})",
            self.what,
            self.limit
        );
        self.pause().await;
    }

    /// Sleeps one interval.
    pub async fn pause(&self) {
        tokio::time::sleep(self.interval).await;
    }
}

/// Polls `condition` every 20 ms until it holds, failing the test after
/// `limit`; how long it took.
pub async fn wait_until(
    what: &str,
    limit: std::time::Duration,
    mut condition: impl FnMut() -> bool,
) -> std::time::Duration {
    let deadline = Deadline::new(what, limit);
    while !condition() {
        deadline.retry("false").await;
    }
    deadline.elapsed()
}

/// A replica's `SHOW SLAVE STATUS`, the fields the tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlaveStatus {
    /// `Slave_IO_Running` (`Yes`, `No`, `Connecting`).
    pub io_running: String,
    /// `Slave_SQL_Running`.
    pub sql_running: String,
    /// `Last_Error`.
    pub last_error: String,
}

/// `SHOW SLAVE STATUS` on `conn`; `None` when the server is no replica.
pub async fn slave_status(conn: &mut Conn) -> Option<SlaveStatus> {
    let row: Option<mysql_async::Row> = conn
        .query_first("SHOW SLAVE STATUS")
        .await
        .expect("SHOW SLAVE STATUS");
    row.map(|row| {
        let field = |name: &str| {
            row.get_opt::<String, _>(name)
                .and_then(Result::ok)
                .unwrap_or_default()
        };
        SlaveStatus {
            io_running: field("Slave_IO_Running"),
            sql_running: field("Slave_SQL_Running"),
            last_error: field("Last_Error"),
        }
    })
}

/// Whether both replication threads of the replica at `port` run, and its
/// last error.
pub async fn replication_running(port: u16) -> (bool, String) {
    let mut conn = operations(port).await;
    let status = slave_status(&mut conn)
        .await
        .unwrap_or_else(|| panic!("{port} is not a replica"));
    conn.disconnect().await.ok();
    let running = status.io_running == "Yes" && status.sql_running == "Yes";
    (running, status.last_error)
}

impl SlaveStatus {
    /// Whether both replication threads run.
    pub fn running(&self) -> bool {
        self.io_running == "Yes" && self.sql_running == "Yes"
    }
}

/// Deletes the pins whose data starts with `tag` on `shards` of the host at
/// `port`, straight on the host (on a master the deletes replicate).
pub async fn delete_pins(port: u16, shards: &[u32], tag: &str) {
    let mut conn = direct(port).await;
    for shard in shards {
        conn.query_drop(format!(
            "DELETE FROM db{shard:05}.pins WHERE data LIKE '{tag}%'"
        ))
        .await
        .unwrap_or_else(|e| panic!("delete the test's pins on {port}, shard {shard}: {e}"));
    }
    conn.disconnect().await.ok();
}

/// Waits (10 s at most) until pin `local_id` of `shard` reads `data`
/// straight on the host at `port`: a row written on a master has reached
/// its replica.
pub async fn wait_for_pin_on(port: u16, shard: u32, local_id: u64, data: &str) {
    let deadline = Deadline::new(
        format!("pin {local_id} of shard {shard} to reach {port}"),
        std::time::Duration::from_secs(10),
    )
    .every(std::time::Duration::from_millis(50));
    loop {
        let found = row_on_host(port, "pins", shard, local_id).await;
        if found.as_deref() == Some(data) {
            return;
        }
        deadline.retry(found).await;
    }
}

/// `yaml` with `entries` (indented `key: value` lines) in its `limits`
/// section, which is added if the config has none.
pub fn with_limits(yaml: &str, entries: &str) -> String {
    if yaml.contains("\nlimits:\n") {
        yaml.replacen("\nlimits:\n", &format!("\nlimits:\n{entries}"), 1)
    } else {
        format!("{yaml}\nlimits:\n{entries}")
    }
}

/// Runs a statement on 3309 as the operations account when dropped: a
/// test's guard that puts the replica back (`START SLAVE IO_THREAD`,
/// `SET GLOBAL read_only = 0`, ...).
pub struct RunOn3309WhenDropped(pub &'static str);

impl Drop for RunOn3309WhenDropped {
    fn drop(&mut self) {
        let output = std::process::Command::new("mariadb")
            .args(["-h", "127.0.0.1", "-P", "3309"])
            .args(["-u", OPS_USER, &format!("-p{OPS_PASSWORD}")])
            .args(["-e", self.0])
            .output()
            .expect("run the mariadb CLI");
        assert!(
            output.status.success(),
            "{} on 3309 failed: {}",
            self.0,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The replication status of the server behind `conn` once both threads
/// run, waiting up to 10 s (an IO thread just started reads `Connecting`
/// for a moment); the last status seen if they never do.
pub async fn slave_status_running(conn: &mut Conn) -> Option<SlaveStatus> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let status = slave_status(conn).await;
        if status.as_ref().is_some_and(SlaveStatus::running)
            || std::time::Instant::now() >= deadline
        {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Held by every test of a binary whose tests change the shared fleet or
/// the process (stop or restart hosts, move shards, set globals, measure
/// RSS): such tests run one at a time, as if each had the fleet to itself.
pub static FLEET: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for [`FLEET`]; the test runs alone while it holds the guard.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    FLEET.lock().await
}

/// A raw protocol connection to the shared proxy as the app account (no
/// capabilities asked for), to read status flags and packets as sent.
pub async fn raw_proxy_conn() -> BackendConn {
    let key = ConnKey {
        framing: CapabilityFlags::empty(),
        collation: 45,
    };
    let addr = proxy_addr().to_string();
    BackendConn::connect(&addr, APP_USER, APP_PASSWORD, key, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("raw login to {addr}: {e}"))
}

/// The log lines of every proxy this test binary runs for the tracing
/// target `target` (at `WARN` and above), from the first call on: a
/// subscriber for the whole process is installed once, writing the lines
/// of that target into memory. Meant for one target per test binary.
pub fn captured_log(target: &'static str) -> String {
    use std::io::Write;
    use std::sync::Mutex;
    use tracing_subscriber::fmt::MakeWriter;

    static LINES: Mutex<Vec<u8>> = Mutex::new(Vec::new());
    struct Capture;
    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            LINES
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    struct MakeCapture;
    impl<'a> MakeWriter<'a> for MakeCapture {
        type Writer = Capture;
        fn make_writer(&'a self) -> Capture {
            Capture
        }
    }
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let filter = tracing_subscriber::EnvFilter::new(format!("{target}=warn"));
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(MakeCapture)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other subscriber");
    });
    String::from_utf8_lossy(&LINES.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}

/// The samples of `GET /metrics` on `proxy`, by `name{labels}` (`NaN`
/// values included).
pub async fn scrape_metrics(proxy: &RunningProxy) -> std::collections::BTreeMap<String, f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = proxy
        .listening
        .metrics
        .expect("the proxy has a metrics endpoint");
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to /metrics");
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .await
        .expect("send GET /metrics");
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
        .await
        .expect("the endpoint answers")
        .expect("read /metrics");
    let (_, body) = response.split_once("\r\n\r\n").expect("head and body");
    body.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The sample `name` (`name{labels}`) of `samples`, failing the test when
/// it is missing.
pub fn metric_sample(samples: &std::collections::BTreeMap<String, f64>, name: &str) -> f64 {
    *samples.get(name).unwrap_or_else(|| {
        panic!(
            "no sample {name} in {:#?}",
            samples.keys().collect::<Vec<_>>()
        )
    })
}
