//! Reading timings: medians, percentiles and their printing, shared by every
//! benchmark so that all tables round alike.

use std::time::Duration;

/// The `p` quantile (0..=1) of `sorted`, the nearest rank.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The median of `v` (sorted in place): its upper middle when even.
pub fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    percentile(v, 0.5)
}

/// Microseconds, one decimal.
pub fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Milliseconds, two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}
