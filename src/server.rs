//! Starts a whole proxy from an [`Engine`]: the client listener, the admin
//! port, the metrics endpoint, the health checker and the config watcher.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::error;

use crate::engine::Engine;

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

/// Binds every listener the config in force names and spawns their tasks
/// and the background ones on the current runtime. Listen addresses are
/// read once: changing them takes a restart.
pub async fn start(engine: Arc<Engine>) -> io::Result<Listening> {
    let config = engine.topology.load().config.clone();
    let client = bind(&config.listen, "client").await?;
    let admin = match &config.admin {
        Some(admin) => Some(bind(&admin.listen, "admin").await?),
        None => None,
    };
    let metrics = match &config.metrics {
        Some(metrics) => Some(bind(&metrics.listen, "metrics").await?),
        None => None,
    };
    let listening = Listening {
        client: client.local_addr()?,
        admin: admin.as_ref().map(TcpListener::local_addr).transpose()?,
        metrics: metrics.as_ref().map(TcpListener::local_addr).transpose()?,
    };
    spawn_logged(
        "client listener",
        crate::frontend::serve(engine.clone(), client),
    );
    if let Some(listener) = admin {
        spawn_logged(
            "admin listener",
            crate::admin::serve(engine.clone(), listener),
        );
    }
    if let Some(listener) = metrics {
        spawn_logged(
            "metrics endpoint",
            crate::stats::http::serve(engine.clone(), listener),
        );
    }
    crate::backend::health::spawn(engine.clone());
    crate::engine::reload::spawn_watchers(engine.clone());
    Ok(listening)
}

async fn bind(addr: &str, what: &str) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr} ({what}): {e}")))
}

fn spawn_logged<F>(what: &'static str, task: F)
where
    F: std::future::Future<Output = io::Result<()>> + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = task.await {
            error!(%e, "{what} stopped");
        }
    });
}
