//! `RESET DIGESTS`: forgets every statement digest (the eviction count,
//! a counter of `/metrics`, stays).

use crate::admin::Answer;
use crate::engine::Engine;

/// Empties the digest table; answers how many digests were forgotten.
pub fn answer(engine: &Engine) -> Answer {
    let forgotten = engine.stats.digests.len();
    engine.stats.digests.reset();
    let mut answer = Answer::new(&["forgotten"]);
    answer.push(vec![forgotten.into()]);
    answer
}
