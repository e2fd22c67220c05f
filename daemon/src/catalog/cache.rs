//! The catalog cache file (`catalog.json` in the cache directory): each
//! server's last good tool list, so a daemon starts serving at once and
//! children start lazily. Read at start, written by the Refresher.
//!
//! At start each server whose cache entry has its config hash is listed from the cache and starts
//! `idle`; the first call starts it. Entries older than `cache.max_age_hours` are re-discovered in
//! the background. Every discovery that changes a server's tools is persisted (debounced, atomic);
//! a child that lists no tools never replaces a good list.

use std::collections::HashMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};

use crate::catalog::resources::Offered;

/// Version of the cache file format; a file of another version is ignored.
pub const CACHE_FORMAT: u32 = 1;

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
    /// Its resources, templates and prompts (absent in files of older
    /// releases: none known until the child lists them).
    #[serde(default)]
    pub offered: Offered,
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
