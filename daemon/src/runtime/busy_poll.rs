//! Busy-polling before the I/O worker sleeps (Linux).
//!
//! A proxied call crosses evod twice: the request on its way to the child,
//! the answer on its way back. Each time, evod's worker had gone to sleep in
//! `epoll_wait`, and waking a sleeping (virtual) CPU is the largest cost of a
//! proxied call on small machines: tens of µs each, more than all of evod's
//! own work. So when the worker runs out of tasks it first watches the
//! runtime's epoll instance for up to [`DEFAULT_SPIN`] (`EVO_SPIN_US`; `0`
//! turns it off): an answer that arrives meanwhile is taken without a sleep
//! and a wakeup. Watching is `poll` on the epoll descriptor, which reports
//! whether an event is pending without taking it, so tokio still gets every
//! event; the watch ends at the first one, including tokio's own wakeups, and
//! at a task woken from a thread outside the runtime (a `run_code` script's
//! engine: such a wake reaches no epoll instance while the worker has not
//! parked yet), so nothing waits for the spin. It only follows work: an idle
//! daemon sleeps.
//!
//! Measured with `evo-bench` (see docs/performance.md, "Threads and busy-poll"): a proxied
//! call through the shim takes less than half as long, and light traffic costs less CPU
//! than the sleeps and wakeups did.
//!
//! The spin watches the first epoll instance the runtime's build created (descriptors are numbered
//! lowest-free first; tokio holds a duplicate of it); if none is found the worker just sleeps.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the worker watches for new events before it sleeps.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(250);
/// Environment variable overriding [`DEFAULT_SPIN`], in µs (`0`: off).
pub const SPIN_ENV: &str = "EVO_SPIN_US";

/// The runtime's epoll descriptor once armed (-1: do not spin).
static EPOLL_FD: AtomicI32 = AtomicI32::new(-1);
static SPIN_NS: AtomicU64 = AtomicU64::new(0);

/// The epoll descriptors this process holds.
fn epoll_fds() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:[eventpoll]")
        })
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The spin time from `EVO_SPIN_US`, else [`DEFAULT_SPIN`].
pub fn spin_from_env() -> Duration {
    std::env::var(SPIN_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_SPIN, Duration::from_micros)
}

/// Builds the runtime with `build` (whose builder has [`before_park`] as
/// its `on_thread_park`) and arms the spin on the epoll instance the build
/// created: the first one, as descriptors are numbered lowest-free first
/// (tokio also holds a duplicate of it). Returns whether the spin is armed.
pub fn arm<T>(spin: Duration, build: impl FnOnce() -> T) -> (T, bool) {
    let before = epoll_fds();
    let runtime = build();
    let created = epoll_fds()
        .into_iter()
        .filter(|fd| !before.contains(fd))
        .min();
    let armed = match created {
        Some(fd) if !spin.is_zero() => {
            SPIN_NS.store(spin.as_nanos() as u64, Ordering::Relaxed);
            EPOLL_FD.store(fd, Ordering::Release);
            true
        }
        _ => false,
    };
    (runtime, armed)
}

/// tokio's `on_thread_park`: watches for a pending event for up to the spin
/// time, returning at the first.
pub fn before_park() {
    let fd = EPOLL_FD.load(Ordering::Acquire);
    if fd < 0 {
        return;
    }
    let limit = Duration::from_nanos(SPIN_NS.load(Ordering::Relaxed));
    let runtime = tokio::runtime::Handle::try_current().ok();
    let start = Instant::now();
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    while start.elapsed() < limit {
        // SAFETY: one valid pollfd and a zero timeout: poll only reports.
        if unsafe { libc::poll(&mut pfd, 1, 0) } != 0 || woken_from_outside(runtime.as_ref()) {
            return;
        }
        std::hint::spin_loop();
    }
}

/// A task woken from a thread outside the runtime (a script's engine
/// thread, say) waits in the runtime's global queue, and no event reaches
/// the epoll instance: this worker runs before it parks, so nobody is told
/// to wake it. Without this check such a wake would wait out the spin.
fn woken_from_outside(runtime: Option<&tokio::runtime::Handle>) -> bool {
    runtime.is_some_and(|r| r.metrics().global_queue_depth() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One worker that spins before it parks.
    fn spinning_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .on_thread_park(before_park)
            .build()
            .unwrap()
    }

    /// The spin's settings are the process's: tests that arm take turns.
    static ARMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn arms_on_the_runtime_epoll_and_io_still_flows() {
        let _one_at_a_time = ARMING.lock();
        let (rt, armed) = arm(Duration::from_micros(200), spinning_runtime);
        assert!(armed);
        let fd = EPOLL_FD.load(Ordering::Acquire);
        let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert_eq!(target.as_os_str(), "anon_inode:[eventpoll]");
        // Ping-pong over a socket pair: every wait goes through the spin.
        rt.block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
            let echo = tokio::spawn(async move {
                let mut buf = [0u8; 1];
                for _ in 0..200 {
                    b.read_exact(&mut buf).await.unwrap();
                    b.write_all(&buf).await.unwrap();
                }
            });
            let mut buf = [0u8; 1];
            for i in 0..200u8 {
                a.write_all(&[i]).await.unwrap();
                a.read_exact(&mut buf).await.unwrap();
                assert_eq!(buf[0], i);
            }
            echo.await.unwrap();
        });
        assert!(!arm(Duration::ZERO, || ()).1, "0 turns the spin off");
    }

    #[test]
    fn a_wake_from_another_thread_ends_the_spin() {
        let _one_at_a_time = ARMING.lock();
        let spin = Duration::from_millis(20);
        let (rt, armed) = arm(spin, spinning_runtime);
        assert!(armed);
        // Ping-pong with a plain thread, as a script's engine does with the
        // worker: no I/O event ends the spin, only the woken task.
        let (to_rt, mut from_thread) = tokio::sync::mpsc::unbounded_channel::<u32>();
        let (to_thread, from_rt) = std::sync::mpsc::channel::<u32>();
        const PINGS: u32 = 20;
        let started = Instant::now();
        let pinger = std::thread::spawn(move || {
            for i in 0..PINGS {
                to_rt.send(i).unwrap();
                assert_eq!(from_rt.recv().unwrap(), i);
            }
        });
        rt.block_on(async {
            tokio::spawn(async move {
                while let Some(i) = from_thread.recv().await {
                    to_thread.send(i).unwrap();
                }
            })
            .await
            .unwrap();
        });
        pinger.join().unwrap();
        let took = started.elapsed();
        assert!(
            took < spin * PINGS / 2,
            "{PINGS} pings took {took:?}: wakes waited out the {spin:?} spin"
        );
    }
}
