//! `evoctl setup CLIENT` and `evoctl import FILE`: the two edits evoctl makes
//! to JSON config files that belong to someone else (an MCP client, or the
//! person who wrote evo's config).
//!
//! Both go through [`JsonFile`], which never overwrites a file it could not
//! parse, keeps the previous content as `FILE.bak`, changes only the text of
//! the entries it sets (every other line stays byte for byte), and replaces
//! the file atomically so a client reading it meanwhile sees the old file or
//! the new one, never half of one.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde::Serialize;
use serde_json::{Map, Value, json};

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

/// `evoctl setup CLIENT [--print] [--file PATH]`.
pub fn setup(
    client: Client,
    print: bool,
    file: Option<&Path>,
    socket: Option<&Path>,
    json: bool,
) -> Result<(), String> {
    let path = match file {
        Some(p) => p.to_path_buf(),
        None => client.default_path()?,
    };
    let entry = client.entry(&this_evoctl()?, socket);
    let key = client.servers_key();
    let snippet = json!({ key: { "evo": entry } });
    if print {
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
    let servers = file.servers(key, &by_hand)?;
    let doubles: Vec<String> = servers
        .into_iter()
        .flatten()
        .filter(|(id, v)| id.as_str() != "evo" && runs_evo_shim(v))
        .map(|(id, _)| id.clone())
        .collect();
    let action = match servers.and_then(|s| s.get("evo")) {
        Some(old) if *old == entry => SetupAction::Unchanged,
        Some(_) => SetupAction::Updated,
        None => SetupAction::Added,
    };
    let backup = match action {
        SetupAction::Unchanged => None,
        _ => {
            file.set_server(key, "evo", entry.clone(), &by_hand)?;
            file.save()?
        }
    };
    let path = &file.path;

    if json {
        let report = json!({
            "client": client.id(),
            "path": path,
            "action": action,
            "entry": entry,
            "backup": backup,
            "also_evo": doubles,
        });
        println!("{}", pretty(&report));
        return Ok(());
    }
    let kept = backup
        .as_ref()
        .map(|b| format!(" (previous version: {})", b.display()))
        .unwrap_or_default();
    match action {
        SetupAction::Unchanged => {
            println!(
                "evo is already set up in {}; nothing changed",
                path.display()
            )
        }
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
    Ok(())
}

/// Why `import` left a server out.
#[derive(Serialize, Debug)]
struct Skipped {
    id: String,
    reason: String,
}

/// `evoctl import FILE [--config PATH]`.
pub fn import(source: &Path, config: Option<&Path>, json: bool) -> Result<(), String> {
    let config_path = match config {
        Some(p) => p.to_path_buf(),
        None => evo_config_path()?,
    };
    if !source.exists() {
        return Err(format!(
            "{} does not exist; pass a client's config file, e.g. ~/.cursor/mcp.json",
            source.display()
        ));
    }
    let found = servers_in(&JsonFile::load(source, "point import at another file")?)?;
    let hint = "import again once evo's config is readable";
    let mut target = JsonFile::load(&config_path, hint)?;
    let shown_config = target.path.display().to_string();
    let mut existing: HashSet<String> = HashSet::new();
    for key in ["mcpServers", "servers"] {
        existing.extend(
            target
                .servers(key, hint)?
                .into_iter()
                .flatten()
                .map(|(id, _)| id.clone()),
        );
    }

    let mut added: Vec<String> = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    for (id, entry) in found {
        let reason = if !entry.is_object() {
            Some("not a server object".to_string())
        } else if runs_evo_shim(&entry) {
            Some("runs `evoctl shim`, which is evo itself: importing it would loop".to_string())
        } else if existing.contains(&id) {
            Some(format!("already in {shown_config}"))
        } else if added.contains(&id) {
            Some(format!(
                "listed twice in {}; the first was imported",
                source.display()
            ))
        } else {
            None
        };
        match reason {
            Some(reason) => skipped.push(Skipped { id, reason }),
            None => {
                target.set_server("mcpServers", &id, entry, hint)?;
                added.push(id);
            }
        }
    }
    let backup = if added.is_empty() {
        None
    } else {
        target.save()?
    };

    if json {
        let report = json!({
            "config": target.path,
            "added": added,
            "skipped": skipped,
            "backup": backup,
        });
        println!("{}", pretty(&report));
        return Ok(());
    }
    if added.is_empty() {
        println!("nothing added; {shown_config} is unchanged");
    } else {
        let kept = backup
            .as_ref()
            .map(|b| format!(" (previous version: {})", b.display()))
            .unwrap_or_default();
        println!("added to {shown_config}: {}{kept}", added.join(", "));
    }
    for s in &skipped {
        println!("skipped {}: {}", s.id, s.reason);
    }
    if !added.is_empty() {
        println!("a running evod picks this up within a second; `evoctl status` shows the servers");
    }
    Ok(())
}

/// evo's config file, resolved as evod resolves it.
fn evo_config_path() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("EVO_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(config_home()?.join("evo").join("mcp.config.json"))
}

/// The servers of a client config, `mcpServers` before `servers` (the order
/// evod reads them in), by id.
fn servers_in(file: &JsonFile) -> Result<Vec<(String, Value)>, String> {
    let hint = "import from another file";
    let mut found = Vec::new();
    let mut any = false;
    for key in ["mcpServers", "servers"] {
        if let Some(servers) = file.servers(key, hint)? {
            any = true;
            found.extend(servers.iter().map(|(id, v)| (id.clone(), v.clone())));
        }
    }
    if !any {
        return Err(format!(
            "{} has no \"mcpServers\" or \"servers\" object: nothing to import; pass a client's config, e.g. ~/.cursor/mcp.json",
            file.path.display()
        ));
    }
    Ok(found)
}

/// Does this server entry start evo's own shim? In evo's config it would make
/// evod spawn a shim that connects back to evod; in a client's config next
/// to another one, the client would see every tool twice.
fn runs_evo_shim(entry: &Value) -> bool {
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

/// A JSON config file as evoctl edits it: the top-level object, the bytes it
/// was read from (for the backup) and its layout (for the rewrite).
struct JsonFile {
    /// The file to write. A symlinked config (dotfile managers do that) is
    /// edited where it lives, so the link survives the atomic rename.
    path: PathBuf,
    /// `None` when the file does not exist yet.
    original: Option<Vec<u8>>,
    doc: Map<String, Value>,
    layout: Layout,
    /// The servers set since loading, as (object key, id), for the splice.
    edits: Vec<(String, String)>,
}

impl JsonFile {
    /// Reads `path` (a missing or blank file is an empty object). Refuses a
    /// file that is not a JSON object, saying where and why, and `hint` (what
    /// the person can do instead).
    fn load(path: &Path, hint: &str) -> Result<JsonFile, String> {
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
    fn parse(path: PathBuf, original: Option<Vec<u8>>, hint: &str) -> Result<JsonFile, String> {
        let text = original.as_deref().unwrap_or_default();
        // Editors on Windows like to start files with a byte-order mark.
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonFile {
                path,
                original,
                doc: Map::new(),
                layout: Layout::default(),
                edits: Vec::new(),
            });
        }
        let value: Value = serde_json::from_slice(text).map_err(|e| {
            format!(
                "{} is not valid JSON: {e}{}. evoctl left it untouched: fix it and run this again, or {hint}",
                path.display(),
                comment_note(text, &e)
            )
        })?;
        let Value::Object(doc) = value else {
            return Err(format!(
                "{}: the top level is {}, not an object, so it is not an MCP config; evoctl left it untouched: {hint}",
                path.display(),
                evo_proto::json_kind(&value)
            ));
        };
        Ok(JsonFile {
            path,
            layout: Layout::of(text),
            original,
            doc,
            edits: Vec::new(),
        })
    }

    /// The servers under the top-level `key`, if the file has that key.
    /// Refuses when `key` holds something other than an object: replacing it
    /// would lose the person's data.
    fn servers(&self, key: &str, hint: &str) -> Result<Option<&Map<String, Value>>, String> {
        match self.doc.get(key) {
            None => Ok(None),
            Some(Value::Object(servers)) => Ok(Some(servers)),
            Some(other) => Err(self.not_servers(key, other, hint)),
        }
    }

    /// Sets server `id` under the top-level `key` (created if missing). An
    /// existing entry is replaced where it stands.
    fn set_server(&mut self, key: &str, id: &str, entry: Value, hint: &str) -> Result<(), String> {
        if let Some(other) = self.doc.get(key).filter(|v| !v.is_object()) {
            return Err(self.not_servers(key, other, hint));
        }
        if let Value::Object(servers) = self
            .doc
            .entry(key)
            .or_insert_with(|| Value::Object(Map::new()))
        {
            servers.insert(id.to_string(), entry);
        }
        self.edits.push((key.to_string(), id.to_string()));
        Ok(())
    }

    fn not_servers(&self, key: &str, found: &Value, hint: &str) -> String {
        format!(
            "{}: \"{key}\" is {}, not an object of servers by id; evoctl left the file untouched: fix it, or {hint}",
            self.path.display(),
            evo_proto::json_kind(found)
        )
    }

    /// The new content: the old text with only the edited entries spliced
    /// in, so every other line stays byte for byte; the whole document
    /// re-serialised in the file's layout when a splice is not possible.
    fn content(&self) -> Vec<u8> {
        self.splice()
            .unwrap_or_else(|| self.layout.render(&self.doc))
    }

    fn splice(&self) -> Option<Vec<u8>> {
        let unit = self.layout.indent.as_deref()?;
        let nl = if self.layout.crlf { "\r\n" } else { "\n" };
        let bytes = self.original.as_deref()?;
        let bom = bytes.starts_with(b"\xEF\xBB\xBF");
        let mut text = std::str::from_utf8(&bytes[if bom { 3 } else { 0 }..])
            .ok()?
            .to_string();
        for (key, id) in &self.edits {
            let entry = self.doc.get(key)?.get(id)?;
            text = splice::set_member(&text, key, id, entry, unit, nl)?;
        }
        // Trusted only if it reads back as exactly the edited document, in
        // the same order.
        let reread: Value = serde_json::from_str(&text).ok()?;
        if serde_json::to_string(&reread).ok()? != serde_json::to_string(&self.doc).ok()? {
            return None;
        }
        let mut out = Vec::with_capacity(text.len() + 3);
        if bom {
            out.extend_from_slice(b"\xEF\xBB\xBF");
        }
        out.extend_from_slice(text.as_bytes());
        Some(out)
    }

    /// Writes the document back: the previous content to `FILE.bak` first,
    /// then the new content atomically. Returns the backup's path.
    fn save(&self) -> Result<Option<PathBuf>, String> {
        let bytes = self.content();
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

/// How a file was laid out, so a rewrite differs from it only where evoctl
/// changed something: same indentation, line endings and final newline.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    /// `None`: everything on one line.
    indent: Option<String>,
    crlf: bool,
    final_newline: bool,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            indent: Some("  ".into()),
            crlf: false,
            final_newline: true,
        }
    }
}

impl Layout {
    fn of(text: &[u8]) -> Layout {
        let text = String::from_utf8_lossy(text);
        let body = text.trim();
        if !body.contains('\n') {
            return Layout {
                indent: None,
                crlf: false,
                final_newline: text.ends_with('\n'),
            };
        }
        let indent = body
            .lines()
            .skip(1)
            .map(|l| {
                let width = l.len() - l.trim_start_matches([' ', '\t']).len();
                &l[..width]
            })
            .find(|ws| !ws.is_empty())
            .unwrap_or("  ");
        Layout {
            indent: Some(indent.to_string()),
            crlf: body.contains("\r\n"),
            final_newline: text.ends_with('\n'),
        }
    }

    fn render(&self, doc: &Map<String, Value>) -> Vec<u8> {
        let mut out = Vec::new();
        // Serialising a Value into memory cannot fail: its keys are strings.
        let _ = match &self.indent {
            None => serde_json::to_writer(&mut out, doc),
            Some(indent) => {
                let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
                let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
                doc.serialize(&mut ser)
            }
        };
        let newline: &[u8] = if self.crlf { b"\r\n" } else { b"\n" };
        if self.crlf {
            // Raw newlines only occur between tokens: strings escape theirs.
            let mut with_cr = Vec::with_capacity(out.len() + out.len() / 16);
            for b in out {
                if b == b'\n' {
                    with_cr.push(b'\r');
                }
                with_cr.push(b);
            }
            out = with_cr;
        }
        if self.final_newline {
            out.extend_from_slice(newline);
        }
        out
    }
}

/// Edits a JSON text in place: finds where members start and end with a
/// scanner over text serde_json already accepted, and gives up (`None`) on
/// anything it does not expect, leaving the caller to re-serialise instead.
mod splice {
    use serde_json::{Value, json};

    /// Where one member of an object sits in the text (byte offsets).
    struct Member {
        key: String,
        key_start: usize,
        value_start: usize,
        value_end: usize,
    }

    /// Where an object's braces and members sit in the text.
    struct Object {
        open: usize,
        close: usize,
        members: Vec<Member>,
    }

    impl Object {
        /// The member JSON keeps when a key is repeated: the last.
        fn member(&self, key: &str) -> Option<&Member> {
            self.members.iter().rev().find(|m| m.key == key)
        }
    }

    /// Sets `top[key][id] = entry` in `text`, indenting new lines like
    /// their neighbours with one `unit` per level.
    pub fn set_member(
        text: &str,
        key: &str,
        id: &str,
        entry: &Value,
        unit: &str,
        nl: &str,
    ) -> Option<String> {
        let b = text.as_bytes();
        let top = object(b, skip_ws(b, 0))?;
        let Some(servers) = top.member(key) else {
            return insert(text, &top, key, &json!({ id: entry }), unit, nl);
        };
        let servers = object(b, servers.value_start)?;
        match servers.member(id) {
            Some(old) => {
                let indent = own_line_indent(text, old.key_start)?;
                let value = render(entry, indent, unit, nl)?;
                Some(replace(text, old.value_start, old.value_end, &value))
            }
            None => insert(text, &servers, id, entry, unit, nl),
        }
    }

    /// Adds `"key": value` as the object's last member.
    fn insert(
        text: &str,
        obj: &Object,
        key: &str,
        value: &Value,
        unit: &str,
        nl: &str,
    ) -> Option<String> {
        let key = serde_json::to_string(key).ok()?;
        match obj.members.last() {
            // Members one per line: the new one goes on its own line, after
            // the last, at the same indentation.
            Some(last) => {
                let indent = own_line_indent(text, last.key_start)?;
                let value = render(value, indent, unit, nl)?;
                let member = format!(",{nl}{indent}{key}: {value}");
                Some(replace(text, last.value_end, last.value_end, &member))
            }
            None => {
                let outer = line_indent(text, obj.open);
                let inner = format!("{outer}{unit}");
                let value = render(value, &inner, unit, nl)?;
                let body = format!("{nl}{inner}{key}: {value}{nl}{outer}");
                Some(replace(text, obj.open + 1, obj.close, &body))
            }
        }
    }

    /// `value` pretty-printed for a spot indented by `indent`.
    fn render(value: &Value, indent: &str, unit: &str, nl: &str) -> Option<String> {
        use serde::Serialize;
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
        value.serialize(&mut ser).ok()?;
        // Raw newlines only occur between tokens: strings escape theirs.
        Some(
            String::from_utf8(out)
                .ok()?
                .replace('\n', &format!("{nl}{indent}")),
        )
    }

    fn replace(text: &str, start: usize, end: usize, with: &str) -> String {
        let mut out = String::with_capacity(text.len() + with.len());
        out.push_str(&text[..start]);
        out.push_str(with);
        out.push_str(&text[end..]);
        out
    }

    /// The whitespace that starts the line holding byte `at`.
    fn line_indent(text: &str, at: usize) -> &str {
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = &text[start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }

    /// Like [`line_indent`], but only if nothing else precedes `at` on its
    /// line: a member sharing its line with others has no indentation to copy.
    fn own_line_indent(text: &str, at: usize) -> Option<&str> {
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let lead = &text[start..at];
        lead.bytes()
            .all(|c| c == b' ' || c == b'\t')
            .then_some(lead)
    }

    fn skip_ws(b: &[u8], mut i: usize) -> usize {
        while b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    }

    /// The end of the string opening at `i`.
    fn string_end(b: &[u8], i: usize) -> Option<usize> {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let mut j = i + 1;
        loop {
            match b.get(j)? {
                b'\\' => j += 2,
                b'"' => return Some(j + 1),
                _ => j += 1,
            }
        }
    }

    /// The end of the value starting at `i`.
    fn value_end(b: &[u8], i: usize) -> Option<usize> {
        match b.get(i)? {
            b'"' => string_end(b, i),
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut j = i;
                loop {
                    match b.get(j)? {
                        b'"' => {
                            j = string_end(b, j)?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Some(j + 1);
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
            }
            _ => {
                let mut j = i;
                while b
                    .get(j)
                    .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
                {
                    j += 1;
                }
                (j > i).then_some(j)
            }
        }
    }

    /// The object opening at `open`.
    fn object(b: &[u8], open: usize) -> Option<Object> {
        if b.get(open) != Some(&b'{') {
            return None;
        }
        let mut members = Vec::new();
        let mut i = skip_ws(b, open + 1);
        if b.get(i) == Some(&b'}') {
            return Some(Object {
                open,
                close: i,
                members,
            });
        }
        loop {
            let key_start = i;
            let key_end = string_end(b, i)?;
            let key: String = serde_json::from_slice(&b[key_start..key_end]).ok()?;
            i = skip_ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            let value_start = skip_ws(b, i + 1);
            let value_end = value_end(b, value_start)?;
            members.push(Member {
                key,
                key_start,
                value_start,
                value_end,
            });
            i = skip_ws(b, value_end);
            match b.get(i)? {
                b',' => i = skip_ws(b, i + 1),
                b'}' => {
                    return Some(Object {
                        open,
                        close: i,
                        members,
                    });
                }
                _ => return None,
            }
        }
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

/// A hint when a parse error sits on a comment: VS Code accepts comments in
/// its JSON files, JSON does not, and a rewrite would lose them.
fn comment_note(text: &[u8], e: &serde_json::Error) -> &'static str {
    let line = String::from_utf8_lossy(text)
        .lines()
        .nth(e.line().saturating_sub(1))
        .map(str::to_string)
        .unwrap_or_default();
    let at = line.get(e.column().saturating_sub(1)..).unwrap_or("");
    if at.starts_with("//") || at.starts_with("/*") {
        " (a comment: evoctl writes plain JSON and would lose it)"
    } else {
        ""
    }
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
    fn layout_is_kept() {
        let cases: [(&str, Layout); 3] = [
            (
                "{\n    \"a\": 1\n}\n",
                Layout {
                    indent: Some("    ".into()),
                    crlf: false,
                    final_newline: true,
                },
            ),
            (
                "{\r\n\t\"a\": 1\r\n}",
                Layout {
                    indent: Some("\t".into()),
                    crlf: true,
                    final_newline: false,
                },
            ),
            (
                "{\"a\":1}",
                Layout {
                    indent: None,
                    crlf: false,
                    final_newline: false,
                },
            ),
        ];
        for (text, want) in cases {
            let layout = Layout::of(text.as_bytes());
            assert_eq!(layout, want, "{text:?}");
            let doc: Map<String, Value> = serde_json::from_str(text).unwrap();
            assert_eq!(String::from_utf8(layout.render(&doc)).unwrap(), text);
        }
    }

    /// `text` after setting `mcpServers.<id>` to `entry`, as `save` writes it.
    fn edited(text: &str, id: &str, entry: Value) -> String {
        let path = PathBuf::from("test.json");
        let mut file = JsonFile::parse(path, Some(text.as_bytes().to_vec()), "").unwrap();
        file.set_server("mcpServers", id, entry, "").unwrap();
        String::from_utf8(file.content()).unwrap()
    }

    #[test]
    fn edits_touch_only_the_entry() {
        let entry = json!({"command": "e", "args": ["shim"]});
        let cases = [
            // A new entry after the others, like them; arrays stay on one line.
            (
                "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"x\"]}\n  },\n  \"theme\": 1e3\n}\n",
                "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"x\"]},\n    \"evo\": {\n      \"command\": \"e\",\n      \"args\": [\n        \"shim\"\n      ]\n    }\n  },\n  \"theme\": 1e3\n}\n",
            ),
            // An existing entry is replaced where it stands.
            (
                "{\n\t\"mcpServers\": {\n\t\t\"evo\": {\"command\": \"old\"},\n\t\t\"b\": {}\n\t}\n}",
                "{\n\t\"mcpServers\": {\n\t\t\"evo\": {\n\t\t\t\"command\": \"e\",\n\t\t\t\"args\": [\n\t\t\t\t\"shim\"\n\t\t\t]\n\t\t},\n\t\t\"b\": {}\n\t}\n}",
            ),
            // No servers yet: the object is added last.
            (
                "{\n  \"theme\": \"dark\"\n}\n",
                "{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"evo\": {\n      \"command\": \"e\",\n      \"args\": [\n        \"shim\"\n      ]\n    }\n  }\n}\n",
            ),
            // An empty object is filled.
            (
                "{\r\n  \"mcpServers\": {}\r\n}\r\n",
                "{\r\n  \"mcpServers\": {\r\n    \"evo\": {\r\n      \"command\": \"e\",\r\n      \"args\": [\r\n        \"shim\"\r\n      ]\r\n    }\r\n  }\r\n}\r\n",
            ),
            // One-line files are rewritten on one line.
            (
                "{\"mcpServers\":{\"a\":{}}}",
                "{\"mcpServers\":{\"a\":{},\"evo\":{\"command\":\"e\",\"args\":[\"shim\"]}}}",
            ),
        ];
        for (before, after) in cases {
            assert_eq!(edited(before, "evo", entry.clone()), after, "{before}");
        }
    }

    #[test]
    fn odd_layouts_fall_back_to_a_full_rewrite() {
        // Two servers on one line: no indentation to copy.
        let before = "{\n  \"mcpServers\": {\"a\": {}, \"b\": {}}\n}\n";
        let after = edited(before, "evo", json!({"command": "e"}));
        let doc: Value = serde_json::from_str(&after).unwrap();
        assert_eq!(
            doc,
            json!({"mcpServers": {"a": {}, "b": {}, "evo": {"command": "e"}}})
        );
    }

    #[test]
    fn comments_get_a_hint() {
        let text = b"{\n  // mine\n  \"a\": 1\n}";
        let e = serde_json::from_slice::<Value>(text).unwrap_err();
        assert!(comment_note(text, &e).contains("comment"), "{e}");
    }
}
