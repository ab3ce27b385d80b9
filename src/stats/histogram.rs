//! A lock-free latency histogram: fixed log-scale buckets of atomics.
//!
//! Values are microseconds. Below 8 µs every value has its own bucket;
//! above, each power of two is split into 8 buckets, so a bucket is at most
//! 12.5 % wide and a quantile read from the buckets (the bucket's middle) is
//! within 6.25 % of the true value. The last bucket holds everything from
//! about 100 s up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets per power of two (a power of two itself).
const SUB_BUCKETS: usize = 8;
/// log2 of [`SUB_BUCKETS`].
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();
/// Highest power of two with buckets of its own: 2^26 µs ≈ 67 s, so the
/// last bucket starts at 15·2^23 µs ≈ 126 s.
const MAX_POWER: u32 = 26;
/// Number of buckets.
pub const BUCKETS: usize = (MAX_POWER as usize - SUB_BITS as usize + 2) * SUB_BUCKETS;

/// Counts, errors, a sum and latency buckets, updated with relaxed atomic
/// increments only.
pub struct Histogram {
    count: AtomicU64,
    errors: AtomicU64,
    sum_us: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

/// A point-in-time reading of a [`Histogram`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistogramSummary {
    /// Values recorded.
    pub count: u64,
    /// Values recorded as errors.
    pub errors: u64,
    /// Sum of every value, in microseconds.
    pub sum_us: u64,
    /// Median, in microseconds (0 when empty).
    pub p50_us: u64,
    /// 99th percentile, in microseconds (0 when empty).
    pub p99_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Histogram").field(&self.summary()).finish()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self {
            count: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Records one value that took `elapsed`, counted as an error if
    /// `error`.
    #[inline]
    pub fn record(&self, elapsed: Duration, error: bool) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.record_us(micros, error);
    }

    /// Records one value of `micros` microseconds.
    #[inline]
    pub fn record_us(&self, micros: u64, error: bool) {
        self.buckets[bucket_of(micros)].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        if error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Values recorded so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Count, errors, sum and the 50th and 99th percentiles. Recording may
    /// go on meanwhile; the quantiles come from one pass over the buckets,
    /// so they are consistent with each other.
    pub fn summary(&self) -> HistogramSummary {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        HistogramSummary {
            count: self.count.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            sum_us: self.sum_us.load(Ordering::Relaxed),
            p50_us: quantile(&counts, 0.5),
            p99_us: quantile(&counts, 0.99),
        }
    }
}

/// The bucket holding `micros`.
#[inline]
fn bucket_of(micros: u64) -> usize {
    if micros < SUB_BUCKETS as u64 {
        return micros as usize;
    }
    let power = 63 - micros.leading_zeros();
    if power > MAX_POWER {
        return BUCKETS - 1;
    }
    let sub = (micros >> (power - SUB_BITS)) as usize & (SUB_BUCKETS - 1);
    (power - SUB_BITS + 1) as usize * SUB_BUCKETS + sub
}

/// The smallest value and the width of bucket `index`.
fn bucket_bounds(index: usize) -> (u64, u64) {
    if index < SUB_BUCKETS {
        return (index as u64, 1);
    }
    let power = (index / SUB_BUCKETS) as u32 + SUB_BITS - 1;
    let sub = (index % SUB_BUCKETS) as u64;
    let width = 1u64 << (power - SUB_BITS);
    ((SUB_BUCKETS as u64 + sub) * width, width)
}

/// The `q` quantile (0 < q ≤ 1) of bucket counts: the middle of the bucket
/// holding the value of rank ⌈q·n⌉; 0 for no values.
fn quantile(counts: &[u64], q: f64) -> u64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0u64;
    for (index, &count) in counts.iter().enumerate() {
        seen += count;
        if seen >= rank {
            let (low, width) = bucket_bounds(index);
            return low + width / 2;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_every_value() {
        let mut expected_low = 0;
        for index in 0..BUCKETS {
            let (low, width) = bucket_bounds(index);
            assert_eq!(low, expected_low, "bucket {index}");
            assert_eq!(bucket_of(low), index);
            assert_eq!(bucket_of(low + width - 1), index);
            expected_low = low + width;
        }
        assert!(
            bucket_bounds(BUCKETS - 1).0 > 100_000_000,
            "last bucket starts past 100 s"
        );
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn buckets_are_at_most_an_eighth_wide() {
        for index in SUB_BUCKETS..BUCKETS {
            let (low, width) = bucket_bounds(index);
            assert!(width * 8 <= low, "bucket {index}: {low}+{width}");
        }
    }

    #[test]
    fn quantiles_are_within_a_bucket_of_the_truth() {
        let histogram = Histogram::new();
        // 1..=10_000 µs: p50 = 5000, p99 = 9900.
        for micros in 1..=10_000u64 {
            histogram.record_us(micros, micros % 100 == 0);
        }
        let summary = histogram.summary();
        assert_eq!(summary.count, 10_000);
        assert_eq!(summary.errors, 100);
        assert_eq!(summary.sum_us, 10_000 * 10_001 / 2);
        let close = |got: u64, want: u64| got.abs_diff(want) * 16 <= want;
        assert!(close(summary.p50_us, 5000), "p50 {}", summary.p50_us);
        assert!(close(summary.p99_us, 9900), "p99 {}", summary.p99_us);
    }

    #[test]
    fn small_values_are_exact_and_outliers_do_not_move_the_median() {
        let histogram = Histogram::new();
        for _ in 0..99 {
            histogram.record(Duration::from_micros(3), false);
        }
        histogram.record(Duration::from_secs(1000), true);
        let summary = histogram.summary();
        assert_eq!(summary.p50_us, 3);
        assert_eq!(summary.p99_us, 3);
        let histogram = Histogram::new();
        histogram.record(Duration::from_secs(2), false);
        let p99 = histogram.summary().p99_us;
        assert!(p99.abs_diff(2_000_000) * 16 <= 2_000_000, "p99 {p99}");
    }

    #[test]
    fn an_empty_histogram_reads_zero() {
        assert_eq!(Histogram::new().summary(), HistogramSummary::default());
    }

    /// Not an assertion: prints what one record costs (run with
    /// `--nocapture --ignored` in release mode).
    #[test]
    #[ignore]
    fn record_cost() {
        let histogram = Histogram::new();
        let rounds = 10_000_000u64;
        let started = std::time::Instant::now();
        for i in 0..rounds {
            histogram.record(Duration::from_nanos(i * 37 % 50_000_000), i % 64 == 0);
        }
        let per = started.elapsed().as_nanos() as f64 / rounds as f64;
        let with_clock = std::time::Instant::now();
        for i in 0..rounds {
            let t = std::time::Instant::now();
            histogram.record(t.elapsed(), i % 64 == 0);
        }
        let per_clock = with_clock.elapsed().as_nanos() as f64 / rounds as f64;
        println!(
            "record: {per:.1} ns; with Instant::now() + elapsed(): {per_clock:.1} ns (count {})",
            histogram.count()
        );
    }
}
