//! Token files of remote servers: one JSON file per server id in the state
//! directory (`$EVO_STATE_DIR/oauth/`, else `$XDG_STATE_HOME/evo/oauth/`,
//! else `~/.local/state/evo/oauth/`), the directory 0700 and each file
//! 0600, written atomically. A file is bound to the server's URL and OAuth
//! settings ([`TokenFile::binding`]): one whose binding differs is stale and
//! is never used.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

use crate::config;
use crate::names;
use crate::runtime::atomic_file::{self, Mode};
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// The directory token files live in.
pub fn dir() -> PathBuf {
    #[cfg(test)]
    if let Some(dir) = TEST_DIR.with(|d| d.borrow().clone()) {
        return dir;
    }
    static DIR: LazyLock<PathBuf> = LazyLock::new(|| {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let state = env("EVO_STATE_DIR")
            .or_else(|| env("XDG_STATE_HOME").map(|d| d.join("evo")))
            .or_else(|| env("HOME").map(|h| h.join(".local/state/evo")))
            .unwrap_or_else(|| PathBuf::from(".evo-state"));
        state.join("oauth")
    });
    DIR.clone()
}

#[cfg(test)]
thread_local! {
    /// A unit test's token directory, for the thread it runs on (tests run
    /// in parallel; the real directory is read from the environment once).
    pub(crate) static TEST_DIR: std::cell::RefCell<Option<PathBuf>> =
        const { std::cell::RefCell::new(None) };
}

/// The lock every run of server `id` takes to spend its refresh token: two
/// runs alive at once (a restart overlapping the old run, a reload) hold the
/// same refresh token, and an authorization server that rotates refresh
/// tokens revokes the whole grant when a used one comes back. One lock per
/// id for the life of evod (ids are config keys: few).
pub fn refresh_lock(id: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: LazyLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
        LazyLock::new(Mutex::default);
    let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
    locks.entry(id.to_owned()).or_default().clone()
}

/// What is kept for one server.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct TokenFile {
    /// Hash of the URL and OAuth settings the tokens were issued for.
    pub binding: String,
    /// The client evo logged in as (registered, configured or a metadata
    /// document URL) and its secret, if the server issued one.
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<StoredCredentials>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("client_id", &self.client_id)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

fn path_of(id: &str) -> PathBuf {
    // Ids are config keys: keep the file name to safe characters.
    let safe = names::underscored(id);
    let hash = config::short_hash(id.as_bytes());
    dir().join(format!("{safe}-{hash}.json"))
}

/// The server's token file if it is bound to `binding`; a stale one is
/// deleted.
pub fn load(id: &str, binding: &str) -> Option<TokenFile> {
    let path = path_of(id);
    let text = std::fs::read(&path).ok()?;
    match serde_json::from_slice::<TokenFile>(&text) {
        Ok(file) if file.binding == binding => Some(file),
        Ok(_) => {
            tracing::info!(server = %id, "the server's URL or OAuth settings changed: its tokens are forgotten; run `evoctl login {id}`");
            let _ = std::fs::remove_file(&path);
            None
        }
        Err(e) => {
            tracing::warn!(server = %id, error = %e, "unreadable token file ignored; run `evoctl login {id}`");
            None
        }
    }
}

/// Writes the server's token file (0600 in a 0700 directory, atomically).
pub fn save(id: &str, file: &TokenFile) -> std::io::Result<()> {
    atomic_file::private_dir(&dir())?;
    let body = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
    atomic_file::write(&path_of(id), &body, Mode::OwnerOnly)
}

/// Forgets the server's tokens.
pub fn delete(id: &str) -> bool {
    std::fs::remove_file(path_of(id)).is_ok()
}

/// A renamed server keeps its tokens.
pub fn rename(old: &str, new: &str) {
    let (from, to) = (path_of(old), path_of(new));
    if from.exists() {
        let _ = std::fs::rename(from, to);
    }
}

/// rmcp's credential store over one server's token file.
pub struct FileCredentials {
    pub id: String,
    /// What the file is written with besides the credentials.
    pub base: TokenFile,
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(load(&self.id, &self.base.binding).and_then(|f| f.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let mut file = load(&self.id, &self.base.binding).unwrap_or_else(|| self.base.clone());
        file.client_id = credentials.client_id.clone();
        file.credentials = Some(credentials);
        save(&self.id, &file).map_err(|e| {
            AuthError::CredentialStoreError(format!(
                "could not write the token file in {}: {e}",
                dir().display()
            ))
        })
    }

    async fn clear(&self) -> Result<(), AuthError> {
        if let Some(mut file) = load(&self.id, &self.base.binding) {
            file.credentials = None;
            save(&self.id, &file).map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        }
        Ok(())
    }
}
