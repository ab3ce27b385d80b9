//! `SHOW STATS`: per statement kind and per host, the count, the errors
//! and the p50/p99 latency since the proxy started.

use crate::admin::answer::micros_to_millis;
use crate::admin::Answer;
use crate::engine::Engine;
use crate::stats;

const COLUMNS: &[&str] = &["scope", "name", "count", "errors", "p50_ms", "p99_ms"];

/// Statement kinds first, then hosts.
pub fn answer(engine: &Engine) -> Answer {
    let mut answer = Answer::new(COLUMNS);
    for row in stats::snapshot(
        &engine.stats,
        &engine.backends.figures(&engine.topology.load()),
    ) {
        answer.push(vec![
            row.scope.into(),
            row.name.into(),
            row.count.into(),
            row.errors.into(),
            micros_to_millis(row.p50_us).into(),
            micros_to_millis(row.p99_us).into(),
        ]);
    }
    answer
}
