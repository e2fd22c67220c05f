//! `evoctl setup CLIENT` and `evoctl import FILE`: the two edits evoctl makes
//! to JSON config files that belong to someone else (an MCP client, or the
//! person who wrote evo's config).
//!
//! Both go through [`JsonFile`], which never overwrites a file it could not
//! parse, keeps the previous content as `FILE.bak`, changes only the text of
//! the entries it sets (every other line stays byte for byte: see
//! [`crate::jsonedit`]), and replaces the file atomically so a client reading
//! it meanwhile sees the old file or the new one, never half of one.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::import::{EvoConfig, Offer, Skipped, print_disabled};
use crate::jsonedit::{Document, NotAnObject, ParseError};
use crate::output::pretty;
use crate::{config_home, home_dir};

/// The MCP clients `evoctl setup` knows the config file of.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// Claude Desktop's claude_desktop_config.json
    ClaudeDesktop,
    /// Claude Code's user scope (~/.claude.json)
    ClaudeCode,
    /// Cursor's global ~/.cursor/mcp.json
    Cursor,
    /// VS Code's user mcp.json
    Vscode,
}

impl Client {
    fn id(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
        }
    }

    /// The top-level object that holds the client's servers by id.
    fn servers_key(self) -> &'static str {
        match self {
            Client::Vscode => "servers",
            _ => "mcpServers",
        }
    }

    /// The entry that starts evo's shim, in the client's dialect; with the
    /// `--socket` evoctl was given, when there is one.
    fn entry(self, evoctl: &str, socket: Option<&Path>) -> Value {
        let mut args = vec![Value::from("shim")];
        if let Some(socket) = socket {
            args.push("--socket".into());
            args.push(socket.to_string_lossy().into());
        }
        match self {
            Client::Vscode => json!({"type": "stdio", "command": evoctl, "args": args}),
            _ => json!({"command": evoctl, "args": args}),
        }
    }

    fn default_path(self) -> Result<PathBuf, String> {
        Ok(match self {
            Client::ClaudeDesktop => app_config_dir()?
                .join("Claude")
                .join("claude_desktop_config.json"),
            Client::Vscode => app_config_dir()?.join("Code").join("User").join("mcp.json"),
            Client::Cursor => home_dir()?.join(".cursor").join("mcp.json"),
            Client::ClaudeCode => home_dir()?.join(".claude.json"),
        })
    }

    /// What the person does next for the client to connect.
    fn next_step(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "restart Claude Desktop to connect it to evo",
            Client::ClaudeCode => {
                "new Claude Code sessions connect to evo (`claude mcp list` shows it)"
            }
            Client::Cursor => "restart Cursor (or toggle evo in its MCP settings) to connect it",
            Client::Vscode => "start evo from VS Code's `MCP: List Servers` command",
        }
    }
}

/// Where Electron apps (Claude Desktop, VS Code) keep their settings.
fn app_config_dir() -> Result<PathBuf, String> {
    if cfg!(target_os = "macos") {
        Ok(home_dir()?.join("Library").join("Application Support"))
    } else if cfg!(windows) {
        std::env::var_os("APPDATA")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| "APPDATA is not set; pass the client's config with --file".into())
    } else {
        config_home()
    }
}

/// The absolute path of this evoctl, for the `command` of a client entry:
/// clients do not all search PATH, and GUI apps rarely share the shell's.
fn this_evoctl() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| {
        format!("cannot tell where this evoctl is ({e}); run `evoctl setup --print` and fill in its path by hand")
    })?;
    exe.to_str().map(str::to_string).ok_or_else(|| {
        format!(
            "this evoctl's path ({}) is not valid UTF-8, which JSON cannot hold; move evoctl to a plain path",
            exe.display()
        )
    })
}

/// What `setup` did to the `evo` entry.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum SetupAction {
    Added,
    Updated,
    Unchanged,
}

/// What `evoctl setup` is asked to do besides writing the evo entry.
pub struct SetupOptions<'a> {
    /// Show the entry; write nothing.
    pub print: bool,
    /// The client's config file instead of its usual one.
    pub file: Option<&'a Path>,
    /// The socket to write into the entry (an explicit `--socket`).
    pub socket: Option<&'a Path>,
    /// `--move`: the client's own servers go to evo's config.
    pub move_servers: bool,
    /// evo's config for `--move` instead of its usual one.
    pub config: Option<&'a Path>,
    /// The socket a running evod listens on, to reload it after `--move`.
    pub daemon: &'a Path,
    pub json: bool,
}

/// `evoctl setup CLIENT [--print] [--file PATH] [--move [--config PATH]]`.
pub fn setup(client: Client, opts: SetupOptions<'_>) -> Result<(), String> {
    let json = opts.json;
    let path = match opts.file {
        Some(p) => p.to_path_buf(),
        None => client.default_path()?,
    };
    let entry = client.entry(&this_evoctl()?, opts.socket);
    let key = client.servers_key();
    let snippet = json!({ key: { "evo": entry } });
    if opts.print {
        if json {
            let report =
                json!({"client": client.id(), "path": path, "snippet": snippet, "written": false});
            println!("{}", pretty(&report));
        } else {
            println!("# add to {}:", path.display());
            println!("{}", pretty(&snippet));
        }
        return Ok(());
    }

    let by_hand = format!(
        "add evo by hand; it goes under \"{key}\":\n{}",
        pretty(&snippet)
    );
    let mut file = JsonFile::load(&path, &by_hand)?;
    let servers: Vec<(String, Value)> = file
        .servers(key, &by_hand)?
        .into_iter()
        .flatten()
        .map(|(id, v)| (id.clone(), v.clone()))
        .collect();
    let doubles: Vec<String> = servers
        .iter()
        .filter(|(id, v)| id.as_str() != "evo" && runs_evo_shim(v))
        .map(|(id, _)| id.clone())
        .collect();
    let action = match servers.iter().find(|(id, _)| id == "evo") {
        Some((_, old)) if *old == entry => SetupAction::Unchanged,
        Some(_) => SetupAction::Updated,
        None => SetupAction::Added,
    };
    let moving = match opts.move_servers {
        true => Some(move_servers(&file, &servers, opts.config)?),
        false => None,
    };
    // evo's config first: a server is in both files for a moment, never in
    // neither. A second run finds it in evo's config, the same, and finishes
    // the move.
    let evo_backup = match &moving {
        Some(m) => m.evo.save()?,
        None => None,
    };
    let moved: &[String] = moving.as_ref().map_or(&[], |m| &m.moved);
    for id in moved {
        file.remove_server(key, id, &by_hand)?;
    }
    if action != SetupAction::Unchanged {
        file.set_server(key, "evo", entry.clone(), &by_hand)?;
    }
    let backup = match action != SetupAction::Unchanged || !moved.is_empty() {
        true => file.save()?,
        false => None,
    };
    let pickup = moving
        .as_ref()
        .filter(|m| !m.evo.added.is_empty())
        .map(|m| crate::import::pick_up(opts.daemon, &m.evo));
    let path = &file.path;

    if json {
        let mut report = json!({
            "client": client.id(),
            "path": path,
            "action": action,
            "entry": entry,
            "backup": backup,
            "also_evo": doubles,
        });
        if let Some(m) = &moving {
            report["move"] = json!({
                "config": m.evo.path(),
                "moved": m.moved,
                "kept": m.kept,
                "added": m.evo.added,
                "disabled": m.evo.disabled,
                "backup": evo_backup,
                "evod": pickup,
            });
        }
        println!("{}", pretty(&report));
        return Ok(());
    }
    let kept = backup
        .as_ref()
        .map(|b| format!(" (previous version: {})", b.display()))
        .unwrap_or_default();
    if let Some(m) = &moving {
        print_move(m, path, evo_backup.as_deref());
    }
    match action {
        SetupAction::Unchanged if moved.is_empty() => {
            println!(
                "evo is already set up in {}; nothing changed",
                path.display()
            )
        }
        SetupAction::Unchanged => println!("evo stays set up in {}{kept}", path.display()),
        SetupAction::Updated => {
            println!("updated evo in {}{kept}", path.display());
            println!("{}", client.next_step());
        }
        SetupAction::Added => {
            println!("added evo to {}{kept}", path.display());
            println!("{}", client.next_step());
        }
    }
    for id in doubles {
        println!(
            "note: \"{id}\" in {} also runs `evoctl shim`; remove one of them, or the client connects to evo twice",
            path.display()
        );
    }
    if let Some(pickup) = &pickup {
        pickup.print();
    }
    Ok(())
}

/// The client's servers on their way to evo's config (`setup --move`).
struct Move {
    evo: EvoConfig,
    /// Taken out of the client's file: evo's config has them, enabled.
    moved: Vec<String>,
    /// Left in the client's file, and why.
    kept: Vec<Skipped>,
}

/// Offers each of the client's servers (but evo's own entries) to evo's
/// config. A server is taken out of the client only when evo's config then
/// holds it and can run it: one evo cannot serve yet is copied disabled and
/// stays in the client, where it works; one whose id evo's config gives to
/// another server stays in the client untouched. Nothing is lost, and a
/// second run changes nothing.
fn move_servers(
    client: &JsonFile,
    servers: &[(String, Value)],
    config: Option<&Path>,
) -> Result<Move, String> {
    let mut evo = EvoConfig::load(config)?;
    if same_file(&client.path, evo.path()) {
        return Err(format!(
            "{} is evo's own config: moving its servers into itself would point evo at evo; pass the client's file with --file",
            client.path.display()
        ));
    }
    let shown = evo.path().display().to_string();
    let mut moved = Vec::new();
    let mut kept = Vec::new();
    for (id, entry) in servers {
        if id == "evo" || runs_evo_shim(entry) {
            continue;
        }
        let reason = match evo.offer(id, entry)? {
            Offer::Added { disabled: None } | Offer::Present { disabled: None } => {
                moved.push(id.clone());
                None
            }
            Offer::Added {
                disabled: Some(why),
            } => Some(format!(
                "{why}; copied to {shown} disabled, and kept here, where it works"
            )),
            Offer::Present {
                disabled: Some(why),
            } => Some(format!("{why}; {shown} has it, disabled")),
            Offer::Conflict => Some(format!(
                "{shown} already has a different server \"{id}\"; rename one of them and run this again to move it"
            )),
            Offer::NotAServer => Some("not a server object".to_string()),
        };
        if let Some(reason) = reason {
            kept.push(Skipped {
                id: id.clone(),
                reason,
            });
        }
    }
    Ok(Move { evo, moved, kept })
}

fn print_move(m: &Move, client: &Path, evo_backup: Option<&Path>) {
    let config = m.evo.path().display();
    let kept_backup = evo_backup
        .map(|b| format!(" (previous version: {})", b.display()))
        .unwrap_or_default();
    if !m.moved.is_empty() {
        println!("moved to {config}: {}{kept_backup}", m.moved.join(", "));
    } else {
        println!("nothing to move from {}", client.display());
        if evo_backup.is_some() {
            println!("{config} changed{kept_backup}");
        }
    }
    print_disabled(&m.evo.disabled);
    for k in &m.kept {
        println!("kept in {}: {}: {}", client.display(), k.id, k.reason);
    }
}

/// Whether two paths name one file (either may not exist yet).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| {
        std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
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
            true => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            false => path.to_path_buf(),
        };
        let original = match std::fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
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
    /// then the new content atomically. Returns the backup's path.
    pub fn save(&self) -> Result<Option<PathBuf>, String> {
        let bytes = self.doc.to_bytes();
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let permissions = std::fs::metadata(&self.path).ok().map(|m| m.permissions());
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
fn write_atomic(
    path: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(path.file_name().unwrap_or_default());
    tmp_name.push(format!(".evoctl-{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        match permissions {
            Some(p) => file.set_permissions(p)?,
            None => {
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
                }
            }
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    // Make the rename itself durable; not every filesystem can sync a
    // directory, and the file is already complete either way.
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
