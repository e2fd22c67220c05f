//! API tokens for the HTTP endpoint. The tokens file (`tokens.json` beside
//! the config, or `serve.http.auth.tokens_file`; mode 0600) holds, per
//! token, its name, role, profile, creation time and the SHA-256 of the
//! token, never the token itself: `evoctl token create` shows that once.
//!
//! ```json
//! {"version": 1, "tokens": [{"name": "ci", "sha256": "9f86…", "role": "readonly",
//!                             "profile": null, "created": "2026-12-01T16:00:00Z"}]}
//! ```
//!
//! A presented token is hashed and compared with every entry's hash in
//! constant time ([`TokenTable::verify`]). The Supervisor owns the table
//! (creates, revokes, reloads the file when it changes); the HTTP front
//! reads the copy it is handed.
//!
//! With Redis, API token records are a hash `tokens` (name → the tokens file's entry: SHA-256,
//! role, profile, created). `token create` adds with `HSETNX` (one name across instances) and
//! answers once the creating instance has the new table in force; the others follow the `tokens`
//! event. The tokens file is then this machine's copy of the hash, rewritten whenever a read
//! changes the table, and in force from start until the first read succeeds, so an instance started
//! while Redis is down accepts the tokens it last knew. The HTTP front holds a token presented
//! before the Supervisor handed it the table (the Supervisor waits up to 2 s for Redis at start to
//! read the catalog) for up to 10 s instead of refusing it as unknown.
//!
//! API tokens are `evo_` and 64 hex digits (32 random bytes). The Supervisor re-reads the table on
//! `evoctl reload` and on config changes and hands the front a new copy; a name no longer in the
//! table ends its sessions. The tokens file is not watched on its own.

use std::path::Path;

use crate::runtime::atomic_file::{self, Mode};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What every token starts with, so a leaked one is recognisable (secret
/// scanners) and an evo token is never mistaken for a JWT.
pub const TOKEN_PREFIX: &str = "evo_";

/// The file format's version.
const FORMAT: u32 = 1;

/// One API token as the file records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenEntry {
    pub name: String,
    sha256: [u8; 32],
    pub role: Option<String>,
    pub profile: Option<String>,
    /// RFC 3339, UTC.
    pub created: String,
}

/// Every API token evod accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenTable {
    entries: Vec<TokenEntry>,
}

#[derive(Serialize, Deserialize)]
struct FileEntry {
    name: String,
    sha256: String,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    created: String,
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    tokens: Vec<FileEntry>,
}

impl TokenTable {
    /// Reads the tokens file; a missing file is an empty table.
    pub fn load(path: &Path) -> Result<TokenTable, String> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TokenTable::default()),
            Err(e) => {
                return Err(format!(
                    "cannot read the tokens file {}: {e}",
                    path.display()
                ));
            }
        };
        TokenTable::parse(&text).map_err(|e| format!("tokens file {}: {e}", path.display()))
    }

    /// Parses the file's text.
    pub fn parse(text: &[u8]) -> Result<TokenTable, String> {
        let file: File = serde_json::from_slice(text).map_err(|e| {
            format!("not a tokens file ({e}); fix it, or move it away and create the tokens again")
        })?;
        if file.version != FORMAT {
            return Err(format!(
                "format version {} is not the one this evod reads ({FORMAT})",
                file.version
            ));
        }
        let mut entries = Vec::with_capacity(file.tokens.len());
        for t in file.tokens {
            let sha256 = unhex(&t.sha256)
                .ok_or_else(|| format!("token '{}': sha256 is not 64 hex digits", t.name))?;
            entries.push(TokenEntry {
                name: t.name,
                sha256,
                role: t.role,
                profile: t.profile,
                created: t.created,
            });
        }
        Ok(TokenTable { entries })
    }

    /// Writes the table to `path`: mode 0600 from its creation, through a
    /// temporary file renamed over the old one; a missing directory is
    /// created 0700.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let fail =
            |e: std::io::Error| format!("cannot write the tokens file {}: {e}", path.display());
        let file = File {
            version: FORMAT,
            tokens: self
                .entries
                .iter()
                .map(|e| FileEntry {
                    name: e.name.clone(),
                    sha256: hex(&e.sha256),
                    role: e.role.clone(),
                    profile: e.profile.clone(),
                    created: e.created.clone(),
                })
                .collect(),
        };
        let mut text = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        text.push(b'\n');
        atomic_file::write(path, &text, Mode::OwnerOnly).map_err(fail)?;
        Ok(())
    }

    /// Adds a token named `name` and returns it (the only time it exists
    /// outside the client that keeps it).
    pub fn create(
        &mut self,
        name: &str,
        role: Option<String>,
        profile: Option<String>,
        created: String,
    ) -> Result<String, String> {
        check_name(name)?;
        if self.entries.iter().any(|e| e.name == name) {
            return Err(format!(
                "a token named '{name}' exists; revoke it first (`evoctl token revoke {name}`) or choose another name"
            ));
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| format!("cannot draw random bytes for a token: {e}"))?;
        let token = format!("{TOKEN_PREFIX}{}", hex(&secret));
        self.entries.push(TokenEntry {
            name: name.to_owned(),
            sha256: digest(&token),
            role,
            profile,
            created,
        });
        Ok(token)
    }

    /// Entry `name` as the shared store keeps it: the file's entry as JSON
    /// (its SHA-256, never the token).
    pub fn record(&self, name: &str) -> Option<String> {
        let e = self.entries.iter().find(|e| e.name == name)?;
        serde_json::to_string(&FileEntry {
            name: e.name.clone(),
            sha256: hex(&e.sha256),
            role: e.role.clone(),
            profile: e.profile.clone(),
            created: e.created.clone(),
        })
        .ok()
    }

    /// The table of the shared store's records ([`TokenTable::record`]).
    pub fn from_records(records: &[String]) -> Result<TokenTable, String> {
        let mut tokens = Vec::with_capacity(records.len());
        for r in records {
            tokens.push(
                serde_json::from_str::<FileEntry>(r)
                    .map_err(|e| format!("a token record in the store is unreadable ({e})"))?,
            );
        }
        let mut text = serde_json::to_vec(&File {
            version: FORMAT,
            tokens,
        })
        .map_err(|e| e.to_string())?;
        text.push(b'\n');
        let mut table = TokenTable::parse(&text)?;
        table
            .entries
            .sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
        Ok(table)
    }

    /// Removes the token named `name`.
    pub fn revoke(&mut self, name: &str) -> Result<TokenEntry, String> {
        let i = self
            .entries
            .iter()
            .position(|e| e.name == name)
            .ok_or_else(|| format!("no token named '{name}'; `evoctl token list` shows them"))?;
        Ok(self.entries.remove(i))
    }

    /// The entry whose token `presented` is. Every entry's hash is compared
    /// in constant time, whichever matches: the time taken tells nothing
    /// about which hash, or how much of one, matched.
    pub fn verify(&self, presented: &str) -> Option<&TokenEntry> {
        let wanted = digest(presented);
        let mut found = None;
        for e in &self.entries {
            if bool::from(e.sha256.ct_eq(&wanted)) {
                found = Some(e);
            }
        }
        found
    }

    pub fn entries(&self) -> &[TokenEntry] {
        &self.entries
    }

    /// Names in `self` that `newer` no longer has (revoked by editing the file).
    pub fn removed_in<'a>(&'a self, newer: &TokenTable) -> Vec<&'a str> {
        self.entries
            .iter()
            .filter(|e| {
                !newer
                    .entries
                    .iter()
                    .any(|n| n.name == e.name && n.sha256 == e.sha256)
            })
            .map(|e| e.name.as_str())
            .collect()
    }
}

/// A token name: 1 to 64 of `A-Z a-z 0-9 . _ -`, so it reads well in
/// identities (`token:NAME`), logs and metrics.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a token name: use 1 to 64 letters, digits, '.', '_' or '-'"
        ))
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    let s = s.as_bytes();
    if s.len() != 64 {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in s.chunks(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

/// `now` as RFC 3339 in UTC, to the second (`2026-12-01T16:00:00Z`).
pub fn rfc3339(now: std::time::SystemTime) -> String {
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_token_verifies_and_the_file_holds_only_its_hash() {
        let dir = std::env::temp_dir().join(format!("evo-tokens-{}", std::process::id()));
        let path = dir.join("sub").join("tokens.json");
        let mut table = TokenTable::default();
        let token = table
            .create(
                "ci",
                Some("readonly".into()),
                None,
                "2026-12-01T00:00:00Z".into(),
            )
            .unwrap();
        assert!(token.starts_with(TOKEN_PREFIX) && token.len() == 4 + 64);
        assert_eq!(table.verify(&token).map(|e| e.name.as_str()), Some("ci"));
        assert!(table.verify("evo_wrong").is_none());
        assert!(table.verify(&token[..token.len() - 1]).is_none());
        table.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&token[4..]), "{text}");
        assert!(text.contains(&hex(&digest(&token))));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let back = TokenTable::load(&path).unwrap();
        assert_eq!(back, table);
        assert_eq!(
            back.verify(&token).unwrap().role.as_deref(),
            Some("readonly")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_are_checked_unique_and_revocable() {
        let mut table = TokenTable::default();
        let t = table.create("a", None, None, String::new()).unwrap();
        assert!(
            table
                .create("a", None, None, String::new())
                .unwrap_err()
                .contains("exists")
        );
        assert!(
            table
                .create("no spaces", None, None, String::new())
                .is_err()
        );
        assert!(table.create("", None, None, String::new()).is_err());
        let before = table.clone();
        table.revoke("a").unwrap();
        assert!(table.verify(&t).is_none());
        assert_eq!(before.removed_in(&table), ["a"]);
        assert!(
            table
                .revoke("a")
                .unwrap_err()
                .contains("no token named 'a'")
        );
    }

    #[test]
    fn a_broken_file_is_an_error_naming_what_to_do() {
        assert!(
            TokenTable::parse(b"{")
                .unwrap_err()
                .contains("not a tokens file")
        );
        let wrong = br#"{"version": 1, "tokens": [{"name": "x", "sha256": "zz"}]}"#;
        assert!(
            TokenTable::parse(wrong)
                .unwrap_err()
                .contains("64 hex digits")
        );
        assert!(TokenTable::parse(br#"{"version": 9, "tokens": []}"#).is_err());
    }

    #[test]
    fn times_read_as_rfc3339() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_764_547_200 + 3_661);
        assert_eq!(rfc3339(t), "2025-12-01T01:01:01Z");
        assert_eq!(rfc3339(std::time::UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }
}
