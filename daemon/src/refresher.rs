//! The Refresher actor: keeps the persistent catalog cache. The Catalog hands
//! it each server's last good tool list; it writes the cache file atomically,
//! debounced and off every session's request path.

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

/// Writes `bytes` to `path` so a reader sees the old file or the new one,
/// never a torn one: temp file in the same directory, fsync, rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
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

/// The Refresher actor. See the module docs.
pub struct Refresher {
    path: PathBuf,
    pending: Option<Vec<CachedServer>>,
    scheduled: bool,
}

impl Refresher {
    pub fn new(cache_dir: &Path) -> Refresher {
        Refresher {
            path: cache_dir.join("catalog.json"),
            pending: None,
            scheduled: false,
        }
    }

    fn flush(&mut self) {
        self.scheduled = false;
        let Some(servers) = self.pending.take() else {
            return;
        };
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let file = CacheFile {
                format: CACHE_FORMAT,
                servers,
            };
            let result = serde_json::to_vec(&file)
                .map_err(std::io::Error::other)
                .and_then(|bytes| write_atomically(&path, &bytes));
            match result {
                Ok(()) => tracing::debug!(path = %path.display(), "catalog cache written"),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "could not write the catalog cache; check the cache directory's permissions")
                }
            }
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
        self.pending = Some(msg.0);
        if !self.scheduled {
            self.scheduled = true;
            ctx.run_later(WRITE_DEBOUNCE, |act, _| act.flush());
        }
    }
}

/// Write any pending change now (at shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct FlushNow;

impl Handler<FlushNow> for Refresher {
    type Result = ();
    fn handle(&mut self, _: FlushNow, _: &mut Context<Self>) {
        self.flush();
    }
}
