//! The rate limit of the slow-statement log: at most a given number of
//! lines per wall-clock second; the lines a second did not write are
//! counted and reported by the next line written.

use std::sync::Mutex;

use crate::sync::lock;

/// Lines written in the current second, and lines held back since the last
/// line written.
#[derive(Debug, Default)]
pub struct SlowLogLimit {
    state: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    second: u64,
    written: u32,
    suppressed: u64,
}

impl SlowLogLimit {
    /// A limit with nothing written yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a line may be written in `second` (seconds since any fixed
    /// point) at `per_second` lines a second: `Some(n)` with the lines held
    /// back since the last one written, `None` when this one is held back.
    pub fn permit(&self, second: u64, per_second: u32) -> Option<u64> {
        let mut window = lock(&self.state);
        if window.second != second {
            window.second = second;
            window.written = 0;
        }
        if window.written >= per_second {
            window.suppressed += 1;
            return None;
        }
        window.written += 1;
        Some(std::mem::take(&mut window.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_limit_a_second_and_the_rest_reported_next() {
        let limit = SlowLogLimit::new();
        assert_eq!(limit.permit(10, 2), Some(0));
        assert_eq!(limit.permit(10, 2), Some(0));
        assert_eq!(limit.permit(10, 2), None);
        assert_eq!(limit.permit(10, 2), None);
        assert_eq!(limit.permit(11, 2), Some(2));
        assert_eq!(limit.permit(11, 2), Some(0));
    }
}
