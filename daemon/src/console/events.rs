//! What the web console hears of evod: a broadcast of "this changed" pings
//! (by topic) and log lines, fired where things happen (a child's state, a
//! catalog publish, a session opening, an approval held or decided). Pages
//! refetch what a ping names through the same control requests `evoctl`
//! sends, so the bus carries no state of its own.
//!
//! A bus with no console open costs one atomic load per ping: nothing is
//! formatted or queued until a console subscribes.
//!
//! The bus is an [`EventBus`] handle `main` makes and passes down (as it does
//! the `StopSignal`): to the log layer, the console, the Supervisor, and
//! through it to sessions and children.
//!
//! A ping is a broadcast send, skipped when no console listens. A console's stream task drains what
//! is queued before it writes, so a burst (a reload touching many servers) is one event; a console
//! that falls 256 events behind is told `all` changed instead of being sent a backlog. Each page
//! re-renders a table only when what it shows changed (a signature of the rows), so a live update
//! does not take the focus from a button someone is on. Pings also come from a session changing its
//! activations, a profile change and a reload.

use std::sync::Arc;

use tokio::sync::broadcast;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topic {
    /// A server's state, tools or error; config and permissions health.
    Servers,
    /// Sessions opened, closed, their activations.
    Sessions,
    /// QuarantinedOffers calls waiting, or decided.
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

/// The console's event bus; cheap to clone, every clone the same bus.
#[derive(Debug, Clone)]
pub struct EventBus(broadcast::Sender<Event>);

impl Default for EventBus {
    fn default() -> EventBus {
        EventBus::new()
    }
}

impl EventBus {
    pub fn new() -> EventBus {
        EventBus(broadcast::channel(CAPACITY).0)
    }

    /// Tells open consoles that `topic` changed.
    pub fn changed(&self, topic: Topic) {
        if self.0.receiver_count() > 0 {
            let _ = self.0.send(Event::Changed(topic));
        }
    }

    /// Whether any console listens (log lines are formatted only then).
    pub fn listening(&self) -> bool {
        self.0.receiver_count() > 0
    }

    pub(crate) fn publish(&self, event: Event) {
        let _ = self.0.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.0.subscribe()
    }
}
