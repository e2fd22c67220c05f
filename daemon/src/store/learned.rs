//! What search learned from use, shared by every instance (see
//! `crate::search::learned`): a hash `learned`, a field per remembered
//! (tool, query) pair — `TOOL<US>QUERY`, US the ASCII unit separator, which
//! neither a tool name nor a trimmed query holds — whose value is
//! `COUNT LAST` (sessions that gave the evidence, Unix seconds of the
//! latest). A change is made by a script (so two instances counting at
//! once both count) and published with the pair's new count, so the other
//! instances apply it without reading the hash again; a resync reads it
//! whole. Queries and tool names only: no arguments, no results.

use super::Event;
pub use super::published::SharedPair;
use super::redis::{Shared, StoreError};

/// Separates the tool from the query in a field.
const SEPARATOR: char = '\u{1f}';

/// Adds `ARGV[2]` to the count of field `ARGV[1]` (dropping it at 0) and
/// stamps it `ARGV[3]`; returns the new count.
const CHANGE: &str = r"
local v = redis.call('HGET', KEYS[1], ARGV[1])
local n = 0
if v then n = tonumber(string.match(v, '^(%d+)')) or 0 end
n = n + tonumber(ARGV[2])
if n <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], n .. ' ' .. ARGV[3])
return n
";

fn field(tool: &str, query: &str) -> String {
    format!("{tool}{SEPARATOR}{query}")
}

fn parse(field: &str, value: &str) -> Option<SharedPair> {
    let (tool, query) = field.split_once(SEPARATOR)?;
    let (count, last) = value.split_once(' ')?;
    Some(SharedPair {
        tool: tool.to_string(),
        query: query.to_string(),
        count: count.parse().ok()?,
        last: last.parse().ok()?,
    })
}

impl Shared {
    /// Every remembered pair.
    pub async fn learned_get(&self) -> Result<Vec<SharedPair>, StoreError> {
        let raw: Vec<(String, String)> = self
            .query(redis::cmd("HGETALL").arg(self.key("learned")))
            .await?;
        Ok(raw.iter().filter_map(|(f, v)| parse(f, v)).collect())
    }

    /// Adds `delta` sessions' evidence of `query` for `tool` and tells the
    /// other instances the pair's count now.
    pub async fn learned_change(
        &self,
        tool: &str,
        query: &str,
        delta: i32,
        last: u64,
    ) -> Result<u32, StoreError> {
        let script = redis::Script::new(CHANGE);
        let key = self.key("learned");
        let field = field(tool, query);
        let (delta, stamp) = (delta.to_string(), last.to_string());
        let count: i64 = self
            .script(&script, &[&key], &[&field, &delta, &stamp])
            .await?;
        let count = u32::try_from(count.max(0)).unwrap_or(u32::MAX);
        self.publish(Event::Learned(SharedPair {
            tool: tool.to_string(),
            query: query.to_string(),
            count,
            last,
        }))
        .await;
        Ok(count)
    }

    /// Drops the pairs of `tool` (`None`: every pair) and tells the others.
    pub async fn learned_forget(&self, tool: Option<&str>) -> Result<(), StoreError> {
        let key = self.key("learned");
        match tool {
            None => {
                let _: i64 = self.query(redis::cmd("DEL").arg(&key)).await?;
            }
            Some(tool) => {
                let fields: Vec<String> = self
                    .learned_get()
                    .await?
                    .into_iter()
                    .filter(|p| p.tool == tool)
                    .map(|p| field(&p.tool, &p.query))
                    .collect();
                self.learned_drop(&fields).await?;
            }
        }
        self.publish(Event::LearnedForgotten {
            tool: tool.map(str::to_string),
        })
        .await;
        Ok(())
    }

    /// Drops these pairs (the weakest past the bound, or a tool's) without
    /// telling anyone: each instance bounds its own copy the same way.
    pub async fn learned_trim(&self, pairs: &[(String, String)]) -> Result<(), StoreError> {
        let fields: Vec<String> = pairs.iter().map(|(t, q)| field(t, q)).collect();
        self.learned_drop(&fields).await
    }

    async fn learned_drop(&self, fields: &[String]) -> Result<(), StoreError> {
        for chunk in fields.chunks(500) {
            let _: i64 = self
                .query(redis::cmd("HDEL").arg(self.key("learned")).arg(chunk))
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_and_value_read_back() {
        let f = field("github_create_issue", "file a bug: login fails");
        let p = parse(&f, "3 1765000000").expect("parses");
        assert_eq!(p.tool, "github_create_issue");
        assert_eq!(p.query, "file a bug: login fails");
        assert_eq!((p.count, p.last), (3, 1_765_000_000));
        assert!(parse("no separator", "1 2").is_none());
        assert!(parse(&f, "x 2").is_none());
    }
}
