//! Starts a whole proxy from its [`Control`] (and the engine it holds): the client listener, the admin
//! port, the metrics endpoint (with `/healthz` and `/ready`), the health checker with the automatic
//! failover listening to its host events, the reading of the object
//! tables' columns, and the config watchers.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::{error, warn};

use crate::control::process::Addresses;
use crate::control::readiness::{readiness, Heartbeat, ListenerUp};
use crate::control::Control;
use crate::frontend::listener::{self, ClientGate};
use crate::frontend::takeover::donor::Donor;
use crate::frontend::takeover::receiver::Inherited;
use crate::frontend::tls::TlsSettings;
use crate::net::{map_large_allocations, open_file_limit, ClientCap};
use crate::stats::http::Endpoints;

/// How the process writes its log lines (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// tracing's human-readable lines.
    #[default]
    Text,
    /// One JSON object a line (tracing-subscriber's JSON format), with the
    /// fields of the spans around the event (`spans`: a session's
    /// `connection_id` and `user`, a statement's `command`).
    Json,
}

/// Installs the process's log subscriber: to stderr, filtered by
/// `RUST_LOG` (default `info`, the ZooKeeper client at `warn`), as `format`
/// says.
pub fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    // The ZooKeeper client logs every session it opens at info.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,zookeeper_client=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().with_span_list(true).init(),
    }
}

/// The addresses a started proxy listens on (useful when the config asks
/// for port 0).
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    /// The client (data) port.
    pub client: SocketAddr,
    /// The admin port, if the config has an `admin` section.
    pub admin: Option<SocketAddr>,
    /// The `/metrics` endpoint, if the config has a `metrics` section.
    pub metrics: Option<SocketAddr>,
}

/// A started proxy: where it listens, and its client listener's task.
pub struct Running {
    /// The addresses it listens on.
    pub listening: Listening,
    client: JoinHandle<io::Result<()>>,
    gate: ClientGate,
    admin_fd: Option<std::os::fd::RawFd>,
    metrics_fd: Option<std::os::fd::RawFd>,
}

impl Running {
    /// What a takeover hands over from this process ([`Donor`]).
    pub fn donor(&self, control: &Control) -> Donor {
        Donor {
            engine: control.engine.clone(),
            proxy_id: control.process.id.clone(),
            gate: self.gate.clone(),
            admin: self.admin_fd,
            metrics: self.metrics_fd,
        }
    }

    /// Waits for the client listener to end, which it does only on a
    /// failure, and says why: a proxy without it serves no client.
    /// A listener handed over to a new process does not count: then this
    /// never returns.
    pub async fn client_listener_ended(self) -> String {
        let ended = self.client.await;
        if self.gate.is_closed() {
            return std::future::pending().await;
        }
        match ended {
            Ok(Ok(())) => "the client listener stopped".to_owned(),
            Ok(Err(e)) => format!("the client listener failed: {e}"),
            Err(e) => format!("the client listener task failed: {e}"),
        }
    }
}

/// What a proxy does before it listens, done once: the allocator and the
/// open-file limit set, the client cap checked, the TLS certificate and
/// key loaded, the backends' version read and the object tables' columns.
pub struct Prepared {
    tls: Option<Arc<TlsSettings>>,
}

/// Maps large allocations on their own ([`map_large_allocations`]), raises
/// the open-file limit ([`open_file_limit`]) and refuses to start when it
/// leaves room for no client ([`ClientCap::check`]), loads the TLS
/// certificate and key, then reads the backends' version
/// ([`crate::engine::Engine::probe_server`]) and the object tables'
/// columns (before the first client's `SELECT *`). A takeover does this
/// before it asks for the running proxy's listening sockets, so new
/// connections do not wait in their backlog meanwhile.
pub async fn prepare(control: &Control) -> io::Result<Prepared> {
    map_large_allocations();
    let files = open_file_limit();
    let engine = &control.engine;
    ClientCap::new(&engine.topology.load(), files)
        .check(files)
        .map_err(io::Error::other)?;
    let config = engine.topology.load().config.clone();
    if config.operations.is_none() {
        warn!(
            user = %config.backend.user,
            "no `operations` section: VERIFY FLEET, PROMOTE REPLICA and failover use the backend \
             account, which the data path should hold with DML privileges only"
        );
    }
    let tls = listener::load_tls(engine)?;
    engine.probe_server().await;
    for problem in crate::backend::columns::refresh(&**engine).await {
        warn!(
            "object table columns not read (SELECT * on them is refused until they are): {problem}"
        );
    }
    Ok(Prepared { tls })
}

/// [`prepare`]s the proxy, binds every listener the config in force names
/// (any failure is returned before a task starts), then spawns the
/// listeners and the background tasks on the current runtime. Listen
/// addresses are read once: changing them takes a restart.
pub async fn run(control: Arc<Control>) -> io::Result<Running> {
    let prepared = prepare(&control).await?;
    run_prepared(control, prepared, None).await
}

/// [`run`] after [`prepare`]; with `inherited`, on the listening sockets a
/// takeover handed over instead of binding the config's addresses.
pub async fn run_prepared(
    control: Arc<Control>,
    prepared: Prepared,
    inherited: Option<Inherited>,
) -> io::Result<Running> {
    let engine = &control.engine;
    let config = engine.topology.load().config.clone();
    let Prepared { tls } = prepared;
    let (client, admin, metrics) = match inherited {
        Some(inherited) => {
            let take = |listener: Option<std::net::TcpListener>| {
                listener.map(TcpListener::from_std).transpose()
            };
            (
                TcpListener::from_std(inherited.client)?,
                take(inherited.admin)?,
                take(inherited.metrics)?,
            )
        }
        None => {
            let client = bind(&config.listen, "client").await?;
            let admin = match &config.admin {
                Some(admin) => Some(bind(&admin.listen, "admin").await?),
                None => None,
            };
            let metrics = match &config.metrics {
                Some(metrics) => Some(bind(&metrics.listen, "metrics").await?),
                None => None,
            };
            (client, admin, metrics)
        }
    };
    let raw = |listener: &TcpListener| std::os::fd::AsRawFd::as_raw_fd(listener);
    let (admin_fd, metrics_fd) = (admin.as_ref().map(raw), metrics.as_ref().map(raw));
    let listening = Listening {
        client: client.local_addr()?,
        admin: admin.as_ref().map(TcpListener::local_addr).transpose()?,
        metrics: metrics.as_ref().map(TcpListener::local_addr).transpose()?,
    };
    let text = |addr: Option<SocketAddr>| addr.map(|a| a.to_string());
    control.process.set_addresses(Addresses {
        client: text(Some(listening.client)),
        admin: text(listening.admin),
        metrics: text(listening.metrics),
    });
    control.publish_entry_now().await;
    crate::backend::columns::spawn(engine);
    let listening_now = Arc::new(ListenerUp::default());
    listening_now.set(true);
    let serving = listening_now.clone();
    let gate = ClientGate::default();
    let serve_client = listener::serve_gated(engine.clone(), client, tls, gate.clone());
    let client = spawn_logged("client listener", async move {
        let ended = serve_client.await;
        serving.set(false);
        ended
    });
    if let Some(listener) = admin {
        spawn_logged(
            "admin listener",
            crate::admin::serve(control.clone(), listener),
        );
    }
    if let Some(listener) = metrics {
        let heartbeat = Heartbeat::spawn();
        let scraped = control.clone();
        let ready = control.clone();
        let endpoints = Endpoints {
            metrics: Box::new(move || {
                let engine = &scraped.engine;
                let hosts = engine.backends.figures(&engine.topology.load());
                crate::stats::prometheus(
                    &engine.stats,
                    &hosts,
                    &crate::control::readiness::figures(&scraped),
                )
            }),
            healthz: Box::new(move || heartbeat.liveness()),
            ready: Box::new(move || readiness(&ready, listening_now.get())),
        };
        spawn_logged(
            "metrics endpoint",
            crate::stats::http::serve(listener, endpoints),
        );
    }
    let (host_events, events) = tokio::sync::mpsc::unbounded_channel();
    crate::backend::health::spawn(engine, host_events);
    crate::control::failover::spawn_auto_failover(&control, events);
    crate::control::reload::spawn_watchers(control.clone());
    Ok(Running {
        listening,
        client,
        gate,
        admin_fd,
        metrics_fd,
    })
}

/// [`run`], for callers that only need the addresses.
pub async fn start(control: Arc<Control>) -> io::Result<Listening> {
    Ok(run(control).await?.listening)
}

async fn bind(addr: &str, what: &str) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr} ({what}): {e}")))
}

fn spawn_logged<F>(what: &'static str, task: F) -> JoinHandle<io::Result<()>>
where
    F: std::future::Future<Output = io::Result<()>> + Send + 'static,
{
    tokio::spawn(async move {
        let result = task.await;
        if let Err(e) = &result {
            error!(%e, "{what} stopped");
        }
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::config::TlsConfig;
    use crate::topology::tests::{load, SPEC_YAML};

    #[tokio::test]
    async fn an_unusable_tls_section_fails_the_start_before_any_listener_runs() {
        let yaml = SPEC_YAML
            .replace("listen: 127.0.0.1:6033", "listen: 127.0.0.1:0")
            .replace("  listen: 127.0.0.1:6032\n", "  listen: 127.0.0.1:0\n");
        let mut topology = load(&yaml);
        // Valid when the config was loaded, gone by the start.
        topology.config.tls = Some(TlsConfig {
            cert: "/nonexistent/shardgate/cert.pem".into(),
            key: "/nonexistent/shardgate/key.pem".into(),
            require: false,
        });
        let control = Arc::new(Control::new(topology, None));
        let error = run(control.clone()).await.err().expect("the start fails");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(error.to_string().starts_with("tls: "), "{error}");
        assert_eq!(
            Arc::strong_count(&control),
            1,
            "no listener or background task was started"
        );
        assert_eq!(Arc::strong_count(&control.engine), 1);
    }
}
