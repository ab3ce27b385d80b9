//! The steps of a cutover, each timed, as the answer and the CLI's
//! progress show them.

use std::fmt;
use std::future::Future;
use std::time::Instant;

/// One step of a cutover and how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Its name (`check`, `pause`, `catch-up`, `write`, ...).
    pub name: &'static str,
    /// How long it took, in milliseconds.
    pub ms: u128,
    /// What it found or did (`failed: ...` when it failed).
    pub detail: String,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} ms): {}", self.name, self.ms, self.detail)
    }
}

/// A step starting or ending, for a caller that shows progress.
#[derive(Debug, Clone, Copy)]
pub enum StepEvent<'a> {
    /// The step named starts.
    Started(&'static str),
    /// The step ended (its detail says whether it failed).
    Ended(&'a Step),
}

/// Told of every step as it starts and ends.
pub type Progress<'a> = &'a (dyn Fn(StepEvent<'_>) + Send + Sync);

/// What a cutover did: its steps, then what is left for the operator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutoverReport {
    /// Every step, in order.
    pub steps: Vec<Step>,
    /// What to clean up by hand afterwards, in order.
    pub cleanup: Vec<String>,
}

/// The steps run so far, with the progress callback.
pub(super) struct Steps<'a> {
    pub(super) done: Vec<Step>,
    progress: Option<Progress<'a>>,
}

impl<'a> Steps<'a> {
    pub(super) fn new(progress: Option<Progress<'a>>) -> Self {
        Self {
            done: Vec::new(),
            progress,
        }
    }

    /// Runs `work` as step `name`: its `Ok` carries the value and the
    /// step's detail; an error is recorded as `failed: ...` and returned.
    pub(super) async fn run<T, E: fmt::Display>(
        &mut self,
        name: &'static str,
        work: impl Future<Output = Result<(T, String), E>>,
    ) -> Result<T, E> {
        if let Some(progress) = self.progress {
            progress(StepEvent::Started(name));
        }
        let started = Instant::now();
        let result = work.await;
        let ms = started.elapsed().as_millis();
        let (result, detail) = match result {
            Ok((value, detail)) => (Ok(value), detail),
            Err(e) => {
                let detail = format!("failed: {e}");
                (Err(e), detail)
            }
        };
        self.note(name, ms, detail);
        result
    }

    /// Records a step that took no time of its own (a dry run's findings).
    pub(super) fn note(&mut self, name: &'static str, ms: u128, detail: String) {
        self.done.push(Step { name, ms, detail });
        if let (Some(progress), Some(step)) = (self.progress, self.done.last()) {
            progress(StepEvent::Ended(step));
        }
    }

    /// The steps as one line each, for a log or an error.
    pub(super) fn summary(&self) -> String {
        self.done
            .iter()
            .map(Step::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }
}
