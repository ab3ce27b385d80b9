//! The client listener: one task per connection.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::{info, warn};

use super::session;
use super::tls::TlsSettings;
use crate::engine::Engine;

/// The TLS settings of the config's `tls` section (certificate and key
/// loaded), or `None` without one; an unusable section is an
/// `InvalidInput` error.
pub fn load_tls(engine: &Engine) -> io::Result<Option<Arc<TlsSettings>>> {
    match &engine.topology.load().config.tls {
        Some(config) => TlsSettings::load(config)
            .map(|settings| Some(Arc::new(settings)))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("tls: {e}"))),
        None => Ok(None),
    }
}

/// Loads the TLS settings ([`load_tls`]) and accepts clients on `listener`
/// forever ([`serve_with`]).
pub async fn serve(engine: Arc<Engine>, listener: TcpListener) -> io::Result<()> {
    let tls = load_tls(&engine)?;
    serve_with(engine, listener, tls).await
}

/// Accepts clients on `listener` forever, each served by its own task,
/// offering (or requiring) `tls`.
pub async fn serve_with(
    engine: Arc<Engine>,
    listener: TcpListener,
    tls: Option<Arc<TlsSettings>>,
) -> io::Result<()> {
    let next_id = AtomicU32::new(1);
    info!(
        addr = %listener.local_addr()?,
        tls = tls.as_ref().map_or("off", |t| if t.require { "required" } else { "offered" }),
        "serving clients"
    );
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let connection_id = next_id.fetch_add(1, Ordering::Relaxed);
        let engine = engine.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            if let Err(error) = session::run(engine, stream, connection_id, tls).await {
                tracing::debug!(connection_id, %peer, %error, "session ended with an error");
            }
        });
    }
}
