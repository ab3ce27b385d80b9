//! Helpers shared by the fuzz targets: a reader over the fuzzer's bytes,
//! an in-memory stream, a poller for futures that never wait, and the test
//! oracles (an independent scanner of MariaDB's lexical rules). Test code,
//! not production code: it is written from the MariaDB manual and
//! `sql_lex.cc`, not from shardgate's router, so the two can disagree.

pub mod alloc;
pub mod input;
pub mod scan;
pub mod stream;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Runs a future whose I/O is all in memory (it never has to wait) to
/// completion on this thread. Panics if it would wait: that would be a
/// harness bug, not a finding.
pub fn run_ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
    panic!("harness: a future over in-memory streams kept returning Pending");
}
