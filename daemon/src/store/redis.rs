//! The Redis backend of the store (`store.redis_url`): one connection
//! manager shared by everything that touches Redis, a health record the
//! status and `/readyz` read, and a subscriber that hands other instances'
//! events to the Supervisor.
//!
//! Redis unreachable (or refusing the password) at start does not stop
//! evod: [`Shared::open`] returns at once and a task keeps connecting; until
//! it succeeds every operation fails with [`StoreError`] naming the reason.
//! Once connected, the connection manager reconnects by itself and each
//! operation is bounded by [`OP_TIMEOUT`], so a dead Redis costs a request
//! at most that long and never a hang.
//!
//! Redis is checked once a second (`PING`). A URL that can never work (not `redis://`/`rediss://`,
//! an unreadable `store.tls_ca`) does stop evod at start. Passwords are masked (`redis://:***@…`)
//! wherever the URL is shown.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::ConnectionManager;
use redis::{Client, FromRedisValue};

use super::breaker_mirror::Mirror;
use super::published::{Envelope, Event};
use crate::metrics;

/// How long one Redis operation may take before it counts as failed.
pub const OP_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the connection is checked (and, until the first connection,
/// tried again).
const HEALTH_EVERY: Duration = Duration::from_secs(1);

/// An operation on the shared store that failed: the message says what and
/// why, for the response it ends up in.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// What the subscriber delivers: an event from another instance, or word
/// that the subscription (re)started, after which state read from Redis may
/// have missed events.
#[derive(Debug, Clone, actix::Message)]
#[rtype(result = "()")]
pub enum Delivery {
    Event(Event),
    Resync,
}

/// The Redis connection and what goes with it. See the module docs.
pub struct Shared {
    prefix: String,
    /// The URL with any password masked, for messages.
    shown: String,
    client: Client,
    conn: OnceLock<ConnectionManager>,
    ok: AtomicBool,
    error: Mutex<Option<String>>,
    /// This instance's id in published events (its own are ignored).
    instance: String,
    listener: OnceLock<actix::Recipient<Delivery>>,
    /// Commands sent (for the benchmark's Redis operations per call).
    ops: AtomicU64,
    /// The retry-loop counts of the sessions served here, kept by the
    /// subscriber itself (no actor hop: a call right after must see it).
    pub(super) breakers: Mutex<Mirror>,
    /// Subscriptions made after the first: events published meanwhile
    /// may be lost, so what was decided on their absence before is void.
    generation: AtomicU64,
}

/// `redis://user:secret@host` shown as `redis://user:***@host`.
pub fn mask_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(unparsable URL)".into();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or("", |(u, _)| u);
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => format!("{scheme}://{authority}{path}"),
    }
}

/// A redis error as a person reads it (never the URL's password).
fn explain(e: &redis::RedisError) -> String {
    match e.kind() {
        redis::ErrorKind::AuthenticationFailed => {
            "Redis refused the credentials: check the password (or user) in store.redis_url / EVO_REDIS_URL".into()
        }
        _ if e.code() == Some("NOAUTH") => {
            "Redis requires a password: put it in store.redis_url (redis://:PASSWORD@host:port) or EVO_REDIS_URL".into()
        }
        _ if e.code() == Some("WRONGPASS") => {
            "Redis refused the password: check the password in store.redis_url / EVO_REDIS_URL".into()
        }
        _ => e.to_string(),
    }
}

impl Shared {
    /// Parses the settings and starts connecting in the background. Errs
    /// only for settings that can never work (a malformed URL, an unreadable
    /// CA file).
    pub fn open(
        url: &str,
        prefix: &str,
        tls_ca: Option<&std::path::Path>,
    ) -> Result<Arc<Shared>, String> {
        let shown = mask_url(url);
        let client = match tls_ca {
            Some(ca) => {
                let pem = std::fs::read(ca)
                    .map_err(|e| format!("store.tls_ca {}: cannot be read ({e})", ca.display()))?;
                Client::build_with_tls(
                    url,
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(pem),
                    },
                )
            }
            None => Client::open(url),
        }
        .map_err(|e| format!("store.redis_url ({shown}): {}", explain(&e)))?;
        let mut id = [0u8; 3];
        let _ = getrandom::fill(&mut id);
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "evod".into());
        // Readable in `evoctl sessions`, unique even for two containers
        // with one hostname and one pid.
        let instance = format!(
            "{host}-{}-{}",
            std::process::id(),
            id.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let shared = Arc::new(Shared {
            prefix: prefix.to_string(),
            shown,
            client,
            conn: OnceLock::new(),
            ok: AtomicBool::new(false),
            error: Mutex::new(Some("connecting to Redis".into())),
            instance,
            listener: OnceLock::new(),
            ops: AtomicU64::new(0),
            breakers: Mutex::new(Default::default()),
            generation: AtomicU64::new(0),
        });
        tokio::spawn(shared.clone().keep_connected());
        tokio::spawn(shared.clone().subscribe());
        Ok(shared)
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// This instance's name in events and session records.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The instance's short tag (its random part): what makes its session
    /// ids (`s2@TAG`) unique across the instances sharing the store.
    pub fn tag(&self) -> &str {
        self.instance.rsplit('-').next().unwrap_or(&self.instance)
    }

    /// `<prefix><rest>`: every key evo writes.
    pub fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// Whether the last operation (or health check) succeeded, and why not.
    pub fn health(&self) -> (bool, Option<String>) {
        let ok = self.ok.load(Ordering::Relaxed);
        let error = if ok {
            None
        } else {
            self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
        };
        (ok, error)
    }

    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    /// Where other instances' events go (the Supervisor). The listener is
    /// told to read everything at once: the subscription's first `Resync`
    /// may have come before there was anyone to tell (a later instance
    /// then never read the profiles' changes made before it started).
    pub fn set_listener(&self, to: actix::Recipient<Delivery>) {
        if self.listener.set(to).is_ok() {
            self.deliver(Delivery::Resync);
        }
    }

    fn mark(&self, result: Result<(), String>) {
        match result {
            Ok(()) => {
                if !self.ok.swap(true, Ordering::Relaxed) {
                    tracing::info!(redis = %self.shown, "shared store reachable");
                }
            }
            Err(why) => {
                metrics::metrics().store_error();
                let was = self.ok.swap(false, Ordering::Relaxed);
                let mut error = self.error.lock().unwrap_or_else(|e| e.into_inner());
                if was || error.as_deref() != Some(why.as_str()) {
                    tracing::error!(redis = %self.shown, "shared store unavailable: {why}; serving what this instance holds and retrying");
                }
                *error = Some(why);
            }
        }
    }

    /// Connects (retrying until it works), then checks the connection
    /// every [`HEALTH_EVERY`].
    async fn keep_connected(self: Arc<Self>) {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(OP_TIMEOUT))
            .set_response_timeout(Some(OP_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        loop {
            let attempt = tokio::time::timeout(
                OP_TIMEOUT * 2,
                ConnectionManager::new_with_config(self.client.clone(), config.clone()),
            )
            .await;
            match attempt {
                Ok(Ok(conn)) => {
                    let _ = self.conn.set(conn);
                    break;
                }
                Ok(Err(e)) => self.mark(Err(format!(
                    "Redis at {} is unreachable: {}",
                    self.shown,
                    explain(&e)
                ))),
                Err(_) => self.mark(Err(format!(
                    "Redis at {} did not answer within {} s",
                    self.shown,
                    (OP_TIMEOUT * 2).as_secs()
                ))),
            }
            tokio::time::sleep(HEALTH_EVERY).await;
        }
        loop {
            let _: Result<String, _> = self.query(&mut redis::cmd("PING")).await;
            tokio::time::sleep(HEALTH_EVERY).await;
        }
    }

    /// Runs one command.
    pub async fn query<T: FromRedisValue>(&self, cmd: &mut redis::Cmd) -> Result<T, StoreError> {
        let mut conn = self.connection()?;
        self.ops.fetch_add(1, Ordering::Relaxed);
        let result = tokio::time::timeout(OP_TIMEOUT, cmd.query_async::<T>(&mut conn)).await;
        self.settle(result)
    }

    /// Every key matching `pattern` (SCAN, in batches; keys made or
    /// deleted meanwhile may or may not be in it, as SCAN says).
    pub async fn scan_keys(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = self
                .query(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(pattern)
                        .arg("COUNT")
                        .arg(500),
                )
                .await?;
            keys.extend(batch);
            cursor = next;
            if cursor == 0 {
                return Ok(keys);
            }
        }
    }

    /// Runs a Lua script (atomically, on the server).
    pub async fn script<T: FromRedisValue>(
        &self,
        script: &redis::Script,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T, StoreError> {
        let mut conn = self.connection()?;
        self.ops.fetch_add(1, Ordering::Relaxed);
        let mut invocation = script.prepare_invoke();
        for k in keys {
            invocation.key(*k);
        }
        for a in args {
            invocation.arg(*a);
        }
        let result =
            tokio::time::timeout(OP_TIMEOUT, invocation.invoke_async::<T>(&mut conn)).await;
        self.settle(result)
    }

    /// Runs a pipeline of commands (one round trip).
    pub async fn pipeline<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, StoreError> {
        let mut conn = self.connection()?;
        self.ops.fetch_add(1, Ordering::Relaxed);
        let result = tokio::time::timeout(OP_TIMEOUT, pipe.query_async::<T>(&mut conn)).await;
        self.settle(result)
    }

    /// Waits (up to `limit`) for the first connection.
    pub async fn wait_connected(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.conn.get().is_none() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn connection(&self) -> Result<ConnectionManager, StoreError> {
        match self.conn.get() {
            Some(c) => Ok(c.clone()),
            None => Err(StoreError(self.unavailable())),
        }
    }

    /// Why the store cannot be used now.
    pub fn unavailable(&self) -> String {
        let (_, error) = self.health();
        format!(
            "the shared store (Redis at {}) is unavailable: {}",
            self.shown,
            error.unwrap_or_else(|| "not connected".into())
        )
    }

    fn settle<T>(
        &self,
        result: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, StoreError> {
        match result {
            Ok(Ok(v)) => {
                self.mark(Ok(()));
                Ok(v)
            }
            Ok(Err(e))
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
            {
                // The server answered (a script's own error): reachable.
                self.mark(Ok(()));
                Err(StoreError(format!("Redis refused the operation: {e}")))
            }
            Ok(Err(e)) => {
                let why = format!("Redis at {}: {}", self.shown, explain(&e));
                self.mark(Err(why.clone()));
                Err(StoreError(format!(
                    "the shared store is unavailable: {why}"
                )))
            }
            Err(_) => {
                let why = format!(
                    "Redis at {} did not answer within {} s",
                    self.shown,
                    OP_TIMEOUT.as_secs()
                );
                self.mark(Err(why.clone()));
                Err(StoreError(format!(
                    "the shared store is unavailable: {why}"
                )))
            }
        }
    }

    /// Tells the other instances (best effort: a lost event is made up
    /// for by the resync after a reconnection).
    pub async fn publish(&self, event: Event) {
        if let Err(e) = self.publish_checked(event).await {
            tracing::debug!("event not published: {e}");
        }
    }

    /// [`Shared::publish`] for a caller that must know it went out.
    pub async fn publish_checked(&self, event: Event) -> Result<(), StoreError> {
        let text = self.envelope(event);
        let channel = self.channel();
        self.query::<i64>(redis::cmd("PUBLISH").arg(&channel).arg(text))
            .await
            .map(|_| ())
    }

    /// The channel every instance's events go out on.
    pub(super) fn channel(&self) -> String {
        self.key("events")
    }

    /// An event as published: with this instance's name, so that it
    /// ignores its own.
    pub(super) fn envelope(&self, event: Event) -> String {
        let envelope = Envelope {
            from: self.instance.clone(),
            event,
        };
        serde_json::to_string(&envelope).unwrap_or_default()
    }

    /// Subscribes to the events channel, again after each disconnection,
    /// and hands what arrives to the listener.
    async fn subscribe(self: Arc<Self>) {
        let channel = self.channel();
        let mut first = true;
        loop {
            let attempt = tokio::time::timeout(OP_TIMEOUT, async {
                let mut pubsub = self.client.get_async_pubsub().await?;
                pubsub.subscribe(&channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            })
            .await;
            if let Ok(Ok(pubsub)) = attempt {
                if !std::mem::take(&mut first) {
                    self.generation.fetch_add(1, Ordering::Relaxed);
                }
                self.deliver(Delivery::Resync);
                let mut messages = pubsub.into_on_message();
                while let Some(msg) = messages.next().await {
                    let Ok(text) = msg.get_payload::<String>() else {
                        continue;
                    };
                    match serde_json::from_str::<Envelope>(&text) {
                        Ok(env) if env.from != self.instance => {
                            self.note(&env.event);
                            self.deliver(Delivery::Event(env.event));
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!(error = %e, "unreadable store event ignored"),
                    }
                }
                tracing::debug!("store events subscription ended; subscribing again");
            }
            tokio::time::sleep(HEALTH_EVERY).await;
        }
    }

    fn note(&self, event: &Event) {
        self.mirror().note(event);
    }

    /// How many times the events subscription was made again (see the
    /// field): state kept from events before it may have missed some.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// This instance's session `name` ended: forget its counts.
    pub fn ended_here(&self, name: &str) {
        self.mirror().forget(name);
    }

    fn deliver(&self, d: Delivery) {
        if let Some(to) = self.listener.get() {
            to.do_send(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            mask_url("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(mask_url("rediss://bob:pw@h:1"), "rediss://bob:***@h:1");
        assert_eq!(mask_url("redis://h:1"), "redis://h:1");
    }
}
