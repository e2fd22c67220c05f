//! Other programs' JSON config files as evoctl edits them: an MCP client's
//! (`evoctl setup CLIENT`) or evo's own (`evoctl import FILE`), and what
//! evoctl recognises in them.
//!
//! Edits go through [`JsonFile`], which never overwrites a file it could not
//! parse, keeps the previous content as `FILE.bak`, changes only the text of
//! the entries it sets (every other line stays byte for byte: see
//! [`crate::jsonedit`]), and replaces the file atomically so a client reading
//! it meanwhile sees the old file or the new one, never half of one.

use std::ffi::OsString;
use std::fs::{self, File, Permissions};
use std::io::{self, Write};
use std::path::{self, Path, PathBuf};
use std::process;

use serde_json::{Map, Value};

use crate::jsonedit::{Document, NotAnObject, ParseError};

/// Whether two paths name one file (either may not exist yet).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| {
        fs::canonicalize(p)
            .or_else(|_| path::absolute(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    canonical(a) == canonical(b)
}

/// Does this server entry start evo's own shim? In evo's config it would make
/// evod spawn a shim that connects back to evod; in a client's config next
/// to another one, the client would see every tool twice.
pub fn runs_evo_shim(entry: &Value) -> bool {
    let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
    let args = entry
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    // Some clients accept "evoctl shim" as one command string.
    let mut words = command.split_whitespace().chain(args);
    let Some(program) = words.next() else {
        return false;
    };
    let base = program.rsplit(['/', '\\']).next().unwrap_or(program);
    let base = base
        .strip_suffix(".exe")
        .or_else(|| base.strip_suffix(".EXE"))
        .unwrap_or(base);
    base == "evoctl" && words.any(|w| w == "shim")
}

/// A JSON config file as evoctl edits it: where it lives, the bytes it was
/// read from (for the backup) and the document being edited.
pub struct JsonFile {
    /// The file to write. A symlinked config (dotfile managers do that) is
    /// edited where it lives, so the link survives the atomic rename.
    pub path: PathBuf,
    /// `None` when the file does not exist yet.
    original: Option<Vec<u8>>,
    doc: Document,
}

impl JsonFile {
    /// Reads `path` (a missing or blank file is an empty object). Refuses a
    /// file that is not a JSON object, saying where and why, and `hint` (what
    /// the person can do instead).
    pub fn load(path: &Path, hint: &str) -> Result<JsonFile, String> {
        let is_link = path.symlink_metadata().is_ok_and(|m| m.is_symlink());
        let path = match is_link {
            true => fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            false => path.to_path_buf(),
        };
        let original = match fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        JsonFile::parse(path, original, hint)
    }

    /// [`JsonFile::load`] for bytes already read (`None`: no such file).
    pub fn parse(path: PathBuf, original: Option<Vec<u8>>, hint: &str) -> Result<JsonFile, String> {
        let doc = match Document::parse(original.as_deref().unwrap_or_default()) {
            Ok(doc) => doc,
            Err(ParseError::Invalid { error, on_comment }) => {
                let note = if on_comment {
                    " (a comment: evoctl writes plain JSON and would lose it)"
                } else {
                    ""
                };
                return Err(format!(
                    "{} is not valid JSON: {error}{note}. evoctl left it untouched: fix it and run this again, or {hint}",
                    path.display(),
                ));
            }
            Err(ParseError::NotAnObject { found }) => {
                return Err(format!(
                    "{}: the top level is {found}, not an object, so it is not an MCP config; evoctl left it untouched: {hint}",
                    path.display(),
                ));
            }
        };
        Ok(JsonFile {
            path,
            original,
            doc,
        })
    }

    /// The servers under the top-level `key`, if the file has that key.
    /// Refuses when `key` holds something other than an object: replacing it
    /// would lose the person's data.
    pub fn servers(&self, key: &str, hint: &str) -> Result<Option<&Map<String, Value>>, String> {
        self.doc
            .object(key)
            .map_err(|e| self.not_servers(key, e, hint))
    }

    /// The object under the top-level `key` (`registry`), if the file has one.
    pub fn section(&self, key: &str) -> Result<Option<&Map<String, Value>>, String> {
        self.doc.object(key).map_err(|NotAnObject { found }| {
            format!(
                "{}: \"{key}\" is {found}, not an object; fix it and run this again",
                self.path.display()
            )
        })
    }

    /// Sets server `id` under the top-level `key` (created if missing). An
    /// existing entry is replaced where it stands.
    pub fn set_server(
        &mut self,
        key: &str,
        id: &str,
        entry: Value,
        hint: &str,
    ) -> Result<(), String> {
        self.doc
            .set(key, id, entry)
            .map_err(|e| self.not_servers(key, e, hint))
    }

    /// Removes server `id` from under the top-level `key`, if it is there.
    pub fn remove_server(&mut self, key: &str, id: &str, hint: &str) -> Result<(), String> {
        self.doc
            .remove(key, id)
            .map(|_| ())
            .map_err(|e| self.not_servers(key, e, hint))
    }

    fn not_servers(&self, key: &str, NotAnObject { found }: NotAnObject, hint: &str) -> String {
        format!(
            "{}: \"{key}\" is {found}, not an object of servers by id; evoctl left the file untouched: fix it, or {hint}",
            self.path.display(),
        )
    }

    /// Writes the document back: the previous content to `FILE.bak` first,
    /// then the new content atomically. Returns the backup's path (told with
    /// [`previous_version`]).
    pub fn save(&self) -> Result<Option<PathBuf>, String> {
        let bytes = self.doc.to_bytes();
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let permissions = fs::metadata(&self.path).ok().map(|m| m.permissions());
        let backup = match &self.original {
            Some(old) => {
                let mut name = self.path.file_name().unwrap_or_default().to_os_string();
                name.push(".bak");
                let backup = self.path.with_file_name(name);
                // The backup holds whatever secrets the file did: same mode.
                write_atomic(&backup, old, permissions.clone()).map_err(|e| {
                    format!(
                        "cannot keep a backup at {} ({e}); {} is unchanged",
                        backup.display(),
                        self.path.display()
                    )
                })?;
                Some(backup)
            }
            None => None,
        };
        write_atomic(&self.path, &bytes, permissions).map_err(|e| {
            format!(
                "cannot write {} ({e}); it is unchanged",
                self.path.display()
            )
        })?;
        Ok(backup)
    }
}

/// Replaces `path` with `bytes` so a reader sees the old file or the new one:
/// a temp file beside it, fsync, rename. The new file gets `permissions`
/// (the old file's), else 0600 on Unix: client configs end up holding tokens.
fn write_atomic(path: &Path, bytes: &[u8], permissions: Option<Permissions>) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp_name = OsString::from(".");
    tmp_name.push(path.file_name().unwrap_or_default());
    tmp_name.push(format!(".evoctl-{}.tmp", process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut file = File::create(&tmp)?;
        match permissions {
            Some(p) => file.set_permissions(p)?,
            None => {
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    file.set_permissions(Permissions::from_mode(0o600))?;
                }
            }
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    // Make the rename itself durable; not every filesystem can sync a
    // directory, and the file is already complete either way.
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// What follows a saved file's name in evoctl's output: where its previous
/// version was kept, if it had one.
pub fn previous_version(backup: Option<&Path>) -> String {
    backup
        .map(|b| format!(" (previous version: {})", b.display()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn evo_shim_entries_are_recognised() {
        let cases = [
            (json!({"command": "evoctl", "args": ["shim"]}), true),
            (
                json!({"command": "/usr/local/bin/evoctl", "args": ["--socket", "/s", "shim", "--mode", "legacy"]}),
                true,
            ),
            (json!({"command": "evoctl shim"}), true),
            (
                json!({"command": r"C:\bin\evoctl.exe", "args": ["shim"]}),
                true,
            ),
            (json!({"command": "evoctl", "args": ["status"]}), false),
            (json!({"command": "npx", "args": ["shim"]}), false),
            (json!({"url": "https://x"}), false),
        ];
        for (entry, want) in cases {
            assert_eq!(runs_evo_shim(&entry), want, "{entry}");
        }
    }

    #[test]
    fn comments_get_a_hint() {
        let text = b"{\n  // mine\n  \"a\": 1\n}";
        let path = PathBuf::from("test.json");
        let e = JsonFile::parse(path, Some(text.to_vec()), "")
            .err()
            .unwrap();
        assert!(e.contains("comment"), "{e}");
    }

    /// Refusals name the file, what is wrong in it and what to do instead.
    #[test]
    fn refusals_name_the_file_and_the_key() {
        let load = |text: &str| JsonFile::parse("c.json".into(), Some(text.into()), "do X");
        assert_eq!(
            load("[1]").err().unwrap(),
            "c.json: the top level is an array, not an object, so it is not an MCP config; evoctl left it untouched: do X"
        );
        let mut file = load("{\"mcpServers\": [\"fs\"]}").unwrap();
        let refusal = "c.json: \"mcpServers\" is an array, not an object of servers by id; evoctl left the file untouched: fix it, or do X";
        assert_eq!(file.servers("mcpServers", "do X").err().unwrap(), refusal);
        assert_eq!(
            file.set_server("mcpServers", "evo", json!({}), "do X")
                .err()
                .unwrap(),
            refusal
        );
        assert!(
            load("{")
                .err()
                .unwrap()
                .starts_with("c.json is not valid JSON: ")
        );
    }
}
