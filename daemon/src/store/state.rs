//! Named sessions' and HTTP sessions' activations, profiles' run-time
//! changes and the catalog cache in Redis.
//!
//! Keys (under the prefix): `act:<session name>` (a set of exposed names;
//! an HTTP session's name is its `Mcp-Session-Id`, and its set expires with
//! the session record), `profiles` (a hash: profile → its changes as JSON,
//! so two instances changing two profiles never overwrite each other),
//! `catalog` (a hash: `v1:<server>@<config hash>` → that server's cache
//! entry as the file holds it: tool lists and config hashes, never env or
//! header values).

use std::collections::{BTreeMap, BTreeSet};

use super::redis::{Shared, StoreError};
use crate::catalog::cache::{CACHE_FORMAT, CachedServer};
use crate::policy::profiles::Changes;
use crate::policy::profiles::SavedProfiles;

impl Shared {
    fn activations_key(&self, name: &str) -> String {
        self.key(&format!("act:{name}"))
    }

    pub async fn activations_get(&self, name: &str) -> Result<BTreeSet<String>, StoreError> {
        self.query(redis::cmd("SMEMBERS").arg(self.activations_key(name)))
            .await
    }

    /// Replaces session `name`'s activations (`ttl_s`: they expire, an
    /// HTTP session's; `None`: kept, a named session's).
    pub async fn activations_put(
        &self,
        name: &str,
        set: &BTreeSet<String>,
        ttl_s: Option<u64>,
    ) -> Result<(), StoreError> {
        let key = self.activations_key(name);
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("DEL").arg(&key).ignore();
        if !set.is_empty() {
            pipe.cmd("SADD")
                .arg(&key)
                .arg(set.iter().collect::<Vec<_>>())
                .ignore();
            if let Some(ttl) = ttl_s {
                pipe.cmd("EXPIRE").arg(&key).arg(ttl.max(1)).ignore();
            }
        }
        self.pipeline::<()>(&pipe).await
    }

    /// Adds (`active`) or takes out `tools` in session `name`'s stored
    /// activations, atomically; returns the names that changed and the set
    /// after.
    pub async fn activations_change(
        &self,
        name: &str,
        tools: &[String],
        active: bool,
    ) -> Result<(Vec<String>, BTreeSet<String>), StoreError> {
        let key = self.activations_key(name);
        let mut pipe = redis::pipe();
        pipe.atomic();
        for t in tools {
            pipe.cmd(if active { "SADD" } else { "SREM" })
                .arg(&key)
                .arg(t);
        }
        pipe.cmd("SMEMBERS").arg(&key);
        let mut answers: Vec<redis::Value> = self.pipeline(&pipe).await?;
        let after = answers
            .pop()
            .map(|v| redis::from_redis_value::<BTreeSet<String>>(v).unwrap_or_default())
            .unwrap_or_default();
        let changed = tools
            .iter()
            .zip(answers)
            .filter(|(_, v)| redis::from_redis_value::<i64>(v.clone()).unwrap_or(0) > 0)
            .map(|(t, _)| t.clone())
            .collect();
        Ok((changed, after))
    }

    /// Whether session `name` is known to the store: an HTTP session's
    /// record, or stored activations.
    pub async fn session_known(&self, name: &str) -> Result<bool, StoreError> {
        let n: i64 = self
            .query(
                redis::cmd("EXISTS")
                    .arg(self.activations_key(name))
                    .arg(self.key(&format!("http:session:{name}"))),
            )
            .await?;
        Ok(n > 0)
    }

    pub async fn profiles_get(&self) -> Result<SavedProfiles, StoreError> {
        let raw: BTreeMap<String, String> = self
            .query(redis::cmd("HGETALL").arg(self.key("profiles")))
            .await?;
        let mut saved = SavedProfiles::default();
        for (name, changes) in raw {
            match serde_json::from_str(&changes) {
                Ok(c) => saved.set(&name, c),
                Err(e) => {
                    tracing::warn!(profile = %name, error = %e, "unreadable saved profile changes in the store ignored")
                }
            }
        }
        Ok(saved)
    }

    /// Writes profile `name`'s changes (none: forgets them).
    pub async fn profile_put(
        &self,
        name: &str,
        changes: Option<&Changes>,
    ) -> Result<(), StoreError> {
        let key = self.key("profiles");
        match changes.filter(|c| !c.is_empty()) {
            Some(c) => {
                let text = serde_json::to_string(c)
                    .map_err(|e| StoreError(format!("profile changes: {e}")))?;
                let _: i64 = self
                    .query(redis::cmd("HSET").arg(key).arg(name).arg(text))
                    .await?;
            }
            None => {
                let _: i64 = self.query(redis::cmd("HDEL").arg(key).arg(name)).await?;
            }
        }
        Ok(())
    }

    /// The stored catalog entries of these servers (id, config hash): each
    /// server's last good list under that config, whichever instance
    /// discovered it. Entries are kept per config hash, so instances that
    /// run different versions of a server never overwrite each other's.
    pub async fn catalog_get(
        &self,
        wanted: &[(String, String)],
    ) -> Result<std::collections::HashMap<String, CachedServer>, StoreError> {
        if wanted.is_empty() {
            return Ok(Default::default());
        }
        let fields: Vec<String> = wanted
            .iter()
            .map(|(id, hash)| catalog_field(id, hash))
            .collect();
        let raw: Vec<Option<String>> = self
            .query(redis::cmd("HMGET").arg(self.key("catalog")).arg(fields))
            .await?;
        let mut found = std::collections::HashMap::new();
        for ((id, _), entry) in wanted.iter().zip(raw) {
            let Some(entry) = entry else { continue };
            match serde_json::from_str::<CachedServer>(&entry) {
                Ok(c) => {
                    found.insert(id.clone(), c);
                }
                Err(e) => {
                    tracing::warn!(server = %id, error = %e, "unreadable catalog entry in the store; discovering live")
                }
            }
        }
        Ok(found)
    }

    pub async fn catalog_put(&self, servers: Vec<CachedServer>) -> Result<(), StoreError> {
        if servers.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("HSET");
        cmd.arg(self.key("catalog"));
        for s in &servers {
            let text =
                serde_json::to_string(s).map_err(|e| StoreError(format!("catalog cache: {e}")))?;
            cmd.arg(catalog_field(&s.id, &s.config_hash)).arg(text);
        }
        let _: i64 = self.query(&mut cmd).await?;
        Ok(())
    }
}

/// `v<format>:<id>@<config hash>`.
fn catalog_field(id: &str, hash: &str) -> String {
    format!("v{CACHE_FORMAT}:{id}@{hash}")
}

/// API token records (`tokens`: a hash, token name → its record, the
/// SHA-256 and never the token), so every instance accepts the same ones.
impl Shared {
    pub async fn tokens_get(&self) -> Result<Vec<String>, StoreError> {
        self.query(redis::cmd("HVALS").arg(self.key("tokens")))
            .await
    }

    /// Adds a record unless one of that name exists; returns whether it did.
    pub async fn token_add(&self, name: &str, record: &str) -> Result<bool, StoreError> {
        let added: i64 = self
            .query(
                redis::cmd("HSETNX")
                    .arg(self.key("tokens"))
                    .arg(name)
                    .arg(record),
            )
            .await?;
        Ok(added == 1)
    }

    /// Removes a record; returns whether there was one.
    pub async fn token_remove(&self, name: &str) -> Result<bool, StoreError> {
        let removed: i64 = self
            .query(redis::cmd("HDEL").arg(self.key("tokens")).arg(name))
            .await?;
        Ok(removed == 1)
    }
}
