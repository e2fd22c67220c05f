//! The store: where state that must outlive an instance, or be the same on
//! every instance, lives. One interface, two backends:
//!
//! - [`Store::Files`] (no `store.redis_url`): files in the cache directory,
//!   exactly as before there was a store (`catalog.json`, `sessions.json`,
//!   `profiles.json` written by the Refresher; approvals in the
//!   Supervisor's memory).
//! - [`Store::Redis`]: the same state in Redis under `store.prefix`, shared
//!   by every instance with the same URL and prefix; changes other
//!   instances must act on are published ([`Event`]).
//!
//! What never goes to the store: tokens, env values, header values (the
//! catalog cache holds tool lists and config hashes; session records hold
//! the client's `initialize` parameters and the identity's name).
//!
//! While Redis is unreachable, calls in sessions held here go on; a call needing an approval is
//! refused with the reason (never let through undecided); a request for a session held elsewhere is
//! 503 with the reason (the client may retry, or initialize anew); `evoctl approve|deny|approvals`
//! fail with it. The soak and fault tests run Redis with `appendonly yes`: decided approvals
//! survive a restart of Redis only when Redis itself persists them.

pub mod approvals;
pub mod breaker;
mod breaker_mirror;
pub mod events;
pub mod instances;
pub mod learned;
pub mod pins;
pub mod published;
pub mod redis;
pub mod sessions;
pub mod state;

use std::sync::Arc;

use crate::config::StoreSettings;

pub use self::published::Event;
pub use self::redis::{Delivery, Shared, StoreError};

/// The store in force; cheap to clone. See the module docs.
#[derive(Clone, Default)]
pub enum Store {
    #[default]
    Files,
    Redis(Arc<Shared>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Files => f.write_str("Store::Files"),
            Store::Redis(s) => write!(f, "Store::Redis({})", s.shown()),
        }
    }
}

impl Store {
    /// The store the settings name: Redis when `EVO_REDIS_URL` or
    /// `store.redis_url` is set (the environment wins), else files. Errs for
    /// settings that can never work; an unreachable Redis is not an error
    /// (evod serves and keeps trying).
    pub fn open(settings: &StoreSettings) -> Result<Store, String> {
        let from_env = std::env::var("EVO_REDIS_URL")
            .ok()
            .filter(|u| !u.is_empty());
        if let Some(url) = &from_env
            && !(url.starts_with("redis://") || url.starts_with("rediss://"))
        {
            return Err(
                "EVO_REDIS_URL: expected a redis:// or rediss:// URL (like redis://127.0.0.1:6379)"
                    .into(),
            );
        }
        match from_env.or_else(|| settings.redis_url.clone()) {
            None => Ok(Store::Files),
            Some(url) => {
                let shared = Shared::open(&url, &settings.prefix, settings.tls_ca.as_deref())?;
                tracing::info!(redis = %shared.shown(), prefix = %settings.prefix, "shared store: Redis");
                Ok(Store::Redis(shared))
            }
        }
    }

    pub fn shared(&self) -> Option<&Arc<Shared>> {
        match self {
            Store::Files => None,
            Store::Redis(s) => Some(s),
        }
    }

    /// `status --json` `store`.
    pub fn status(&self) -> evo_proto::ctl::StoreStatus {
        match self {
            Store::Files => evo_proto::ctl::StoreStatus::default(),
            Store::Redis(s) => {
                let (ok, error) = s.health();
                evo_proto::ctl::StoreStatus {
                    kind: "redis".into(),
                    ok,
                    url: Some(s.shown().to_string()),
                    error,
                    instance: Some(s.instance().to_string()),
                }
            }
        }
    }

    /// `/readyz`: why the store is not usable, if it is not.
    pub fn not_ready(&self) -> Option<String> {
        match self {
            Store::Files => None,
            Store::Redis(s) => match s.health() {
                (true, _) => None,
                (false, _) => Some(s.unavailable()),
            },
        }
    }
}
