//! Each instance's sessions in Redis, so `evoctl sessions` on any of them
//! lists every instance's.
//!
//! Key (under the prefix): `inst:<instance>:sessions`, the instance's
//! sessions as `evoctl sessions --json` shows them (ids, names, modes,
//! identities' names, activations; never a token), written every
//! [`PUBLISH_EVERY`] and expiring after [`RECORD_TTL`]: a dead instance's
//! record goes away by itself.
//!
//! `evoctl activate|deactivate` for a session another instance holds goes
//! to that instance as an event; it answers under `answer:<ticket>` (a
//! random 128-bit ticket, kept 30 s), which the asking instance reads.

use std::time::Duration;

use evo_proto::ctl::{CtlReply, SessionInfo};

use super::Event;
use super::redis::{Shared, StoreError};

/// How often an instance writes its sessions.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(3);
/// How long a record outlives its instance's last write.
pub const RECORD_TTL: Duration = Duration::from_secs(10);

impl Shared {
    pub async fn sessions_put(&self, sessions: &[SessionInfo]) -> Result<(), StoreError> {
        let text = serde_json::to_string(sessions)
            .map_err(|e| StoreError(format!("session list: {e}")))?;
        self.query(
            redis::cmd("SET")
                .arg(self.key(&format!("inst:{}:sessions", self.instance())))
                .arg(text)
                .arg("EX")
                .arg(RECORD_TTL.as_secs()),
        )
        .await
    }

    /// The other live instances' sessions, each marked with its instance.
    pub async fn sessions_of_others(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let pattern = self.key("inst:*:sessions");
        let mine = self.key(&format!("inst:{}:sessions", self.instance()));
        let mut keys = self.scan_keys(&pattern).await?;
        keys.retain(|k| *k != mine);
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let values: Vec<Option<String>> = self.query(redis::cmd("MGET").arg(&keys)).await?;
        let prefix = self.key("inst:");
        let mut out = Vec::new();
        for (key, value) in keys.iter().zip(values) {
            let Some(value) = value else { continue };
            let instance = key
                .strip_prefix(&prefix)
                .and_then(|k| k.strip_suffix(":sessions"))
                .unwrap_or(key);
            match serde_json::from_str::<Vec<SessionInfo>>(&value) {
                Ok(list) => out.extend(list.into_iter().map(|mut s| {
                    s.instance = Some(instance.to_string());
                    s
                })),
                Err(e) => {
                    tracing::debug!(instance, error = %e, "unreadable session list in the store ignored")
                }
            }
        }
        Ok(out)
    }
}

/// How long an instance asking another to act on one of its sessions waits
/// for the answer.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(3);

impl Shared {
    /// Asks the instance holding session `id` (another's) to change its
    /// activations, and waits for its answer: the reply `evoctl` gets.
    /// `Ok(None)`: no answer within [`ANSWER_WITHIN`] (the instance is gone).
    pub async fn ask_set_active(
        &self,
        id: &str,
        tools: &[String],
        active: bool,
    ) -> Result<Option<CtlReply>, StoreError> {
        let mut random = [0u8; 16];
        let _ = getrandom::fill(&mut random);
        let ticket: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let key = self.key(&format!("answer:{ticket}"));
        self.publish_checked(Event::SetActive {
            id: id.to_string(),
            tools: tools.to_vec(),
            active,
            ticket,
        })
        .await?;
        let deadline = tokio::time::Instant::now() + ANSWER_WITHIN;
        while tokio::time::Instant::now() < deadline {
            let got: Option<String> = self.query(redis::cmd("GETDEL").arg(&key)).await?;
            if let Some(text) = got {
                return serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| StoreError(format!("unreadable answer: {e}")));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(None)
    }

    /// The answer to another instance's [`Event::SetActive`].
    pub async fn answer_put(&self, ticket: &str, reply: &CtlReply) -> Result<(), StoreError> {
        let text = serde_json::to_string(reply).map_err(|e| StoreError(format!("answer: {e}")))?;
        self.query(
            redis::cmd("SET")
                .arg(self.key(&format!("answer:{ticket}")))
                .arg(text)
                .arg("EX")
                .arg(ANSWER_WITHIN.as_secs() * 10),
        )
        .await
    }
}
