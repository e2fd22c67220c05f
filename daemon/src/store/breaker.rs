//! Retry-loop counts in Redis: the [`crate::session::breaker`] rules (one
//! count per tool, for its last failing arguments; other arguments start
//! over; a success forgets the tool) for a session whichever instance
//! serves each of its calls.
//!
//! Key (under the prefix): `brk:<session's store name>`, a hash: tool →
//! `<arguments key>:<failures>`. It expires an hour after the last failure
//! (a local breaker lives as long as its session; a shared one has no end
//! of its own to wait for).

use std::sync::LazyLock;

use super::redis::{Shared, StoreError};

/// How long a session's counts outlive its last failure.
const TTL_S: u64 = 3600;

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

impl Shared {
    fn breaker_key(&self, session: &str) -> String {
        self.key(&format!("brk:{session}"))
    }

    /// Identical failures so far of `tool` with arguments `key` in session
    /// `session` (one `HGET`).
    pub async fn breaker_prior(
        &self,
        session: &str,
        tool: &str,
        key: u64,
    ) -> Result<Prior, StoreError> {
        let last: Option<String> = self
            .query(redis::cmd("HGET").arg(self.breaker_key(session)).arg(tool))
            .await?;
        let Some(last) = last else {
            return Ok(Prior::default());
        };
        let failures = last
            .split_once(':')
            .filter(|(k, _)| *k == format!("{key:016x}"))
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0);
        Ok(Prior {
            failures,
            counted: true,
        })
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
                &[tool, &format!("{key:016x}"), &TTL_S.to_string()],
            )
            .await?;
        Ok(n)
    }

    pub async fn breaker_succeeded(&self, session: &str, tool: &str) -> Result<(), StoreError> {
        let _: i64 = self
            .query(redis::cmd("HDEL").arg(self.breaker_key(session)).arg(tool))
            .await?;
        Ok(())
    }
}
