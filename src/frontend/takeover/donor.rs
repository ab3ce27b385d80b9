//! The running (old) process's side of a takeover: it listens on the
//! takeover socket, hands its listening sockets to the new process, then
//! each session at its next boundary, and returns once it holds none.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tracing::{info, warn};

use super::wire::Channel;
use super::{format_of, Message, FORMAT};
use crate::engine::sessions::HandoffOffer;
use crate::engine::Engine;
use crate::frontend::listener::ClientGate;

/// How often the donor looks whether it still holds sessions and whether
/// the new process is still there.
const POLL: Duration = Duration::from_millis(20);

/// What the old process hands over.
pub struct Donor {
    /// Its engine (the sessions).
    pub engine: Arc<Engine>,
    /// Its registry id.
    pub proxy_id: String,
    /// The client listener's gate.
    pub gate: ClientGate,
    /// The admin listening socket, if any (open for the process's life).
    pub admin: Option<RawFd>,
    /// The metrics listening socket, if any (open for the process's life).
    pub metrics: Option<RawFd>,
}

/// How a completed takeover went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandedOver {
    /// Sessions moved to the new process.
    pub handed: u64,
    /// Sessions closed here (1053 at a boundary) after
    /// `shutdown.drain_timeout_ms`.
    pub closed: u64,
    /// Sessions still open when the drain ended (cut).
    pub cut: u64,
    /// From the listeners sent to the last session moved or closed.
    pub took: Duration,
    /// From the first session moved to the last.
    pub first_to_last: Duration,
}

impl std::fmt::Display for HandedOver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "handed over in {} ms (sessions first to last {} ms): sessions handed {}, closed {}, cut {}",
            self.took.as_millis(),
            self.first_to_last.as_millis(),
            self.handed,
            self.closed,
            self.cut
        )
    }
}

/// The bound takeover socket.
pub struct TakeoverSocket {
    /// Where it is.
    pub path: PathBuf,
    listener: UnixListener,
    /// The inode bound at `path` (another process may replace it).
    inode: u64,
}

impl TakeoverSocket {
    /// Binds the takeover socket at `path`, owner-only (0600). A stale
    /// file (nobody listening) is replaced; with `replace`, also a live one
    /// (the process that took over replaces its predecessor's).
    pub async fn bind(path: &Path, replace: bool) -> io::Result<Self> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if std::fs::symlink_metadata(path).is_ok() {
            let live = tokio::net::UnixStream::connect(path).await.is_ok();
            if live && !replace {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "{} is the takeover socket of a running proxy (start this one with --takeover, or set takeover.socket)",
                        path.display()
                    ),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let inode = std::fs::symlink_metadata(path)?.ino();
        Ok(Self {
            path: path.to_owned(),
            listener,
            inode,
        })
    }

    /// Removes the socket's path if it is still the one this process bound.
    pub fn unbind(&self) {
        use std::os::unix::fs::MetadataExt;
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Donor {
    /// Serves takeovers on `listener` until one completes. A peer of
    /// another user, a refusal or a failure before the end leaves this
    /// process serving as before.
    pub async fn serve(&self, socket: &TakeoverSocket) -> HandedOver {
        loop {
            let stream = match socket.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    warn!(%error, "takeover socket: accept failed");
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            };
            let channel = match Channel::new(stream) {
                Ok(channel) => channel,
                Err(error) => {
                    warn!(%error, "takeover refused");
                    continue;
                }
            };
            info!(socket = %socket.path.display(), "a new process asks to take over");
            match self.hand_over(channel).await {
                Ok(done) => return done,
                Err(error) => {
                    self.engine.sessions.end_handoff();
                    if self.engine.sessions.is_draining() {
                        // Past `shutdown.drain_timeout_ms` the sessions
                        // left were already closing: finish as a stop.
                        warn!(%error, "takeover failed after the drain began: this process finishes the drain and exits");
                        return HandedOver {
                            handed: 0,
                            closed: 0,
                            cut: self.engine.sessions.count() as u64,
                            took: Duration::ZERO,
                            first_to_last: Duration::ZERO,
                        };
                    }
                    self.gate.open();
                    warn!(%error, "takeover failed: this process goes on serving");
                }
            }
        }
    }

    async fn hand_over(&self, mut channel: Channel) -> io::Result<HandedOver> {
        let hello = Message::Hello {
            format: FORMAT,
            proxy_id: self.proxy_id.clone(),
        };
        channel.send(&hello, &[]).await?;
        let (answer, _) = channel.recv_value().await?;
        match serde_json::from_value::<Message>(answer.clone()) {
            Ok(Message::Accept { format }) if format == FORMAT => {}
            Ok(Message::Refuse { reason }) => {
                return Err(io::Error::other(format!(
                    "the new process refused: {reason}"
                )))
            }
            _ => {
                return Err(io::Error::other(format!(
                "the new process answered {answer} (format {:?}), not an accept of format {FORMAT}",
                format_of(&answer)
            )))
            }
        }
        let client = self.gate.pause().await?;
        let started = Instant::now();
        let dup = |fd: Option<RawFd>| -> io::Result<Option<OwnedFd>> {
            fd.map(|fd| {
                // SAFETY: the admin and metrics listeners stay open for the
                // process's life.
                unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()
            })
            .transpose()
        };
        let (admin, metrics) = (dup(self.admin)?, dup(self.metrics)?);
        let mut fds = vec![client.as_raw_fd()];
        fds.extend(admin.iter().chain(metrics.iter()).map(AsRawFd::as_raw_fd));
        let listeners = Message::Listeners {
            admin: admin.is_some(),
            metrics: metrics.is_some(),
            next_connection_id: self.engine.sessions.peek_next_id(),
        };
        channel.send(&listeners, &fds).await?;
        drop((client, admin, metrics));
        match channel.recv::<Message>().await?.0 {
            Message::Listening => {}
            other => {
                return Err(io::Error::other(format!(
                    "expected listening, got {other:?}"
                )))
            }
        }
        // Paused, not closed, until the end: if the new process fails, this
        // one accepts again on its own copy of the socket.
        info!("the new process serves the listeners: handing over the sessions");
        let handed = self.hand_sessions(&mut channel).await?;
        self.gate.close();
        let done = Message::Done {
            handed: handed.handed,
        };
        // The new process may be gone by now: every session is placed.
        if let Err(error) = channel.send(&done, &[]).await {
            warn!(%error, "takeover: the new process left before the end");
        }
        Ok(HandedOver {
            took: started.elapsed(),
            ..handed
        })
    }

    /// Offers every session at its next boundary until none is left here.
    async fn hand_sessions(&self, channel: &mut Channel) -> io::Result<HandedOver> {
        let sessions = &self.engine.sessions;
        let (link, mut offers) = tokio::sync::mpsc::unbounded_channel();
        sessions.request_handoff(link);
        let limit =
            Duration::from_millis(self.engine.topology.load().config.shutdown.drain_timeout_ms);
        let started = Instant::now();
        let mut handed = 0;
        let mut moved: Option<(Instant, Instant)> = None;
        let mut draining = false;
        let closed_before = sessions.shutdown_closed();
        let failure = loop {
            if sessions.count() == 0 {
                break None;
            }
            if !draining && started.elapsed() >= limit {
                // The rest close at a boundary with 1053, as a stop closes them.
                sessions.end_handoff();
                sessions.start_draining();
                draining = true;
            }
            if started.elapsed() >= limit * 2 {
                break None;
            }
            if channel.peer_gone() {
                break Some(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the new process closed the takeover channel",
                ));
            }
            let offer = tokio::select! {
                offer = offers.recv() => offer,
                () = tokio::time::sleep(POLL) => continue,
            };
            let Some(offer) = offer else { continue };
            match self.offer(channel, offer).await {
                Ok(true) => {
                    handed += 1;
                    self.engine.stats.operator.handed_off();
                    let now = Instant::now();
                    moved = Some(moved.map_or((now, now), |(first, _)| (first, now)));
                }
                Ok(false) => {}
                Err(error) => break Some(error),
            }
        };
        sessions.end_handoff();
        // Offers made meanwhile stay here.
        offers.close();
        while let Ok(offer) = offers.try_recv() {
            let _ = offer.reply.send(false);
        }
        if let Some(error) = failure {
            if draining {
                warn!("takeover failed while draining: the sessions left close as in a stop");
            }
            return Err(error);
        }
        let closed = sessions.shutdown_closed();
        Ok(HandedOver {
            handed,
            closed: (closed.0 + closed.1).saturating_sub(closed_before.0 + closed_before.1),
            cut: sessions.count() as u64,
            took: Duration::ZERO,
            first_to_last: moved.map_or(Duration::ZERO, |(first, last)| last - first),
        })
    }

    /// Sends one session and waits for the new process's answer; the
    /// session is told whether it was taken (a failure keeps it here).
    async fn offer(&self, channel: &mut Channel, offer: HandoffOffer) -> io::Result<bool> {
        let HandoffOffer {
            connection_id,
            state,
            fd,
            reply,
        } = offer;
        let message = serde_json::json!({"type": "session"})
            .as_object()
            .cloned()
            .map(|mut object| {
                if let serde_json::Value::Object(fields) = state {
                    object.extend(fields);
                }
                serde_json::Value::Object(object)
            })
            .unwrap_or_default();
        let result = async {
            channel.send(&message, &[fd]).await?;
            match channel.recv::<Message>().await?.0 {
                Message::Ack { connection_id: id } if id == connection_id => Ok(true),
                Message::Nack {
                    connection_id: id,
                    reason,
                } if id == connection_id => {
                    warn!(connection_id, %reason, "the new process could not take the session: it stays here");
                    Ok(false)
                }
                other => Err(io::Error::other(format!(
                    "expected the answer for session {connection_id}, got {other:?}"
                ))),
            }
        }
        .await;
        let _ = reply.send(matches!(result, Ok(true)));
        result
    }
}
