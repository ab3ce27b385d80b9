//! The client listener: one task per connection.

use std::io;
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::{debug, info, info_span, Instrument};

use super::handshake::{self, LoginBounds};
use super::session;
use super::tls::TlsSettings;
use crate::engine::Engine;
use crate::net::{open_file_limit, ClientCap, ConnectionCount};

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
/// offering (or requiring) `tls`, once the backends' version and idle
/// timeouts were read ([`Engine::probe_server`]). Every connection counts against the
/// client cap ([`ClientCap`], from `limits.max_client_connections` and the
/// open-file limit, read at each accept) from its accept to its close; one
/// past it is answered 1040 in place of the greeting and closed. A
/// connection's login is held to the `limits` in force at its accept
/// ([`LoginBounds`]).
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
    engine.probe_server().await;
    let files = open_file_limit();
    ClientCap::new(&engine.topology.load(), files).log(files);
    let open = ConnectionCount::default();
    let accept = crate::net::accept_forever(listener, "client listener", |stream, peer, _| {
        // The registry's id, never one a live session still has (the
        // accept loop's count wraps over them).
        let connection_id = engine.sessions.next_id();
        let topology = engine.topology.load();
        let cap = ClientCap::new(&topology, files).effective;
        let slot = open.try_acquire(cap);
        let bounds = LoginBounds::new(&topology.config.limits);
        let engine = engine.clone();
        let tls = tls.clone();
        async move {
            let Some(_slot) = slot else {
                debug!(connection_id, %peer, cap, "too many client connections; answered 1040");
                engine.stats.operator.connection_refused();
                handshake::refuse_too_many_connections(stream, cap);
                return;
            };
            // Every line a session logs carries its id and, once logged in,
            // its user.
            let span = info_span!("session", connection_id, user = tracing::field::Empty);
            let run = session::run(engine, stream, connection_id, tls, bounds).instrument(span);
            if let Err(error) = run.await {
                debug!(connection_id, %peer, %error, "session ended with an error");
            }
        }
    });
    // A stop closes the listening socket: new clients are refused.
    tokio::select! {
        () = accept => {}
        () = engine.sessions.draining() => info!("stopping: no longer accepting clients"),
    }
    Ok(())
}
