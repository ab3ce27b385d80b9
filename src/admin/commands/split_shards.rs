//! `SPLIT SHARDS a-b [IN fleet] TO host:port [options]`: starts the split
//! as a background job of this proxy and answers at once with its row
//! (`SHOW SPLITS` follows it); `DRY RUN` answers the checks and what each
//! phase would do, changing nothing.
//! docs/decisions/0037-split-shards-on-the-admin-port-is-a-background-job.md
//! says why.

use std::sync::Arc;

use crate::admin::parse::SplitCommand;
use crate::admin::{AdminError, Answer};
use crate::control::split::place::ThisProxy;
use crate::control::split::{dry_run, jobs, open, SplitOptions, SplitRequest};
use crate::control::Control;

/// The job's row (as `SHOW SPLITS` shows it), or the dry run's lines.
pub async fn answer(
    control: &Arc<Control>,
    user: &str,
    command: SplitCommand,
) -> Result<Answer, AdminError> {
    let request = SplitRequest {
        fleet: command.range.fleet.clone(),
        first: command.range.first,
        last: command.range.last,
        target: command.target.clone(),
    };
    let defaults = SplitOptions::default();
    let options = SplitOptions {
        resume: command.resume,
        max_rows_per_second: command
            .max_rows_per_second
            .unwrap_or(defaults.max_rows_per_second),
        keep_moved: command.keep_moved,
        grace_seconds: command.grace_seconds.unwrap_or(defaults.grace_seconds),
        stop_after: command.stop_after,
        resume_hint: "the same SPLIT SHARDS with RESUME",
    };
    if command.dry_run {
        let place = ThisProxy {
            control: Arc::clone(control),
            user: user.to_owned(),
        };
        let opened = open(&place, &request).await?;
        let found = dry_run(opened, &request, &options).await?;
        let mut answer = Answer::new(&["step", "detail"]);
        for line in &found.lines {
            let (step, detail) = line.split_once('\t').unwrap_or((line.as_str(), ""));
            answer.push(vec![step.into(), detail.into()]);
        }
        answer.push(vec![
            "dry run".into(),
            if found.failures.is_empty() {
                "nothing was changed".to_owned()
            } else {
                format!(
                    "nothing was changed; {} check(s) failed: {}",
                    found.failures.len(),
                    found.failures.join("; ")
                )
            }
            .into(),
        ]);
        return Ok(answer);
    }
    let job = jobs::start(control, user, request, options).await?;
    Ok(super::show_splits::rows(&[job]))
}
