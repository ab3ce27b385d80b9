//! The client listener: one task per connection.

use std::io;
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::{debug, info, info_span};

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

/// Whether the client listener accepts: a takeover pauses it while it
/// hands the listening socket over (connections wait in the socket's
/// backlog, none is refused), then closes it, or opens it again if the
/// takeover failed.
#[derive(Debug, Clone, Default)]
pub struct ClientGate(Arc<GateInner>);

#[derive(Debug)]
struct GateInner {
    state: tokio::sync::watch::Sender<Gate>,
    /// Whether the accept loop is stopped (no connection gets an id).
    idle: tokio::sync::watch::Sender<bool>,
    /// The listening socket's descriptor, open while the listener runs.
    fd: std::sync::OnceLock<std::os::fd::RawFd>,
}

impl Default for GateInner {
    fn default() -> Self {
        Self {
            state: tokio::sync::watch::Sender::new(Gate::Open),
            idle: tokio::sync::watch::Sender::new(true),
            fd: std::sync::OnceLock::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Open,
    Paused,
    Closed,
}

impl ClientGate {
    /// Stops accepting; once no connection is being accepted, a duplicate
    /// of the listening socket (to hand over).
    pub async fn pause(&self) -> io::Result<std::os::fd::OwnedFd> {
        self.0.state.send_replace(Gate::Paused);
        let _ = self.0.idle.subscribe().wait_for(|idle| *idle).await;
        let fd = self
            .0
            .fd
            .get()
            .copied()
            .ok_or_else(|| io::Error::other("the client listener is not running"))?;
        // SAFETY: the listener task keeps the socket open while paused
        // (it closes it only when draining or closed, never while paused).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()
    }

    /// Accepts again after [`ClientGate::pause`].
    pub fn open(&self) {
        self.0.state.send_if_modified(|gate| {
            let paused = *gate == Gate::Paused;
            if paused {
                *gate = Gate::Open;
            }
            paused
        });
    }

    /// Stops accepting for good: the client listener's task ends.
    pub fn close(&self) {
        self.0.state.send_replace(Gate::Closed);
    }

    /// Whether [`ClientGate::close`] was called (the listener was handed
    /// over).
    pub fn is_closed(&self) -> bool {
        *self.0.state.borrow() == Gate::Closed
    }
}

/// Accepts clients on `listener` forever, each served by its own task,
/// offering (or requiring) `tls`, once the backends' version and idle
/// timeouts were read ([`Engine::probe_server`]). Every connection counts against the
/// client cap ([`ClientCap`], from `limits.max_client_connections` and the
/// open-file limit, read at each accept) from its accept to its close
/// ([`Engine::clients`], where sessions a takeover brings count too); one
/// past it is answered 1040 in place of the greeting and closed. A
/// connection's login is held to the `limits` in force at its accept
/// ([`LoginBounds`]).
pub async fn serve_with(
    engine: Arc<Engine>,
    listener: TcpListener,
    tls: Option<Arc<TlsSettings>>,
) -> io::Result<()> {
    serve_gated(engine, listener, tls, ClientGate::default()).await
}

/// [`serve_with`], accepting only while `gate` is open; ends when it
/// closes.
pub async fn serve_gated(
    engine: Arc<Engine>,
    listener: TcpListener,
    tls: Option<Arc<TlsSettings>>,
    gate: ClientGate,
) -> io::Result<()> {
    info!(
        addr = %listener.local_addr()?,
        tls = tls.as_ref().map_or("off", |t| if t.require { "required" } else { "offered" }),
        "serving clients"
    );
    engine.probe_server().await;
    let files = open_file_limit();
    ClientCap::new(&engine.topology.load(), files).log(files);
    let open = engine.clients.clone();
    // Each round accepts on a duplicate of the socket, dropped when the
    // gate pauses; the socket itself stays open (and keeps its backlog).
    let listener = listener.into_std()?;
    let _ = gate.0.fd.set(std::os::fd::AsRawFd::as_raw_fd(&listener));
    let mut states = gate.0.state.subscribe();
    loop {
        let state = *states.borrow_and_update();
        match state {
            Gate::Closed => {
                info!("handed over: no longer accepting clients");
                return Ok(());
            }
            Gate::Paused => {
                // A takeover in progress closes the gate when done or opens
                // it again. The drain it starts past
                // `shutdown.drain_timeout_ms` is its own to finish: ending
                // here would read as a failed listener and stop the process
                // with the sessions left in it cut.
                if states.changed().await.is_err() {
                    break;
                }
                continue;
            }
            Gate::Open => {}
        }
        let round = TcpListener::from_std(listener.try_clone()?)?;
        gate.0.idle.send_replace(false);
        let accept = accept_round(&engine, round, &tls, files, &open);
        let stopped = tokio::select! {
            () = accept => false,
            _ = states.wait_for(|gate| *gate != Gate::Open) => false,
            () = engine.sessions.draining() => true,
        };
        gate.0.idle.send_replace(true);
        if stopped {
            break;
        }
    }
    info!("stopping: no longer accepting clients");
    Ok(())
}

/// Accepts clients on `listener` until dropped.
async fn accept_round(
    engine: &Arc<Engine>,
    listener: TcpListener,
    tls: &Option<Arc<TlsSettings>>,
    files: Option<crate::net::FileLimit>,
    open: &ConnectionCount,
) {
    crate::net::accept_forever(listener, "client listener", |stream, peer, _| {
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
            let run = session::logged(
                span,
                session::run(engine, stream, connection_id, tls, bounds),
            );
            if let Err(error) = run.await {
                debug!(connection_id, %peer, %error, "session ended with an error");
            }
        }
    })
    .await;
}
