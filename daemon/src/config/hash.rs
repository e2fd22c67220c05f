//! A server's launch identity as a digest ([`ConfigHash`]), and the hex text of digests.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// SHA-256 of a server's launch identity: (id, command, args, env, cwd, url, headers) after
/// `${VAR}` expansion, in a canonical encoding.
///
/// The catalog cache stores it to tell whether a cached tool list still belongs to the
/// configured server; hot reload restarts a child whose hash changed. It is a digest, so it may
/// be shown and stored where env and header values must not be. Serialises as a hex string.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigHash(pub [u8; 32]);

impl ConfigHash {
    /// The first 12 hex digits, for tables and logs.
    pub fn short(&self) -> String {
        hex(&self.0[..6])
    }

    pub(super) fn of(launch: &Launch<'_>) -> ConfigHash {
        // A JSON array fixes the field order; BTreeMaps serialise with sorted keys. The leading
        // tag lets a future encoding change every hash on purpose.
        let canonical = (
            "evo-config-hash-v1",
            launch.id,
            launch.command,
            launch.args,
            launch.env,
            launch.cwd,
            launch.url,
            launch.headers,
        );
        // What only remote servers have (the SSE transport, OAuth settings)
        // is appended only when set, so other entries keep their hashes.
        let bytes = match &launch.extra {
            None => serde_json::to_vec(&canonical),
            Some(extra) => serde_json::to_vec(&(canonical, extra)),
        }
        .expect("strings and string-keyed maps always serialise to JSON");
        ConfigHash(Sha256::digest(&bytes).into())
    }
}

impl fmt::Display for ConfigHash {
    /// All 64 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl fmt::Debug for ConfigHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConfigHash({self})")
    }
}

/// A string that is not 64 hex digits, where a [`ConfigHash`] was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid config hash '{0}': expected 64 hex digits")]
pub struct InvalidConfigHash(pub String);

impl FromStr for ConfigHash {
    type Err = InvalidConfigHash;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidConfigHash(s.to_owned());
        let digits = s.as_bytes();
        if digits.len() != 64 {
            return Err(invalid());
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let high = hex_value(pair[0]).ok_or_else(invalid)?;
            let low = hex_value(pair[1]).ok_or_else(invalid)?;
            *byte = (high << 4) | low;
        }
        Ok(ConfigHash(bytes))
    }
}

impl Serialize for ConfigHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ConfigHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Lowercase hex digits of `bytes`.
pub(super) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// The launch identity of a server after expansion: exactly what [`ConfigHash`] covers.
pub(super) struct Launch<'a> {
    pub(super) id: &'a str,
    pub(super) command: Option<&'a str>,
    pub(super) args: &'a [String],
    pub(super) env: &'a BTreeMap<String, String>,
    pub(super) cwd: Option<&'a str>,
    pub(super) url: Option<&'a str>,
    pub(super) headers: &'a BTreeMap<String, String>,
    /// The SSE transport and the OAuth settings' binding, when set.
    pub(super) extra: Option<String>,
}

/// 12 hex digits of a SHA-256: a short, stable name for a text (a token file's server id).
pub fn short_hash(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes)[..6])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{one_server, parse_ok};

    fn hash_of(body: &str) -> ConfigHash {
        let config = one_server(body);
        match config.servers.first() {
            Some(spec) => spec.hash,
            None => panic!("{body} did not load: {:?}", config.failed),
        }
    }

    #[test]
    fn config_hash_covers_launch_identity_only() {
        let base = r#"{"command": "c", "args": ["a"], "env": {"K": "v", "J": "w"}, "cwd": "/d"}"#;
        #[rustfmt::skip]
        let same = [
            base,
            // Key order in the file does not matter.
            r#"{"cwd": "/d", "env": {"J": "w", "K": "v"}, "args": ["a"], "command": "c"}"#,
            // Expansion happens before hashing.
            r#"{"command": "c", "args": ["a"], "env": {"K": "v", "J": "w"}, "cwd": "${NOPE:-/d}"}"#,
            // Settings that do not change the child.
            r#"{"command": "c", "args": ["a"], "env": {"K": "v", "J": "w"}, "cwd": "/d",
                "prefix": "p", "timeout_s": 5, "domain": "d", "hot": ["t"], "idle_timeout_s": 9}"#,
        ];
        #[rustfmt::skip]
        let different = [
            r#"{"command": "c2", "args": ["a"], "env": {"K": "v", "J": "w"}, "cwd": "/d"}"#,
            r#"{"command": "c", "args": ["a", "b"], "env": {"K": "v", "J": "w"}, "cwd": "/d"}"#,
            r#"{"command": "c", "args": ["a"], "env": {"K": "v2", "J": "w"}, "cwd": "/d"}"#,
            r#"{"command": "c", "args": ["a"], "env": {"K": "v"}, "cwd": "/d"}"#,
            r#"{"command": "c", "args": ["a"], "env": {"K": "v", "J": "w"}}"#,
        ];
        let expected = hash_of(base);
        for body in same {
            assert_eq!(hash_of(body), expected, "{body}");
        }
        for body in different {
            assert_ne!(hash_of(body), expected, "{body}");
        }
        let header = |value: &str| {
            hash_of(&format!(
                r#"{{"url": "https://h", "headers": {{"A": "{value}"}}}}"#
            ))
        };
        assert_ne!(header("one"), header("two"));

        // The id is part of the identity.
        let config = parse_ok(r#"{"mcpServers": {"a": {"command": "c"}, "b": {"command": "c"}}}"#);
        assert_ne!(config.servers[0].hash, config.servers[1].hash);
    }

    #[test]
    fn config_hash_text_forms() {
        let hash = hash_of(r#"{"command": "c"}"#);
        let full = hash.to_string();
        assert_eq!(full.len(), 64);
        assert!(
            full.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_eq!(hash.short(), full[..12]);
        assert_eq!(full.parse::<ConfigHash>().ok(), Some(hash));
        assert_eq!(full.to_uppercase().parse::<ConfigHash>().ok(), Some(hash));
        assert!("abc".parse::<ConfigHash>().is_err());
        assert!(format!("{}g", &full[..63]).parse::<ConfigHash>().is_err());
        let json = serde_json::to_string(&hash).unwrap_or_default();
        assert_eq!(json, format!("\"{full}\""));
        assert_eq!(serde_json::from_str::<ConfigHash>(&json).ok(), Some(hash));
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(short_hash(b"fs"), hex(&Sha256::digest(b"fs"))[..12]);
    }
}
