//! `VERIFY SHARDS a-b [IN fleet] ROWS AGAINST host:port [MAX n ROWS PER
//! SECOND]`: the rows of the shards compared between their master and
//! another server; a row per difference, or one `ok` row (the summary)
//! when there is none.

use crate::admin::parse::ShardRange;
use crate::admin::{AdminError, Answer, Cell};
use crate::control::Control;
use crate::ops::{verify_rows, RowVerifyRequest};

const COLUMNS: &[&str] = &["shard", "database", "table", "problem", "key_range", "keys"];

/// Compares the rows of `range` between its master and `against`.
pub async fn answer(
    control: &Control,
    range: &ShardRange,
    against: &str,
    max_rows_per_second: Option<u64>,
) -> Result<Answer, AdminError> {
    let topology = control.engine.topology.load();
    let mut request = RowVerifyRequest::new(range.first, range.last, against);
    request.fleet = range.fleet.clone();
    if let Some(rate) = max_rows_per_second {
        request.max_rows_per_second = rate;
    }
    let report = verify_rows(&topology, &request).await?;
    let mut answer = Answer::new(COLUMNS);
    for difference in &report.differences {
        let detail = if difference.key_range.is_empty() {
            difference.detail.clone()
        } else {
            difference.keys.to_string()
        };
        answer.push(vec![
            u64::from(difference.shard).into(),
            difference.database.clone().into(),
            difference.table.clone().into(),
            difference.kind.into(),
            Some(difference.key_range.clone())
                .filter(|r| !r.is_empty())
                .into(),
            detail.into(),
        ]);
    }
    if answer.rows.is_empty() {
        answer.push(vec![
            Cell::Null,
            Cell::Null,
            Cell::Null,
            "ok".into(),
            Cell::Null,
            report.to_string().into(),
        ]);
    }
    Ok(answer)
}
