//! The retry-loop counts of the sessions this instance serves, as the store
//! has them (see [`super::breaker`]): kept in step by the events other
//! instances publish, so a plain call reads nothing from Redis.

use std::collections::HashMap;

use super::published::Event;

/// Sessions mirrored at most; past that the mirror starts over (each
/// session reads its hash again on its next call).
const MIRRORED: usize = 20_000;

/// One session's counts: tool → (arguments key, failures).
pub(super) type Counts = HashMap<String, (u64, u32)>;

/// The counts of the sessions this instance serves, as the store has them
/// (see the module docs). A session's entry holds the events generation it
/// was read in; one from an earlier generation is read again.
#[derive(Default)]
pub struct Mirror {
    sessions: HashMap<String, (u64, Counts)>,
}

impl Mirror {
    pub(super) fn insert(&mut self, session: &str, generation: u64, counts: Counts) {
        if self.sessions.len() >= MIRRORED && !self.sessions.contains_key(session) {
            self.sessions.clear();
        }
        self.sessions
            .insert(session.to_string(), (generation, counts));
    }

    /// The session's counts, if read in `generation`.
    pub(super) fn current(&self, session: &str, generation: u64) -> Option<&Counts> {
        match self.sessions.get(session) {
            Some((g, counts)) if *g == generation => Some(counts),
            _ => None,
        }
    }

    /// A count changed (here or, through its event, elsewhere); sessions
    /// not mirrored read it when they need it.
    pub(super) fn set(&mut self, session: &str, tool: &str, count: Option<(u64, u32)>) {
        if let Some((_, counts)) = self.sessions.get_mut(session) {
            match count {
                Some(c) => {
                    counts.insert(tool.to_string(), c);
                }
                None => {
                    counts.remove(tool);
                }
            }
        }
    }

    pub fn forget(&mut self, session: &str) {
        self.sessions.remove(session);
    }

    /// Another instance's event, as the subscriber received it.
    pub fn note(&mut self, event: &Event) {
        match event {
            Event::Breaker { name, tool, key, n } => {
                let count = (*n > 0)
                    .then(|| u64::from_str_radix(key, 16).ok().map(|k| (k, *n)))
                    .flatten();
                self.set(name, tool, count);
            }
            Event::SessionEnded { id } => self.forget(id),
            _ => {}
        }
    }
}
