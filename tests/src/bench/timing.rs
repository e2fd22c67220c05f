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

/// A process's CPU time so far (user + system), from `/proc/PID/stat`.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces), from field 3:
    // utime and stime are fields 14 and 15.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let total = ticks(11) + ticks(12);
    Duration::from_nanos(total * 1_000_000_000 / per_second)
}
