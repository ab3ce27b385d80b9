//! `RELOAD CONFIG`: re-read the config file and swap it in if it is valid.
//! A refused file leaves the config in force serving; the error lists
//! every problem with its line (and `SHOW CONFIG` keeps it). The file is
//! read and built on the blocking pool, not on the admin session's worker.
//! A file that would re-home existing data is refused unless `FORCE`.

use crate::admin::{AdminError, Answer};
use crate::control::reload::{Force, ReloadTrigger};
use crate::control::Control;

/// A row with the outcome: `reloaded` or `unchanged`, the version in
/// force, and what changed. `force` loads a file that re-homes data.
pub async fn answer(control: &Control, force: bool) -> Result<Answer, AdminError> {
    let force = if force { Force::Rehome } else { Force::No };
    let summary = control.reload_with(ReloadTrigger::Admin, force).await?;
    let mut answer = Answer::new(&["result", "version", "changes"]);
    answer.push(vec![
        if summary.changed {
            "reloaded"
        } else {
            "unchanged"
        }
        .into(),
        summary.version.into(),
        summary.description.into(),
    ]);
    Ok(answer)
}
