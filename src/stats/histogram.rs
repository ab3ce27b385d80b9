//! A lock-free latency histogram: fixed log-scale buckets of atomics.
//!
//! Values are microseconds. Below 8 µs every value has its own bucket;
//! above, each power of two is split into 8 buckets, so a bucket is at most
//! 12.5 % wide and a quantile read from the buckets (the bucket's middle) is
//! within 6.25 % of the true value. The last bucket holds everything from
//! about 100 s up. Prometheus gets cumulative counts at a few of the
//! bucket boundaries ([`EXPORT_BOUNDS_US`]).

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

/// Upper bounds, in microseconds, of the cumulative buckets exported to
/// Prometheus: the powers of two from 64 µs to 2^25 µs ≈ 33.6 s. Each is
/// a bucket boundary, so the count of values below it is exact.
pub const EXPORT_BOUNDS_US: [u64; 20] = {
    let mut bounds = [0; 20];
    let mut i = 0;
    while i < bounds.len() {
        bounds[i] = 1 << (i + 6);
        i += 1;
    }
    bounds
};

/// Errors, a sum and latency buckets, updated with relaxed atomic
/// increments only; the count is the buckets' total.
pub struct Histogram {
    errors: AtomicU64,
    sum_us: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

/// A point-in-time reading of a [`Histogram`]'s count, errors, sum and
/// quantiles, all since the histogram was created.
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

/// A copy of a [`Histogram`]'s counters, read in one pass over the
/// buckets, so the count, the quantiles and the cumulative counts agree
/// with each other even while recording goes on.
#[derive(Debug, Clone)]
pub struct Snapshot {
    counts: [u64; BUCKETS],
    errors: u64,
    sum_us: u64,
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
        if error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Values recorded so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            counts: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            errors: self.errors.load(Ordering::Relaxed),
            sum_us: self.sum_us.load(Ordering::Relaxed),
        }
    }

    /// Count, errors, sum and the 50th and 99th percentiles.
    pub fn summary(&self) -> HistogramSummary {
        self.snapshot().summary()
    }
}

impl Snapshot {
    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Values recorded as errors.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Sum of every value, in microseconds.
    pub fn sum_us(&self) -> u64 {
        self.sum_us
    }

    /// Count, errors, sum and the 50th and 99th percentiles.
    pub fn summary(&self) -> HistogramSummary {
        HistogramSummary {
            count: self.count(),
            errors: self.errors,
            sum_us: self.sum_us,
            p50_us: quantile(&self.counts, 0.5),
            p99_us: quantile(&self.counts, 0.99),
        }
    }

    /// For each of [`EXPORT_BOUNDS_US`], the values below it.
    pub fn cumulative(&self) -> [u64; EXPORT_BOUNDS_US.len()] {
        EXPORT_BOUNDS_US.map(|bound| self.counts[..bucket_of(bound)].iter().sum())
    }
}

/// The same buckets as [`Histogram`], for one owner behind a lock: only
/// the buckets that hold values are kept (sorted), so a table of many
/// histograms whose values fall in a few buckets each stays small.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparseHistogram {
    buckets: Vec<(u16, u64)>,
}

impl SparseHistogram {
    /// Records one value of `micros` microseconds.
    pub fn record_us(&mut self, micros: u64) {
        let bucket = bucket_of(micros) as u16;
        match self.buckets.binary_search_by_key(&bucket, |&(b, _)| b) {
            Ok(at) => self.buckets[at].1 += 1,
            Err(at) => self.buckets.insert(at, (bucket, 1)),
        }
    }

    /// The `q` quantile (0 < q ≤ 1), as [`Histogram`] reads it; 0 when
    /// empty.
    pub fn quantile_us(&self, q: f64) -> u64 {
        let total: u64 = self.buckets.iter().map(|&(_, count)| count).sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for &(bucket, count) in &self.buckets {
            seen += count;
            if seen >= rank {
                let (low, width) = bucket_bounds(usize::from(bucket));
                return low + width / 2;
            }
        }
        0
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
    fn export_bounds_are_bucket_boundaries_and_count_what_lies_below() {
        for bound in EXPORT_BOUNDS_US {
            assert_eq!(bucket_bounds(bucket_of(bound)).0, bound, "{bound}");
        }
        assert_eq!(EXPORT_BOUNDS_US[0], 64);
        assert!(EXPORT_BOUNDS_US[19] > 30_000_000);
        let histogram = Histogram::new();
        for micros in [0, 63, 64, 65, 1000, 40_000_000] {
            histogram.record_us(micros, false);
        }
        let snapshot = histogram.snapshot();
        let cumulative = snapshot.cumulative();
        assert_eq!(cumulative[0], 2, "below 64 µs");
        assert_eq!(cumulative[1], 4, "below 128 µs");
        assert_eq!(cumulative[3], 4, "below 512 µs");
        assert_eq!(cumulative[4], 5, "below 1024 µs");
        assert_eq!(cumulative[19], 5, "40 s is above every bound");
        assert_eq!(snapshot.count(), 6);
        assert_eq!(histogram.count(), 6);
        assert_eq!(snapshot.sum_us(), 40_001_192);
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
        let shared = Histogram::new();
        let contended = std::time::Instant::now();
        std::thread::scope(|scope| {
            for thread in 0..2u64 {
                let shared = &shared;
                scope.spawn(move || {
                    for i in 0..rounds {
                        shared.record(Duration::from_nanos((i + thread) * 37 % 50_000_000), false);
                    }
                });
            }
        });
        let per_contended = contended.elapsed().as_nanos() as f64 / rounds as f64;
        println!(
            "record: {per:.1} ns; with Instant::now() + elapsed(): {per_clock:.1} ns; \
             two threads on one histogram: {per_contended:.1} ns per record per thread (counts {} {})",
            histogram.count(),
            shared.count()
        );
    }
}
