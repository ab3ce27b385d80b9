//! `SHOW SHARD STATS`: the busiest virtual shards since the proxy started,
//! by statements, errors or time.

use crate::admin::answer::micros_to_millis;
use crate::admin::Answer;
use crate::engine::Engine;
use crate::stats::shards::ShardOrder;

const COLUMNS: &[&str] = &["fleet", "shard", "statements", "errors", "time_ms"];

/// The `top` shards, highest first by `order`.
pub fn answer(engine: &Engine, top: usize, order: ShardOrder) -> Answer {
    let mut answer = Answer::new(COLUMNS);
    for row in engine.stats.shards.top(order, top) {
        answer.push(vec![
            row.fleet.into(),
            row.shard.into(),
            row.statements.into(),
            row.errors.into(),
            micros_to_millis(row.time_us).into(),
        ]);
    }
    answer
}
