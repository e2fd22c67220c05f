//! Gives memory back after a burst. glibc's allocator keeps what a burst of
//! calls freed inside its arenas (several MiB after 16 clients' load, with
//! the heap itself back under 1 MiB), so an idle evod would hold its peak
//! for ever. Every 5 s, evod's own CPU time says whether it was busy;
//! the first quiet interval after a busy one calls `malloc_trim(0)`, which
//! returns the free pages of every arena. Never on the call path, and at
//! most once per burst; a no-op where the allocator is not glibc's.

use std::time::Duration;

/// How often evod looks at its CPU time.
const EVERY: Duration = Duration::from_secs(5);
/// CPU time in an interval above which evod was busy.
const BUSY: Duration = Duration::from_millis(100);
/// CPU time in an interval under which evod is quiet.
const QUIET: Duration = Duration::from_millis(20);

/// Starts the watch on the current tokio runtime.
pub fn start() {
    tokio::spawn(async {
        let mut last = cpu_time();
        let mut busy_since_trim = false;
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let now = cpu_time();
            let used = now.saturating_sub(last);
            last = now;
            if used >= BUSY {
                busy_since_trim = true;
            } else if used <= QUIET && busy_since_trim {
                busy_since_trim = false;
                trim();
            }
        }
    });
}

/// User and system CPU time of the whole process.
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage we own.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return Duration::ZERO;
        }
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes the arenas' own locks; any thread may call it.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
