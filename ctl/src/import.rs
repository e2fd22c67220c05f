//! `evoctl import FILE`, and the half of `evoctl setup CLIENT --move` that
//! writes evo's config: servers copied from a client's config into evo's,
//! never over a server evo already has, never written enabled when evo
//! cannot run them, and what a running evod made of them reported as it
//! happened (its reload), not as a promise.
//!
//! `evoctl import` and `setup --move` write what evod's loader would refuse (a `type`/`transport`
//! other than stdio, Streamable HTTP or SSE, a `url` that is not http(s), a `${…}` evod does not
//! expand such as VS Code's `${input:…}`) with `"disabled": true` and a `description` (`imported
//! disabled: why`), keeping the person's values to finish; so does a `url` ending in `/sse` with no
//! `type` (the loader would take it for Streamable HTTP and fail to connect). evoctl does not link
//! the loader (only `proto` is shared), so these rules are restated here; whatever only evod can
//! know (an unset `${VAR}`, a missing command) shows in the reload that follows: evoctl asks a
//! running evod for `status` (does it read this file?), then `reload`, then `status` again, and
//! reports each written server from that (`applied` with its state, `failed` with its error,
//! `disabled`), never "will be picked up".

use std::env;
use std::path::{self, Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use evo_proto::ctl::{ServerState, StatusReport};
use evo_proto::entry::{TransportKind, has_http_scheme};
use evo_proto::{CtlRequest, Reply};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::client_config::{JsonFile, previous_version, runs_evo_shim, same_file};
use crate::connection::ask;
use crate::output::pretty;
use crate::user_dirs::config_home;

/// Why a server was left out, or written disabled.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub id: String,
    pub reason: String,
}

/// What [`EvoConfig::offer`] did with one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer {
    /// Written to evo's config; with the reason, disabled.
    Added { disabled: Option<String> },
    /// evo's config already holds exactly what an import writes for it (an
    /// earlier import or move); with the reason, disabled.
    Present { disabled: Option<String> },
    /// evo's config holds a different server under this id.
    Conflict,
    /// The entry is not an object, so not a server.
    NotAServer,
}

/// evo's config file while servers are added to it.
pub struct EvoConfig {
    pub file: JsonFile,
    /// The servers it has, by id, as evod reads them (`mcpServers` first).
    existing: Map<String, Value>,
    /// Where `${input:…}` values belong instead: the env file beside it.
    env_file: PathBuf,
    pub added: Vec<String>,
    /// Added with `"disabled": true`, and why.
    pub disabled: Vec<Skipped>,
}

const RETRY: &str = "run this again once evo's config is readable";

impl EvoConfig {
    /// `path`, else evo's config where evod finds it.
    pub fn load(path: Option<&Path>) -> Result<EvoConfig, String> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => evo_config_path()?,
        };
        let file = JsonFile::load(&path, RETRY)?;
        let mut existing = Map::new();
        for key in ["mcpServers", "servers"] {
            for (id, entry) in file.servers(key, RETRY)?.into_iter().flatten() {
                if !existing.contains_key(id) {
                    existing.insert(id.clone(), entry.clone());
                }
            }
        }
        // Named absolute in messages: they are read far from this cwd.
        let env_file = path::absolute(&file.path)
            .unwrap_or_else(|_| file.path.clone())
            .with_file_name("env");
        Ok(EvoConfig {
            file,
            existing,
            env_file,
            added: Vec::new(),
            disabled: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Whether it has a server under `id` (in `mcpServers` or `servers`).
    pub fn has(&self, id: &str) -> bool {
        self.existing.contains_key(id)
    }

    /// The env file beside it, where variables for `${KEY}` belong.
    pub fn env_file(&self) -> &Path {
        &self.env_file
    }

    /// Adds server `id` unless evo's config has that id already. An entry
    /// evo cannot serve yet is written with `"disabled": true` and a
    /// `description` saying why, so evod neither fails on it nor loses it.
    pub fn offer(&mut self, id: &str, entry: &Value) -> Result<Offer, String> {
        let Some(object) = entry.as_object() else {
            return Ok(Offer::NotAServer);
        };
        let disabled = cannot_serve(object, &self.env_file);
        let imported = imported(object, disabled.as_deref());
        if let Some(there) = self.existing.get(id) {
            return Ok(if *there == imported {
                Offer::Present { disabled }
            } else {
                Offer::Conflict
            });
        }
        self.file
            .set_server("mcpServers", id, imported.clone(), RETRY)?;
        self.existing.insert(id.to_string(), imported);
        self.added.push(id.to_string());
        if let Some(reason) = &disabled {
            self.disabled.push(Skipped {
                id: id.to_string(),
                reason: reason.clone(),
            });
        }
        Ok(Offer::Added { disabled })
    }

    /// Writes the file if anything was added; returns the backup's path.
    pub fn save(&self) -> Result<Option<PathBuf>, String> {
        if self.added.is_empty() {
            return Ok(None);
        }
        self.file.save()
    }
}

/// The entry as import writes it: as it was, or disabled with the reason.
fn imported(entry: &Map<String, Value>, disabled: Option<&str>) -> Value {
    let mut entry = entry.clone();
    if let Some(reason) = disabled {
        entry.insert("disabled".into(), Value::Bool(true));
        let theirs = entry.get("description").and_then(Value::as_str);
        // Already says why (evo's own entry, imported again): kept as it is.
        if !theirs.is_some_and(|d| d.starts_with("imported disabled: ")) {
            let theirs = theirs
                .map(|d| format!(" (its description: {d})"))
                .unwrap_or_default();
            entry.insert(
                "description".into(),
                format!("imported disabled: {reason}{theirs}").into(),
            );
        }
    }
    Value::Object(entry)
}

/// Why evod could not serve this entry, if it could not: what decides
/// whether an entry can run at all, its transport (the loader's own rules,
/// from `evo_proto::entry`) and its `${…}` references. What only evod can know (is `${VAR}` set in its
/// environment, does the command exist) its reload reports.
pub fn cannot_serve(entry: &Map<String, Value>, env_file: &Path) -> Option<String> {
    let mut declared = None;
    for key in ["type", "transport"] {
        let Some(name) = entry.get(key).and_then(Value::as_str) else {
            continue;
        };
        match TransportKind::from_declared(name) {
            Some(kind) => declared = Some(kind),
            None => {
                return Some(format!(
                    "evo does not serve \"{key}\": \"{name}\" servers; it serves stdio (\"command\") and Streamable HTTP (\"url\")"
                ));
            }
        }
    }
    let url = entry.get("url").and_then(Value::as_str);
    if let (None, None, Some(url)) = (&declared, entry.get("command"), url) {
        // Written as a variable, the scheme is evod's to check.
        if !url.starts_with("${") && !has_http_scheme(url) {
            return Some(format!(
                "its url {url} is not an http:// or https:// address, the only kind evo serves"
            ));
        }
        let path = url.split(['?', '#']).next().unwrap_or(url);
        if path.trim_end_matches('/').ends_with("/sse") {
            return Some(
                "its url ends in /sse, where legacy SSE servers listen, but it says no \"type\"; \
                 add \"type\": \"sse\" (legacy HTTP+SSE) or \"type\": \"http\" (Streamable HTTP) and remove \"disabled\""
                    .into(),
            );
        }
    }
    for (key, text) in expanded_strings(entry) {
        if let Some(reason) = unexpandable(&key, text, env_file) {
            return Some(reason);
        }
    }
    None
}

/// The strings evod expands `${…}` in, each with the key that locates it
/// (`args[1]`, `env.TOKEN`).
fn expanded_strings(entry: &Map<String, Value>) -> Vec<(String, &str)> {
    let mut found = Vec::new();
    for key in ["command", "cwd", "url"] {
        if let Some(text) = entry.get(key).and_then(Value::as_str) {
            found.push((key.to_string(), text));
        }
    }
    if let Some(args) = entry.get("args").and_then(Value::as_array) {
        for (i, arg) in args.iter().enumerate() {
            if let Some(text) = arg.as_str() {
                found.push((format!("args[{i}]"), text));
            }
        }
    }
    for key in ["env", "headers"] {
        for (name, value) in entry
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(text) = value.as_str() {
                found.push((format!("{key}.{name}"), text));
            }
        }
    }
    found
}

/// Why a `${…}` reference in `text` (at `key`) is one evod cannot expand:
/// it expands `${VAR}`, `${VAR:-default}` and `${env:VAR}`, nothing else.
fn unexpandable(key: &str, text: &str, env_file: &Path) -> Option<String> {
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Some(format!(
                "{key} has a \"${{\" with no closing \"}}\", which evo cannot expand"
            ));
        };
        let reference = &after[..end];
        let name = reference.split_once(":-").map_or(reference, |(n, _)| n);
        let name = name.strip_prefix("env:").unwrap_or(name);
        if name.starts_with("input:") {
            return Some(format!(
                "${{{reference}}} in {key} is a VS Code prompt, which evo cannot show; put the value in {} \
                 (a KEY=VALUE line) or evod's environment, write ${{KEY}} in its place, and remove \"disabled\"",
                env_file.display()
            ));
        }
        if !is_var_name(name) {
            return Some(format!(
                "${{{reference}}} in {key} is not a variable evo expands (it expands ${{VAR}}, ${{VAR:-default}} \
                 and ${{env:VAR}}); replace it with its value or a ${{VAR}}, and remove \"disabled\""
            ));
        }
        rest = &after[end + 1..];
    }
    None
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// evo's config file, resolved as evod resolves it.
fn evo_config_path() -> Result<PathBuf, String> {
    if let Some(p) = env::var_os("EVO_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(config_home()?.join("evo").join("mcp.config.json"))
}

/// `evoctl import FILE [--config PATH]`.
pub fn import(
    source: &Path,
    config: Option<&Path>,
    socket: &Path,
    json: bool,
) -> Result<(), String> {
    if !source.exists() {
        return Err(format!(
            "{} does not exist; pass a client's config file, e.g. ~/.cursor/mcp.json",
            source.display()
        ));
    }
    let found = servers_in(&JsonFile::load(source, "point import at another file")?)?;
    let mut target = EvoConfig::load(config)?;
    let shown_config = target.path().display().to_string();

    let mut skipped: Vec<Skipped> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (id, entry) in &found {
        let twice = seen.contains(&id.as_str());
        seen.push(id);
        let reason = if runs_evo_shim(entry) {
            Some("runs `evoctl shim`, which is evo itself: importing it would loop".to_string())
        } else if twice {
            Some(format!(
                "listed twice in {}; the first was imported",
                source.display()
            ))
        } else {
            match target.offer(id, entry)? {
                Offer::Added { .. } => None,
                Offer::Present { .. } => Some(format!("already in {shown_config}, the same")),
                Offer::Conflict => Some(format!(
                    "{shown_config} already has another server under this id; rename one of them to import it"
                )),
                Offer::NotAServer => Some("not a server object".to_string()),
            }
        };
        if let Some(reason) = reason {
            skipped.push(Skipped {
                id: id.clone(),
                reason,
            });
        }
    }
    let backup = target.save()?;
    let pickup = (!target.added.is_empty()).then(|| pick_up(socket, &target));

    if json {
        let report = json!({
            "config": target.path(),
            "added": target.added,
            "disabled": target.disabled,
            "skipped": skipped,
            "backup": backup,
            "evod": pickup,
        });
        println!("{}", pretty(&report));
        return Ok(());
    }
    if target.added.is_empty() {
        println!("nothing added; {shown_config} is unchanged");
    } else {
        let kept = previous_version(backup.as_deref());
        println!("added to {shown_config}: {}{kept}", target.added.join(", "));
    }
    print_sandbox_hint(&target.added);
    print_disabled(&target.disabled);
    for s in &skipped {
        println!("skipped {}: {}", s.id, s.reason);
    }
    if let Some(pickup) = &pickup {
        pickup.print();
    }
    Ok(())
}

/// The one line `import` and `setup --move` add when they wrote servers: they leave those
/// servers unconfined (guessing what a server may touch would break it or confine it too
/// little), and say how to confine one.
pub fn print_sandbox_hint(written: &[String]) {
    if !written.is_empty() {
        println!(
            "sandboxes are off for these servers; to confine one, add \"sandbox\": {{\"read\": \
             [...], \"write\": [...], \"network\": false}} to its entry (see docs/sandbox.md)"
        );
    }
}

pub fn print_disabled(disabled: &[Skipped]) {
    for d in disabled {
        println!("imported disabled: {}: {}", d.id, d.reason);
    }
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

/// What the running evod made of the servers just written to its config.
#[derive(Serialize, Debug)]
pub struct Pickup {
    /// Whether an evod answered at `socket`.
    running: bool,
    socket: PathBuf,
    /// The config file that evod reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    reads: Option<String>,
    /// Whether it re-read the file now.
    reloaded: bool,
    /// Its reload message, or why it did not reload.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// Each server written, as evod shows it after the reload.
    servers: Vec<Outcome>,
    /// The config written, for the messages.
    #[serde(skip)]
    config: PathBuf,
    /// What the servers were: `imported`, `added`.
    #[serde(skip)]
    verb: &'static str,
}

/// One written server after evod's reload.
#[derive(Serialize, Debug)]
struct Outcome {
    id: String,
    /// `applied` (evod runs it), `failed` (its entry or its start failed:
    /// `error` says why), `disabled`, or `missing` (evod does not list it).
    outcome: &'static str,
    /// Its state in `evoctl status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<ServerState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Asks a running evod to reload now, if it reads `config`'s file, and
/// reads back what became of each server added. Without an evod, says so:
/// the file is read when one starts.
pub fn pick_up(socket: &Path, config: &EvoConfig) -> Pickup {
    let mut pickup = Pickup {
        running: false,
        socket: socket.to_path_buf(),
        reads: None,
        reloaded: false,
        message: None,
        servers: Vec::new(),
        config: config.path().to_path_buf(),
        verb: "imported",
    };
    let status = match ask(socket, &CtlRequest::Status) {
        Ok(None) => return pickup,
        Err(e) => {
            pickup.running = true;
            pickup.message = Some(format!("evod did not answer `status`: {e}"));
            return pickup;
        }
        Ok(Some(Reply::Status(s))) => s,
        Ok(Some(_)) => {
            pickup.running = true;
            pickup.message = Some("evod answered `status` with something else".into());
            return pickup;
        }
    };
    pickup.running = true;
    pickup.reads = Some(status.config.path.clone());
    if !same_file(Path::new(&status.config.path), config.path()) {
        pickup.message = Some(format!(
            "it reads {}, not {}, so it does not see these servers",
            status.config.path,
            config.path().display()
        ));
        return pickup;
    }
    match ask(socket, &CtlRequest::Reload) {
        Ok(Some(Reply::Action(report))) => {
            pickup.reloaded = true;
            pickup.message = Some(report.message);
        }
        Ok(Some(_)) => pickup.message = Some("evod answered `reload` oddly".into()),
        // A permissions file it cannot read refuses the reload after the
        // servers applied: what status says next is the truth either way.
        Err(e) => pickup.message = Some(format!("the reload was refused: {e}")),
        Ok(None) => {
            pickup.running = false;
            return pickup;
        }
    }
    let after = match ask(socket, &CtlRequest::Status) {
        Ok(Some(Reply::Status(s))) => s,
        _ => StatusReport::default(),
    };
    pickup.servers = config.added.iter().map(|id| outcome(&after, id)).collect();
    pickup
}

fn outcome(status: &StatusReport, id: &str) -> Outcome {
    let Some(server) = status.servers.iter().find(|s| s.id == id) else {
        return Outcome {
            id: id.to_string(),
            outcome: "missing",
            state: None,
            error: Some(
                "evod does not list it after the reload; `evoctl status` shows what it runs".into(),
            ),
        };
    };
    let outcome = match server.state {
        ServerState::Failed => "failed",
        ServerState::Disabled => "disabled",
        _ => "applied",
    };
    Outcome {
        id: id.to_string(),
        outcome,
        state: Some(server.state),
        error: server.error.clone(),
    }
}

impl Pickup {
    /// `2 server(s) imported: 1 applied, 1 disabled`: each outcome with
    /// its count, in a fixed order.
    fn counts(&self) -> String {
        let parts: Vec<String> = ["applied", "disabled", "failed", "missing"]
            .iter()
            .filter_map(|outcome| {
                let n = self
                    .servers
                    .iter()
                    .filter(|s| s.outcome == *outcome)
                    .count();
                (n > 0).then(|| format!("{n} {outcome}"))
            })
            .collect();
        format!(
            "{} server(s) {}: {}",
            self.servers.len(),
            self.verb,
            parts.join(", ")
        )
    }

    /// Says the servers were `verb` (`added`) in the lines printed.
    pub fn called(mut self, verb: &'static str) -> Pickup {
        self.verb = verb;
        self
    }

    /// Waits, up to `limit`, until no server written is still queued, starting or restarting,
    /// so the report says whether each came up rather than that it was on its way.
    pub fn settle(&mut self, socket: &Path, limit: Duration) {
        let deadline = Instant::now() + limit;
        let unsettled = |p: &Pickup| {
            p.servers.iter().any(|s| {
                s.state
                    .is_some_and(|st| st.is_starting() || st == ServerState::Restarting)
            })
        };
        while self.reloaded && unsettled(self) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(300));
            if let Ok(Some(Reply::Status(status))) = ask(socket, &CtlRequest::Status) {
                for server in &mut self.servers {
                    *server = outcome(&status, &server.id);
                }
            }
        }
    }

    /// Whether every server written is ready.
    pub fn all_ready(&self) -> bool {
        !self.servers.is_empty()
            && self
                .servers
                .iter()
                .all(|s| s.state == Some(ServerState::Ready))
    }

    /// The lines a person reads: what evod did, server by server.
    pub fn print(&self) {
        let config = self.config.display();
        let socket = self.socket.display();
        if !self.running {
            println!("no evod is running at {socket}; it reads {config} when it starts");
            return;
        }
        if !self.reloaded {
            let why = self.message.as_deref().unwrap_or("it did not reload");
            println!("the evod at {socket} has not taken these servers: {why}");
            if self.servers.is_empty() {
                if let Some(reads) = &self.reads
                    && !same_file(Path::new(reads), &self.config)
                {
                    println!(
                        "import into its config with --config {reads}, or start evod with --config {config}"
                    );
                }
                return;
            }
        } else {
            // Counted from the servers written, not the reload's own diff:
            // the file watcher may have applied part of it already, and a
            // disabled server is no change to what runs.
            println!("evod reloaded {config}: {}", self.counts());
        }
        for s in &self.servers {
            let state = s.state.map(|st| st.as_str()).unwrap_or("");
            match (s.outcome, &s.error) {
                ("applied", None) => println!("  {}: applied ({state})", s.id),
                ("applied", Some(e)) => println!("  {}: applied ({state}: {e})", s.id),
                ("disabled", _) => println!("  {}: disabled, not started", s.id),
                (_, Some(e)) => println!("  {}: failed: {e}", s.id),
                (_, None) => println!("  {}: failed ({state})", s.id),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reason(entry: Value) -> Option<String> {
        cannot_serve(entry.as_object().unwrap(), Path::new("/cfg/evo/env"))
    }

    /// The entries evod's loader accepts are imported as they are; the rest
    /// say why, in words that name the fix.
    #[test]
    fn what_evo_cannot_serve_is_named() {
        for servable in [
            json!({"command": "npx", "args": ["-y", "x"], "env": {"T": "${TOKEN}", "U": "${env:U}", "V": "${V:-1}"}}),
            json!({"type": "stdio", "command": "uvx"}),
            json!({"url": "https://h/mcp"}),
            json!({"type": "http", "url": "https://h/sse"}),
            json!({"type": "sse", "url": "https://h/sse"}),
            json!({"transport": "SSE", "url": "https://h/events"}),
            json!({"type": "streamable-http", "url": "${BASE}/mcp"}),
            json!({"transport": "streamableHttp", "url": "http://localhost:3000/mcp"}),
            json!({"url": "${BASE}"}),
            // Not a transport problem: left to evod's loader, whose reload names it.
            json!({"command": "c", "url": "https://h"}),
        ] {
            assert_eq!(reason(servable.clone()), None, "{servable}");
        }
        #[rustfmt::skip]
        let cases = [
            (json!({"type": "ws", "url": "wss://h"}), "\"type\": \"ws\""),
            (json!({"url": "https://h/sse"}), "ends in /sse"),
            (json!({"url": "https://h/sse/?x=1"}), "ends in /sse"),
            (json!({"url": "wss://h/mcp"}), "not an http:// or https:// address"),
            (json!({"command": "c", "env": {"TOKEN": "${input:token}"}}),
                "${input:token} in env.TOKEN is a VS Code prompt"),
            (json!({"type": "http", "url": "https://h", "headers": {"A": "Bearer ${input:gh}"}}),
                "${input:gh} in headers.A is a VS Code prompt, which evo cannot show; put the value in /cfg/evo/env"),
            (json!({"command": "c", "args": ["--x", "${config:path}"]}),
                "${config:path} in args[1] is not a variable evo expands"),
            (json!({"command": "c", "cwd": "${HOME"}), "cwd has a \"${\" with no closing"),
        ];
        for (entry, want) in cases {
            let got = reason(entry.clone()).unwrap_or_else(|| panic!("{entry}: servable?"));
            assert!(got.contains(want), "{entry}: {got}");
        }
    }

    #[test]
    fn an_unservable_entry_is_written_disabled_with_the_reason() {
        let entry = json!({"type": "sse", "url": "u", "description": "team search"});
        let written = imported(entry.as_object().unwrap(), Some("why"));
        assert_eq!(
            written,
            json!({"type": "sse", "url": "u", "description": "imported disabled: why (its description: team search)", "disabled": true})
        );
        // Written again from what evo's config holds: the same.
        assert_eq!(imported(written.as_object().unwrap(), Some("why")), written);
        let fine = json!({"command": "c"});
        assert_eq!(imported(fine.as_object().unwrap(), None), fine);
    }
}
