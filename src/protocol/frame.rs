//! Packet framing: a 3-byte length, a 1-byte sequence id, the payload.
//! Payloads of 16 MiB - 1 bytes or more continue in the following frames.

use std::cell::RefCell;
use std::io;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest payload a single frame carries; a frame this long is continued.
pub const MAX_FRAME_PAYLOAD: usize = 0xFF_FFFF;

/// Largest logical packet a [`FrameReader`] accepts unless given another
/// limit ([`FrameReader::set_max_packet`]): what the proxy reads from a
/// backend. Client readers get the config's `limits` instead.
pub const MAX_PACKET: usize = 64 * 1024 * 1024;

const HEADER_LEN: usize = 4;
const READ_CHUNK: usize = 16 * 1024;
/// Room made for the first read after [`FrameReader::release_idle`] (and
/// the very first read): a typical command fits, and an idle connection
/// holds no more than this while it waits.
const IDLE_READ: usize = 512;
const WRITE_FLUSH_AT: usize = 64 * 1024;
/// Write buffers an idle [`FrameWriter`] gave back, kept per thread for the
/// next writer that needs one (at most this many: 1 MiB a thread).
const SPARE_WRITE_BUFFERS: usize = 16;

thread_local! {
    static SPARE_WRITE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A peer declared a packet longer than the reader's limit. The reader
/// refused it on the frame header: nothing of the payload was read or
/// allocated, and the stream is no longer in step (the caller closes it).
/// Carried inside an `InvalidData` [`io::Error`]; see [`PacketTooLarge::of`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a packet of {declared} bytes or more, over the limit of {limit} bytes")]
pub struct PacketTooLarge {
    /// Sequence id of the frame that went over the limit.
    pub seq: u8,
    /// The packet's length as declared so far (frames before included).
    pub declared: usize,
    /// The limit in force.
    pub limit: usize,
}

impl PacketTooLarge {
    /// The refusal inside `error`, when that is what `error` is.
    pub fn of(error: &io::Error) -> Option<&PacketTooLarge> {
        error.get_ref()?.downcast_ref()
    }
}

impl From<PacketTooLarge> for io::Error {
    fn from(too_large: PacketTooLarge) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, too_large)
    }
}

/// One frame as read off the wire, header included, so it can be relayed
/// verbatim: split off the reader's buffer ([`FrameReader::next_frame`]),
/// or lent inside it until the reader is used again
/// ([`FrameReader::next_frame_in_place`], `Frame<&mut [u8]>`).
#[derive(Debug)]
pub struct Frame<B = BytesMut> {
    raw: B,
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Frame<B> {
    /// The frame's sequence id.
    pub fn seq(&self) -> u8 {
        self.raw.as_ref()[3]
    }

    /// The payload, without the header.
    pub fn payload(&self) -> &[u8] {
        &self.raw.as_ref()[HEADER_LEN..]
    }

    /// The payload, for in-place edits of fixed-size fields.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.raw.as_mut()[HEADER_LEN..]
    }

    /// Header and payload, as they came.
    pub fn raw(&self) -> &[u8] {
        self.raw.as_ref()
    }

    /// Gives the frame another sequence id (the client's numbering may differ
    /// from the backend's when a request was split differently).
    pub fn set_seq(&mut self, seq: u8) {
        self.raw.as_mut()[3] = seq;
    }

    /// Whether the logical packet continues in the next frame.
    pub fn is_continued(&self) -> bool {
        self.payload().len() == MAX_FRAME_PAYLOAD
    }
}

/// Reads frames from a byte stream through one growing buffer; frames are
/// split off the buffer without copying. A packet longer than the reader's
/// limit is refused on its frame header ([`PacketTooLarge`]), before any
/// room is made for it. The buffer starts small and can be given back
/// between packets ([`FrameReader::release_idle`]).
pub struct FrameReader<R> {
    inner: R,
    buf: BytesMut,
    max_packet: usize,
    /// The next read makes room for [`IDLE_READ`] bytes only.
    lean: bool,
    /// The buffer was made larger than [`IDLE_READ`] since the last
    /// [`FrameReader::release_idle`].
    grown: bool,
    /// The packet [`FrameReader::next_packet`] has read in part.
    assembly: Option<Assembly>,
    /// Length of the frame [`FrameReader::next_frame_in_place`] lent at
    /// the front of the buffer: consumed when the reader is next used.
    lent: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Wraps a stream; packets up to [`MAX_PACKET`] bytes are accepted.
    pub fn new(inner: R) -> Self {
        Self::with_max_packet(inner, MAX_PACKET)
    }

    /// Wraps a stream; packets up to `max_packet` bytes are accepted.
    pub fn with_max_packet(inner: R, max_packet: usize) -> Self {
        Self {
            inner,
            buf: BytesMut::new(),
            max_packet,
            lean: true,
            grown: false,
            assembly: None,
            lent: 0,
        }
    }

    /// Drops the frame lent by [`FrameReader::next_frame_in_place`] from
    /// the buffer.
    fn settle(&mut self) {
        if self.lent > 0 {
            self.buf.advance(self.lent);
            self.lent = 0;
        }
    }

    /// Gives the read buffer back when nothing is buffered and it grew
    /// past [`IDLE_READ`], so a peer that stays silent costs a small buffer
    /// only; a small one is kept and reused by the next packet.
    pub fn release_idle(&mut self) {
        self.settle();
        if self.buf.is_empty() {
            if self.grown {
                self.buf = BytesMut::new();
                self.grown = false;
            }
            self.lean = true;
        }
    }

    /// Changes the largest packet accepted from now on (a client's limit
    /// grows from the login packet's to `max_allowed_packet` once logged in).
    pub fn set_max_packet(&mut self, max_packet: usize) {
        self.max_packet = max_packet;
    }

    /// The largest packet accepted.
    pub fn max_packet(&self) -> usize {
        self.max_packet
    }

    /// Whether bytes are already buffered (a pipelining peer).
    pub fn has_buffered(&self) -> bool {
        self.buf.len() > self.lent || self.assembly.is_some()
    }

    /// The next frame. A clean end of stream before a header is
    /// `UnexpectedEof`; a frame longer than the limit is [`PacketTooLarge`].
    pub async fn next_frame(&mut self) -> io::Result<Frame> {
        self.settle();
        let total = self.buffer_frame().await?;
        Ok(Frame {
            raw: self.buf.split_to(total),
        })
    }

    /// [`FrameReader::next_frame`] without taking the frame out of the read
    /// buffer: the frame is lent where it lies (no split, no reference
    /// count) and dropped from the buffer when the reader is next used.
    pub async fn next_frame_in_place(&mut self) -> io::Result<Frame<&mut [u8]>> {
        self.settle();
        let total = self.buffer_frame().await?;
        self.lent = total;
        Ok(Frame {
            raw: &mut self.buf[..total],
        })
    }

    /// [`FrameReader::next_frame_in_place`] when the next frame is already
    /// buffered whole (`None` when it is not): no read, no future.
    pub fn buffered_frame_in_place(&mut self) -> io::Result<Option<Frame<&mut [u8]>>> {
        self.settle();
        let Some(total) = self.buffered_frame_len()? else {
            return Ok(None);
        };
        self.lent = total;
        Ok(Some(Frame {
            raw: &mut self.buf[..total],
        }))
    }

    /// The payload length the header at the front of the buffer declares
    /// (at least [`HEADER_LEN`] bytes are buffered).
    fn front_frame_len(&self) -> usize {
        usize::from(self.buf[0]) | usize::from(self.buf[1]) << 8 | usize::from(self.buf[2]) << 16
    }

    /// The length, header included, of the frame at the front of the
    /// buffer when it is there whole; refused on its header when it would
    /// go over the limit.
    fn buffered_frame_len(&self) -> io::Result<Option<usize>> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let len = self.front_frame_len();
        if len > self.max_packet {
            return Err(PacketTooLarge {
                seq: self.buf[3],
                declared: len,
                limit: self.max_packet,
            }
            .into());
        }
        let total = HEADER_LEN + len;
        Ok((self.buf.len() >= total).then_some(total))
    }

    /// Reads until the buffer starts with a whole frame and returns the
    /// frame's length, header included; refused on its header when it
    /// would go over the limit.
    async fn buffer_frame(&mut self) -> io::Result<usize> {
        loop {
            if let Some(total) = self.buffered_frame_len()? {
                return Ok(total);
            }
            if self.buf.len() < HEADER_LEN {
                self.reserve();
            } else {
                let total = HEADER_LEN + self.front_frame_len();
                if self.buf.capacity() < total {
                    // Exact growth: `reserve` doubles the storage it shares
                    // with frames already split off, so a stream of long
                    // frames made it hold several times a frame.
                    let mut grown = BytesMut::with_capacity(total);
                    grown.extend_from_slice(&self.buf);
                    self.buf = grown;
                    self.grown = true;
                }
            }
            let read = self.inner.read_buf(&mut self.buf).await?;
            self.lean = false;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed the connection",
                ));
            }
        }
    }

    /// Reads and throws away what the peer still sends, until it closes or
    /// `limit` bytes went by. Used after refusing an oversized packet: a
    /// socket closed with unread bytes resets the connection, and the peer,
    /// still writing the rest of its packet, then loses the error sent to
    /// it (a server skips the rest of the packet the same way).
    pub async fn discard_until_eof(&mut self, limit: usize) -> io::Result<()> {
        self.settle();
        let mut seen = self.buf.len();
        self.buf = BytesMut::new();
        self.assembly = None;
        let mut scratch = vec![0u8; READ_CHUNK.min(limit.max(1))];
        while seen < limit {
            let read = self.inner.read(&mut scratch).await?;
            if read == 0 {
                break;
            }
            seen = seen.saturating_add(read);
        }
        Ok(())
    }

    /// A whole logical packet (continuation frames joined): the sequence id
    /// of its last frame and its payload. A packet longer than the limit is
    /// refused on the header of the frame that goes over it: an
    /// `InvalidData` error holding a [`PacketTooLarge`].
    ///
    /// The payload is read straight into the vector returned, made with
    /// room for the frame its header declares (grown exactly for each
    /// continuation frame): a long packet is held once, never also in the
    /// read buffer. Cancel-safe: a packet read in part is kept and
    /// completed by the next call.
    pub async fn next_packet(&mut self) -> io::Result<(u8, Vec<u8>)> {
        self.settle();
        loop {
            if let Some(packet) = &mut self.assembly {
                let missing = packet.frame_end - packet.payload.len();
                if missing > 0 {
                    let take = missing.min(self.buf.len());
                    packet.payload.extend_from_slice(&self.buf[..take]);
                    self.buf.advance(take);
                    if take < missing {
                        let limited = &mut (&mut packet.payload).limit(missing - take);
                        let read = self.inner.read_buf(limited).await?;
                        self.lean = false;
                        if read == 0 {
                            self.assembly = None;
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "peer closed the connection",
                            ));
                        }
                        continue;
                    }
                }
                if !packet.continued {
                    let packet = self.assembly.take().unwrap_or_default();
                    return Ok((packet.seq, packet.payload));
                }
            }
            if self.buf.len() < HEADER_LEN {
                self.fill_buf().await?;
                continue;
            }
            let len = self.front_frame_len();
            let seq = self.buf[3];
            let before = self.assembly.as_ref().map_or(0, |p| p.payload.len());
            let declared = before.saturating_add(len);
            if declared > self.max_packet {
                self.assembly = None;
                return Err(PacketTooLarge {
                    seq,
                    declared,
                    limit: self.max_packet,
                }
                .into());
            }
            self.buf.advance(HEADER_LEN);
            let packet = self.assembly.get_or_insert_with(Assembly::default);
            // Exact growth: doubling would allocate up to twice the limit.
            packet.payload.reserve_exact(len);
            packet.frame_end = declared;
            packet.seq = seq;
            packet.continued = len == MAX_FRAME_PAYLOAD;
        }
    }

    /// Makes room for the next read: [`IDLE_READ`] bytes after
    /// [`FrameReader::release_idle`] (in place when the buffer is not
    /// shared any more), else [`READ_CHUNK`].
    fn reserve(&mut self) {
        if self.lean {
            self.buf.reserve(IDLE_READ);
        } else {
            self.buf.reserve(READ_CHUNK);
            self.grown = true;
        }
    }

    /// [`FrameReader::next_packet`] as [`Bytes`]: a packet of one frame
    /// that the last read brought whole is split off the read buffer,
    /// neither copied nor allocated (the buffer's storage is reused once
    /// the packet is dropped); any other is read as `next_packet` does.
    pub async fn next_packet_bytes(&mut self) -> io::Result<(u8, Bytes)> {
        self.settle();
        if self.assembly.is_none() && self.buf.len() < HEADER_LEN {
            self.fill_buf().await?;
        }
        if self.assembly.is_none() && self.buf.len() >= HEADER_LEN {
            let len = self.front_frame_len();
            if len < MAX_FRAME_PAYLOAD
                && len <= self.max_packet
                && self.buf.len() >= HEADER_LEN + len
            {
                let seq = self.buf[3];
                self.buf.advance(HEADER_LEN);
                return Ok((seq, self.buf.split_to(len).freeze()));
            }
        }
        let (seq, payload) = self.next_packet().await?;
        Ok((seq, Bytes::from(payload)))
    }

    /// Reads more of the stream into the buffer (a small first read after
    /// [`FrameReader::release_idle`]).
    async fn fill_buf(&mut self) -> io::Result<()> {
        self.reserve();
        let read = self.inner.read_buf(&mut self.buf).await?;
        self.lean = false;
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the connection",
            ));
        }
        Ok(())
    }
}

/// A logical packet [`FrameReader::next_packet`] is reading.
#[derive(Default)]
struct Assembly {
    /// Sequence id of the frame being read.
    seq: u8,
    /// The payload so far.
    payload: Vec<u8>,
    /// Payload length at which the frame being read ends.
    frame_end: usize,
    /// Whether another frame follows this one.
    continued: bool,
}

/// Buffers outgoing frames and writes them in large chunks. The buffer is
/// allocated at the first write and never grows far past
/// [`WRITE_FLUSH_AT`]: a frame that long is written without being copied.
/// It can be given back between answers ([`FrameWriter::release_idle`]).
pub struct FrameWriter<W> {
    inner: W,
    buf: Vec<u8>,
    next_seq: u8,
    last_was_error: bool,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// Wraps a stream.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            next_seq: 0,
            last_was_error: false,
        }
    }

    /// The sequence id after the last frame queued.
    pub fn next_seq(&self) -> u8 {
        self.next_seq
    }

    /// Whether the last frame queued was an ERR packet (no other packet a
    /// server sends starts with 0xFF).
    pub fn last_was_error(&self) -> bool {
        self.last_was_error
    }

    /// Gives the write buffer back when everything was written, so a
    /// connection waiting for its peer holds none: to this thread's spare
    /// buffers, which the next writer to queue a frame takes (no
    /// allocation per answer).
    pub fn release_idle(&mut self) {
        if self.buf.is_empty() && self.buf.capacity() > 0 {
            let buf = std::mem::take(&mut self.buf);
            if buf.capacity() == WRITE_FLUSH_AT {
                let _ = SPARE_WRITE.try_with(|spare| {
                    let mut spare = spare.borrow_mut();
                    if spare.len() < SPARE_WRITE_BUFFERS {
                        spare.push(buf);
                    }
                });
            }
        }
    }

    /// Queues a frame exactly as read from a peer.
    pub async fn write_raw(&mut self, raw: &[u8]) -> io::Result<()> {
        self.note_raw(raw);
        self.queue(raw).await
    }

    /// [`FrameWriter::write_raw`] when the frame fits in the buffer without
    /// a write: queued, `true`. Otherwise nothing is queued and the caller
    /// awaits `write_raw` (`false`).
    pub fn write_raw_buffered(&mut self, raw: &[u8]) -> bool {
        if self.buf.capacity() == 0 || self.buf.len() + raw.len() >= WRITE_FLUSH_AT {
            return false;
        }
        self.note_raw(raw);
        self.buf.extend_from_slice(raw);
        true
    }

    /// The sequence id and ERR mark of a frame queued as read.
    fn note_raw(&mut self, raw: &[u8]) {
        if raw.len() > HEADER_LEN {
            self.next_seq = raw[3].wrapping_add(1);
            self.last_was_error = raw[HEADER_LEN] == 0xFF;
        }
    }

    /// Appends `bytes` to the buffer and writes it out from
    /// [`WRITE_FLUSH_AT`] bytes on; bytes that long on their own are
    /// written straight from the caller's slice, after what was queued.
    async fn queue(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.len() >= WRITE_FLUSH_AT {
            self.write_queued().await?;
            return self.inner.write_all(bytes).await;
        }
        if self.buf.capacity() == 0 {
            match SPARE_WRITE.try_with(|spare| spare.borrow_mut().pop()) {
                Ok(Some(spare)) => self.buf = spare,
                _ => self.buf.reserve_exact(WRITE_FLUSH_AT),
            }
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= WRITE_FLUSH_AT {
            self.write_queued().await?;
        }
        Ok(())
    }

    /// Writes out the buffer (without flushing the stream).
    async fn write_queued(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf).await?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Queues a logical packet starting at sequence id `seq`, split into
    /// frames as needed. Returns the sequence id for the next packet.
    pub async fn write_packet(&mut self, seq: u8, payload: &[u8]) -> io::Result<u8> {
        self.last_was_error = payload.first() == Some(&0xFF);
        let mut seq = seq;
        let mut rest = payload;
        loop {
            let chunk = rest.len().min(MAX_FRAME_PAYLOAD);
            let len = chunk as u32;
            self.queue(&[len as u8, (len >> 8) as u8, (len >> 16) as u8, seq])
                .await?;
            self.queue(&rest[..chunk]).await?;
            seq = seq.wrapping_add(1);
            self.next_seq = seq;
            rest = &rest[chunk..];
            if chunk < MAX_FRAME_PAYLOAD {
                return Ok(seq);
            }
        }
    }

    /// Queues a command packet (sequence id 0): `command` followed by
    /// `body`, split into frames as [`FrameWriter::write_packet`] would,
    /// without first copying them into one payload (a long statement is
    /// not held twice while it is sent).
    pub async fn write_command(&mut self, command: u8, body: &[u8]) -> io::Result<()> {
        self.last_was_error = command == 0xFF;
        let mut seq = 0u8;
        // The first frame carries the command byte before its share of body,
        // queued with the frame's header.
        let mut head_len = 1;
        let mut rest = body;
        loop {
            let chunk = rest.len().min(MAX_FRAME_PAYLOAD - head_len);
            let len = (head_len + chunk) as u32;
            let header = [len as u8, (len >> 8) as u8, (len >> 16) as u8, seq, command];
            self.queue(&header[..HEADER_LEN + head_len]).await?;
            self.queue(&rest[..chunk]).await?;
            head_len = 0;
            seq = seq.wrapping_add(1);
            self.next_seq = seq;
            rest = &rest[chunk..];
            if (len as usize) < MAX_FRAME_PAYLOAD {
                return Ok(());
            }
        }
    }

    /// Writes out everything queued.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.write_queued().await?;
        self.inner.flush().await
    }

    /// Shuts the write side down after flushing.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.flush().await?;
        self.inner.shutdown().await
    }
}

/// Reads a length-encoded integer at the front of `buf`, advancing it.
pub fn read_lenenc_int(buf: &mut &[u8]) -> Option<u64> {
    let first = *buf.first()?;
    let width = match first {
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        0xFB | 0xFF => return None,
        small => {
            buf.advance(1);
            return Some(u64::from(small));
        }
    };
    if buf.len() < 1 + width {
        return None;
    }
    let mut value = 0u64;
    for (i, byte) in buf[1..=width].iter().enumerate() {
        value |= u64::from(*byte) << (8 * i);
    }
    buf.advance(1 + width);
    Some(value)
}

/// Appends a length-encoded integer.
pub fn write_lenenc_int(out: &mut Vec<u8>, value: u64) {
    match value {
        0..=250 => out.push(value as u8),
        251..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(value as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(value as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

/// Appends a length-encoded string.
pub fn write_lenenc_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    write_lenenc_int(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trip() {
        for value in [
            0u64,
            250,
            251,
            0xFFFF,
            0x1_0000,
            0xFF_FFFF,
            0x100_0000,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            write_lenenc_int(&mut out, value);
            let mut slice = out.as_slice();
            assert_eq!(read_lenenc_int(&mut slice), Some(value));
            assert!(slice.is_empty());
        }
    }

    #[tokio::test]
    async fn large_packets_split_and_join() {
        let payload: Vec<u8> = (0..(MAX_FRAME_PAYLOAD * 2 + 10))
            .map(|i| (i % 251) as u8)
            .collect();
        let mut writer = FrameWriter::new(Vec::new());
        let next = writer.write_packet(0, &payload).await.unwrap();
        assert_eq!(next, 3);
        writer.flush().await.unwrap();
        let mut reader = FrameReader::new(writer.inner.as_slice());
        let (seq, joined) = reader.next_packet().await.unwrap();
        assert_eq!(seq, 2);
        assert_eq!(joined, payload);
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_on_the_header() {
        // 10 MiB declared, 3 bytes sent: refused without waiting for the
        // body or making room for it.
        let mut input = vec![0x00, 0x00, 0xA0, 1];
        input.extend_from_slice(b"abc");
        let mut reader = FrameReader::with_max_packet(input.as_slice(), 4096);
        let error = reader.next_packet().await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            PacketTooLarge::of(&error),
            Some(&PacketTooLarge {
                seq: 1,
                declared: 10 * 1024 * 1024,
                limit: 4096
            })
        );
        assert!(reader.buf.capacity() <= 2 * READ_CHUNK);
    }

    #[tokio::test]
    async fn continuation_frames_count_against_the_limit() {
        let payload = vec![1u8; MAX_FRAME_PAYLOAD + 100];
        let mut writer = FrameWriter::new(Vec::new());
        writer.write_packet(0, &payload).await.unwrap();
        writer.flush().await.unwrap();
        let mut reader =
            FrameReader::with_max_packet(writer.inner.as_slice(), MAX_FRAME_PAYLOAD + 99);
        let error = reader.next_packet().await.unwrap_err();
        let too_large = PacketTooLarge::of(&error).expect("refused by the limit");
        assert_eq!((too_large.seq, too_large.declared), (1, payload.len()));

        let mut reader =
            FrameReader::with_max_packet(writer.inner.as_slice(), MAX_FRAME_PAYLOAD + 100);
        assert_eq!(reader.next_packet().await.unwrap().1.len(), payload.len());
    }

    #[tokio::test]
    async fn packets_past_the_limit_are_refused_before_they_grow() {
        // Four full frames and a short one: the limit plus 96 bytes.
        let frames = MAX_PACKET / MAX_FRAME_PAYLOAD;
        let mut stream = Vec::with_capacity(MAX_PACKET + 200);
        for seq in 0..=frames {
            let len = if seq < frames { MAX_FRAME_PAYLOAD } else { 100 };
            stream.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
            stream.push(seq as u8);
            stream.resize(stream.len() + len, 0x61);
        }
        let mut reader = FrameReader::new(stream.as_slice());
        let error = reader.next_packet().await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }

    #[tokio::test]
    async fn idle_buffers_are_given_back_and_long_frames_are_not_copied() {
        let long = vec![9u8; 3 * WRITE_FLUSH_AT];
        let mut writer = FrameWriter::new(Vec::new());
        assert_eq!(writer.buf.capacity(), 0, "allocated at the first write");
        writer.write_packet(0, b"short").await.unwrap();
        writer.write_packet(1, &long).await.unwrap();
        writer.write_packet(2, b"after").await.unwrap();
        assert!(
            writer.buf.capacity() <= WRITE_FLUSH_AT,
            "a long frame went through the buffer"
        );
        writer.flush().await.unwrap();
        writer.release_idle();
        assert_eq!(writer.buf.capacity(), 0);

        let mut reader = FrameReader::new(writer.inner.as_slice());
        assert_eq!(reader.next_packet().await.unwrap(), (0, b"short".to_vec()));
        assert_eq!(reader.next_packet().await.unwrap().1, long);
        reader.release_idle();
        assert_eq!(reader.buf.capacity(), 0);
        assert_eq!(reader.next_packet().await.unwrap(), (2, b"after".to_vec()));
        assert!(
            reader.buf.capacity() <= IDLE_READ,
            "a short packet after idling reads into a small buffer"
        );
    }

    /// A long packet is read into its payload only: the read buffer stays
    /// a read's size and the payload has the room of its frames, no more.
    #[tokio::test]
    async fn a_long_packet_is_held_once() {
        for len in [3 * READ_CHUNK + 7, MAX_FRAME_PAYLOAD + 10] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let mut writer = FrameWriter::new(Vec::new());
            writer.write_packet(0, &payload).await.unwrap();
            writer.write_packet(9, b"next").await.unwrap();
            writer.flush().await.unwrap();
            let mut reader = FrameReader::new(writer.inner.as_slice());
            let (_, read) = reader.next_packet().await.unwrap();
            assert!(read == payload, "{len}");
            assert_eq!(read.capacity(), len);
            assert!(reader.buf.capacity() <= 2 * READ_CHUNK, "{len}");
            assert_eq!(reader.next_packet().await.unwrap(), (9, b"next".to_vec()));
        }
    }

    /// A read cancelled in the middle of a packet loses nothing: the next
    /// call completes the packet.
    #[tokio::test]
    async fn a_packet_read_in_part_is_completed_after_a_cancelled_read() {
        let payload = vec![5u8; 100_000];
        let mut writer = FrameWriter::new(Vec::new());
        writer.write_packet(3, &payload).await.unwrap();
        writer.flush().await.unwrap();
        let wire = writer.inner;
        let (mut client, server) = tokio::io::duplex(wire.len());
        let mut reader = FrameReader::new(server);
        for part in [&wire[..2], &wire[2..30_000], &wire[30_000..60_000]] {
            client.write_all(part).await.unwrap();
            let waited =
                tokio::time::timeout(std::time::Duration::from_millis(20), reader.next_packet())
                    .await;
            assert!(waited.is_err(), "a packet before all of it came");
        }
        client.write_all(&wire[60_000..]).await.unwrap();
        let (seq, read) = reader.next_packet().await.unwrap();
        assert_eq!(seq, 3);
        assert!(read == payload);
    }

    #[tokio::test]
    async fn a_command_is_framed_as_its_packet() {
        for body_len in [
            0,
            10,
            MAX_FRAME_PAYLOAD - 2,
            MAX_FRAME_PAYLOAD - 1,
            MAX_FRAME_PAYLOAD,
            MAX_FRAME_PAYLOAD + 5,
            2 * MAX_FRAME_PAYLOAD - 1,
            2 * MAX_FRAME_PAYLOAD + 3,
        ] {
            let body = vec![b'x'; body_len];
            let mut payload = vec![3u8];
            payload.extend_from_slice(&body);
            let mut as_packet = FrameWriter::new(Vec::new());
            as_packet.write_packet(0, &payload).await.unwrap();
            as_packet.flush().await.unwrap();
            let mut as_command = FrameWriter::new(Vec::new());
            as_command.write_command(3, &body).await.unwrap();
            as_command.flush().await.unwrap();
            assert_eq!(as_command.next_seq(), as_packet.next_seq(), "{body_len}");
            assert!(as_command.inner == as_packet.inner, "{body_len}");
        }
    }

    #[tokio::test]
    async fn exact_multiple_gets_empty_trailer() {
        let payload = vec![7u8; MAX_FRAME_PAYLOAD];
        let mut writer = FrameWriter::new(Vec::new());
        assert_eq!(writer.write_packet(5, &payload).await.unwrap(), 7);
        writer.flush().await.unwrap();
        let mut reader = FrameReader::new(writer.inner.as_slice());
        let (seq, joined) = reader.next_packet().await.unwrap();
        assert_eq!((seq, joined.len()), (6, MAX_FRAME_PAYLOAD));
    }

    #[tokio::test]
    async fn discarding_stops_at_the_end_of_stream_or_the_byte_limit() {
        let sent = vec![1u8; 100_000];
        let mut reader = FrameReader::new(sent.as_slice());
        reader.discard_until_eof(usize::MAX).await.unwrap();
        assert!(reader.inner.is_empty(), "read to the end");

        let mut reader = FrameReader::new(sent.as_slice());
        reader.discard_until_eof(20_000).await.unwrap();
        let left = reader.inner.len();
        assert!(
            left > 0 && left <= 80_000,
            "stopped near the limit: {left} left"
        );
    }

    /// A stream that returns one prepared chunk per read (what fits of
    /// it), as a client's socket returns one statement per read.
    struct Chunks(std::collections::VecDeque<Vec<u8>>);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            if let Some(mut chunk) = self.0.pop_front() {
                let rest = chunk.split_off(chunk.len().min(buf.remaining()));
                buf.put_slice(&chunk);
                if !rest.is_empty() {
                    self.0.push_front(rest);
                }
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    fn command_frame(n: usize) -> Vec<u8> {
        let body = format!("\x03SELECT data FROM pins WHERE id = {n}");
        let mut frame = vec![body.len() as u8, 0, 0, 0];
        frame.extend_from_slice(body.as_bytes());
        frame
    }

    #[tokio::test]
    async fn statements_read_one_by_one_reuse_the_read_buffer_without_copy_or_allocation() {
        let frames: Vec<Vec<u8>> = (0..12).map(command_frame).collect();
        let mut reader = FrameReader::new(Chunks(frames.iter().cloned().collect()));
        let mut made = Vec::new();
        for frame in &frames {
            reader.release_idle();
            let before = crate::test_alloc::allocations();
            let (seq, packet) = reader.next_packet_bytes().await.unwrap();
            made.push(crate::test_alloc::allocations() - before);
            assert_eq!((seq, &packet[..]), (0, &frame[HEADER_LEN..]));
            assert!(!reader.has_buffered());
        }
        // The first packet allocates the buffer and its shared header.
        assert_eq!(made[2..], [0; 10], "allocations per packet: {made:?}");
    }

    #[tokio::test]
    async fn long_or_split_packets_are_still_joined_exactly() {
        let frame = command_frame(7);
        let (head, tail) = frame.split_at(10);
        let mut reader = FrameReader::new(Chunks([head.to_vec(), tail.to_vec()].into()));
        let (_, packet) = reader.next_packet_bytes().await.unwrap();
        assert_eq!(&packet[..], &frame[HEADER_LEN..]);

        let long = vec![9u8; IDLE_READ * 3];
        let mut writer = FrameWriter::new(Vec::new());
        writer.write_packet(0, &long).await.unwrap();
        writer.write_packet(1, b"next").await.unwrap();
        writer.flush().await.unwrap();
        let mut reader = FrameReader::new(writer.inner.as_slice());
        let (seq, packet) = reader.next_packet_bytes().await.unwrap();
        assert_eq!((seq, packet.len()), (0, long.len()));
        let (seq, packet) = reader.next_packet_bytes().await.unwrap();
        assert_eq!((seq, &packet[..]), (1, &b"next"[..]));
        reader.set_max_packet(3);
        let mut reader = FrameReader::with_max_packet(Chunks([frame].into()), 3);
        let refused = reader.next_packet_bytes().await.unwrap_err();
        assert!(PacketTooLarge::of(&refused).is_some(), "{refused}");
    }

    /// An answer's frames: short ones, one continued over a full frame,
    /// its empty trailer, and one read split over several reads.
    async fn answer_stream() -> Vec<u8> {
        let mut writer = FrameWriter::new(Vec::new());
        let long = vec![4u8; MAX_FRAME_PAYLOAD];
        for (seq, payload) in [(1u8, &b"\x01"[..]), (2, b"def"), (3, &long), (5, b"")] {
            writer.write_packet(seq, payload).await.unwrap();
        }
        writer.flush().await.unwrap();
        writer.inner
    }

    #[tokio::test]
    async fn frames_lent_in_place_are_the_frames_split_off() {
        let wire = answer_stream().await;
        let mut split = FrameReader::new(wire.as_slice());
        let mut expected = Vec::new();
        while let Ok(frame) = split.next_frame().await {
            expected.push(frame.raw().to_vec());
        }
        assert_eq!(expected.len(), 5);
        // Reads no longer than the reader's first, small one: the header
        // read byte by byte, frames split anywhere.
        for (first, chunk) in [(IDLE_READ, IDLE_READ), (1, 509), (3, 4093)] {
            let (head, tail) = wire.split_at(30);
            let reads = (head.chunks(first).chain(tail.chunks(chunk)))
                .map(<[u8]>::to_vec)
                .collect();
            let mut reader = FrameReader::new(Chunks(reads));
            let mut lent = Vec::new();
            for _ in &expected {
                let mut frame = reader.next_frame_in_place().await.unwrap();
                let seq = frame.seq();
                frame.set_seq(seq);
                lent.push(frame.raw().to_vec());
            }
            assert!(lent == expected, "reads of {first} then {chunk} bytes");
            assert!(!reader.has_buffered(), "the last frame lent counts as read");
            let end = reader.next_frame_in_place().await.unwrap_err();
            assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof);
        }
    }

    #[tokio::test]
    async fn a_lent_frame_is_gone_for_every_later_read() {
        let mut writer = FrameWriter::new(Vec::new());
        for (seq, payload) in [(0u8, &b"one"[..]), (1, b"two"), (2, b"three"), (3, b"four")] {
            writer.write_packet(seq, payload).await.unwrap();
        }
        writer.flush().await.unwrap();
        let mut reader = FrameReader::new(writer.inner.as_slice());
        let mut frame = reader.next_frame_in_place().await.unwrap();
        frame.set_seq(9);
        assert_eq!((frame.seq(), frame.payload()), (9, &b"one"[..]));
        assert!(reader.has_buffered());
        assert_eq!(reader.next_frame().await.unwrap().payload(), b"two");
        assert_eq!(
            reader.next_frame_in_place().await.unwrap().payload(),
            b"three"
        );
        assert_eq!(reader.next_packet().await.unwrap(), (3, b"four".to_vec()));
        assert!(!reader.has_buffered());

        let mut reader = FrameReader::new(writer.inner.as_slice());
        reader.next_frame_in_place().await.unwrap();
        reader.release_idle();
        let (seq, packet) = reader.next_packet_bytes().await.unwrap();
        assert_eq!((seq, &packet[..]), (1, &b"two"[..]));
    }

    #[tokio::test]
    async fn frames_lent_in_place_keep_the_limit() {
        let wire = answer_stream().await;
        let mut reader = FrameReader::with_max_packet(wire.as_slice(), 100);
        reader.next_frame_in_place().await.unwrap();
        reader.next_frame_in_place().await.unwrap();
        let refused = reader.next_frame_in_place().await.unwrap_err();
        assert_eq!(
            PacketTooLarge::of(&refused),
            Some(&PacketTooLarge {
                seq: 3,
                declared: MAX_FRAME_PAYLOAD,
                limit: 100
            })
        );
    }

    #[tokio::test]
    async fn answers_relayed_in_place_allocate_nothing() {
        let answer = answer_stream().await[..12].to_vec();
        let mut reader = FrameReader::new(Chunks(std::iter::repeat_n(answer, 8).collect()));
        let mut made = Vec::new();
        for _ in 0..8 {
            let before = crate::test_alloc::allocations();
            let first = reader.next_frame_in_place().await.unwrap();
            assert_eq!(first.payload(), b"\x01");
            let second = reader.next_frame_in_place().await.unwrap();
            assert_eq!(second.payload(), b"def");
            made.push(crate::test_alloc::allocations() - before);
        }
        // The first answer allocates a small read buffer, the second one a
        // read's size.
        assert_eq!(made[2..], [0; 6], "allocations per answer: {made:?}");
    }

    #[tokio::test]
    async fn buffered_frames_are_lent_without_reading() {
        let wire = answer_stream().await;
        let (head, tail) = wire.split_at(9);
        let reads = [head.to_vec(), tail[..600].to_vec()];
        let mut reader = FrameReader::new(Chunks(reads.into()));
        assert!(
            reader.buffered_frame_in_place().unwrap().is_none(),
            "nothing read yet"
        );
        assert_eq!(
            reader.next_frame_in_place().await.unwrap().payload(),
            b"\x01"
        );
        // Four bytes of "def"'s frame: not whole, not lent.
        assert!(reader.buffered_frame_in_place().unwrap().is_none());
        assert!(reader.has_buffered(), "the part read stays");
        let frame = reader.next_frame_in_place().await.unwrap();
        assert_eq!((frame.seq(), frame.payload()), (2, &b"def"[..]));
        // The long frame's header is over the limit: refused without a read.
        reader.set_max_packet(100);
        let refused = reader.buffered_frame_in_place().unwrap_err();
        assert_eq!(PacketTooLarge::of(&refused).map(|t| t.seq), Some(3));

        let mut reader = FrameReader::new(wire.as_slice());
        reader.next_frame_in_place().await.unwrap();
        let mut lent = Vec::new();
        while let Some(frame) = reader.buffered_frame_in_place().unwrap() {
            lent.push(frame.seq());
        }
        assert_eq!(lent, [2], "the long frame is not whole in one read");
    }

    #[tokio::test]
    async fn frames_queued_without_a_write_are_the_frames_write_raw_queues() {
        let short = [3u8, 0, 0, 7, 0xFF, 1, 2];
        let long = [vec![0u8, 0x40, 0, 8], vec![5u8; 0x4000]].concat();
        let frames: Vec<&[u8]> = std::iter::repeat_n([&short[..], &long[..]], 9)
            .flatten()
            .collect();
        let mut plain = FrameWriter::new(Vec::new());
        let mut fast = FrameWriter::new(Vec::new());
        let mut buffered = 0;
        for (n, frame) in frames.iter().enumerate() {
            if n == 5 {
                for writer in [&mut plain, &mut fast] {
                    writer.flush().await.unwrap();
                    writer.release_idle();
                }
            }
            plain.write_raw(frame).await.unwrap();
            if fast.write_raw_buffered(frame) {
                buffered += 1;
            } else {
                fast.write_raw(frame).await.unwrap();
            }
            assert!(fast.buf.len() < WRITE_FLUSH_AT, "frame {n}");
            assert_eq!(
                (fast.next_seq(), fast.last_was_error()),
                (plain.next_seq(), plain.last_was_error()),
                "frame {n}"
            );
        }
        assert!(buffered > 0 && buffered < frames.len() - 2, "{buffered}");
        plain.flush().await.unwrap();
        fast.flush().await.unwrap();
        assert!(fast.inner == plain.inner);
    }

    #[tokio::test]
    async fn answers_reuse_a_write_buffer_given_back_between_them() {
        let mut writer = FrameWriter::new(tokio::io::sink());
        let mut made = Vec::new();
        for n in 0..6u8 {
            let before = crate::test_alloc::allocations();
            writer.write_packet(1, &[n; 300]).await.unwrap();
            writer.flush().await.unwrap();
            writer.release_idle();
            made.push(crate::test_alloc::allocations() - before);
        }
        assert_eq!(made[1..], [0; 5], "allocations per answer: {made:?}");
        assert_eq!(writer.buf.capacity(), 0, "an idle writer holds no buffer");
    }
}
