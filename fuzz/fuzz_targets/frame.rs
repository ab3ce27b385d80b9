//! The client frame reader (`protocol::frame::FrameReader::next_packet`)
//! on an arbitrary byte stream, every packet read until end of stream or
//! error. Checks: no panic; no packet longer than the limit; the memory
//! the reader holds stays within the limit plus a few frames; on streams
//! small enough to hold, the packets equal those of a reference decoder.
#![no_main]

use std::io::ErrorKind;

use libfuzzer_sys::fuzz_target;
use shardgate::protocol::frame::{FrameReader, MAX_FRAME_PAYLOAD, MAX_PACKET};
use shardgate_fuzz::alloc::{self, Counting};
use shardgate_fuzz::input::Input;
use shardgate_fuzz::run_ready;
use shardgate_fuzz::stream::ScriptedStream;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const FRAME: usize = MAX_FRAME_PAYLOAD + 4;
/// Long enough to cross the packet limit with full frames.
const MAX_STREAM: u64 = (MAX_PACKET + 2 * FRAME) as u64;
/// What the reader may hold: one packet at the limit, the frame being
/// joined and the buffer reading the next one, plus small change.
const MAX_HELD: usize = MAX_PACKET + 2 * FRAME + (1 << 20);
/// Packets read per input: a stream of zeros is millions of empty packets,
/// and more of them exercise nothing new.
const MAX_PACKETS: usize = 10_000;
/// Streams up to this long are also decoded by the reference decoder.
const REFERENCE_MAX: u64 = 1 << 20;

/// The packets of a stream by the protocol's definition (frames of a
/// 3-byte length and a sequence id; a frame of 0xFFFFFF bytes continues
/// the packet); a truncated frame ends the stream.
fn reference(stream: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut packets = Vec::new();
    let mut packet = Vec::new();
    let mut at = 0;
    while let Some(header) = stream.get(at..at + 4) {
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        let Some(payload) = stream.get(at + 4..at + 4 + len) else {
            break;
        };
        packet.extend_from_slice(payload);
        at += 4 + len;
        if len < MAX_FRAME_PAYLOAD {
            packets.push((header[3], std::mem::take(&mut packet)));
        }
    }
    packets
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let chunk_choice = input.u8();
    let mut stream = ScriptedStream::decode(&mut input, MAX_STREAM);
    // Small reads only on short streams (a byte per read of 80 MB is slow,
    // and unoptimised CI builds replay the whole corpus).
    let chunk = match chunk_choice % 4 {
        0 if stream.total() <= 1 << 12 => 1,
        1 if stream.total() <= 1 << 16 => 7,
        2 if stream.total() <= 1 << 20 => 4096,
        _ => usize::MAX,
    };
    stream.set_chunk(chunk);
    let expected = (stream.total() <= REFERENCE_MAX).then(|| reference(&stream.materialize()));

    alloc::reset_peak();
    let base = alloc::live();
    let mut reader = FrameReader::new(stream);
    let mut got = Vec::new();
    let mut complete = false;
    for _ in 0..MAX_PACKETS {
        match run_ready(reader.next_packet()) {
            Ok((seq, payload)) => {
                assert!(
                    payload.len() <= MAX_PACKET,
                    "a packet of {} bytes passed the {MAX_PACKET}-byte limit",
                    payload.len()
                );
                if expected.is_some() {
                    got.push((seq, payload));
                }
            }
            Err(error) => {
                assert!(
                    matches!(
                        error.kind(),
                        ErrorKind::UnexpectedEof | ErrorKind::InvalidData
                    ),
                    "unexpected error kind: {error:?}"
                );
                if error.kind() == ErrorKind::InvalidData {
                    assert!(expected.is_none(), "InvalidData on a short stream: {error}");
                }
                complete = true;
                break;
            }
        }
        let held = alloc::peak() - base;
        assert!(
            held <= MAX_HELD,
            "the reader held {held} bytes at once (limit {MAX_PACKET}, allowed {MAX_HELD})"
        );
    }
    let held = alloc::peak() - base;
    assert!(
        held <= MAX_HELD,
        "the reader held {held} bytes at once (allowed {MAX_HELD})"
    );
    if let Some(mut expected) = expected {
        if !complete {
            expected.truncate(got.len());
        }
        assert_eq!(got, expected, "packets differ from the reference decoder");
    }
});
