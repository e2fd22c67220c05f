//! What the web console hears of evod: a broadcast of "this changed" pings
//! (by topic) and log lines, fired where things happen (a child's state, a
//! catalog publish, a session opening, an approval held or decided). Pages
//! refetch what a ping names through the same control requests `evoctl`
//! sends, so the bus carries no state of its own.
//!
//! A bus with no console open costs one atomic load per ping: nothing is
//! formatted or queued until a console subscribes.

use std::sync::{Arc, OnceLock};

use tokio::sync::broadcast;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topic {
    /// A server's state, tools or error; config and permissions health.
    Servers,
    /// Sessions opened, closed, their activations.
    Sessions,
    /// Held calls waiting, or decided.
    Approvals,
    /// The catalog (tools, quarantine, profiles' members).
    Catalog,
    /// Profiles changed by a person.
    Profiles,
}

impl Topic {
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Servers => "servers",
            Topic::Sessions => "sessions",
            Topic::Approvals => "approvals",
            Topic::Catalog => "catalog",
            Topic::Profiles => "profiles",
        }
    }
}

/// One thing on the bus.
#[derive(Debug, Clone)]
pub enum Event {
    Changed(Topic),
    /// A log line, already JSON (see [`super::logring`]).
    Log(Arc<str>),
}

/// Pings past this many unread by a slow console are dropped for it; it is
/// then told everything changed (a refetch, not a backlog).
const CAPACITY: usize = 256;

fn bus() -> &'static broadcast::Sender<Event> {
    static BUS: OnceLock<broadcast::Sender<Event>> = OnceLock::new();
    BUS.get_or_init(|| broadcast::channel(CAPACITY).0)
}

/// Tells open consoles that `topic` changed.
pub fn changed(topic: Topic) {
    let bus = bus();
    if bus.receiver_count() > 0 {
        let _ = bus.send(Event::Changed(topic));
    }
}

/// Whether any console listens (log lines are formatted only then).
pub fn listening() -> bool {
    bus().receiver_count() > 0
}

pub(crate) fn publish(event: Event) {
    let _ = bus().send(event);
}

pub fn subscribe() -> broadcast::Receiver<Event> {
    bus().subscribe()
}
