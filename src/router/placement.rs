//! The default placement policy: a uniformly random open shard.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::plan::Placement;

/// Chooses uniformly at random among the open shards (the default
/// placement policy for new objects). One per session; cheap to create.
#[derive(Debug, Clone)]
pub struct RandomPlacement {
    rng: SmallRng,
}

impl RandomPlacement {
    /// A policy seeded from the thread's generator (itself seeded from
    /// the operating system): no system call per session.
    pub fn new() -> Self {
        RandomPlacement {
            rng: SmallRng::from_rng(&mut rand::rng()),
        }
    }

    /// A reproducible policy (tests, benchmarks).
    pub fn seeded(seed: u64) -> Self {
        RandomPlacement {
            rng: SmallRng::seed_from_u64(seed),
        }
    }
}

impl Default for RandomPlacement {
    fn default() -> Self {
        Self::new()
    }
}

impl Placement for RandomPlacement {
    fn choose(&mut self, first: u32, last: u32) -> u32 {
        if first >= last {
            return first;
        }
        self.rng.random_range(first..=last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_in_range_and_spreads() {
        let mut p = RandomPlacement::seeded(7);
        let mut seen = [false; 4];
        for _ in 0..200 {
            let s = p.choose(10, 13);
            assert!((10..=13).contains(&s));
            seen[(s - 10) as usize] = true;
        }
        assert!(seen.iter().all(|&b| b));
        assert_eq!(p.choose(5, 5), 5);
        assert_eq!(p.choose(6, 5), 6);
    }
}
