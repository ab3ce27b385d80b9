//! The splits this proxy runs for `SPLIT SHARDS`: one at a time, each a
//! background task of the proxy's runtime, its phase, progress, ETA and
//! last error kept for `SHOW SPLITS`. The state record is the same as the
//! command line's, so either continues what the other started.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::place::ThisProxy;
use super::{
    check_resume, open_claimed, run, DriverError, Outcome, SplitEvent, SplitOptions, SplitRequest,
};
use crate::control::Control;
use crate::sync::lock;

/// How many finished splits `SHOW SPLITS` keeps.
const KEPT: usize = 16;
/// How many result lines of a phase a failure's error lists.
const FINDINGS: usize = 20;

/// Where a split job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Its task runs.
    Running,
    /// Every phase done.
    Done,
    /// Stopped after a phase as asked; `RESUME` continues.
    Stopped,
    /// A phase failed (the error says what to do); `RESUME` continues.
    Failed,
}

impl JobState {
    /// Its name in `SHOW SPLITS`.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Stopped => "stopped",
            JobState::Failed => "failed",
        }
    }
}

/// One split started on this proxy, as `SHOW SPLITS` shows it.
#[derive(Debug, Clone)]
pub struct SplitJob {
    /// Its number on this proxy (from 1).
    pub id: u64,
    /// The fleet.
    pub fleet: String,
    /// First shard.
    pub first: u32,
    /// Last shard.
    pub last: u32,
    /// The shards' master before the split.
    pub source: String,
    /// The new master.
    pub target: String,
    /// Where it is.
    pub state: JobState,
    /// The phase running (or the last one run).
    pub phase: &'static str,
    /// What the phase is doing, or what it did.
    pub progress: String,
    /// The copy's time left, when known.
    pub eta: Option<Duration>,
    /// When it started (seconds since the epoch).
    pub started_at: u64,
    /// Since it started, or how long it took.
    pub elapsed: Duration,
    /// Why it failed.
    pub last_error: Option<String>,
    /// The admin account that started it.
    pub user: String,
    /// Where its state record is.
    pub record: String,
    /// The result lines of the phase running (the verify's differences),
    /// the first [`FINDINGS`]: a failure's error lists them.
    findings: Vec<String>,
    started: Instant,
}

/// The split jobs of this proxy.
#[derive(Default)]
pub struct Splits {
    jobs: Mutex<Vec<SplitJob>>,
}

impl Splits {
    /// Every job, oldest first, with its time so far.
    pub fn list(&self) -> Vec<SplitJob> {
        lock(&self.jobs)
            .iter()
            .map(|job| {
                let mut job = job.clone();
                if job.state == JobState::Running {
                    job.elapsed = job.started.elapsed();
                }
                job
            })
            .collect()
    }

    /// A new running job for `request`, its id; refused while one runs.
    fn reserve(&self, user: &str, request: &SplitRequest) -> Result<u64, DriverError> {
        let mut jobs = lock(&self.jobs);
        if let Some(job) = jobs.iter().find(|job| job.state == JobState::Running) {
            return Err(DriverError::Busy(format!(
                "split {} ({} {}-{} to {}) is running on this proxy, phase {}: one split at a time; \
                 SHOW SPLITS follows it",
                job.id, job.fleet, job.first, job.last, job.target, job.phase
            )));
        }
        let id = jobs.iter().map(|job| job.id).max().unwrap_or(0) + 1;
        jobs.push(SplitJob {
            id,
            fleet: request.fleet.clone().unwrap_or_default(),
            first: request.first,
            last: request.last,
            source: String::new(),
            target: request.target.clone(),
            state: JobState::Running,
            phase: "prepare",
            progress: "reading the state record".to_owned(),
            eta: None,
            started_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            elapsed: Duration::ZERO,
            last_error: None,
            user: user.to_owned(),
            record: String::new(),
            findings: Vec::new(),
            started: Instant::now(),
        });
        Ok(id)
    }

    fn update(&self, id: u64, change: impl FnOnce(&mut SplitJob)) {
        if let Some(job) = lock(&self.jobs).iter_mut().find(|job| job.id == id) {
            change(job);
        }
    }

    /// What `event` says of job `id`.
    fn heard(&self, id: u64, event: &SplitEvent<'_>) {
        match event {
            SplitEvent::Started(phase, what) => {
                tracing::info!(split = id, "split: {what}");
                self.update(id, |job| {
                    job.phase = phase;
                    job.progress = (*what).to_owned();
                    job.eta = None;
                    job.findings.clear();
                });
            }
            SplitEvent::Copy(p) => self.update(id, |job| {
                job.progress = format!(
                    "copy {}/{} databases, {} rows, {:.1} MB",
                    p.databases_done,
                    p.databases,
                    p.rows,
                    p.bytes as f64 / 1e6
                );
                job.eta = p.eta();
            }),
            SplitEvent::Note(text) => {
                tracing::info!(split = id, "split: {text}");
                self.update(id, |job| job.progress = (*text).to_owned());
            }
            SplitEvent::Line(text) => {
                tracing::info!(split = id, "split: {text}");
                self.update(id, |job| {
                    if job.findings.len() < FINDINGS {
                        job.findings.push((*text).to_owned());
                    }
                });
            }
            SplitEvent::Ended(phase, took, detail) => {
                let text = format!("{phase} done in {:.1}s: {detail}", took.as_secs_f64());
                tracing::info!(split = id, "split: {text}");
                self.update(id, |job| {
                    job.progress = text;
                    job.eta = None;
                });
            }
        }
    }

    fn finished(&self, id: u64, result: Result<Outcome, DriverError>) {
        self.update(id, |job| {
            job.elapsed = job.started.elapsed();
            job.eta = None;
            match result {
                Ok(Outcome::Done(_)) => job.state = JobState::Done,
                Ok(Outcome::Stopped(_)) => job.state = JobState::Stopped,
                Err(error) => {
                    tracing::warn!(split = id, "split failed: {error}");
                    job.state = JobState::Failed;
                    let mut text = error.to_string();
                    if job.phase == "verify" {
                        for finding in &job.findings {
                            text.push('\n');
                            text.push_str(finding);
                        }
                    }
                    job.last_error = Some(text);
                }
            }
        });
        let mut jobs = lock(&self.jobs);
        let finished = jobs.iter().filter(|j| j.state != JobState::Running).count();
        if finished > KEPT {
            if let Some(oldest) = jobs.iter().position(|j| j.state != JobState::Running) {
                jobs.remove(oldest);
            }
        }
    }
}

/// Starts `request` on `control`'s proxy as a background task and returns
/// its job at once; refused (changing nothing) while another split runs
/// on this proxy, when the request does not fit the config, or when the
/// state record says otherwise (another split; this one without
/// `RESUME`, or `RESUME` without one).
pub async fn start(
    control: &Arc<Control>,
    user: &str,
    request: SplitRequest,
    options: SplitOptions,
) -> Result<SplitJob, DriverError> {
    let splits = &control.splits;
    let id = splits.reserve(user, &request)?;
    let place = ThisProxy {
        control: Arc::clone(control),
        user: user.to_owned(),
    };
    let checked = match open_claimed(&place, &request).await {
        Ok((opened, claim)) => {
            match check_resume(&opened, &options).and_then(|()| check_plan(&opened, &request)) {
                Ok(()) => Ok((opened, claim)),
                Err(e) => {
                    claim.release().await;
                    Err(e)
                }
            }
        }
        Err(e) => Err(e),
    };
    let (opened, claim) = match checked {
        Ok(checked) => checked,
        Err(e) => {
            lock(&splits.jobs).retain(|job| job.id != id);
            return Err(e);
        }
    };
    let source = opened
        .recorded
        .as_ref()
        .map(|state| state.source.clone())
        .or_else(|| {
            let topology = &opened.topology;
            topology
                .fleet_by_name(&opened.fleet)
                .and_then(|f| topology.master_of(f, request.first))
                .map(|h| topology.hosts[h].addr.clone())
        })
        .unwrap_or_default();
    splits.update(id, |job| {
        job.fleet = opened.fleet.clone();
        job.source = source;
        job.record = opened.store.describe();
        if let Some(state) = &opened.recorded {
            job.phase = state.phase.name();
            job.progress = format!("resuming after {}", state.phase.name());
        }
    });
    let control = Arc::clone(control);
    tokio::spawn(async move {
        let events = |event: SplitEvent<'_>| control.splits.heard(id, &event);
        let result = run(&place, opened, &claim, &request, &options, &events).await;
        claim.release().await;
        control.splits.finished(id, result);
    });
    splits
        .list()
        .into_iter()
        .find(|job| job.id == id)
        .ok_or_else(|| DriverError::Failed(format!("split {id} vanished")))
}

/// A new split's range, fleet and target checked against the config, so
/// that a bad argument is refused now rather than by the job.
fn check_plan(opened: &super::Opened, request: &SplitRequest) -> Result<(), DriverError> {
    if opened.recorded.is_some() {
        return Ok(());
    }
    crate::ops::split::plan(
        &opened.topology,
        Some(&opened.fleet),
        request.first,
        request.last,
        &request.target,
    )
    .map(|_| ())
    .map_err(|e| DriverError::Refused(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::split::CopyProgress;

    fn request(first: u32, last: u32) -> SplitRequest {
        SplitRequest {
            fleet: Some("main".to_owned()),
            first,
            last,
            target: "127.0.0.1:3311".to_owned(),
        }
    }

    #[test]
    fn one_split_at_a_time_and_what_show_splits_sees() {
        let splits = Splits::default();
        let id = splits.reserve("admin", &request(8, 15)).unwrap();
        assert_eq!(id, 1);
        let refused = splits.reserve("admin", &request(0, 3)).unwrap_err();
        assert!(matches!(refused, DriverError::Busy(_)), "{refused:?}");
        assert!(
            refused
                .to_string()
                .contains("split 1 (main 8-15 to 127.0.0.1:3311) is running"),
            "{refused}"
        );
        splits.heard(id, &SplitEvent::Started("copy", "copy a -> b ..."));
        let progress = CopyProgress {
            databases_done: 4,
            databases: 16,
            rows: 1200,
            bytes: 2_500_000,
            elapsed: Duration::from_secs(2),
        };
        splits.heard(id, &SplitEvent::Copy(&progress));
        let job = &splits.list()[0];
        assert_eq!((job.state, job.phase), (JobState::Running, "copy"));
        assert_eq!(job.progress, "copy 4/16 databases, 1200 rows, 2.5 MB");
        assert_eq!(job.eta, Some(Duration::from_secs(6)));
        splits.heard(id, &SplitEvent::Started("verify", "verify ..."));
        splits.heard(
            id,
            &SplitEvent::Line("shard 9 db09.pins: rows differ: 1 changed: 7"),
        );
        splits.finished(
            id,
            Err(DriverError::Failed("verify: 1 difference".to_owned())),
        );
        let job = &splits.list()[0];
        assert_eq!(job.state, JobState::Failed);
        assert_eq!(
            job.last_error.as_deref(),
            Some("verify: 1 difference\nshard 9 db09.pins: rows differ: 1 changed: 7")
        );
        assert_eq!(
            splits.reserve("admin", &request(0, 3)).unwrap(),
            2,
            "a new one may start"
        );
    }

    #[test]
    fn finished_splits_beyond_the_kept_are_forgotten_oldest_first() {
        let splits = Splits::default();
        for _ in 0..KEPT + 3 {
            let id = splits.reserve("admin", &request(1, 2)).unwrap();
            splits.finished(id, Err(DriverError::Failed("x".to_owned())));
        }
        let ids: Vec<u64> = splits.list().iter().map(|job| job.id).collect();
        assert_eq!(ids.len(), KEPT);
        assert_eq!(ids.first(), Some(&4));
    }
}
