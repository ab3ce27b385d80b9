//! The seam between the statement path and the hosts: how a backend
//! connection reaches its host. Every connection the engine makes (pooled
//! ones for statements, control connections for `KILL QUERY` and the
//! server probe) is opened through the [`Dialer`] of its [`Backends`]
//! (`super::Backends`); the real one is [`TcpDialer`]. Engine unit tests
//! give the engine a dialer whose hosts are scripted in-process MySQL
//! servers (`engine/tests/fake.rs`), so the engine's own checkout, send,
//! relay, release and kill code runs unchanged against them.
//!
//! The dialer is called once per new connection, never per statement; what
//! a statement reads and writes goes through [`HostRead`] / [`HostWrite`],
//! enums with one arm per kind of stream (static dispatch: a `match` per
//! poll, no boxing).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A byte stream to a host, as a [`Dialer`] opened it.
pub enum HostStream {
    /// A TCP connection (every real host).
    Tcp(TcpStream),
    /// An in-process stream, whose other end is a fake host of a test.
    Memory(DuplexStream),
}

impl HostStream {
    /// The stream's read and write halves.
    pub fn split(self) -> (HostRead, HostWrite) {
        match self {
            HostStream::Tcp(stream) => {
                let (read, write) = stream.into_split();
                (HostRead::Tcp(read), HostWrite::Tcp(write))
            }
            HostStream::Memory(stream) => {
                let (read, write) = tokio::io::split(stream);
                (HostRead::Memory(read), HostWrite::Memory(write))
            }
        }
    }
}

/// The reading half of a [`HostStream`].
pub enum HostRead {
    /// Of a TCP connection.
    Tcp(OwnedReadHalf),
    /// Of an in-process stream.
    Memory(ReadHalf<DuplexStream>),
}

/// The writing half of a [`HostStream`].
pub enum HostWrite {
    /// Of a TCP connection.
    Tcp(OwnedWriteHalf),
    /// Of an in-process stream.
    Memory(WriteHalf<DuplexStream>),
}

impl AsyncRead for HostRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostRead::Tcp(read) => Pin::new(read).poll_read(cx, buf),
            HostRead::Memory(read) => Pin::new(read).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for HostWrite {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HostWrite::Tcp(write) => Pin::new(write).poll_write(cx, buf),
            HostWrite::Memory(write) => Pin::new(write).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HostWrite::Tcp(write) => Pin::new(write).poll_write_vectored(cx, bufs),
            HostWrite::Memory(write) => Pin::new(write).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            HostWrite::Tcp(write) => write.is_write_vectored(),
            HostWrite::Memory(write) => write.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostWrite::Tcp(write) => Pin::new(write).poll_flush(cx),
            HostWrite::Memory(write) => Pin::new(write).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostWrite::Tcp(write) => Pin::new(write).poll_shutdown(cx),
            HostWrite::Memory(write) => Pin::new(write).poll_shutdown(cx),
        }
    }
}

/// What [`Dialer::dial`] returns: the stream once it is open.
pub type Dialing<'a> = Pin<Box<dyn Future<Output = io::Result<HostStream>> + Send + 'a>>;

/// Opens byte streams to hosts by address. Called once per new backend
/// connection (never per statement), so a boxed future costs nothing the
/// statement path would notice.
pub trait Dialer: Send + Sync {
    /// A stream to `addr` (`host:port`); a refused or failed connect is
    /// the `Err`. The caller bounds the time it takes.
    fn dial<'a>(&'a self, addr: &'a str) -> Dialing<'a>;
}

/// The real hosts: TCP, with Nagle's algorithm off.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpDialer;

impl Dialer for TcpDialer {
    fn dial<'a>(&'a self, addr: &'a str) -> Dialing<'a> {
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok(HostStream::Tcp(stream))
        })
    }
}
