//! An in-memory byte stream described by a short script, so a few fuzzer
//! bytes can stand for a stream of many megabytes (long frames of filler)
//! without holding it in memory.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use crate::input::Input;

/// A piece of the stream.
#[derive(Debug, Clone)]
enum Piece {
    /// These bytes.
    Bytes(Vec<u8>),
    /// `len` copies of the byte `block` is made of.
    Fill { block: Vec<u8>, len: u64 },
}

/// Bytes of filler copied per step: copies are memcpy even in unoptimised
/// builds, where a byte-by-byte fill of 80 MB takes seconds.
const FILL_BLOCK: usize = 64 * 1024;

/// A stream of pieces, served at most `chunk` bytes per read (to exercise
/// partial reads; unlimited unless [`ScriptedStream::set_chunk`]), then end
/// of stream.
#[derive(Debug, Clone)]
pub struct ScriptedStream {
    pieces: Vec<Piece>,
    /// Index of the piece being served and how far into it.
    at: usize,
    offset: u64,
    chunk: usize,
    total: u64,
}

impl ScriptedStream {
    /// Decodes a script: ops until the input ends, each a tag byte then
    /// its operands:
    ///
    /// - `0`: a length byte `n`, then `n` literal bytes;
    /// - `1`: a frame of filler: a 3-byte length `L`, a sequence id and a
    ///   filler byte give the header `L, seq` and `L` filler bytes;
    /// - `2`: raw filler: a 3-byte length and a filler byte (no header);
    /// - any other tag: the rest of the input, literally.
    ///
    /// The stream stops growing once it holds `max_total` bytes.
    pub fn decode(input: &mut Input<'_>, max_total: u64) -> Self {
        let mut pieces = Vec::new();
        let mut total = 0u64;
        while !input.is_empty() && total < max_total {
            let piece = match input.u8() % 4 {
                0 => {
                    let n = usize::from(input.u8());
                    Piece::Bytes(input.take(n).to_vec())
                }
                1 => {
                    let len = input.u24();
                    let seq = input.u8();
                    let byte = input.u8();
                    let header = len.to_le_bytes();
                    pieces.push(Piece::Bytes(vec![header[0], header[1], header[2], seq]));
                    total += 4;
                    fill(byte, len)
                }
                2 => {
                    let len = input.u24();
                    let byte = input.u8();
                    fill(byte, len)
                }
                _ => Piece::Bytes(input.rest().to_vec()),
            };
            total += match &piece {
                Piece::Bytes(bytes) => bytes.len() as u64,
                Piece::Fill { len, .. } => *len,
            };
            pieces.push(piece);
        }
        Self {
            pieces,
            at: 0,
            offset: 0,
            chunk: usize::MAX,
            total,
        }
    }

    /// Serves at most `chunk` bytes per read.
    pub fn set_chunk(&mut self, chunk: usize) {
        self.chunk = chunk.max(1);
    }

    /// Total length of the stream.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The whole stream in memory (for a reference decoder on small
    /// streams).
    pub fn materialize(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in &self.pieces {
            match piece {
                Piece::Bytes(bytes) => out.extend_from_slice(bytes),
                Piece::Fill { block, len } => {
                    let byte = block.first().copied().unwrap_or(0);
                    out.resize(out.len() + usize::try_from(*len).unwrap_or(0), byte)
                }
            }
        }
        out
    }
}

/// A piece of `len` filler bytes.
fn fill(byte: u8, len: u32) -> Piece {
    let len = u64::from(len);
    Piece::Fill {
        block: vec![byte; FILL_BLOCK.min(len as usize)],
        len,
    }
}

impl AsyncRead for ScriptedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut room = buf.remaining().min(self.chunk);
        while room > 0 {
            let (at, offset) = (self.at, self.offset);
            let Some(piece) = self.pieces.get(at) else {
                break;
            };
            let (left, n) = match piece {
                Piece::Bytes(bytes) => {
                    let start = usize::try_from(offset).unwrap_or(usize::MAX);
                    let left = bytes.get(start..).unwrap_or(&[]);
                    let n = left.len().min(room);
                    buf.put_slice(&left[..n]);
                    (left.len() as u64, n)
                }
                Piece::Fill { block, len } => {
                    let left = len - offset;
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(room)
                        .min(block.len());
                    buf.put_slice(&block[..n]);
                    (left, n)
                }
            };
            room -= n;
            if n as u64 == left {
                self.at += 1;
                self.offset = 0;
            } else {
                self.offset += n as u64;
            }
        }
        Poll::Ready(Ok(()))
    }
}
