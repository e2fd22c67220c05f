//! What a config says back: the warnings about what was ignored (each with its file and line,
//! found as sections are read), the unknown-key check with its "did you mean", and a server
//! entry's error. A leaf: every part of the loader reports through it.

use std::fmt;
use std::path::{Path, PathBuf};

use evo_proto::json_kind;
use serde_json::{Map, Value};

use super::key_lines::KeyLines;

/// The env file as `load` read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvFileRead {
    pub path: PathBuf,
    /// Whether the file was there (and readable).
    pub found: bool,
    /// The variables it set, by name.
    pub names: Vec<String>,
}

/// Something in a config (or its env file) that was ignored, and where.
///
/// Displays as `/home/u/.config/evo/mcp.config.json:7: server 'fs': unknown key 'timeout'
/// ignored; did you mean 'timeout_s'?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub file: PathBuf,
    /// 1-based; `None` when the place cannot be told.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// Warnings as they are found, each placed by its path of keys.
pub(super) struct Warnings<'a> {
    file: &'a Path,
    keys: &'a KeyLines,
    pub(super) list: Vec<ConfigWarning>,
}

impl<'a> Warnings<'a> {
    pub(super) fn new(file: &'a Path, keys: &'a KeyLines) -> Warnings<'a> {
        Warnings {
            file,
            keys,
            list: Vec::new(),
        }
    }

    /// A warning about the key at `at` (its line, when the text has it).
    pub(super) fn push(&mut self, at: &[&str], message: String) {
        self.list.push(ConfigWarning {
            file: self.file.to_owned(),
            line: self.keys.line(at),
            message,
        });
    }
}

/// Warns about each key of `object` (at path `at`) that is not in `known`, naming the known
/// key it is probably a misspelling of. `label` says where for the message (`discovery`,
/// `server 'fs'`; empty at the top level).
pub(super) fn warn_unknown_keys(
    object: &Map<String, Value>,
    known: &[&str],
    at: &[&str],
    label: &str,
    warnings: &mut Warnings<'_>,
) {
    for key in object.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let mut message = if label.is_empty() {
            format!("unknown top-level key '{key}' ignored")
        } else {
            format!("{label}: unknown key '{key}' ignored")
        };
        if let Some(near) = near_key(key, known) {
            message.push_str(&format!("; did you mean '{near}'?"));
        }
        let mut path = at.to_vec();
        path.push(key);
        warnings.push(&path, message);
    }
}

/// The known key `key` is probably a misspelling of: the same but for case, `-`/`_` or a unit
/// suffix (`timeout` for `timeout_s`), or within a small edit distance (one edit for short
/// keys, two from six characters).
fn near_key<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let fold = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let wanted = fold(key);
    // Other tools' words for the same thing.
    const SYNONYMS: &[(&str, &str)] = &[
        ("cmd", "command"),
        ("arguments", "args"),
        ("environment", "env"),
        ("endpoint", "url"),
    ];
    if let Some(&(_, word)) = SYNONYMS
        .iter()
        .find(|(other, word)| *other == wanted && known.contains(word))
    {
        return known.iter().copied().find(|k| *k == word);
    }
    let limit = if wanted.chars().count() >= 6 { 2 } else { 1 };
    known
        .iter()
        .filter(|k| !k.starts_with('$'))
        .map(|k| {
            let folded = fold(k);
            let distance = if folded == wanted
                || folded.strip_suffix("_s") == Some(&wanted)
                || folded.strip_suffix("_hours") == Some(&wanted)
                || folded.strip_suffix("_bytes") == Some(&wanted)
            {
                0
            } else {
                strsim::damerau_levenshtein(&wanted, &folded)
            };
            (distance, *k)
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

/// Checks that a top-level section is an object and warns about its unknown keys.
pub(super) fn section<'a>(
    name: &str,
    value: &'a Value,
    known: &[&str],
    warnings: &mut Warnings<'_>,
) -> Result<&'a Map<String, Value>, String> {
    let Value::Object(object) = value else {
        return Err(format!(
            "'{name}' must be an object, found {}",
            json_kind(value)
        ));
    };
    warn_unknown_keys(object, known, &[name], name, warnings);
    Ok(object)
}

/// Why one server was skipped. The other servers still load.
///
/// Displays as `server 'gh': headers.Authorization: environment variable GITHUB_TOKEN is not
/// set; set it or remove the reference`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfigError {
    /// The server id.
    pub server: String,
    /// Where in the server's entry, e.g. `args[2]`, `env.LOG`, `headers.Authorization`; empty
    /// when the entry as a whole is wrong.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ServerConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "server '{}': {}", self.server, self.message)
        } else {
            write!(
                f,
                "server '{}': {}: {}",
                self.server, self.key, self.message
            )
        }
    }
}

impl std::error::Error for ServerConfigError {}

#[cfg(test)]
mod tests {
    use super::near_key;
    use crate::config::keys::{CACHE_KEYS, SERVER_KEYS, TOP_LEVEL_KEYS};

    #[test]
    fn near_keys() {
        #[rustfmt::skip]
        let cases = [
            ("timeout", Some("timeout_s")),
            ("idle_timeout", Some("idle_timeout_s")),
            ("TIMEOUT_S", Some("timeout_s")),
            ("comand", Some("command")),
            ("cmd", Some("command")),
            ("arguments", Some("args")),
            ("environment", Some("env")),
            ("header", Some("headers")),
            ("aliasses", Some("aliases")),
            ("foo", None),
            ("schema", None),
            ("descr", None),
        ];
        for (key, expected) in cases {
            assert_eq!(near_key(key, SERVER_KEYS), expected, "{key}");
        }
        assert_eq!(near_key("mcp_servers", TOP_LEVEL_KEYS), Some("mcpServers"));
        assert_eq!(near_key("envfile", TOP_LEVEL_KEYS), Some("env_file"));
        assert_eq!(near_key("max_age", CACHE_KEYS), Some("max_age_hours"));
    }
}
