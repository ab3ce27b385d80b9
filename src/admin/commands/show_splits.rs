//! `SHOW SPLITS`: the splits `SPLIT SHARDS` started on this proxy, oldest
//! first: where each is (phase, progress, ETA) and how it ended.

use crate::admin::{Answer, Cell};
use crate::control::split::SplitJob;
use crate::control::Control;

const COLUMNS: &[&str] = &[
    "id",
    "fleet",
    "shards",
    "source",
    "target",
    "state",
    "phase",
    "progress",
    "eta_s",
    "elapsed_s",
    "started_by",
    "last_error",
    "state_record",
];

/// Every split of this proxy.
pub fn answer(control: &Control) -> Answer {
    rows(&control.splits.list())
}

/// The rows of `jobs`.
pub fn rows(jobs: &[SplitJob]) -> Answer {
    let mut answer = Answer::new(COLUMNS);
    for job in jobs {
        answer.push(vec![
            job.id.into(),
            job.fleet.clone().into(),
            format!("{}-{}", job.first, job.last).into(),
            job.source.clone().into(),
            job.target.clone().into(),
            job.state.name().into(),
            job.phase.into(),
            job.progress.clone().into(),
            job.eta.map(|d| d.as_secs()).into(),
            job.elapsed.as_secs().into(),
            job.user.clone().into(),
            job.last_error.clone().into(),
            Cell::from(job.record.clone()),
        ]);
    }
    answer
}
