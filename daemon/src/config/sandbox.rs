//! A stdio server's `sandbox` entry ([`SandboxSpec`]) and the top-level `sandbox.default`
//! every stdio server without its own entry takes.
//!
//! Both are `"off"` or `{"read": [paths], "write": [paths], "network": bool}`; paths take `~`
//! and `${VAR}` and must be absolute once expanded. Nothing here touches the file system: a
//! path that does not exist fails the server when it starts (see `child/sandbox.rs`), where
//! the person sees it in `evoctl status`, not here.
//!
//! `sandbox.default` is read once at the top and applied to each stdio server as if written
//! in its entry, so a mistake in it fails each server that takes it (never starts them
//! unconfined) and leaves the others alone. An entry's own `sandbox` replaces the default
//! whole (no merging of lists: what a server may touch reads in one place).

use std::path::PathBuf;

use serde_json::Value;

use super::readers::{TypeError, boolean, describe, string_list};

/// What a confined server's process tree may touch, paths expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// Readable (and executable), with everything below them.
    pub read: Vec<PathBuf>,
    /// Readable and writable, with everything below them.
    pub write: Vec<PathBuf>,
    /// `false`: no network at all, not even loopback.
    pub network: bool,
}

impl SandboxSpec {
    /// The entry's identity for the server's config hash: a changed sandbox restarts it.
    pub(super) fn hash_text(&self) -> String {
        let list = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join("\u{0}")
        };
        format!(
            "sandbox;read={};write={};network={}",
            list(&self.read),
            list(&self.write),
            self.network
        )
    }
}

/// The keys of a sandbox object.
const SANDBOX_ENTRY_KEYS: &[&str] = &["read", "write", "network"];

/// Reads a `sandbox` value (a server's own, or the default): `Ok(None)` for `"off"`.
/// `expand` expands `${VAR}` in one path (its first argument says where, for errors and the
/// note on missing variables); `home` expands `~`. Errors are (key below `sandbox`, message).
pub(super) fn parse_sandbox(
    value: &Value,
    expand: &dyn Fn(&str, &str) -> Result<String, String>,
    home: Option<&str>,
) -> Result<Option<SandboxSpec>, (String, String)> {
    let object = match value {
        Value::String(s) if s == "off" => return Ok(None),
        Value::Object(object) => object,
        other => {
            return Err((
                String::new(),
                format!(
                    "expected \"off\" or an object with \"read\", \"write\" and \"network\", \
                     found {}",
                    describe(other)
                ),
            ));
        }
    };
    if let Some(unknown) = object
        .keys()
        .find(|key| !SANDBOX_ENTRY_KEYS.contains(&key.as_str()))
    {
        // A misspelt key would leave the server less confined than meant: fail, don't warn.
        return Err((
            format!(".{unknown}"),
            "unknown key; a sandbox has \"read\", \"write\" and \"network\"".to_owned(),
        ));
    }
    let paths = |key: &str| -> Result<Vec<PathBuf>, (String, String)> {
        let Some(value) = object.get(key).filter(|v| !v.is_null()) else {
            return Ok(Vec::new());
        };
        let raw = string_list(value)
            .map_err(|err: TypeError| (format!(".{key}{}", err.path), err.message))?;
        raw.iter()
            .enumerate()
            .map(|(index, raw)| {
                let at = format!(".{key}[{index}]");
                let expanded = expand(&at, raw).map_err(|message| (at.clone(), message))?;
                sandbox_path(&expanded, home).map_err(|message| (at, message))
            })
            .collect()
    };
    let read = paths("read")?;
    let write = paths("write")?;
    let network = match object.get("network").filter(|v| !v.is_null()) {
        None => false,
        Some(value) => boolean(value).map_err(|err| (".network".to_owned(), err.message))?,
    };
    Ok(Some(SandboxSpec {
        read,
        write,
        network,
    }))
}

/// One expanded path: `~` and `~/…` from `home`; absolute, else an error saying how to write it.
fn sandbox_path(path: &str, home: Option<&str>) -> Result<PathBuf, String> {
    let home_relative = if path == "~" {
        Some("")
    } else {
        path.strip_prefix("~/")
    };
    let full = match home_relative {
        Some(rest) => {
            let home = home.filter(|h| !h.is_empty()).ok_or_else(|| {
                "starts with ~ but HOME is not set in evod's environment; write the path in \
                 full"
                    .to_owned()
            })?;
            let home = PathBuf::from(home);
            if rest.is_empty() {
                home
            } else {
                home.join(rest)
            }
        }
        None => PathBuf::from(path),
    };
    if path.trim().is_empty() {
        return Err("is empty; give a path, or leave it out".to_owned());
    }
    if !full.is_absolute() {
        return Err(format!(
            "'{path}' is not an absolute path; write it from / or from ~"
        ));
    }
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<SandboxSpec>, (String, String)> {
        let value: Value = serde_json::from_str(text).expect("test JSON");
        let expand = |_: &str, raw: &str| -> Result<String, String> {
            match raw.replace("${DATA}", "/srv/data") {
                s if s.contains("${NOPE}") => Err("NOPE is not set".to_owned()),
                s => Ok(s),
            }
        };
        parse_sandbox(&value, &expand, Some("/home/u"))
    }

    #[test]
    fn paths_expand_home_and_variables() {
        let spec = parse(r#"{"read": ["~", "~/notes", "${DATA}/in"], "write": ["/tmp/out"]}"#)
            .expect("valid")
            .expect("on");
        assert_eq!(
            spec.read,
            [
                PathBuf::from("/home/u"),
                PathBuf::from("/home/u/notes"),
                PathBuf::from("/srv/data/in")
            ]
        );
        assert_eq!(spec.write, [PathBuf::from("/tmp/out")]);
        assert!(!spec.network, "network is off unless turned on");
        assert_eq!(parse(r#""off""#), Ok(None));
        let open = parse(r#"{"network": true}"#).expect("valid").expect("on");
        assert!(open.network && open.read.is_empty() && open.write.is_empty());
    }

    #[test]
    fn a_bad_sandbox_names_its_key() {
        #[rustfmt::skip]
        let cases = [
            (r#""on""#, "", "expected \"off\" or an object"),
            (r#"true"#, "", "expected \"off\" or an object"),
            (r#"{"reads": []}"#, ".reads", "unknown key"),
            (r#"{"read": "/x"}"#, ".read", "array of strings"),
            (r#"{"read": ["/x", 3]}"#, ".read[1]", "expected a string"),
            (r#"{"write": ["data"]}"#, ".write[0]", "not an absolute path"),
            (r#"{"write": [""]}"#, ".write[0]", "is empty"),
            (r#"{"read": ["${NOPE}/x"]}"#, ".read[0]", "NOPE is not set"),
            (r#"{"network": "no"}"#, ".network", "true or false"),
        ];
        for (text, key, words) in cases {
            let (at, message) = parse(text).expect_err(text);
            assert_eq!(at, key, "{text}");
            assert!(message.contains(words), "{text}: {message}");
        }
        let value = serde_json::json!({"read": ["~/x"]});
        let no_home = parse_sandbox(&value, &|_, raw| Ok(raw.to_owned()), None);
        assert!(no_home.is_err_and(|(_, m)| m.contains("HOME is not set")));
    }
}
