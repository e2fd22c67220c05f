//! Retry-loop counts in Redis: the [`crate::session::breaker`] rules (one
//! count per tool, for its last failing arguments; other arguments start
//! over; a success forgets the tool) for a session whichever instance
//! serves each of its calls.
//!
//! Key (under the prefix): `brk:<session's store name>`, a hash: tool →
//! `<arguments key>:<failures>`. It expires an hour after the last failure
//! (a local breaker lives as long as its session; a shared one has no end
//! of its own to wait for).
//!
//! A plain call sends Redis nothing for its count: every instance keeps a
//! `Mirror` of the counts of the sessions it serves, read from the hash
//! once (or known empty, for a session opened here) and kept in step by
//! the [`Event::Breaker`] every change publishes (from inside the script
//! that makes it, so no change goes unannounced). Only failures, and the
//! success that clears a count, write. A resubscription to the events
//! (events published meanwhile may be lost) voids the mirror: each session
//! reads its hash again on its next call. What this costs: a retry that
//! reaches another instance before the failure's event does is counted one
//! short, so the breaker trips there one call late.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::breaker_mirror::{Counts, Mirror};
use super::published::Event;
use super::redis::{Shared, StoreError};

/// How long a session's counts outlive its last failure.
const TTL_S: u64 = 3600;

/// Counts a failure and announces the new count (ARGV: tool, arguments
/// key, TTL, channel, this instance, session).
static FAILED: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local n = 0
local last = redis.call('HGET', KEYS[1], ARGV[1])
if last then
  local k, c = string.match(last, '^(%x+):(%d+)$')
  if k == ARGV[2] then n = tonumber(c) end
end
n = n + 1
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. n)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('PUBLISH', ARGV[4], cjson.encode({from = ARGV[5], kind = 'breaker',
  name = ARGV[6], tool = ARGV[1], key = ARGV[2], n = n}))
return n
",
    )
});

/// What the store knows of a tool's failures in a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prior {
    /// Identical failures so far (of these arguments).
    pub failures: u32,
    /// The tool has a count at all (a success must clear it).
    pub counted: bool,
}

/// A hash field's value (`<key hex>:<failures>`).
fn parse_count(value: &str) -> Option<(u64, u32)> {
    let (k, n) = value.split_once(':')?;
    Some((u64::from_str_radix(k, 16).ok()?, n.parse().ok()?))
}

fn prior(counts: &Counts, tool: &str, key: u64) -> Prior {
    match counts.get(tool) {
        Some(&(k, n)) => Prior {
            failures: if k == key { n } else { 0 },
            counted: true,
        },
        None => Prior::default(),
    }
}

impl Shared {
    fn breaker_key(&self, session: &str) -> String {
        self.key(&format!("brk:{session}"))
    }

    pub(super) fn mirror(&self) -> std::sync::MutexGuard<'_, Mirror> {
        self.breakers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A session that has just begun here (a new HTTP session): the store
    /// has no counts for it, so none is read.
    pub fn breaker_begun(&self, session: &str) {
        let generation = self.generation();
        self.mirror().insert(session, generation, Counts::new());
    }

    /// Identical failures so far of `tool` with arguments `key` in session
    /// `session`: from the mirror, or (its first call here, or after a
    /// resubscription) one `HGETALL`.
    pub async fn breaker_prior(
        &self,
        session: &str,
        tool: &str,
        key: u64,
    ) -> Result<Prior, StoreError> {
        let generation = self.generation();
        if let Some(counts) = self.mirror().current(session, generation) {
            return Ok(prior(counts, tool, key));
        }
        let all: HashMap<String, String> = self
            .query(redis::cmd("HGETALL").arg(self.breaker_key(session)))
            .await?;
        let counts: Counts = all
            .into_iter()
            .filter_map(|(t, v)| Some((t, parse_count(&v)?)))
            .collect();
        let answer = prior(&counts, tool, key);
        self.mirror().insert(session, generation, counts);
        Ok(answer)
    }

    /// Records a failure; returns how many identical failures there now are.
    pub async fn breaker_failed(
        &self,
        session: &str,
        tool: &str,
        key: u64,
    ) -> Result<u32, StoreError> {
        let n: u32 = self
            .script(
                &FAILED,
                &[&self.breaker_key(session)],
                &[
                    tool,
                    &format!("{key:016x}"),
                    &TTL_S.to_string(),
                    &self.channel(),
                    self.instance(),
                    session,
                ],
            )
            .await?;
        self.mirror().set(session, tool, Some((key, n)));
        Ok(n)
    }

    /// A success forgets the tool's count, everywhere.
    pub async fn breaker_succeeded(&self, session: &str, tool: &str) -> Result<(), StoreError> {
        self.mirror().set(session, tool, None);
        let event = self.envelope(Event::Breaker {
            name: session.to_string(),
            tool: tool.to_string(),
            key: String::new(),
            n: 0,
        });
        let mut pipe = redis::pipe();
        pipe.cmd("HDEL")
            .arg(self.breaker_key(session))
            .arg(tool)
            .ignore()
            .cmd("PUBLISH")
            .arg(self.channel())
            .arg(event)
            .ignore();
        self.pipeline::<()>(&pipe).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(name: &str, tool: &str, key: u64, n: u32) -> Event {
        Event::Breaker {
            name: name.into(),
            tool: tool.into(),
            key: format!("{key:016x}"),
            n,
        }
    }

    #[test]
    fn the_mirror_follows_events_of_the_sessions_it_holds() {
        let mut m = Mirror::default();
        m.insert("s", 0, Counts::new());
        m.note(&breaker("s", "t", 7, 1));
        m.note(&breaker("other", "t", 7, 1));
        let counts = m.current("s", 0).unwrap();
        assert_eq!(
            prior(counts, "t", 7),
            Prior {
                failures: 1,
                counted: true
            }
        );
        // Other arguments: not these failures, but a count to clear.
        assert_eq!(
            prior(counts, "t", 8),
            Prior {
                failures: 0,
                counted: true
            }
        );
        assert!(
            m.current("other", 0).is_none(),
            "not mirrored: read when needed"
        );
        m.note(&breaker("s", "t", 0, 0));
        assert_eq!(prior(m.current("s", 0).unwrap(), "t", 7), Prior::default());
        // A resubscription voids it; an ended session is forgotten.
        assert!(m.current("s", 1).is_none());
        m.note(&Event::SessionEnded { id: "s".into() });
        assert!(m.current("s", 0).is_none());
    }

    #[test]
    fn hash_values_parse_or_are_skipped() {
        assert_eq!(parse_count("00000000000000ff:3"), Some((255, 3)));
        assert_eq!(parse_count("zz:3"), None);
        assert_eq!(parse_count("ff"), None);
    }

    #[test]
    fn the_script_announces_what_serde_reads_back() {
        // The script's cjson encodes this shape; the subscriber must read it.
        let text =
            r#"{"from":"a","kind":"breaker","name":"s","tool":"t","key":"00000000000000ff","n":2}"#;
        let env: super::super::published::Envelope = serde_json::from_str(text).unwrap();
        assert_eq!(env.event, breaker("s", "t", 255, 2));
    }
}
