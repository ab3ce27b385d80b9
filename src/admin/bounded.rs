//! The admin port's bounds, applied in front of `opensrv-mysql` (which has
//! none of its own and buffers a whole packet, continuation frames joined,
//! before looking at it): the read side of each admin connection follows
//! the MySQL frame headers going through it and fails the read
//!
//! - at a header that takes a packet past the limit (the login packet's
//!   before the login, the client packet's after), before opensrv sees it;
//! - at a continuation frame whose sequence id does not follow the one
//!   before (opensrv asserts on it, which would panic the task);
//! - before the login is over, once the login deadline has passed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Sleep;

use crate::frontend::handshake::LoginBounds;
use crate::protocol::frame::{PacketTooLarge, MAX_FRAME_PAYLOAD};

const HEADER_LEN: usize = 4;

/// An admin connection's read side, held to its login bounds.
pub(super) struct BoundedReader<R> {
    inner: R,
    bounds: LoginBounds,
    /// Set by the shim once the login was accepted.
    logged_in: Arc<AtomicBool>,
    deadline: Option<Pin<Box<Sleep>>>,
    frames: FrameTracker,
}

impl<R> BoundedReader<R> {
    /// Wraps `inner`; the login is over when `logged_in` is set.
    pub(super) fn new(inner: R, bounds: LoginBounds, logged_in: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            deadline: bounds
                .deadline
                .map(|deadline| Box::pin(tokio::time::sleep_until(deadline))),
            bounds,
            logged_in,
            frames: FrameTracker::default(),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let logged_in = this.logged_in.load(Ordering::Acquire);
        // Checked on every read, not only while waiting: a client that
        // trickles bytes must not outlast the deadline either.
        let expired = |deadline: &mut Pin<Box<Sleep>>| deadline.as_mut().poll(cx).is_ready();
        if !logged_in && this.deadline.as_mut().is_some_and(expired) {
            return Poll::Ready(Err(this.bounds.timed_out()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let limit = if logged_in {
                    this.bounds.max_packet
                } else {
                    this.bounds.max_login_packet
                };
                Poll::Ready(this.frames.track(&buf.filled()[before..], limit))
            }
            other => other,
        }
    }
}

/// Where the byte stream stands among frame headers and payloads.
#[derive(Debug, Default)]
struct FrameTracker {
    header: [u8; HEADER_LEN],
    header_read: usize,
    payload_left: usize,
    packet_len: usize,
    /// The sequence id of the frame before, while the packet continues.
    continued_after: Option<u8>,
}

impl FrameTracker {
    /// Follows `bytes`; an error at the first header that takes its packet
    /// over `limit` or breaks the continuation sequence.
    fn track(&mut self, mut bytes: &[u8], limit: usize) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let skipped = self.payload_left.min(bytes.len());
                self.payload_left -= skipped;
                bytes = &bytes[skipped..];
                continue;
            }
            let taken = (HEADER_LEN - self.header_read).min(bytes.len());
            self.header[self.header_read..self.header_read + taken]
                .copy_from_slice(&bytes[..taken]);
            self.header_read += taken;
            bytes = &bytes[taken..];
            if self.header_read < HEADER_LEN {
                break;
            }
            self.header_read = 0;
            self.next_frame(limit)?;
        }
        Ok(())
    }

    fn next_frame(&mut self, limit: usize) -> io::Result<()> {
        let [a, b, c, seq] = self.header;
        let len = usize::from(a) | usize::from(b) << 8 | usize::from(c) << 16;
        match self.continued_after {
            // A packet of 256 frames is over any limit; refusing the wrap
            // keeps opensrv's `seq + 1` from overflowing.
            Some(previous) if previous == u8::MAX || seq != previous + 1 => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("broken continuation: frame with sequence id {seq} after {previous}"),
                ));
            }
            Some(_) => {}
            None => self.packet_len = 0,
        }
        self.packet_len = self.packet_len.saturating_add(len);
        if self.packet_len > limit {
            return Err(PacketTooLarge {
                seq,
                declared: self.packet_len,
                limit,
            }
            .into());
        }
        self.payload_left = len;
        self.continued_after = (len == MAX_FRAME_PAYLOAD).then_some(seq);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: usize, seq: u8) -> [u8; 4] {
        [len as u8, (len >> 8) as u8, (len >> 16) as u8, seq]
    }

    #[test]
    fn follows_frames_split_anywhere() {
        let mut stream = Vec::new();
        for (len, seq) in [(3, 1), (0, 2), (5, 0)] {
            stream.extend_from_slice(&header(len, seq));
            stream.extend(std::iter::repeat_n(7u8, len));
        }
        for split in 0..stream.len() {
            let mut tracker = FrameTracker::default();
            tracker.track(&stream[..split], 5).unwrap();
            tracker.track(&stream[split..], 5).unwrap();
            assert_eq!((tracker.header_read, tracker.payload_left), (0, 0));
        }
    }

    #[test]
    fn refuses_a_declared_length_over_the_limit_on_the_header() {
        let mut tracker = FrameTracker::default();
        let error = tracker.track(&header(4097, 1), 4096).unwrap_err();
        let too_large = PacketTooLarge::of(&error).unwrap();
        assert_eq!((too_large.declared, too_large.limit), (4097, 4096));

        // Continuation frames add up: 128 MiB declared in 16 MiB frames.
        let mut tracker = FrameTracker::default();
        let mut stream = header(MAX_FRAME_PAYLOAD, 1).to_vec();
        stream.extend(vec![0u8; MAX_FRAME_PAYLOAD]);
        stream.extend_from_slice(&header(MAX_FRAME_PAYLOAD, 2));
        let error = tracker.track(&stream, 20 << 20).unwrap_err();
        assert_eq!(
            PacketTooLarge::of(&error).unwrap().declared,
            2 * MAX_FRAME_PAYLOAD
        );
    }

    #[test]
    fn refuses_a_broken_continuation_sequence() {
        for (first, second) in [(1u8, 3u8), (1, 1), (255, 0)] {
            let mut tracker = FrameTracker::default();
            let mut stream = header(MAX_FRAME_PAYLOAD, first).to_vec();
            stream.extend(vec![0u8; MAX_FRAME_PAYLOAD]);
            stream.extend_from_slice(&header(10, second));
            let error = tracker.track(&stream, usize::MAX).unwrap_err();
            assert!(error.to_string().contains("broken continuation"), "{error}");
        }
        let mut tracker = FrameTracker::default();
        let mut stream = header(MAX_FRAME_PAYLOAD, 1).to_vec();
        stream.extend(vec![0u8; MAX_FRAME_PAYLOAD]);
        stream.extend_from_slice(&header(10, 2));
        tracker.track(&stream, usize::MAX).unwrap();
    }
}
