//! `SHOW DIGESTS`: per statement shape (literals masked), the count,
//! errors, times, rows, shards and routes since the proxy started or the
//! last `RESET DIGESTS`.

use crate::admin::answer::micros_to_millis;
use crate::admin::Answer;
use crate::clock::format_time;
use crate::engine::Engine;
use crate::stats::digest::DigestOrder;

const COLUMNS: &[&str] = &[
    "digest",
    "text",
    "count",
    "errors",
    "total_ms",
    "max_ms",
    "p50_ms",
    "p99_ms",
    "rows_sent",
    "rows_affected",
    "shards",
    "routes",
    "first_seen",
    "last_seen",
];

/// The digests, highest first by `order`, at most `limit`.
pub fn answer(engine: &Engine, order: DigestOrder, limit: Option<usize>) -> Answer {
    let mut answer = Answer::new(COLUMNS);
    for row in engine.stats.digests.rows(order, limit) {
        answer.push(vec![
            row.digest.into(),
            row.text.into(),
            row.count.into(),
            row.errors.into(),
            micros_to_millis(row.total_us).into(),
            micros_to_millis(row.max_us).into(),
            micros_to_millis(row.p50_us).into(),
            micros_to_millis(row.p99_us).into(),
            row.rows_sent.into(),
            row.rows_affected.into(),
            row.shards.into(),
            row.routes.into(),
            format_time(row.first_seen).into(),
            format_time(row.last_seen).into(),
        ]);
    }
    answer
}
