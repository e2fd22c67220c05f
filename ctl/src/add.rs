//! `evoctl add QUERY|NAME`: servers from the MCP registry into evo's config.
//!
//! An argument with a `/` is a server name (`io.github.owner/server`, the registry's names
//! always have one): its record becomes one config entry. Anything else is a search, listed.
//!
//! The entry is built from the record's first way evo can run, in this order: an npm package
//! (`npx -y PKG@VERSION`), a PyPI package (`uvx PKG==VERSION`), an OCI image (`docker run -i
//! --rm …`, only with `--allow-docker`: it runs whatever the image holds, with docker's rights),
//! then a remote (Streamable HTTP or SSE, with its headers). A package that serves HTTP on a
//! port of its own, and nuget/mcpb/maven packages, are not started by evo; a record with nothing
//! else is refused, naming what it offers.
//!
//! Inputs (environment variables, headers, arguments, URL variables) take, in order: the
//! person's `--env KEY=VALUE` (variables, headers) or `--arg NAME=VALUE` (arguments by
//! `valueHint` or flag name, URL variables), the record's fixed `value`, an answer on the
//! terminal (secrets read without echo; blank keeps the default), the record's `default`. A
//! required one left without a value fails the whole add, naming each. A secret never goes in
//! the config (which is printed, backed up and shown around): it goes in the env file beside
//! it (0600) as `ID_NAME` (`NAME` when it starts with the id already), and the entry says
//! `${ID_NAME}`, which evod expands.
//!
//! Writing, the backup, the reload and the report are `evoctl import`'s ([`EvoConfig`],
//! [`pick_up`]); `add` then waits for the server to come up or fail, and says which.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use evo_proto::ctl::ServerState;
use serde_json::{Map, Value, json};

use crate::client_config::previous_version;
use crate::import::{EvoConfig, Offer, Pickup, pick_up};
use crate::output::pretty;
use crate::registry::{DEFAULT_REGISTRY, Record, Registry};

/// How long `add` waits for the new server to come up (a first `npx`/`uvx` downloads it).
const SETTLE: Duration = Duration::from_secs(180);

/// `evoctl add`'s arguments.
pub struct AddOptions<'a> {
    /// A search, or a server name.
    pub target: &'a str,
    pub id: Option<&'a str>,
    pub env: &'a [String],
    pub args: &'a [String],
    pub version: Option<&'a str>,
    pub allow_docker: bool,
    pub config: Option<&'a Path>,
    pub socket: &'a Path,
    pub json: bool,
}

pub fn add(opts: AddOptions<'_>) -> Result<(), String> {
    let env = pairs(opts.env, "--env")?;
    let args = pairs(opts.args, "--arg")?;
    let mut target = EvoConfig::load(opts.config)?;
    let registry = Registry::new(&registry_url(&target)?);
    if !opts.target.contains('/') {
        return list(&registry, opts.target, opts.json);
    }
    let record = registry.record(opts.target, opts.version)?;
    let id = match opts.id {
        Some(id) => checked_id(id)?,
        None => short_id(record.name()),
    };
    let shown_config = target.path().display().to_string();
    if target.has(&id) {
        return Err(format!(
            "{shown_config} already has a server '{id}'; evoctl add never replaces one: pass --id NEW_ID to add {} beside it",
            record.name()
        ));
    }
    let mut inputs = Inputs {
        id: id.clone(),
        env,
        args,
        used: BTreeSet::new(),
        ask: io::stdin().is_terminal(),
        secrets: Vec::new(),
        missing: Vec::new(),
    };
    let built = build(&record, opts.allow_docker, &mut inputs)?;
    inputs.check_complete(&record)?;

    let env_file = target.env_file().to_path_buf();
    stash_secrets(&env_file, &inputs.secrets)?;
    match target.offer(&id, &built.entry)? {
        Offer::Added { .. } => {}
        _ => return Err(format!("{shown_config} already has a server '{id}'")),
    }
    let backup = target.save()?;
    let mut pickup = pick_up(opts.socket, &target).called("added");
    pickup.settle(opts.socket, SETTLE);
    // A remote sent no credential of the person's may want an OAuth login.
    let login =
        (built.remote && built.entry.get("headers").is_none()) || pickup_says_login(&pickup);
    let secrets: Vec<&str> = inputs.secrets.iter().map(|(k, _)| k.as_str()).collect();

    if opts.json {
        let report = json!({
            "ok": true,
            "config": target.path(),
            "id": id,
            "name": record.name(),
            "version": record.version(),
            "entry": built.entry,
            "backup": backup,
            "env_file": (!secrets.is_empty()).then_some(&env_file),
            "secrets": secrets,
            "ready": pickup.all_ready(),
            "evod": pickup,
        });
        println!("{}", pretty(&report));
        return Ok(());
    }
    let kept = previous_version(backup.as_deref());
    println!(
        "added {} {} to {shown_config} as '{id}'{kept}:",
        record.name(),
        record.version()
    );
    let mut shown = Map::new();
    shown.insert(id.clone(), built.entry.clone());
    println!("{}", pretty(&Value::Object(shown)));
    if !secrets.is_empty() {
        println!(
            "secrets kept in {} (not in the config): {}",
            env_file.display(),
            secrets.join(", ")
        );
    }
    pickup.print();
    if login {
        println!(
            "if it asks for a login (OAuth), run `evoctl login {id}`; a remote that answers 401 with OAuth metadata shows as login_required in `evoctl status`"
        );
    }
    Ok(())
}

/// `registry.url` in evo's config, else the official registry.
fn registry_url(config: &EvoConfig) -> Result<String, String> {
    let Some(section) = config.file.section("registry")? else {
        return Ok(DEFAULT_REGISTRY.to_string());
    };
    match section.get("url") {
        None | Some(Value::Null) => Ok(DEFAULT_REGISTRY.to_string()),
        Some(Value::String(url)) if url.starts_with("http://") || url.starts_with("https://") => {
            Ok(url.clone())
        }
        Some(other) => Err(format!(
            "{}: registry.url must be the registry's http(s) address, e.g. \"{DEFAULT_REGISTRY}\", found {other}",
            config.path().display()
        )),
    }
}

fn list(registry: &Registry, query: &str, json: bool) -> Result<(), String> {
    let found = registry.search(query)?;
    if json {
        let results: Vec<Value> = found.iter().map(Record::summary).collect();
        println!(
            "{}",
            pretty(&json!({"registry": registry.base(), "query": query, "results": results}))
        );
        return Ok(());
    }
    if found.is_empty() {
        println!(
            "no server in the registry at {} has \"{query}\" in its name",
            registry.base()
        );
        return Ok(());
    }
    let rows: Vec<[String; 4]> = found
        .iter()
        .map(|r| {
            [
                r.name().to_string(),
                r.version().to_string(),
                r.transports().join(", "),
                r.description().to_string(),
            ]
        })
        .collect();
    let header = ["NAME", "VERSION", "TRANSPORT", "DESCRIPTION"].map(String::from);
    let width = |i: usize| {
        rows.iter()
            .chain([&header])
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    for [name, version, transport, description] in [&header].into_iter().chain(&rows) {
        println!("{name:w0$}  {version:w1$}  {transport:w2$}  {description}");
    }
    println!("add one with `evoctl add NAME`");
    Ok(())
}

/// `KEY=VALUE` flags by key.
fn pairs(given: &[String], flag: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for pair in given {
        match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => {
                map.insert(key.to_string(), value.to_string());
            }
            _ => return Err(format!("{flag} takes KEY=VALUE, not '{pair}'")),
        }
    }
    Ok(map)
}

fn checked_id(id: &str) -> Result<String, String> {
    let fine = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if fine {
        Ok(id.to_string())
    } else {
        Err(format!(
            "--id '{id}': an id is 1 to 64 letters, digits, '_' or '-' (it prefixes the server's tool names)"
        ))
    }
}

/// The id a record gets without `--id`: the part of its name after the `/`, lowercased, less
/// the words every MCP server's name has (`mcp-server-`, `server-`, `mcp-` in front; `-mcp-server`,
/// `-mcp`, `-server` behind), other characters as `-`: `io.github.domdomegg/airtable-mcp-server`
/// is `airtable`.
pub fn short_id(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name).to_lowercase();
    let clean: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut short = clean.as_str();
    for prefix in ["mcp-server-", "server-", "mcp-"] {
        short = short.strip_prefix(prefix).unwrap_or(short);
    }
    for suffix in ["-mcp-server", "-server-mcp", "-mcp", "-server"] {
        short = short.strip_suffix(suffix).unwrap_or(short);
    }
    let short = short.trim_matches('-');
    // Nothing but the common words (`mcp-server`): the name as it is.
    let generic = ["", "mcp", "server"].contains(&short);
    let chosen = if generic { clean.as_str() } else { short };
    chosen.chars().take(64).collect()
}

/// The entry built from a record.
struct Built {
    entry: Value,
    /// A remote server (it may want an OAuth login).
    remote: bool,
}

fn build(record: &Record, allow_docker: bool, inputs: &mut Inputs) -> Result<Built, String> {
    let server = &record.server;
    let packages: Vec<&Value> = server["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let remotes: Vec<&Value> = server["remotes"].as_array().into_iter().flatten().collect();
    let mut passed = Vec::new();
    let stdio = |p: &&&Value| p["transport"]["type"] == "stdio";
    for kind in ["npm", "pypi"] {
        if let Some(package) = packages
            .iter()
            .filter(|p| p["registryType"] == kind)
            .find(stdio)
        {
            return Ok(Built {
                entry: package_entry(package, kind, inputs),
                remote: false,
            });
        }
    }
    let image = packages
        .iter()
        .filter(|p| p["registryType"] == "oci")
        .find(stdio);
    if let Some(package) = image
        && allow_docker
    {
        return Ok(Built {
            entry: package_entry(package, "oci", inputs),
            remote: false,
        });
    }
    if let Some(remote) = remotes.first() {
        return Ok(Built {
            entry: remote_entry(remote, inputs),
            remote: true,
        });
    }
    if let Some(package) = image {
        return Err(format!(
            "{} runs only as the docker image {}; evoctl add writes `docker run` only when you pass --allow-docker (the image runs with docker's rights)",
            record.name(),
            package["identifier"].as_str().unwrap_or("?")
        ));
    }
    for package in &packages {
        let kind = package["registryType"].as_str().unwrap_or("?");
        let transport = package["transport"]["type"].as_str().unwrap_or("?");
        passed.push(if transport == "stdio" {
            format!("a {kind} package, which evo has no runner for")
        } else {
            format!("a {kind} package serving {transport} on a port of its own, which evo does not start")
        });
    }
    let offers = if passed.is_empty() {
        "no package and no remote".to_string()
    } else {
        passed.join("; ")
    };
    Err(format!(
        "evo cannot run {}: it offers {offers}; evo runs npm (npx), PyPI (uvx) and OCI (docker, with --allow-docker) packages over stdio, and remote Streamable HTTP or SSE servers",
        record.name()
    ))
}

/// `npx -y PKG@V`, `uvx PKG==V` or `docker run -i --rm … IMAGE`, with the package's arguments
/// and environment.
fn package_entry(package: &Value, kind: &str, inputs: &mut Inputs) -> Value {
    let identifier = package["identifier"].as_str().unwrap_or_default();
    let version = package["version"].as_str().filter(|v| !v.is_empty());
    let mut env = Map::new();
    for variable in package["environmentVariables"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(name) = variable["name"].as_str() else {
            continue;
        };
        if let Some(value) = inputs.resolve(variable, name, Given::Env) {
            env.insert(name.to_string(), Value::String(value));
        }
    }
    let runtime = inputs.arguments(&package["runtimeArguments"]);
    let arguments = inputs.arguments(&package["packageArguments"]);
    let (command, mut args) = match kind {
        "npm" => {
            let spec = match version {
                Some(v) => format!("{identifier}@{v}"),
                None => identifier.to_string(),
            };
            (
                "npx",
                [vec!["-y".to_string()], runtime, vec![spec]].concat(),
            )
        }
        "pypi" => {
            let spec = match version {
                Some(v) => format!("{identifier}=={v}"),
                None => identifier.to_string(),
            };
            ("uvx", [runtime, vec![spec]].concat())
        }
        _ => {
            // A container sees only the variables passed to it: `-e NAME` hands on each.
            let forwarded = env.keys().flat_map(|k| ["-e".to_string(), k.clone()]);
            let has_tag = identifier
                .rsplit('/')
                .next()
                .is_some_and(|last| last.contains(':'))
                || identifier.contains('@');
            let image = match version {
                Some(v) if !has_tag => format!("{identifier}:{v}"),
                _ => identifier.to_string(),
            };
            let run = ["run", "-i", "--rm"].map(String::from).to_vec();
            (
                "docker",
                [run, runtime, forwarded.collect(), vec![image]].concat(),
            )
        }
    };
    args.extend(arguments);
    let mut entry = json!({"command": command, "args": args});
    if !env.is_empty() {
        entry["env"] = Value::Object(env);
    }
    entry
}

/// A remote's URL (its `{variables}` filled in) and headers.
fn remote_entry(remote: &Value, inputs: &mut Inputs) -> Value {
    let url = remote["url"].as_str().unwrap_or_default();
    let url = inputs.substitute(url, &remote["variables"], Given::Arg);
    let kind = if remote["type"] == "sse" {
        "sse"
    } else {
        "http"
    };
    let mut entry = json!({"type": kind, "url": url});
    let mut headers = Map::new();
    for header in remote["headers"].as_array().into_iter().flatten() {
        let Some(name) = header["name"].as_str() else {
            continue;
        };
        if let Some(value) = inputs.resolve(header, name, Given::Env) {
            headers.insert(name.to_string(), Value::String(value));
        }
    }
    if !headers.is_empty() {
        entry["headers"] = Value::Object(headers);
    }
    entry
}

/// Which flag gives an input: `--env` (variables, headers) or `--arg` (arguments, URL variables).
#[derive(Clone, Copy)]
enum Given {
    Env,
    Arg,
}

impl Given {
    fn flag(self) -> &'static str {
        match self {
            Given::Env => "--env",
            Given::Arg => "--arg",
        }
    }
}

/// The values of a record's inputs as they are found.
struct Inputs {
    id: String,
    env: BTreeMap<String, String>,
    args: BTreeMap<String, String>,
    /// `--env NAME` / `--arg NAME` the record asked for.
    used: BTreeSet<String>,
    /// Whether to ask on the terminal.
    ask: bool,
    /// Env-file variables to write: name, value.
    secrets: Vec<(String, String)>,
    /// Required inputs without a value: how to give each.
    missing: Vec<String>,
}

impl Inputs {
    /// The value of one input (`isRequired`, `isSecret`, `value`, `default`, `variables`),
    /// given as `name`; a secret the person gave is written as `${ID_NAME}`.
    fn resolve(&mut self, input: &Value, name: &str, given: Given) -> Option<String> {
        let secret = input["isSecret"] == true;
        let required = input["isRequired"] == true;
        let offered = match given {
            Given::Env => self.env.get(name),
            Given::Arg => self.args.get(name),
        };
        if let Some(value) = offered.cloned() {
            self.used.insert(format!("{} {name}", given.flag()));
            return Some(self.keep(name, value, secret));
        }
        if let Some(value) = input["value"].as_str() {
            return Some(self.substitute(value, &input["variables"], given));
        }
        let default = input["default"].as_str();
        if self.ask {
            let about = input["description"]
                .as_str()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            let shown_default = default.map(|d| format!(" [{d}]")).unwrap_or_default();
            let optional = if required { "" } else { ", optional" };
            let prompt = format!("{name}{about}{optional}{shown_default}: ");
            match ask(&prompt, secret) {
                Ok(answer) if !answer.is_empty() => return Some(self.keep(name, answer, secret)),
                Ok(_) => {}
                Err(e) => eprintln!("evoctl: cannot read the answer: {e}"),
            }
        }
        if let Some(default) = default {
            return Some(default.to_string());
        }
        if required {
            let about = input["description"]
                .as_str()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            self.missing
                .push(format!("{} {name}=VALUE{about}", given.flag()));
        }
        None
    }

    /// A secret goes to the env file; the entry gets a reference to it.
    fn keep(&mut self, name: &str, value: String, secret: bool) -> String {
        if !secret {
            return value;
        }
        let upper = |text: &str| -> String {
            text.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let (id, name) = (upper(&self.id), upper(name));
        // `AIRTABLE_API_KEY` of server `airtable` is named enough already.
        let var = if name.starts_with(&format!("{id}_")) {
            name
        } else {
            format!("{id}_{name}")
        };
        self.secrets.retain(|(k, _)| *k != var);
        self.secrets.push((var.clone(), value));
        format!("${{{var}}}")
    }

    /// `text` with each `{name}` of `variables` replaced by its value (unknown ones kept).
    fn substitute(&mut self, text: &str, variables: &Value, given: Given) -> String {
        let Some(variables) = variables.as_object() else {
            return text.to_string();
        };
        let mut out = text.to_string();
        for (name, input) in variables {
            let hole = format!("{{{name}}}");
            if out.contains(&hole) {
                let value = self.resolve(input, name, given).unwrap_or_default();
                out = out.replace(&hole, &value);
            }
        }
        out
    }

    /// The command-line words of a list of arguments.
    fn arguments(&mut self, list: &Value) -> Vec<String> {
        let mut words = Vec::new();
        for (i, arg) in list.as_array().into_iter().flatten().enumerate() {
            if arg["type"] == "named" {
                let Some(flag) = arg["name"].as_str() else {
                    continue;
                };
                let label = flag.trim_start_matches('-');
                let boolean = arg["format"] == "boolean";
                match self.resolve(arg, label, Given::Arg) {
                    Some(v) if boolean && v == "true" => words.push(flag.to_string()),
                    Some(v) if boolean && v == "false" => {}
                    Some(v) => words.extend([flag.to_string(), v]),
                    None => {}
                }
            } else {
                let label = arg["valueHint"]
                    .as_str()
                    .map_or_else(|| format!("arg{}", i + 1), str::to_string);
                if let Some(v) = self.resolve(arg, &label, Given::Arg) {
                    words.push(v);
                }
            }
        }
        words
    }

    /// Fails when a required input has no value, or a flag named nothing the record takes.
    fn check_complete(&self, record: &Record) -> Result<(), String> {
        let offered = self
            .env
            .keys()
            .map(|k| format!("--env {k}"))
            .chain(self.args.keys().map(|k| format!("--arg {k}")));
        let unused: Vec<String> = offered.filter(|o| !self.used.contains(o)).collect();
        if !self.missing.is_empty() {
            let terminal = if self.ask {
                ""
            } else {
                " (on a terminal evoctl asks for them)"
            };
            return Err(format!(
                "{} needs values evoctl does not have{terminal}: pass {}",
                record.name(),
                self.missing.join(", ")
            ));
        }
        if !unused.is_empty() {
            return Err(format!(
                "{} takes no {} (the inputs its record names: see `evoctl add {} --json` on a search); nothing was written",
                record.name(),
                unused.join(", "),
                record.name().rsplit('/').next().unwrap_or_default()
            ));
        }
        Ok(())
    }
}

/// Asks on the terminal; a secret is read with echo off.
fn ask(prompt: &str, secret: bool) -> io::Result<String> {
    // Echo off before the prompt shows: what is typed after it is never echoed.
    let _quiet = if secret {
        Some(NoEcho::on_stdin())
    } else {
        None
    };
    let mut err = io::stderr();
    write!(err, "{prompt}")?;
    err.flush()?;
    let mut line = String::new();
    io::stdin().lock().read_line(&mut line)?;
    if secret {
        writeln!(err)?;
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

/// The terminal's echo off while it lives.
struct NoEcho {
    #[cfg(unix)]
    saved: Option<libc::termios>,
}

impl NoEcho {
    #[cfg(unix)]
    fn on_stdin() -> NoEcho {
        // SAFETY: tcgetattr writes a termios for fd 0, which this process holds open, into
        // memory it owns; the struct is plain data, valid zeroed.
        let mut term: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut term) } != 0 {
            return NoEcho { saved: None };
        }
        let saved = term;
        term.c_lflag &= !libc::ECHO;
        term.c_lflag |= libc::ECHONL;
        // SAFETY: sets fd 0's attributes from a termios read from it above.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &term) };
        NoEcho { saved: Some(saved) }
    }

    #[cfg(not(unix))]
    fn on_stdin() -> NoEcho {
        NoEcho {}
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(saved) = &self.saved {
            // SAFETY: restores the attributes read from fd 0 when this was made.
            unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, saved) };
        }
    }
}

/// Appends the secrets to the env file (created 0600), refusing to change a variable it has.
fn stash_secrets(env_file: &Path, secrets: &[(String, String)]) -> Result<(), String> {
    if secrets.is_empty() {
        return Ok(());
    }
    let text = match fs::read_to_string(env_file) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", env_file.display())),
    };
    for (name, _) in secrets {
        let set = text.lines().any(|line| {
            let line = line.trim_start();
            let line = line.strip_prefix("export ").unwrap_or(line);
            line.split_once('=').is_some_and(|(k, _)| k.trim() == name)
        });
        if set {
            return Err(format!(
                "{} already sets {name}; remove that line (or pass --id for another name) and run this again; nothing was written",
                env_file.display()
            ));
        }
    }
    if let Some(dir) = env_file.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(env_file)
        .map_err(|e| format!("cannot write {}: {e}", env_file.display()))?;
    let mut lines = String::new();
    if !text.is_empty() && !text.ends_with('\n') {
        lines.push('\n');
    }
    for (name, value) in secrets {
        lines.push_str(&format!("{name}={}\n", env_quoted(value)));
    }
    file.write_all(lines.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", env_file.display()))
}

/// A value as the env file reads it back literally: single-quoted unless it holds a `'`,
/// else double-quoted with `\` and `"` escaped.
fn env_quoted(value: &str) -> String {
    if !value.contains('\'') {
        format!("'{value}'")
    } else {
        format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

fn pickup_says_login(pickup: &Pickup) -> bool {
    serde_json::to_value(pickup).is_ok_and(|p| {
        p["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["state"] == json!(ServerState::LoginRequired))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_drop_the_words_every_server_name_has() {
        for (name, id) in [
            ("io.github.domdomegg/airtable-mcp-server", "airtable"),
            (
                "io.github.modelcontextprotocol/server-everything",
                "everything",
            ),
            ("io.github.x/mcp-server-time", "time"),
            ("io.github.getcyphrex/cyphrex-mcp", "cyphrex"),
            ("com.example/My.Tool", "my-tool"),
            ("com.example/mcp-server", "mcp-server"),
        ] {
            assert_eq!(short_id(name), id, "{name}");
        }
    }

    fn inputs(env: &[(&str, &str)], args: &[(&str, &str)]) -> Inputs {
        let map = |p: &[(&str, &str)]| {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        Inputs {
            id: "w".into(),
            env: map(env),
            args: map(args),
            used: BTreeSet::new(),
            ask: false,
            secrets: Vec::new(),
            missing: Vec::new(),
        }
    }

    /// The registry's own example (examples/valid/with-package.json): the positional argument
    /// by its valueHint, the fixed named one, the secret to the env file.
    #[test]
    fn a_package_becomes_a_command_with_its_arguments_and_secrets_by_reference() {
        let package = json!({
            "registryType": "npm", "identifier": "@modelcontextprotocol/server-weather",
            "version": "1.0.0", "transport": {"type": "stdio"}, "runtimeHint": "npx",
            "packageArguments": [
                {"type": "positional", "valueHint": "config_path"},
                {"type": "named", "name": "--port", "value": "8080"}
            ],
            "environmentVariables": [{"name": "API_KEY", "isSecret": true, "isRequired": true}]
        });
        let mut given = inputs(&[("API_KEY", "s3cret")], &[("config_path", "/etc/w.json")]);
        let entry = package_entry(&package, "npm", &mut given);
        assert_eq!(
            entry,
            json!({"command": "npx",
                   "args": ["-y", "@modelcontextprotocol/server-weather@1.0.0", "/etc/w.json", "--port", "8080"],
                   "env": {"API_KEY": "${W_API_KEY}"}})
        );
        assert_eq!(
            given.secrets,
            vec![("W_API_KEY".to_string(), "s3cret".to_string())]
        );

        let mut none = inputs(&[], &[]);
        package_entry(&package, "npm", &mut none);
        assert_eq!(none.missing, vec!["--env API_KEY=VALUE".to_string()]);
    }

    /// Runtime arguments go to the runner, before the package; a boolean flag is the flag alone.
    #[test]
    fn runtime_arguments_come_before_the_package() {
        let package = json!({
            "registryType": "pypi", "identifier": "mcp-x", "version": "2.0",
            "transport": {"type": "stdio"}, "runtimeHint": "uvx",
            "runtimeArguments": [{"type": "named", "name": "--python", "value": "3.12"}],
            "packageArguments": [
                {"type": "named", "name": "--read-only", "format": "boolean", "default": "true"},
                {"type": "named", "name": "--verbose", "format": "boolean"},
                {"type": "positional", "value": "{root}/data",
                 "variables": {"root": {"default": "/srv"}}}
            ]
        });
        let entry = package_entry(&package, "pypi", &mut inputs(&[], &[]));
        assert_eq!(
            entry,
            json!({"command": "uvx",
                   "args": ["--python", "3.12", "mcp-x==2.0", "--read-only", "/srv/data"]})
        );
    }

    #[test]
    fn an_image_hands_its_variables_to_the_container() {
        let package = json!({"registryType": "oci", "identifier": "docker.io/a/b:1.2",
                             "transport": {"type": "stdio"},
                             "environmentVariables": [{"name": "K", "default": "v"}]});
        let entry = package_entry(&package, "oci", &mut inputs(&[], &[]));
        assert_eq!(
            entry,
            json!({"command": "docker", "args": ["run", "-i", "--rm", "-e", "K", "docker.io/a/b:1.2"],
                   "env": {"K": "v"}})
        );
    }

    #[test]
    fn a_remote_fills_its_url_variables_and_headers() {
        let remote = json!({"type": "streamable-http", "url": "https://{tenant}.example/mcp",
                            "variables": {"tenant": {"isRequired": true}},
                            "headers": [{"name": "Authorization", "value": "Bearer {token}",
                                         "variables": {"token": {"isSecret": true, "isRequired": true}}}]});
        let mut given = inputs(&[("token", "t0k")], &[("tenant", "acme")]);
        assert_eq!(
            remote_entry(&remote, &mut given),
            json!({"type": "http", "url": "https://acme.example/mcp",
                   "headers": {"Authorization": "Bearer ${W_TOKEN}"}})
        );
    }

    #[test]
    fn env_file_values_read_back_literally() {
        assert_eq!(env_quoted("a b#c"), "'a b#c'");
        assert_eq!(env_quoted("it's \"x\"\\"), "\"it's \\\"x\\\"\\\\\"");
    }
}
