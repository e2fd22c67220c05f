//! Approvals in Redis: the same rules as [`crate::policy::approvals::ApprovalBook`]
//! (one request per identical call and identity, a decision stands for the
//! window, an approval passes exactly one call), made atomic across
//! instances by running each step as one Lua script on the server.
//!
//! Keys (under the prefix): `ap:next` (the id counter, so ids are unique
//! across instances), `ap:id:<ID>` (a hash: tool, key, identity, preview,
//! state, since, call), `ap:call:<identity>|<tool>|<key>` (the id of that
//! call's request). Both expire with the window; a decision restarts it.

use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use super::redis::{Shared, StoreError};
use crate::policy::approvals::{Approval, Gate, State, WINDOW};

static CHECK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local id = redis.call('GET', KEYS[1])
if id then
  local rk = ARGV[1] .. id
  local state = redis.call('HGET', rk, 'state')
  if state == 'approved' then
    redis.call('DEL', rk, KEYS[1])
    return {'pass', id}
  elseif state then
    return {state, id}
  end
end
local n = redis.call('INCR', KEYS[2])
id = 'ap' .. n
local rk = ARGV[1] .. id
redis.call('HSET', rk, 'tool', ARGV[2], 'key', ARGV[3], 'identity', ARGV[4],
  'preview', ARGV[5], 'state', 'pending', 'since', ARGV[6], 'call', KEYS[1])
redis.call('EXPIRE', rk, ARGV[7])
redis.call('SET', KEYS[1], id, 'EX', ARGV[7])
return {'pending', id}
",
    )
});

static DECIDE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'missing'} end
if state ~= 'pending' then return {'already', state} end
local new = 'denied'
if ARGV[1] == '1' then new = 'approved' end
redis.call('HSET', KEYS[1], 'state', new, 'since', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
local call = redis.call('HGET', KEYS[1], 'call')
if call then redis.call('EXPIRE', call, ARGV[3]) end
return {'ok', redis.call('HGET', KEYS[1], 'tool')}
",
    )
});

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Shared {
    /// [`crate::policy::approvals::ApprovalBook::check`] across instances.
    pub async fn approval_check(
        &self,
        tool: &str,
        key: u64,
        identity: Option<&str>,
        preview: &str,
    ) -> Result<Gate, StoreError> {
        let who = identity.unwrap_or("");
        let call = self.key(&format!("ap:call:{who}|{tool}|{key:016x}"));
        let next = self.key("ap:next");
        let id_prefix = self.key("ap:id:");
        let preview: String = preview.chars().take(200).collect();
        let answer: Vec<String> = self
            .script(
                &CHECK,
                &[&call, &next],
                &[
                    &id_prefix,
                    tool,
                    &format!("{key:016x}"),
                    who,
                    &preview,
                    &now_ms().to_string(),
                    &WINDOW.as_secs().to_string(),
                ],
            )
            .await?;
        match answer.as_slice() {
            [verdict, id] => Ok(match verdict.as_str() {
                "pass" => Gate::Pass,
                "denied" => Gate::Denied(id.clone()),
                _ => Gate::Pending(id.clone()),
            }),
            _ => Err(StoreError(
                "unexpected answer from the approvals script".into(),
            )),
        }
    }

    /// A person's decision; returns the tool's name.
    pub async fn approval_decide(&self, id: &str, approve: bool) -> Result<String, String> {
        let record = self.key(&format!("ap:id:{id}"));
        let answer: Vec<String> = self
            .script(
                &DECIDE,
                &[&record],
                &[
                    if approve { "1" } else { "0" },
                    &now_ms().to_string(),
                    &WINDOW.as_secs().to_string(),
                ],
            )
            .await
            .map_err(|e| format!("{e}; decide again when the store is back"))?;
        match answer.as_slice() {
            [ok, tool] if ok == "ok" => Ok(tool.clone()),
            [already, state] if already == "already" => {
                Err(format!("call '{id}' was already {state}"))
            }
            _ => Err(format!(
                "no held call '{id}': it expired (approvals last {} minutes) or never existed; `evoctl approvals` lists the pending ones",
                WINDOW.as_secs() / 60
            )),
        }
    }

    /// Calls waiting for a decision, on every instance, oldest first.
    pub async fn approvals_pending(&self) -> Result<Vec<(Approval, u64)>, StoreError> {
        let pattern = self.key("ap:id:*");
        let keys = self.scan_keys(&pattern).await?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for k in &keys {
            pipe.cmd("HGETALL").arg(k);
        }
        let records: Vec<std::collections::HashMap<String, String>> = self.pipeline(&pipe).await?;
        let now = now_ms();
        let prefix = self.key("ap:id:");
        let mut out: Vec<(Approval, u64)> = keys
            .iter()
            .zip(records)
            .filter(|(_, r)| r.get("state").map(String::as_str) == Some("pending"))
            .map(|(k, mut r)| {
                let since: u64 = r.get("since").and_then(|s| s.parse().ok()).unwrap_or(now);
                let identity = r.remove("identity").filter(|i| !i.is_empty());
                (
                    Approval {
                        id: k.strip_prefix(&prefix).unwrap_or(k).to_string(),
                        tool: r.remove("tool").unwrap_or_default(),
                        key: r
                            .get("key")
                            .and_then(|k| u64::from_str_radix(k, 16).ok())
                            .unwrap_or(0),
                        preview: r.remove("preview").unwrap_or_default(),
                        identity,
                        state: State::Pending,
                        since: std::time::Instant::now(),
                    },
                    now.saturating_sub(since) / 1000,
                )
            })
            .collect();
        out.sort_by_key(|(_, age)| std::cmp::Reverse(*age));
        Ok(out)
    }
}

/// An in-band approval question (2026-07-28 `input_required`): its
/// `requestState` → the call it was asked for (identity, tool, arguments
/// key), so the retry that carries the user's answer may land on any
/// instance; taking it is one atomic step, so an answer is used once.
static TAKE_ASK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
",
    )
});

impl Shared {
    fn ask_key(&self, state: &str) -> String {
        self.key(&format!("ask:{state}"))
    }

    /// Records question `state`, asked for the call `call`, for `ttl_s`.
    pub async fn ask_put(&self, state: &str, call: &str, ttl_s: u64) -> Result<(), StoreError> {
        self.query(
            redis::cmd("SET")
                .arg(self.ask_key(state))
                .arg(call)
                .arg("EX")
                .arg(ttl_s.max(1)),
        )
        .await
    }

    /// Takes question `state` if it was asked for the call `call`: true
    /// once, for the first retry that names it on any instance.
    pub async fn ask_take(&self, state: &str, call: &str) -> Result<bool, StoreError> {
        let taken: i64 = self
            .script(&TAKE_ASK, &[&self.ask_key(state)], &[call])
            .await?;
        Ok(taken == 1)
    }
}
