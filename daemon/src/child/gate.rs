//! The start gate: at most `limits.max_concurrent_starts` children are
//! starting (spawned, not yet listed) at once; the others wait their turn in
//! the order they asked. A cold start of dozens of `npx`/`uvx` servers would
//! otherwise share the CPU so thinly that none answers its handshake in
//! time, all are killed together and the storm repeats.
//!
//! A [`Permit`] is held from spawn until the child has listed its tools (or
//! its start ended); dropping it hands the slot to the next in line. A
//! [`Ticket`] is a place in the line; dropping it leaves the line, and a
//! slot it was handed but never took is passed on.
//!
//! Remote (HTTP) servers take no slot: connecting costs this machine nothing. A newcomer never
//! passes the line, and a reload's new limit applies at once (raised) or as starts finish
//! (lowered). `start_timeout_s` counts from the slot, not from the queue; a start that times out
//! while others are starting is excused (`restarts.rs`). Status shows `queued` (`queue_position`, 1
//! next) and `starting` (`starting_s`). Why the gate: with it open, children that each need a
//! second of CPU all start at once, each becomes slower than rmcp's 10 s probe, and the set never
//! converges (docs/performance.md, "Cold starts").

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// The line and the slots. Shared by every ChildServer of a daemon.
pub struct StartGate {
    inner: Mutex<Inner>,
}

struct Inner {
    limit: usize,
    /// Slots held by permits (and handed to tickets not yet polled).
    taken: usize,
    /// Tickets waiting, first in line first.
    line: VecDeque<(u64, oneshot::Sender<()>)>,
    next_ticket: u64,
}

/// A slot: the holder may be starting a child.
pub struct Permit {
    gate: Arc<StartGate>,
}

/// A place in the line; resolves to a [`Permit`] when its turn comes.
pub struct Ticket {
    gate: Arc<StartGate>,
    id: u64,
    turn: Option<oneshot::Receiver<()>>,
}

impl StartGate {
    pub fn new(limit: usize) -> Arc<StartGate> {
        Arc::new(StartGate {
            inner: Mutex::new(Inner {
                limit: limit.max(1),
                taken: 0,
                line: VecDeque::new(),
                next_ticket: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot now if one is free and nobody is waiting for one, else a
    /// place at the end of the line.
    pub fn enter(self: &Arc<Self>) -> Result<Permit, Ticket> {
        let mut inner = self.lock();
        if inner.taken < inner.limit && inner.line.is_empty() {
            inner.taken += 1;
            return Ok(Permit { gate: self.clone() });
        }
        let id = inner.next_ticket;
        inner.next_ticket += 1;
        let (tx, rx) = oneshot::channel();
        inner.line.push_back((id, tx));
        Err(Ticket {
            gate: self.clone(),
            id,
            turn: Some(rx),
        })
    }

    /// Changes the limit (a reload); a larger one lets more of the line in
    /// at once, a smaller one takes effect as starts finish.
    pub fn set_limit(&self, limit: usize) {
        let mut inner = self.lock();
        inner.limit = limit.max(1);
        inner.admit();
    }

    /// Slots in use and tickets waiting.
    pub fn load(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.taken, inner.line.len())
    }

    /// 1 for the first in line; `None` once the ticket is no longer waiting.
    pub fn position(&self, ticket: u64) -> Option<usize> {
        let inner = self.lock();
        inner
            .line
            .iter()
            .position(|(id, _)| *id == ticket)
            .map(|i| i + 1)
    }

    fn release(&self) {
        let mut inner = self.lock();
        inner.taken = inner.taken.saturating_sub(1);
        inner.admit();
    }
}

impl Inner {
    /// Hands free slots to the line, first first; a ticket that was
    /// dropped meanwhile is skipped.
    fn admit(&mut self) {
        while self.taken < self.limit {
            let Some((_, turn)) = self.line.pop_front() else {
                return;
            };
            if turn.send(()).is_ok() {
                self.taken += 1;
            }
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.gate.release();
    }
}

impl Ticket {
    /// Names this place in the line (see [`StartGate::position`]).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Waits for this ticket's turn.
    pub async fn turn(mut self) -> Permit {
        if let Some(turn) = self.turn.as_mut() {
            // The gate never drops a sender it keeps: an error means the
            // slot was handed over anyway (see `admit`), or the gate is gone.
            let _ = turn.await;
        }
        self.turn = None;
        Permit {
            gate: self.gate.clone(),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(mut turn) = self.turn.take() else {
            return; // became a permit
        };
        let mut inner = self.gate.lock();
        let before = inner.line.len();
        inner.line.retain(|(id, _)| *id != self.id);
        // Not in the line any more and handed a slot it never took: pass
        // the slot on.
        if inner.line.len() == before && turn.try_recv().is_ok() {
            inner.taken = inner.taken.saturating_sub(1);
            inner.admit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(gate: &Arc<StartGate>) -> Ticket {
        match gate.enter() {
            Ok(_) => panic!("expected to wait in line"),
            Err(t) => t,
        }
    }

    fn permit(gate: &Arc<StartGate>) -> Permit {
        match gate.enter() {
            Ok(p) => p,
            Err(_) => panic!("expected a free slot"),
        }
    }

    #[tokio::test]
    async fn slots_go_to_the_line_in_order() {
        let gate = StartGate::new(2);
        let a = permit(&gate);
        let _b = permit(&gate);
        let c = ticket(&gate);
        let d = ticket(&gate);
        assert_eq!(gate.load(), (2, 2));
        assert_eq!(
            (gate.position(c.id()), gate.position(d.id())),
            (Some(1), Some(2))
        );
        drop(a);
        let _c = c.turn().await;
        assert_eq!(gate.position(d.id()), Some(1));
        assert_eq!(gate.load(), (2, 1));
    }

    #[tokio::test]
    async fn a_newcomer_does_not_pass_the_line() {
        let gate = StartGate::new(1);
        let a = permit(&gate);
        let b = ticket(&gate);
        drop(a); // the slot is b's now, though b has not looked yet
        assert!(gate.enter().is_err(), "a newcomer waits behind b");
        let _b = b.turn().await;
        assert_eq!(gate.load().0, 1);
    }

    #[tokio::test]
    async fn a_ticket_dropped_in_line_or_after_its_turn_passes_the_slot_on() {
        let gate = StartGate::new(1);
        let a = permit(&gate);
        let b = ticket(&gate);
        let c = ticket(&gate);
        let d = ticket(&gate);
        drop(b); // leaves the line
        assert_eq!(gate.position(c.id()), Some(1));
        drop(a); // the slot goes to c
        drop(c); // c never took it: d gets it
        let _d = d.turn().await;
        assert_eq!(gate.load(), (1, 0));
    }

    #[tokio::test]
    async fn a_raised_limit_admits_waiters_at_once() {
        let gate = StartGate::new(1);
        let _a = permit(&gate);
        let b = ticket(&gate);
        let c = ticket(&gate);
        gate.set_limit(3);
        let (_b, _c) = (b.turn().await, c.turn().await);
        assert_eq!(gate.load(), (3, 0));
        gate.set_limit(1);
        assert!(
            gate.enter().is_err(),
            "over the lowered limit, newcomers wait"
        );
    }
}
