//! The new process's side of a takeover (`serve --takeover`): it connects
//! to the running proxy's takeover socket, checks the format, receives the
//! listening sockets, then serves every session handed to it.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use thiserror::Error;
use tokio::net::UnixStream;
use tracing::{debug, info, info_span, warn};

use super::wire::Channel;
use super::{format_of, Message, FORMAT};
use crate::engine::Engine;
use crate::frontend::handoff::{HandoffSocket, SessionSnapshot};
use crate::frontend::session;

/// Why a takeover could not start; the running proxy goes on serving.
#[derive(Debug, Error)]
pub enum TakeoverError {
    /// No running proxy answers at the takeover socket.
    #[error("cannot reach the running proxy at {path}: {error} (is it running with this config? see takeover.socket)")]
    Connect {
        /// The takeover socket.
        path: PathBuf,
        /// The failure.
        error: io::Error,
    },
    /// The running proxy hands over in a format this build cannot read.
    #[error("the running proxy hands over in format {}; this build reads format {FORMAT} only: refused, the running proxy goes on serving (stop it with SIGTERM instead)", .found.map_or_else(|| "(none given)".to_owned(), |f| f.to_string()))]
    Format {
        /// The format it announced.
        found: Option<u32>,
    },
    /// Neither `takeover.socket` nor a fixed client port names the socket.
    #[error("no takeover socket: the client port is 0 and the config has no takeover.socket")]
    NoSocket,
    /// The exchange failed.
    #[error("takeover failed: {0}")]
    Exchange(#[from] io::Error),
}

/// The listening sockets taken over.
pub struct Inherited {
    /// The client port.
    pub client: std::net::TcpListener,
    /// The admin port, if the old process had one.
    pub admin: Option<std::net::TcpListener>,
    /// The metrics endpoint, if the old process had one.
    pub metrics: Option<std::net::TcpListener>,
}

/// A takeover under way: the listeners are here, the sessions follow.
pub struct Taking {
    channel: Channel,
    /// The old process's id.
    pub from: String,
    next_connection_id: u32,
    /// When the listening sockets came (new connections wait in their
    /// backlog until this process accepts).
    received: Instant,
}

/// What the new process received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Sessions it serves now.
    pub sessions: u64,
    /// Whether the old process said it was done (else it went away).
    pub completed: bool,
}

/// Connects to the running proxy at `path`, reads its first message
/// (refusing a format this build does not read: it answers why and the
/// old process goes on serving) and receives its listening sockets.
pub async fn connect(path: &Path) -> Result<(Taking, Inherited), TakeoverError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|error| TakeoverError::Connect {
            path: path.to_owned(),
            error,
        })?;
    let mut channel = Channel::new(stream)?;
    let (first, _) = channel.recv_value().await?;
    let found = format_of(&first);
    if found != Some(FORMAT) {
        let refusal = Message::Refuse {
            reason: format!("format {found:?} is not format {FORMAT}"),
        };
        let _ = channel.send(&refusal, &[]).await;
        return Err(TakeoverError::Format { found });
    }
    let from = match serde_json::from_value(first) {
        Ok(Message::Hello { proxy_id, .. }) => proxy_id,
        _ => return Err(TakeoverError::Format { found }),
    };
    channel
        .send(&Message::Accept { format: FORMAT }, &[])
        .await?;
    let (message, fds) = channel.recv::<Message>().await?;
    let received = Instant::now();
    let Message::Listeners {
        admin,
        metrics,
        next_connection_id,
    } = message
    else {
        return Err(io::Error::other(format!("expected the listeners, got {message:?}")).into());
    };
    let expected = 1 + usize::from(admin) + usize::from(metrics);
    if fds.len() != expected {
        return Err(io::Error::other(format!(
            "{} listening sockets came, {expected} announced",
            fds.len()
        ))
        .into());
    }
    let mut fds = fds.into_iter().map(listener);
    let mut next = || fds.next().transpose();
    let client = next()?.ok_or_else(|| io::Error::other("no client socket"))?;
    let admin = if admin { next()? } else { None };
    let metrics = if metrics { next()? } else { None };
    info!(from = %from, "took over the listening sockets");
    Ok((
        Taking {
            channel,
            from,
            next_connection_id,
            received,
        },
        Inherited {
            client,
            admin,
            metrics,
        },
    ))
}

fn listener(fd: OwnedFd) -> io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    Ok(listener)
}

impl Taking {
    /// Numbers connections on from the old process's next id, says the
    /// listeners are served, then serves each session handed over (an ack
    /// once it is registered here) until the old process is done or gone.
    pub async fn receive_sessions(mut self, engine: Arc<Engine>) -> Received {
        engine.sessions.continue_ids_from(self.next_connection_id);
        let mut received = Received {
            sessions: 0,
            completed: false,
        };
        if let Err(error) = self.channel.send(&Message::Listening, &[]).await {
            warn!(%error, "takeover: the old process is gone");
            return received;
        }
        info!(
            window_ms = self.received.elapsed().as_millis() as u64,
            "serving the listeners taken over (window_ms: from receiving them to accepting)"
        );
        loop {
            let (message, fds) = match self.channel.recv::<Message>().await {
                Ok(next) => next,
                Err(error) => {
                    warn!(%error, "takeover: the old process left before it was done");
                    return received;
                }
            };
            let (answer, start) = match message {
                Message::Session(snapshot) => {
                    let id = snapshot.connection_id;
                    match take_session(&engine, *snapshot, fds) {
                        Ok(start) => (Message::Ack { connection_id: id }, Some(start)),
                        Err(reason) => (
                            Message::Nack {
                                connection_id: id,
                                reason,
                            },
                            None,
                        ),
                    }
                }
                Message::Done { handed } => {
                    info!(handed, from = %self.from, "takeover done");
                    received.completed = true;
                    return received;
                }
                other => {
                    warn!(?other, "takeover: unexpected message; the exchange ends");
                    return received;
                }
            };
            // Nothing is read from the client before the old process has the
            // ack: without it, it goes on serving the session.
            if let Err(error) = self.channel.send(&answer, &[]).await {
                warn!(%error, "takeover: the old process is gone");
                if let Some(start) = start {
                    start.abandon();
                }
                return received;
            }
            if let Some(start) = start {
                received.sessions += 1;
                start.run();
            }
        }
    }
}

/// A session registered here, not yet run.
struct Pending {
    run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    socket: HandoffSocket,
}

impl Pending {
    fn run(self) {
        tokio::spawn(self.run);
    }

    /// Drops it unrun, leaving the client's connection open for the old
    /// process.
    fn abandon(self) {
        self.socket.release();
    }
}

/// Registers one session handed over with its socket, to run once acked.
fn take_session(
    engine: &Arc<Engine>,
    snapshot: SessionSnapshot,
    fds: Vec<OwnedFd>,
) -> Result<Pending, String> {
    let [fd]: [OwnedFd; 1] = fds
        .try_into()
        .map_err(|fds: Vec<OwnedFd>| format!("{} sockets came with the session", fds.len()))?;
    let connection_id = snapshot.connection_id;
    let stream = std::net::TcpStream::from(fd);
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    let stream = tokio::net::TcpStream::from_std(stream).map_err(|e| e.to_string())?;
    let user = snapshot.user.clone();
    let (run, socket) = session::resume(engine.clone(), stream, snapshot)?;
    let span = info_span!("session", connection_id, user = %user);
    // Counted against the client cap here from now on (over it, if the
    // cap is lower here: it is open already); the old process's count
    // drops when its session ends.
    let slot = engine.clients.count_in();
    let run = session::logged(span, async move {
        let _slot = slot;
        if let Err(error) = run.await {
            debug!(%error, "session ended with an error");
        }
    });
    Ok(Pending {
        run: Box::pin(run),
        socket,
    })
}
