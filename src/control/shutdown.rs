//! The graceful stop a SIGTERM starts: `/ready` answers 503 (draining), the
//! client listener stops accepting, running statements and open
//! transactions finish, and every session closes at its next boundary
//! outside a transaction with 1053 (server shutdown); sessions left after
//! `shutdown.drain_timeout_ms`, or when a second signal comes, are cut.
//! The ZooKeeper registry is left last.

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use super::Control;

/// How often the stop looks whether every session has closed.
const POLL: Duration = Duration::from_millis(20);

/// What a stop did with the sessions open when it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopSummary {
    /// Closed at a boundary after finishing a statement or a transaction,
    /// or ended by their client meanwhile.
    pub drained: u64,
    /// Idle when the stop came: closed at once with 1053.
    pub closed: u64,
    /// Still open when the drain ended (timeout or a second signal).
    pub cut: u64,
    /// How long the drain took.
    pub took: Duration,
    /// Whether a second signal ended it.
    pub interrupted: bool,
}

impl fmt::Display for StopSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stopped in {} ms: sessions drained {}, closed {}, cut {}{}",
            self.took.as_millis(),
            self.drained,
            self.closed,
            self.cut,
            if self.interrupted {
                " (a second signal ended the drain)"
            } else {
                ""
            }
        )
    }
}

impl StopSummary {
    /// The process's outcome: `Err` (exit status 1) when sessions were cut.
    pub fn outcome(self) -> Result<(), String> {
        match self.cut {
            0 => Ok(()),
            _ => Err(self.to_string()),
        }
    }
}

/// Stops `control`'s proxy gracefully; `again` resolves when a second stop
/// signal comes, which cuts the sessions left at once.
pub async fn drain(control: &Control, again: impl Future<Output = ()>) -> StopSummary {
    let started = Instant::now();
    control.process.start_draining();
    let sessions = &control.engine.sessions;
    let open = sessions.count() as u64;
    sessions.start_draining();
    let limit = Duration::from_millis(
        control
            .engine
            .topology
            .load()
            .config
            .shutdown
            .drain_timeout_ms,
    );
    let emptied = async {
        while sessions.count() > 0 {
            tokio::time::sleep(POLL).await;
        }
    };
    let interrupted = tokio::select! {
        () = emptied => false,
        () = tokio::time::sleep(limit) => false,
        () = again => true,
    };
    let cut = sessions.count() as u64;
    let (closed, _) = sessions.shutdown_closed();
    let took = started.elapsed();
    control.shutdown().await;
    StopSummary {
        drained: open.saturating_sub(closed).saturating_sub(cut),
        closed,
        cut,
        took,
        interrupted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_what_became_of_the_sessions() {
        let summary = StopSummary {
            drained: 2,
            closed: 1,
            cut: 0,
            took: Duration::from_millis(1200),
            interrupted: false,
        };
        assert_eq!(
            summary.to_string(),
            "stopped in 1200 ms: sessions drained 2, closed 1, cut 0"
        );
        assert_eq!(summary.outcome(), Ok(()));
        let cut = StopSummary {
            cut: 1,
            interrupted: true,
            ..summary
        };
        let error = cut.outcome().unwrap_err();
        assert!(
            error.ends_with("cut 1 (a second signal ended the drain)"),
            "{error}"
        );
    }
}
