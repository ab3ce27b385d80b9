//! `VERIFY FLEET`: every shard database on its master and nowhere it should
//! not be, with the tables of the config's `schema` file; a row per
//! problem, or one `ok` row (the summary) when there is none.

use crate::admin::{AdminError, Answer, Cell};
use crate::control::Control;
use crate::ops;

const COLUMNS: &[&str] = &["host", "database", "problem", "detail"];

/// Checks every host of the topology in force.
pub async fn answer(control: &Control) -> Result<Answer, AdminError> {
    let topology = control.engine.topology.load();
    let report = ops::verify_configured(&topology, control.config_path.as_deref()).await?;
    let mut answer = Answer::new(COLUMNS);
    for problem in report.problems() {
        answer.push(vec![
            problem.host.into(),
            Some(problem.database).filter(|db| !db.is_empty()).into(),
            problem.kind.into(),
            problem.detail.into(),
        ]);
    }
    if answer.rows.is_empty() {
        answer.push(vec![
            "(all)".into(),
            Cell::Null,
            "ok".into(),
            report.to_string().into(),
        ]);
    }
    Ok(answer)
}
