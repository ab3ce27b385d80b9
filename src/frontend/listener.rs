//! The client listener: one task per connection.

use std::io;
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::info;

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
    info!(
        addr = %listener.local_addr()?,
        tls = tls.as_ref().map_or("off", |t| if t.require { "required" } else { "offered" }),
        "serving clients"
    );
    crate::server::accept_forever(
        listener,
        "client listener",
        |stream, peer, connection_id| {
            let engine = engine.clone();
            let tls = tls.clone();
            async move {
                if let Err(error) = session::run(engine, stream, connection_id, tls).await {
                    tracing::debug!(connection_id, %peer, %error, "session ended with an error");
                }
            }
        },
    )
    .await;
    Ok(())
}
