//! How a ChildServer's run ends and what comes next: a start that timed out
//! (excused while the machine is busy), a run that went down (restarted with
//! backoff, or marked failed after repeated crashes), and the callers still
//! waiting told why.
//!
//! A start that times out while at least one other child holds a slot is "excused": started again
//! at the back of the line, counted in `restarts` but not as a crash, at most twice in a row; the
//! third counts. With `limits.max_concurrent_starts` at 1 nothing is excused (nobody else was
//! starting), nor is a remote server (it takes no slot).
//!
//! A crash goes to `Backoff` (restarted at once, then after 250 ms doubling to 30 s, ±20%); five
//! within 60 s go to `Failed` until `evoctl refresh` or a reload. A child that cannot be started at
//! all (its command is missing, a header is invalid) is `Failed` at once, since retrying cannot
//! help. A remote server that goes away is never failed, only reconnected with the same backoff:
//! its outage is not a crash loop of ours (`evoctl status` shows `restarting` with the last error).

use std::time::{Duration, Instant};

use actix::prelude::*;

use super::{AfterRunEnds, ChildServer, Phase, Waiter};

/// Start timeouts forgiven in a row while other children were starting too
/// (a saturated machine, not a broken server); the next one counts as a
/// crash.
const MAX_EXCUSED_TIMEOUTS: u32 = 2;
/// Crashes within this window count towards marking the server failed.
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// Crashes within [`CRASH_WINDOW`] after which the server is marked failed.
const MAX_CRASHES: usize = 5;
impl ChildServer {
    /// Run `generation` did not answer its handshake and list its tools
    /// within `start_timeout_s`. While other children were starting too the
    /// machine is saturated, not this server broken: it starts again at the
    /// back of the line, not counted as a crash (a few times in a row at
    /// most). Otherwise it is down like a crash.
    pub(super) fn start_timed_out(&mut self, generation: u64, ctx: &mut Context<Self>) {
        let limit = self.spec.start_timeout.as_secs_f64();
        let reason =
            format!("did not answer initialize and tools/list within {limit}s (start_timeout_s)");
        let others = self.gate.load().0.saturating_sub(1);
        if self.remote() || others == 0 || self.excused >= MAX_EXCUSED_TIMEOUTS {
            return self.down(generation, reason, ctx);
        }
        self.excused += 1;
        let busy = match others {
            1 => "another child was starting".to_string(),
            n => format!("{n} other children were starting"),
        };
        tracing::warn!(server = %self.spec.id, others, "{reason} while {busy}; not counted as a crash, it starts again at the back of the line (raise start_timeout_s or lower limits.max_concurrent_starts if this repeats)");
        self.last_error = Some(format!("{reason} while {busy}; starting it again"));
        self.start_over(ctx);
    }

    /// Ends the current start (its slot freed) and starts again at the back
    /// of the line, its callers still waiting; counted as a restart, not as
    /// a crash.
    pub(super) fn start_over(&mut self, ctx: &mut Context<Self>) {
        self.restarts += 1;
        let left = std::mem::replace(&mut self.phase, Phase::Idle).leave(ctx);
        if let Some(run) = left.run {
            run.end(left.client, &self.spec.id);
        }
        self.start(left.waiters, ctx);
    }

    /// The child answered the discover probe after rmcp had fallen back to
    /// `initialize` (see `probe.rs`): it speaks 2026-07-28 and may never
    /// answer `initialize`. Started again at once, probed alone from now on;
    /// not a crash.
    pub(super) fn probe_alone(&mut self, ctx: &mut Context<Self>) {
        tracing::info!(server = %self.spec.id, "slow to answer server/discover but speaks 2026-07-28: starting it again, probing with server/discover alone");
        self.modern_only = true;
        self.start_over(ctx);
    }

    /// Run `generation` is gone (failed to start, exited, or its connection
    /// closed): fail its waiters and schedule a restart with backoff, or mark
    /// the server failed after repeated crashes. Events about a run that is
    /// no longer current are ignored.
    pub(super) fn down(&mut self, generation: u64, reason: String, ctx: &mut Context<Self>) {
        self.end_run(generation, reason, AfterRunEnds::Retry, ctx);
    }

    /// Ends run `generation` for `reason`: retried with backoff (or failed
    /// after repeated crashes), or failed at once.
    pub(super) fn end_run(
        &mut self,
        generation: u64,
        reason: String,
        fate: AfterRunEnds,
        ctx: &mut Context<Self>,
    ) {
        if !self.phase.is_run(generation) {
            return;
        }
        // A variable the config refers to and evod lacks is often the cause
        // (an autostarted evod has its first client's environment).
        let reason = match self.spec.missing_vars_note() {
            Some(note) => format!("{reason}; {note}"),
            None => reason,
        };
        if fate == AfterRunEnds::Failed {
            tracing::error!(server = %self.spec.id, reason = %reason, "server cannot start; fix its config and run `evoctl refresh {}`", self.spec.id);
            self.last_error = Some(reason);
            self.abandon(Phase::Failed, ctx);
            return;
        }
        tracing::warn!(server = %self.spec.id, reason = %reason, "child is down");
        self.last_error = Some(reason);
        let now = Instant::now();
        self.crashes.push_back(now);
        while self
            .crashes
            .front()
            .is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW)
        {
            self.crashes.pop_front();
        }
        // A remote server that went away is not a crash loop of ours: keep
        // reconnecting, backing off up to 30 s, never marked failed.
        let remote = self.remote();
        self.downs_since_ready += 1;
        let next = if self.crashes.len() >= MAX_CRASHES && !remote {
            tracing::error!(server = %self.spec.id, crashes = self.crashes.len(), "server marked failed after repeated crashes; fix it and run `evoctl refresh {}`", self.spec.id);
            Phase::Failed
        } else {
            let delay = if remote {
                backoff(self.downs_since_ready)
            } else {
                backoff(self.crashes.len())
            };
            self.restarts += 1;
            let timer = ctx.run_later(delay, |act, ctx| {
                if matches!(act.phase, Phase::Backoff { .. }) {
                    act.start(Vec::new(), ctx);
                }
            });
            Phase::Backoff { timer }
        };
        self.abandon(next, ctx);
    }

    /// Leaves the current run for `next`: its client closes, its process
    /// tree is killed, its waiters get the reason.
    pub(super) fn abandon(&mut self, next: Phase, ctx: &mut Context<Self>) {
        let left = self.enter(next).leave(ctx);
        drop(left.client);
        if let Some(process) = left.run.and_then(|r| r.process) {
            process.kill();
        }
        self.fail_waiters(left.waiters);
    }

    /// Answers callers waiting for a start that will not come with why.
    pub(super) fn fail_waiters(&self, waiters: Vec<Waiter>) {
        let err = self.unavailable();
        for w in waiters {
            let _ = w.send(Err(err.clone()));
        }
    }
}

/// Delay before the n-th restart within the crash window: at once for the
/// first, then 250 ms doubling up to 30 s, with ±20% jitter.
pub(super) fn backoff(crashes_in_window: usize) -> Duration {
    if crashes_in_window <= 1 {
        return Duration::ZERO;
    }
    let base_ms = 250u64
        .saturating_mul(1 << (crashes_in_window - 2).min(7))
        .min(30_000);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = (nanos % 400) as i64 - 200; // per mille, -20%..+20%
    let ms = base_ms as i64 + base_ms as i64 * jitter / 1000;
    Duration::from_millis(ms.max(0) as u64)
}
