//! What the console keeps across a restart of evod, in `console.json` in
//! the cache directory (0600): the owner's signed-in browsers (the SHA-256
//! of each cookie, never the cookie, with its CSRF token) and the loopback
//! port the console listened on, so an open page finds evod again and
//! stays signed in. Token sign-ins are not kept: a restarted evod cannot
//! tell whether the token was revoked meanwhile.
//!
//! The file is written when they change. At start, with saved sessions and no `serve.http`, evod
//! opens the console's listener again at once on the same port (a free one if taken:
//! `listener.rs`), so an open page's `EventSource` reconnects, sees another `run` id in its `hello`
//! and says evod restarted.

use std::path::{Path, PathBuf};

use crate::runtime::atomic_file;
use crate::runtime::atomic_file::Mode;
use serde::{Deserialize, Serialize};

pub const FILE: &str = "console.json";
const FORMAT: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Saved {
    pub version: u32,
    /// The console's own listener (no `serve.http`), when it ran.
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub sessions: Vec<SavedSession>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedSession {
    /// SHA-256 of the cookie, hex.
    pub cookie_sha256: String,
    pub csrf: String,
}

pub fn path(cache_dir: &Path) -> PathBuf {
    cache_dir.join(FILE)
}

/// The saved state; a missing, unreadable or other-format file is none.
pub fn load(path: &Path) -> Saved {
    let Ok(text) = std::fs::read(path) else {
        return Saved::default();
    };
    match serde_json::from_slice::<Saved>(&text) {
        Ok(s) if s.version == FORMAT => s,
        _ => {
            tracing::warn!(file = %path.display(), "console sessions file not readable; browsers sign in again");
            Saved::default()
        }
    }
}

/// Writes `saved` through a temporary file, mode 0600 from its creation.
pub fn store(path: &Path, saved: &Saved) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut text = serde_json::to_vec_pretty(saved).map_err(|e| e.to_string())?;
    text.push(b'\n');
    atomic_file::write(path, &text, Mode::OwnerOnly).map_err(fail)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, chunk) in text.as_bytes().chunks(2).enumerate() {
        let pair = std::str::from_utf8(chunk).ok()?;
        out[i] = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_mode_0600() {
        let dir = std::env::temp_dir().join(format!("evo-console-saved-{}", std::process::id()));
        let p = path(&dir);
        let saved = Saved {
            version: FORMAT,
            port: Some(4242),
            sessions: vec![SavedSession {
                cookie_sha256: hex(&[7u8; 32]),
                csrf: "c".into(),
            }],
        };
        store(&p, &saved).unwrap();
        let back = load(&p);
        assert_eq!(back.port, Some(4242));
        assert_eq!(unhex(&back.sessions[0].cookie_sha256), Some([7u8; 32]));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        std::fs::write(&p, b"{not json").unwrap();
        assert!(load(&p).sessions.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(unhex("zz"), None);
    }
}
