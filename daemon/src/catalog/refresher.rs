//! The Refresher actor: keeps the daemon's files in the cache directory. The
//! Catalog hands it each server's last good tool list, the Supervisor the
//! named sessions' activations and the profiles' run-time changes; it
//! writes each file atomically, debounced, never two writes of one file at
//! once, and off every request path.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::prelude::*;

use crate::catalog::cache::{CACHE_FORMAT, CacheFile, CachedServer};
use crate::child::ChildServer;
use crate::child::Discover;
use crate::policy::integrity::PINS_FILE;
use crate::policy::integrity::PinFile;
use crate::policy::profiles::PROFILES_FILE;
use crate::policy::profiles::SavedProfiles;
use crate::runtime::atomic_file::{self, Mode};
use crate::store::Store;

/// Changes arriving within this window are written once.
const WRITE_DEBOUNCE: Duration = Duration::from_millis(300);

/// What the Refresher writes. Serialised on a blocking thread, not on the
/// actor thread.
enum Payload {
    Catalog(Vec<CachedServer>),
    Named(BTreeMap<String, BTreeSet<String>>),
    Pins(PinFile),
    Profiles(SavedProfiles),
}

impl Payload {
    fn to_bytes(&self) -> serde_json::Result<Vec<u8>> {
        match self {
            Payload::Catalog(servers) => serde_json::to_vec(&CacheFile {
                format: CACHE_FORMAT,
                servers: servers.clone(),
            }),
            Payload::Named(named) => serde_json::to_vec_pretty(named),
            Payload::Pins(pins) => serde_json::to_vec_pretty(pins),
            Payload::Profiles(saved) => serde_json::to_vec_pretty(saved),
        }
    }
}

/// The Refresher actor. See the module docs.
pub struct Refresher {
    catalog_path: PathBuf,
    sessions_path: PathBuf,
    pins_path: PathBuf,
    profiles_path: PathBuf,
    /// The newest unwritten payload per file.
    pending: HashMap<PathBuf, Payload>,
    /// Files being written now; a newer payload waits for the write to end,
    /// so writes of one file never overlap or reorder.
    in_flight: HashSet<PathBuf>,
    scheduled: bool,
    /// With the shared store: the newest catalog for the task that writes
    /// it there (in order, the newest only).
    shared_catalog: Option<tokio::sync::watch::Sender<Option<Vec<CachedServer>>>>,
}

impl Refresher {
    pub fn new(cache_dir: &Path) -> Refresher {
        Refresher {
            catalog_path: cache_dir.join("catalog.json"),
            sessions_path: cache_dir.join("sessions.json"),
            pins_path: cache_dir.join(PINS_FILE),
            profiles_path: cache_dir.join(PROFILES_FILE),
            pending: HashMap::new(),
            in_flight: HashSet::new(),
            scheduled: false,
            shared_catalog: None,
        }
    }

    /// The catalog cache also goes to the shared store (where instances
    /// started later read it); the file stays as this instance's fallback.
    pub fn with_store(mut self, store: &Store) -> Refresher {
        let Some(shared) = store.shared().cloned() else {
            return self;
        };
        let (tx, mut rx) = tokio::sync::watch::channel(None::<Vec<CachedServer>>);
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let latest = rx.borrow_and_update().clone();
                if let Some(servers) = latest
                    && let Err(e) = shared.catalog_put(servers).await
                {
                    tracing::warn!("catalog cache not written to the store: {e}");
                }
            }
        });
        self.shared_catalog = Some(tx);
        self
    }

    /// Writes `payload` to `path` now, or as soon as the write under way
    /// ends (see [`Written`]).
    fn write_now(&mut self, path: PathBuf, payload: Payload, ctx: &mut Context<Self>) {
        self.pending.insert(path.clone(), payload);
        if !self.in_flight.contains(&path) {
            self.write(path, ctx);
        }
    }

    fn queue(&mut self, path: PathBuf, payload: Payload, ctx: &mut Context<Self>) {
        self.pending.insert(path, payload);
        if !self.scheduled {
            self.scheduled = true;
            ctx.run_later(WRITE_DEBOUNCE, |act, ctx| act.flush(ctx));
        }
    }

    fn flush(&mut self, ctx: &mut Context<Self>) {
        self.scheduled = false;
        let ready: Vec<PathBuf> = self
            .pending
            .keys()
            .filter(|p| !self.in_flight.contains(*p))
            .cloned()
            .collect();
        for path in ready {
            self.write(path, ctx);
        }
    }

    /// Writes `path`'s pending payload on a blocking thread; one write per
    /// path at a time (a newer payload waits for [`Written`]).
    fn write(&mut self, path: PathBuf, ctx: &mut Context<Self>) {
        let Some(payload) = self.pending.remove(&path) else {
            return;
        };
        self.in_flight.insert(path.clone());
        let addr = ctx.address();
        tokio::task::spawn_blocking(move || {
            let result = payload
                .to_bytes()
                .map_err(std::io::Error::other)
                .and_then(|bytes| atomic_file::write(&path, &bytes, Mode::Default));
            match result {
                Ok(()) => tracing::debug!(path = %path.display(), "written"),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "could not write; check the cache directory's permissions")
                }
            }
            addr.do_send(Written(path));
        });
    }
}

impl Actor for Refresher {
    type Context = Context<Self>;
}

/// The catalog's current per-server tool lists, to persist.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Persist(pub Vec<CachedServer>);

impl Handler<Persist> for Refresher {
    type Result = ();
    fn handle(&mut self, msg: Persist, ctx: &mut Context<Self>) {
        if let Some(tx) = &self.shared_catalog {
            let _ = tx.send(Some(msg.0.clone()));
        }
        let path = self.catalog_path.clone();
        self.queue(path, Payload::Catalog(msg.0), ctx);
    }
}

/// Named sessions' activations, to persist.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PersistNamed(pub BTreeMap<String, BTreeSet<String>>);

impl Handler<PersistNamed> for Refresher {
    type Result = ();
    /// Written at once, not debounced like the catalog: an activation is
    /// one small file, and it must survive even a daemon killed right after.
    fn handle(&mut self, msg: PersistNamed, ctx: &mut Context<Self>) {
        let path = self.sessions_path.clone();
        self.write_now(path, Payload::Named(msg.0), ctx);
    }
}

/// The tool pins, to persist.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PersistPins(pub PinFile);

impl Handler<PersistPins> for Refresher {
    type Result = ();
    /// Written at once, like named sessions: a pin or a quarantine must not
    /// be lost to a daemon killed right after it (the catalog cache, written
    /// later, could then hold a changed list with no pin to compare it to).
    fn handle(&mut self, msg: PersistPins, ctx: &mut Context<Self>) {
        let path = self.pins_path.clone();
        self.write_now(path, Payload::Pins(msg.0), ctx);
    }
}

/// Run-time changes to profiles, to persist.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PersistProfiles(pub SavedProfiles);

impl Handler<PersistProfiles> for Refresher {
    type Result = ();
    /// Written at once, like named sessions: a person's change must
    /// survive a daemon killed right after it.
    fn handle(&mut self, msg: PersistProfiles, ctx: &mut Context<Self>) {
        let path = self.profiles_path.clone();
        self.write_now(path, Payload::Profiles(msg.0), ctx);
    }
}

/// A write finished.
#[derive(Message)]
#[rtype(result = "()")]
struct Written(PathBuf);

impl Handler<Written> for Refresher {
    type Result = ();
    fn handle(&mut self, msg: Written, ctx: &mut Context<Self>) {
        self.in_flight.remove(&msg.0);
        // Files written at once stay so when a change came in while the
        // last write was under way.
        let at_once = [&self.sessions_path, &self.pins_path, &self.profiles_path].contains(&&msg.0);
        if self.pending.contains_key(&msg.0) && at_once {
            self.write(msg.0, ctx);
        } else if self.pending.contains_key(&msg.0) && !self.scheduled {
            self.scheduled = true;
            ctx.run_later(WRITE_DEBOUNCE, |act, ctx| act.flush(ctx));
        }
    }
}

/// Re-discover these servers in the background: their cached entries are
/// older than `cache.max_age_hours` (stale-while-revalidate).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Revalidate(pub Vec<(String, Addr<ChildServer>)>);

impl Handler<Revalidate> for Refresher {
    type Result = ();
    fn handle(&mut self, msg: Revalidate, _: &mut Context<Self>) {
        for (id, child) in msg.0 {
            tracing::info!(server = %id, "cached tools are stale; re-discovering in the background");
            child.do_send(Discover);
        }
    }
}

/// Write pending changes now, before answering (at shutdown, where blocking
/// the actor thread is what we want).
#[derive(Message)]
#[rtype(result = "()")]
pub struct FlushNow;

impl Handler<FlushNow> for Refresher {
    type Result = ();
    fn handle(&mut self, _: FlushNow, _: &mut Context<Self>) {
        for (path, payload) in self.pending.drain() {
            let result = payload
                .to_bytes()
                .map_err(std::io::Error::other)
                .and_then(|bytes| atomic_file::write(&path, &bytes, Mode::Default));
            if let Err(e) = result {
                tracing::warn!(path = %path.display(), error = %e, "could not write at shutdown");
            }
        }
    }
}
