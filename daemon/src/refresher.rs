//! The Refresher actor: keeps the daemon's files in the cache directory. The
//! Catalog hands it each server's last good tool list, the Supervisor the
//! named sessions' activations; it writes each file atomically, debounced,
//! never two writes of one file at once, and off every request path.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use rmcp::model::Tool;
use serde::{Deserialize, Serialize};

/// Version of the cache file format; a file of another version is ignored.
pub const CACHE_FORMAT: u32 = 1;
/// Changes arriving within this window are written once.
const WRITE_DEBOUNCE: Duration = Duration::from_millis(300);

/// One server's entry in the cache file. Holds no env or header values: the
/// config hash stands for them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedServer {
    pub id: String,
    pub config_hash: String,
    /// Seconds since the Unix epoch.
    pub fetched_at: u64,
    pub capabilities: Vec<String>,
    pub tools: Vec<Tool>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CacheFile {
    pub format: u32,
    pub servers: Vec<CachedServer>,
}

pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Reads the catalog cache of `cache_dir`: each server's entry by id. A
/// missing file is an empty cache; an unreadable, corrupt or newer-format
/// one is discarded with a warning (the daemon starts anyway, discovering
/// live).
pub fn load_cache(cache_dir: &Path) -> HashMap<String, CachedServer> {
    let path = cache_dir.join("catalog.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HashMap::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the catalog cache; discovering live");
            return HashMap::new();
        }
    };
    #[derive(Deserialize)]
    struct Header {
        format: u32,
    }
    match serde_json::from_slice::<Header>(&bytes) {
        Ok(h) if h.format != CACHE_FORMAT => {
            tracing::warn!(path = %path.display(), format = h.format, expected = CACHE_FORMAT, "catalog cache has another format version (written by another evod?); ignoring it");
            return HashMap::new();
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "catalog cache is corrupt; discarding it");
            return HashMap::new();
        }
    }
    match serde_json::from_slice::<CacheFile>(&bytes) {
        Ok(file) => file
            .servers
            .into_iter()
            .map(|s| (s.id.clone(), s))
            .collect(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "catalog cache is corrupt; discarding it");
            HashMap::new()
        }
    }
}

/// Writes `bytes` to `path` so a reader sees the old file or the new one,
/// never a torn one: temp file in the same directory, fsync, rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// What the Refresher writes. Serialised on a blocking thread, not on the
/// actor thread.
enum Payload {
    Catalog(Vec<CachedServer>),
    Named(BTreeMap<String, BTreeSet<String>>),
}

impl Payload {
    fn to_bytes(&self) -> serde_json::Result<Vec<u8>> {
        match self {
            Payload::Catalog(servers) => serde_json::to_vec(&CacheFile {
                format: CACHE_FORMAT,
                servers: servers.clone(),
            }),
            Payload::Named(named) => serde_json::to_vec_pretty(named),
        }
    }
}

/// The Refresher actor. See the module docs.
pub struct Refresher {
    catalog_path: PathBuf,
    sessions_path: PathBuf,
    /// The newest unwritten payload per file.
    pending: HashMap<PathBuf, Payload>,
    /// Files being written now; a newer payload waits for the write to end,
    /// so writes of one file never overlap or reorder.
    in_flight: HashSet<PathBuf>,
    scheduled: bool,
}

impl Refresher {
    pub fn new(cache_dir: &Path) -> Refresher {
        Refresher {
            catalog_path: cache_dir.join("catalog.json"),
            sessions_path: cache_dir.join("sessions.json"),
            pending: HashMap::new(),
            in_flight: HashSet::new(),
            scheduled: false,
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
                .and_then(|bytes| write_atomically(&path, &bytes));
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
        self.pending.insert(path.clone(), Payload::Named(msg.0));
        if !self.in_flight.contains(&path) {
            self.write(path, ctx);
        }
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
        if self.pending.contains_key(&msg.0) && msg.0 == self.sessions_path {
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
pub struct Revalidate(pub Vec<(String, Addr<crate::child::ChildServer>)>);

impl Handler<Revalidate> for Refresher {
    type Result = ();
    fn handle(&mut self, msg: Revalidate, _: &mut Context<Self>) {
        for (id, child) in msg.0 {
            tracing::info!(server = %id, "cached tools are stale; re-discovering in the background");
            child.do_send(crate::child::Discover);
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
                .and_then(|bytes| write_atomically(&path, &bytes));
            if let Err(e) = result {
                tracing::warn!(path = %path.display(), error = %e, "could not write at shutdown");
            }
        }
    }
}
