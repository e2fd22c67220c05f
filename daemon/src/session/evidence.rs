//! What a session's searches and calls teach search (see
//! `crate::search::learned`): the `discover_tools` queries of its current
//! task (the last few, within [`TASK_WINDOW`]) count as evidence for the
//! tool it then calls successfully. A tool called and then replaced by
//! another after a new search in the same task has that evidence withdrawn.
//! Kept per session, in memory, under a `Mutex` held for microseconds.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::search::learned::learned;

/// How long after a search a call still belongs to the same task.
pub const TASK_WINDOW: Duration = Duration::from_secs(300);
/// Searches of one task remembered.
const TASK_QUERIES: usize = 5;

/// A search of the task: when, the query, and its vector when the semantic
/// stage ranked it.
type Search = (Instant, String, Option<Arc<[f32]>>);

/// One session's recent searches and what they were counted for.
#[derive(Default)]
pub struct Evidence {
    searches: VecDeque<Search>,
    /// (query, tool) pairs already counted: one session counts a pair once.
    counted: Vec<(String, String)>,
    /// The latest tool credited, and when.
    last_call: Option<(Instant, String)>,
}

impl Evidence {
    /// A `discover_tools` query, with its vector when the semantic stage
    /// ranked it.
    pub fn searched(&mut self, query: &str, vector: Option<Arc<[f32]>>, now: Instant) {
        let query = query.trim();
        if query.is_empty() || !learned().enabled() {
            return;
        }
        self.forget_old(now);
        self.searches.retain(|(_, q, _)| q != query);
        if self.searches.len() >= TASK_QUERIES {
            self.searches.pop_front();
        }
        self.searches.push_back((now, query.to_string(), vector));
    }

    /// A successful call of `tool`: the task's queries count for it.
    pub fn called(&mut self, tool: &str, now: Instant) {
        self.forget_old(now);
        if self.searches.is_empty() || !learned().enabled() {
            return;
        }
        // Another tool called before a search of this task that came after
        // it: the agent went on to this one, so the other was the wrong one.
        if let Some((at, replaced)) = self.last_call.take()
            && replaced != tool
            && self.searches.iter().any(|(t, _, _)| *t > at)
        {
            let queries: Vec<String> = self.searches.iter().map(|(_, q, _)| q.clone()).collect();
            self.counted.retain(|(q, t)| {
                let withdraw = *t == replaced && queries.contains(q);
                if withdraw {
                    learned().withdraw(q, t);
                }
                !withdraw
            });
        }
        for (_, q, v) in &self.searches {
            if !self.counted.iter().any(|(cq, ct)| cq == q && ct == tool) {
                learned().add(q, tool, v.clone());
                self.counted.push((q.clone(), tool.to_string()));
            }
        }
        self.last_call = Some((now, tool.to_string()));
    }

    fn forget_old(&mut self, now: Instant) {
        while self
            .searches
            .front()
            .is_some_and(|(t, _, _)| now.duration_since(*t) > TASK_WINDOW)
        {
            self.searches.pop_front();
        }
        if self.counted.len() > 64 {
            self.counted.drain(..32);
        }
    }
}
