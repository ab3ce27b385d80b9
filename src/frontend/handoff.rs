//! What moves with a client session when a new process takes over
//! (`serve --takeover`, [`super::takeover`]): its state, and its plain
//! client socket, which this process must then leave open.

use serde::{Deserialize, Serialize};

use crate::engine::session_state::CarriedState;

/// One client session as it moves: the login and the statement path's
/// state ([`CarriedState`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSnapshot {
    /// Its id (`CONNECTION_ID()`), kept.
    pub connection_id: u32,
    /// The account it logged in with.
    pub user: String,
    /// The client's address.
    pub peer: String,
    /// Capability flags in force.
    pub capabilities: u32,
    /// The handshake's collation.
    pub collation: u8,
    /// The handshake's scramble (COM_CHANGE_USER answers with it).
    pub nonce: [u8; 20],
    /// The database named at login.
    pub login_database: Option<String>,
    /// Database, settings, transaction characteristics, prepared statements.
    pub state: CarriedState,
}

use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use tokio::net::tcp::OwnedWriteHalf;

/// The client socket as the session offers it: its descriptor, and the
/// flag that, once set, keeps the connection open when the session drops
/// its halves (the new process holds the same socket).
#[derive(Debug, Clone)]
pub struct HandoffSocket {
    /// The socket's descriptor in this process.
    pub fd: RawFd,
    released: Arc<AtomicBool>,
}

impl HandoffSocket {
    /// Marks the socket as taken by another process.
    pub fn release(&self) {
        self.released.store(true, Ordering::Release);
    }
}

/// The write half of a plain client socket. Dropping tokio's write half
/// shuts the connection's sending side down (a FIN the client sees) even
/// when another process holds the socket; once released, this one only
/// closes this process's descriptor.
pub struct ReleasableWrite {
    half: Option<OwnedWriteHalf>,
    released: Arc<AtomicBool>,
}

impl ReleasableWrite {
    /// Wraps `half` of the socket whose descriptor is `fd`; the returned
    /// [`HandoffSocket`] releases it.
    pub fn new(half: OwnedWriteHalf, fd: RawFd) -> (Self, HandoffSocket) {
        let released = Arc::new(AtomicBool::new(false));
        (
            Self {
                half: Some(half),
                released: released.clone(),
            },
            HandoffSocket { fd, released },
        )
    }

    fn half(&mut self) -> io::Result<Pin<&mut OwnedWriteHalf>> {
        match &mut self.half {
            Some(half) => Ok(Pin::new(half)),
            None => Err(io::Error::from(io::ErrorKind::NotConnected)),
        }
    }
}

impl Drop for ReleasableWrite {
    fn drop(&mut self) {
        if let Some(half) = self.half.take() {
            if self.released.load(Ordering::Acquire) {
                half.forget();
            }
        }
    }
}

impl AsyncWrite for ReleasableWrite {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.half() {
            Ok(half) => half.poll_write(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.half() {
            Ok(half) => half.poll_write_vectored(cx, bufs),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.half() {
            Ok(half) => half.poll_flush(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.half() {
            Ok(half) => half.poll_shutdown(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}
