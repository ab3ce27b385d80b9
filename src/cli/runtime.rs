//! The tokio runtimes the commands run on, and the stop signals.

use super::CliError;

/// Stack of the runtime's worker and blocking threads. The router keeps its
/// recursion within a fraction of 2 MiB (the nesting limits); the rest is
/// margin for the session futures, which are polled on these stacks.
pub(super) const THREAD_STACK_BYTES: usize = 8 * 1024 * 1024;

/// The multi-threaded runtime of the one-shot commands.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(THREAD_STACK_BYTES)
        .enable_all()
        .build()
        .map_err(CliError::Runtime)
}

/// SIGTERM and SIGINT, handled by the process from the moment they are
/// taken (a signal that came meanwhile is kept until [`StopSignals::received`]).
pub(super) struct StopSignals(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl StopSignals {
    /// Takes both signals over (inside a runtime).
    pub(super) fn take() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => Self(Some((term, int))),
            _ => Self(None),
        }
    }

    /// Waits for one; its name.
    pub(super) async fn received(&mut self) -> &'static str {
        match &mut self.0 {
            Some((term, int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            None => std::future::pending().await,
        }
    }
}
