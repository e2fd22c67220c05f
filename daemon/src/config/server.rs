//! One server entry ([`ServerSpec`]): how to reach the server ([`TransportSpec`]), its
//! settings, and why an entry that cannot be used is skipped ([`ServerConfigError`]). `Debug`
//! output hides env and header values.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use evo_proto::entry::{TransportKind, has_http_scheme};
use evo_proto::json_kind;
use serde_json::{Map, Value};

use super::diagnostics::{ServerConfigError, Warnings, warn_unknown_keys};
use super::expand::Env;
use super::expand::{ExpandError, expand_vars};
use super::hash::{ConfigHash, Launch};
use super::keys::SERVER_KEYS;
use super::oauth::{OAuthSpec, binding, parse_oauth};
use super::overrides::{ToolOverride, parse_tools};
use super::readers::{
    TypeError, boolean, count, positive, present, seconds, string, string_list, string_map,
};
use super::sandbox::{SandboxSpec, parse_sandbox};
use crate::names;

/// Per-call timeout when a server sets no `timeout_s`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// `start_timeout_s` when unset.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);

/// One enabled, valid child server, with every `${VAR}` already expanded.
///
/// `Debug` is written by hand so env and header values (often secrets) print as `<redacted>`.
#[derive(Clone, PartialEq)]
pub struct ServerSpec {
    /// The key under `mcpServers`/`servers`.
    pub id: String,
    pub transport: TransportSpec,
    /// Prepended to upstream tool names as `{prefix}_{tool}`; `""` exposes them unprefixed.
    /// Not sanitised here: `names::exposed_name` does that.
    pub prefix: String,
    /// Per-call timeout (`timeout_s`).
    pub timeout: Duration,
    /// Stop the child after this long without calls (`idle_timeout_s`); `None` keeps it running.
    pub idle_timeout: Option<Duration>,
    /// How long a start may take to answer the handshake and list its tools, counted from the
    /// child's own start (`start_timeout_s`).
    pub start_timeout: Duration,
    /// Largest result of this server's tools passed on whole
    /// (`max_result_bytes`); `None` takes `limits.max_result_bytes`.
    pub max_result_bytes: Option<usize>,
    /// Grouping for search and disclosure; defaults to the id.
    pub domain: String,
    /// Upstream tool names always shown with full schemas.
    pub hot: Vec<String>,
    /// Upstream tool name -> {wrong parameter name -> right parameter name}.
    pub aliases: BTreeMap<String, BTreeMap<String, String>>,
    /// Upstream tool name -> what this entry changes about it (`tools`; see `overrides.rs`).
    pub tools: BTreeMap<String, ToolOverride>,
    /// Searchable capabilities from env flags (`XTOOL=true` gives `x`).
    pub capabilities: BTreeSet<String>,
    /// Identity of the child as launched: a changed hash means restart and re-discover.
    pub hash: ConfigHash,
    /// Variables the entry refers to that evod's environment lacks: a `${VAR:-default}` that
    /// fell back to its default, a `${VAR}` that is set but empty. Named in the server's
    /// failures, where they are often the cause.
    pub missing_vars: Vec<MissingVar>,
    /// The env file where such a variable would be set (for the note), if known.
    pub env_file: Option<PathBuf>,
    /// `auth: "oauth"` / `oauth` of a remote server.
    pub oauth: Option<OAuthSpec>,
    /// A stdio server's `sandbox` (or `sandbox.default`); `None`: not confined.
    pub sandbox: Option<SandboxSpec>,
}

/// A `${VAR}` reference whose variable is unset or empty in evod's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingVar {
    pub name: String,
    /// Where in the entry, e.g. `env.SSL_CERT_FILE`, `args[1]`.
    pub key: String,
    /// Set, but to the empty string (else unset).
    pub empty: bool,
}

impl ServerSpec {
    /// The note a failure of this server carries when its config refers to variables evod's
    /// environment lacks, e.g. `note: SSL_CERT_FILE (referenced by this server's config in
    /// env.SSL_CERT_FILE) is not set in evod's environment, so its default was used; if the
    /// server needs it, set it in /home/u/.config/evo/env and run `evoctl reload``.
    pub fn missing_vars_note(&self) -> Option<String> {
        if self.missing_vars.is_empty() {
            return None;
        }
        let mut seen = BTreeSet::new();
        let refs: Vec<String> = self
            .missing_vars
            .iter()
            .filter(|m| seen.insert(m.name.as_str()))
            .map(|m| {
                let keys: Vec<&str> = self
                    .missing_vars
                    .iter()
                    .filter(|other| other.name == m.name)
                    .map(|other| other.key.as_str())
                    .collect();
                let state = if m.empty { "empty" } else { "not set" };
                format!(
                    "{} (referenced by this server's config in {}) is {state}",
                    m.name,
                    keys.join(", ")
                )
            })
            .collect();
        let place = match &self.env_file {
            Some(path) => format!("set it in {} and run `evoctl reload`", path.display()),
            None => "set it in evod's env file (`env_file`) and run `evoctl reload`".to_owned(),
        };
        Some(format!(
            "note: {} in evod's environment; if the server needs {}, {place}",
            refs.join("; "),
            if seen.len() == 1 { "it" } else { "them" },
        ))
    }
}

impl fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerSpec")
            .field("id", &self.id)
            .field("transport", &self.transport)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("start_timeout", &self.start_timeout)
            .field("max_result_bytes", &self.max_result_bytes)
            .field("domain", &self.domain)
            .field("hot", &self.hot)
            .field("aliases", &self.aliases)
            .field("tools", &self.tools)
            .field("capabilities", &self.capabilities)
            .field("hash", &self.hash)
            .field("missing_vars", &self.missing_vars)
            .field("env_file", &self.env_file)
            .field("oauth", &self.oauth)
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

/// How to reach a child server.
///
/// `Debug` is written by hand so env and header values print as `<redacted>` (keys are shown).
#[derive(Clone, PartialEq, Eq)]
pub enum TransportSpec {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout. Its environment is
    /// the daemon's plus `env`.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A remote endpoint: Streamable HTTP, or with `sse` the legacy
    /// HTTP+SSE transport (`url` is the SSE stream's).
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        sse: bool,
    },
}

impl ServerSpec {
    /// The values a child may hold as secrets: its configured env values and
    /// header values (never shown in status, even when the child echoes one).
    pub fn secret_values(&self) -> Vec<&str> {
        match &self.transport {
            TransportSpec::Stdio { env, .. } => env.values().map(String::as_str).collect(),
            TransportSpec::Http { headers, .. } => headers.values().map(String::as_str).collect(),
        }
    }
}

impl TransportSpec {
    /// `stdio` or `http`, for status output.
    pub fn kind(&self) -> &'static str {
        match self {
            TransportSpec::Stdio { .. } => "stdio",
            TransportSpec::Http { sse: false, .. } => "http",
            TransportSpec::Http { sse: true, .. } => "sse",
        }
    }
}

impl fmt::Debug for TransportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &RedactedValues(env))
                .field("cwd", cwd)
                .finish(),
            TransportSpec::Http { url, headers, sse } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &RedactedValues(headers))
                .field("sse", sse)
                .finish(),
        }
    }
}

/// Debug view of a map that shows its keys and hides its values.
struct RedactedValues<'a>(&'a BTreeMap<String, String>);

impl fmt::Debug for RedactedValues<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|key| (key, Redacted)))
            .finish()
    }
}

/// Stands in for a secret in Debug output.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Parses one server entry. `Ok(None)` means `disabled: true`. `sandbox_default` is the
/// top-level `sandbox.default`, taken by a stdio server without its own `sandbox`.
pub(super) fn parse_server(
    section: &str,
    id: &str,
    value: &Value,
    env: &Env<'_>,
    sandbox_default: Option<&Value>,
    warnings: &mut Warnings<'_>,
) -> Result<Option<ServerSpec>, ServerConfigError> {
    let Value::Object(object) = value else {
        return Err(ServerConfigError {
            server: id.to_owned(),
            key: String::new(),
            message: format!(
                "expected an object describing the server, found {}",
                json_kind(value)
            ),
        });
    };
    let entry = Entry {
        section,
        id,
        object,
        env,
        missing: RefCell::default(),
    };
    warn_unknown_keys(
        object,
        SERVER_KEYS,
        &[section, id],
        &entry.label(),
        warnings,
    );
    if id.is_empty() {
        return Err(entry.fail("", "the server id must not be empty".to_owned()));
    }
    if entry.read("disabled", boolean)? == Some(true) {
        return Ok(None);
    }

    let command = entry.read("command", string)?;
    let url = entry.read("url", string)?;
    let chosen = transport_kind(object, command.is_some(), url.is_some())
        .map_err(|(key, message)| entry.fail(key, message))?;
    // `env` is allowed on both transports: on an HTTP server it only carries capability flags.
    let own_env = entry.expanded_map("env")?;
    let capabilities = capabilities(&own_env);
    let (transport, hash, oauth, sandbox) = match chosen {
        TransportKind::Stdio => {
            let sandbox = entry.sandbox(sandbox_default)?;
            let (transport, hash) =
                stdio_transport(&entry, command, own_env, sandbox.as_ref(), warnings)?;
            (transport, hash, None, sandbox)
        }
        TransportKind::Http | TransportKind::Sse => {
            let sse = chosen == TransportKind::Sse;
            let (transport, hash, oauth) = remote_transport(&entry, url, sse, &own_env, warnings)?;
            (transport, hash, oauth, None)
        }
    };

    let prefix = entry.read("prefix", string)?.unwrap_or(id).to_owned();
    let domain = match entry.read("domain", string)? {
        Some("") => return Err(entry.fail("domain", "must not be empty".to_owned())),
        Some(domain) => domain.to_owned(),
        None => id.to_owned(),
    };
    let timeout = entry.read("timeout_s", seconds)?.unwrap_or(DEFAULT_TIMEOUT);
    let idle_timeout = entry.read("idle_timeout_s", seconds)?;
    let start_timeout = entry
        .read("start_timeout_s", seconds)?
        .unwrap_or(DEFAULT_START_TIMEOUT);
    let max_result_bytes =
        entry.read("max_result_bytes", |value| count(value).and_then(positive))?;
    let hot = entry.read("hot", string_list)?.unwrap_or_default();
    let aliases = entry.aliases()?;
    let tools = match present(object, "tools") {
        Some(value) => parse_tools(value, &prefix, &[section, id], &entry.label(), warnings)
            .map_err(|err| entry.wrong("tools", err))?,
        None => BTreeMap::new(),
    };

    Ok(Some(ServerSpec {
        id: id.to_owned(),
        capabilities,
        transport,
        prefix,
        timeout,
        idle_timeout,
        start_timeout,
        max_result_bytes,
        domain,
        hot,
        aliases,
        tools,
        hash,
        missing_vars: entry.missing.into_inner(),
        env_file: env.file.map(Path::to_path_buf),
        oauth,
        sandbox,
    }))
}

/// A stdio server's process: `command`, `args` and `cwd` expanded, and its environment.
fn stdio_transport(
    entry: &Entry<'_>,
    command: Option<&str>,
    own_env: BTreeMap<String, String>,
    sandbox: Option<&SandboxSpec>,
    warnings: &mut Warnings<'_>,
) -> Result<(TransportSpec, ConfigHash), ServerConfigError> {
    entry.warn_ignored(&["url", "headers"], "a stdio", warnings);
    let raw = command.ok_or_else(|| {
        entry.fail(
            "command",
            "the server's type is 'stdio' but 'command' is missing".to_owned(),
        )
    })?;
    let command = entry.expand("command", raw)?;
    if command.trim().is_empty() {
        return Err(entry.fail("command", "is empty".to_owned()));
    }
    let mut args = Vec::new();
    for (index, raw) in entry
        .read("args", string_list)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        args.push(entry.expand(&format!("args[{index}]"), raw)?);
    }
    let cwd = entry
        .read("cwd", string)?
        .map(|raw| entry.expand("cwd", raw))
        .transpose()?;
    // The child's environment: evod's, the env file's, then its own `env`.
    let mut env = own_env;
    for (name, value) in entry.env.overlay {
        env.entry(name.clone()).or_insert_with(|| value.clone());
    }
    let hash = ConfigHash::of(&Launch {
        id: entry.id,
        command: Some(&command),
        args: &args,
        env: &env,
        cwd: cwd.as_deref(),
        url: None,
        headers: &BTreeMap::new(),
        // Only when set, so unconfined servers keep their hashes.
        extra: sandbox.map(SandboxSpec::hash_text),
    });
    let transport = TransportSpec::Stdio {
        command,
        args,
        env,
        cwd: cwd.map(PathBuf::from),
    };
    Ok((transport, hash))
}

/// A remote server's endpoint: `url` and `headers` expanded, and its OAuth entries. Its own
/// `env` (capability flags) counts in its hash.
fn remote_transport(
    entry: &Entry<'_>,
    url: Option<&str>,
    sse: bool,
    own_env: &BTreeMap<String, String>,
    warnings: &mut Warnings<'_>,
) -> Result<(TransportSpec, ConfigHash, Option<OAuthSpec>), ServerConfigError> {
    entry.warn_ignored(&["command", "args", "cwd", "sandbox"], "an HTTP", warnings);
    let raw = url.ok_or_else(|| {
        entry.fail(
            "url",
            "the server's type is 'http' but 'url' is missing".to_owned(),
        )
    })?;
    let url = entry.expand("url", raw)?;
    if !has_http_scheme(&url) {
        return Err(entry.fail("url", "must be an http:// or https:// URL".to_owned()));
    }
    let headers = entry.expanded_map("headers")?;
    let oauth = parse_oauth(
        entry.object,
        &|key, raw| entry.expand(key, raw),
        &|key, message| entry.fail(key, message),
    )?;
    let extra = (sse || oauth.is_some()).then(|| {
        format!(
            "sse={sse};oauth={}",
            oauth
                .as_ref()
                .map(|o| binding("", Some(o)))
                .unwrap_or_default()
        )
    });
    let hash = ConfigHash::of(&Launch {
        id: entry.id,
        command: None,
        args: &[],
        env: own_env,
        cwd: None,
        url: Some(&url),
        headers: &headers,
        extra,
    });
    Ok((TransportSpec::Http { url, headers, sse }, hash, oauth))
}

/// One server entry while it is read: what its errors and warnings name, and the variables
/// its `${VAR}` references found missing so far.
struct Entry<'a> {
    /// `mcpServers` or `servers`.
    section: &'a str,
    id: &'a str,
    object: &'a Map<String, Value>,
    env: &'a Env<'a>,
    /// Filled by [`Entry::expand`], which the OAuth entries call through a `Fn`.
    missing: RefCell<Vec<MissingVar>>,
}

impl<'a> Entry<'a> {
    /// `server 'id'`, for warnings.
    fn label(&self) -> String {
        format!("server '{}'", self.id)
    }

    fn fail(&self, key: &str, message: String) -> ServerConfigError {
        ServerConfigError {
            server: self.id.to_owned(),
            key: key.to_owned(),
            message,
        }
    }

    /// The value under `key` read by `reader`, when the key is there (`null` is not).
    fn read<T>(
        &self,
        key: &str,
        reader: impl FnOnce(&'a Value) -> Result<T, TypeError>,
    ) -> Result<Option<T>, ServerConfigError> {
        present(self.object, key)
            .map(reader)
            .transpose()
            .map_err(|err| self.wrong(key, err))
    }

    /// A wrong type under `key`; the error's path extends the key (`args` + `[2]`).
    fn wrong(&self, key: &str, err: TypeError) -> ServerConfigError {
        self.fail(&format!("{key}{}", err.path), err.message)
    }

    /// `raw` with its `${VAR}` references expanded; `key` says where, in errors and in the
    /// references to missing variables kept for the note.
    fn expand(&self, key: &str, raw: &str) -> Result<String, ServerConfigError> {
        let mut found = Vec::new();
        let expanded = expand_vars(raw, self.env.lookup, &mut found).map_err(|err| match err {
            ExpandError::Unset(name) => self.fail(key, unset_message(&name, self.env.file)),
            err => self.fail(key, err.to_string()),
        })?;
        self.missing
            .borrow_mut()
            .extend(found.into_iter().map(|(name, empty)| MissingVar {
                name,
                key: key.to_owned(),
                empty,
            }));
        Ok(expanded)
    }

    /// The object of strings under `key` (`env`, `headers`), each value expanded.
    fn expanded_map(&self, key: &str) -> Result<BTreeMap<String, String>, ServerConfigError> {
        let mut expanded = BTreeMap::new();
        for (name, raw) in self.read(key, string_map)?.unwrap_or_default() {
            let value = self.expand(&format!("{key}.{name}"), &raw)?;
            expanded.insert(name, value);
        }
        Ok(expanded)
    }

    /// The stdio server's sandbox: its own `sandbox`, else `default` (`sandbox.default`).
    fn sandbox(&self, default: Option<&Value>) -> Result<Option<SandboxSpec>, ServerConfigError> {
        let (value, key) = match present(self.object, "sandbox") {
            Some(own) => (own, "sandbox"),
            None => match default {
                Some(default) => (default, "sandbox.default"),
                None => return Ok(None),
            },
        };
        let expand = |at: &str, raw: &str| {
            self.expand(&format!("{key}{at}"), raw)
                .map_err(|err| err.message)
        };
        let home = (self.env.lookup)("HOME");
        parse_sandbox(value, &expand, home.as_deref())
            .map_err(|(at, message)| self.fail(&format!("{key}{at}"), message))
    }

    /// `aliases`: upstream tool name -> {wrong parameter name -> right parameter name}.
    fn aliases(&self) -> Result<BTreeMap<String, BTreeMap<String, String>>, ServerConfigError> {
        let mut aliases = BTreeMap::new();
        let Some(value) = present(self.object, "aliases") else {
            return Ok(aliases);
        };
        let Value::Object(tools) = value else {
            return Err(self.wrong("aliases", TypeError::expected("an object", value)));
        };
        for (tool, renames) in tools {
            let renames = string_map(renames).map_err(|err| {
                let path = format!(".{tool}{}", err.path);
                self.wrong("aliases", err.at(path))
            })?;
            aliases.insert(tool.clone(), renames);
        }
        Ok(aliases)
    }

    /// Warns about each of `keys` that is set although this transport (`a stdio`, `an HTTP`)
    /// has no use for it.
    fn warn_ignored(&self, keys: &[&str], transport: &str, warnings: &mut Warnings<'_>) {
        for key in keys {
            if present(self.object, key).is_some() {
                warnings.push(
                    &[self.section, self.id, key],
                    format!("{}: '{key}' ignored for {transport} server", self.label()),
                );
            }
        }
    }
}
/// The error of a `${NAME}` whose variable is unset, pointing at the env file.
fn unset_message(name: &str, env_file: Option<&Path>) -> String {
    match env_file {
        Some(file) => format!(
            "environment variable {name} is not set in evod's environment; set it in {} (then \
             `evoctl reload`) or remove the reference",
            file.display()
        ),
        None => ExpandError::Unset(name.to_owned()).to_string(),
    }
}

/// Decides the transport from `type`/`transport` and the presence of `command`/`url`.
/// Errors are (key, message).
fn transport_kind(
    object: &Map<String, Value>,
    has_command: bool,
    has_url: bool,
) -> Result<TransportKind, (&'static str, String)> {
    let mut declared = None;
    for key in ["type", "transport"] {
        let Some(value) = present(object, key) else {
            continue;
        };
        let name = string(value).map_err(|err| (key, err.message))?;
        let kind = TransportKind::from_declared(name).ok_or_else(|| {
            (
                key,
                format!(
                    "transport '{name}' is not supported; use 'stdio' (with 'command'), \
                     'http' (Streamable HTTP, with 'url') or 'sse' (legacy HTTP+SSE, with 'url')"
                ),
            )
        })?;
        if declared.is_some_and(|earlier| earlier != kind) {
            return Err((key, "'type' and 'transport' disagree; keep one".to_owned()));
        }
        declared = Some(kind);
    }
    match (declared, has_command, has_url) {
        (Some(kind), _, _) => Ok(kind),
        (None, true, false) => Ok(TransportKind::Stdio),
        (None, false, true) => Ok(TransportKind::Http),
        (None, true, true) => Err((
            "url",
            "both 'command' and 'url' are set; keep one, or say which with 'type'".to_owned(),
        )),
        (None, false, false) => Err((
            "command",
            "neither 'command' (stdio) nor 'url' (http) is set".to_owned(),
        )),
    }
}

/// Capabilities from env flags: a key ending in `TOOL` (any case) whose value is true/1/yes
/// (any case) gives the key lowercased, without the suffix and trailing `_`s:
/// `XTOOL=True` gives `x`, `GITHUB_TOOL=1` gives `github`.
pub fn capabilities(env: &BTreeMap<String, String>) -> BTreeSet<String> {
    env.iter()
        .filter(|(_, value)| is_truthy(value))
        .filter_map(|(key, _)| capability_of(key))
        .collect()
}

fn capability_of(key: &str) -> Option<String> {
    let stem_len = key.len().checked_sub("tool".len())?;
    let suffix = key.get(stem_len..)?;
    if !suffix.eq_ignore_ascii_case("tool") {
        return None;
    }
    let name = key[..stem_len].trim_end_matches('_').to_lowercase();
    (!name.is_empty()).then_some(name)
}

fn is_truthy(value: &str) -> bool {
    let value = value.trim();
    ["true", "1", "yes"]
        .iter()
        .any(|word| value.eq_ignore_ascii_case(word))
}

impl ServerSpec {
    /// The override configured for the upstream tool `upstream`, if any.
    pub fn override_of(&self, upstream: &str) -> Option<&ToolOverride> {
        self.tools.get(upstream)
    }

    /// The name clients see for the upstream tool `upstream`: `{prefix}_{name}` with an
    /// override's `name` in place of the upstream one. Every exposed name of a proxied tool
    /// comes from here.
    pub fn exposed_name(&self, upstream: &str) -> String {
        names::exposed_name(&self.prefix, self.renamed(upstream))
    }

    /// The doubled form of the exposed name that still routes, when the (overridden) name
    /// already carries the prefix.
    pub fn doubled_name(&self, upstream: &str) -> Option<String> {
        names::doubled_name(&self.prefix, self.renamed(upstream))
    }

    fn renamed<'a>(&'a self, upstream: &'a str) -> &'a str {
        self.override_of(upstream)
            .and_then(|o| o.name.as_deref())
            .unwrap_or(upstream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{messages, one_server, parse_ok};

    #[test]
    fn per_server_settings() {
        let config = one_server(
            r#"{"command": "x", "prefix": "", "timeout_s": 2.5, "idle_timeout_s": 300,
                "start_timeout_s": 5, "domain": "files", "description": "ignored, no warning",
                "aliases": {"read": {"file": "path", "p": "path"}}}"#,
        );
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        let spec = &config.servers[0];
        assert_eq!(spec.prefix, "");
        assert_eq!(spec.timeout, Duration::from_millis(2500));
        assert_eq!(spec.idle_timeout, Some(Duration::from_secs(300)));
        assert_eq!(spec.start_timeout, Duration::from_secs(5));
        assert_eq!(spec.domain, "files");
        let read = &spec.aliases["read"];
        assert_eq!(read.get("file").map(String::as_str), Some("path"));
        assert_eq!(read.get("p").map(String::as_str), Some("path"));
    }

    #[test]
    fn transport_is_chosen_from_type_command_and_url() {
        use TransportKind::{Http, Stdio};
        #[rustfmt::skip]
        let cases = [
            (r#"{"command": "c"}"#, Stdio),
            (r#"{"type": "stdio", "command": "c"}"#, Stdio),
            (r#"{"url": "http://h/mcp"}"#, Http),
            (r#"{"type": "http", "url": "https://h/mcp"}"#, Http),
            (r#"{"type": "streamable-http", "url": "https://h"}"#, Http),
            (r#"{"type": "streamableHttp", "url": "https://h"}"#, Http),
            (r#"{"transport": "HTTP", "url": "HTTPS://h"}"#, Http),
            (r#"{"type": "http", "transport": "streamable_http", "url": "https://h"}"#, Http),
            (r#"{"type": "sse", "url": "https://h/sse"}"#, TransportKind::Sse),
        ];
        for (body, expected) in cases {
            let config = one_server(body);
            assert!(config.failed.is_empty(), "{body}: {:?}", config.failed);
            let actual = match config.servers[0].transport {
                TransportSpec::Stdio { .. } => Stdio,
                TransportSpec::Http { sse: false, .. } => Http,
                TransportSpec::Http { sse: true, .. } => TransportKind::Sse,
            };
            assert_eq!(actual, expected, "{body}");
        }
    }

    #[test]
    fn http_server_expands_url_and_headers() {
        let config = one_server(
            r#"{"url": "https://${EMPTY:-api.example}/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}", "X-Plain": "v"}}"#,
        );
        let TransportSpec::Http { url, headers, .. } = &config.servers[0].transport else {
            panic!("expected http: {config:?}");
        };
        assert_eq!(url, "https://api.example/mcp");
        let header = |name: &str| headers.get(name).map(String::as_str);
        assert_eq!(header("Authorization"), Some("Bearer s3cret-token"));
        assert_eq!(header("X-Plain"), Some("v"));
    }

    #[test]
    fn a_bad_server_fails_alone() {
        // (server body, key named in the error, words the message must contain)
        #[rustfmt::skip]
        let cases = [
            (r#"{"command": "${NOPE}"}"#, "command", "environment variable NOPE is not set; set it or remove the reference"),
            (r#"{"command": "c", "args": ["a", "b", "--token=${NOPE}"]}"#, "args[2]", "NOPE is not set"),
            (r#"{"command": "c", "env": {"LOG": "${NOPE}/x"}}"#, "env.LOG", "NOPE is not set"),
            (r#"{"command": "c", "cwd": "${NOPE}"}"#, "cwd", "NOPE is not set"),
            (r#"{"url": "https://${NOPE}/"}"#, "url", "NOPE is not set"),
            (r#"{"url": "https://h", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}"#, "headers.Authorization", "GITHUB_TOKEN is not set"),
            (r#"{"command": "c", "args": ["${A"]}"#, "args[0]", "without a closing"),
            (r#"{"command": "c", "args": ["${input:pat}"]}"#, "args[0]", "not a supported reference"),
            (r#"{"url": "https://h", "type": "websocket"}"#, "type", "'websocket' is not supported"),
            (r#"{"url": "https://h", "transport": "websocket"}"#, "transport", "not supported"),
            (r#"{"url": "https://h", "type": "http", "transport": "stdio"}"#, "transport", "disagree"),
            (r#"{}"#, "command", "neither 'command' (stdio) nor 'url' (http)"),
            (r#"{"description": "only this"}"#, "command", "neither"),
            (r#"{"command": "c", "url": "https://h"}"#, "url", "both 'command' and 'url'"),
            (r#"{"type": "http", "command": "c"}"#, "url", "'url' is missing"),
            (r#"{"type": "stdio", "url": "https://h"}"#, "command", "'command' is missing"),
            (r#"{"url": "ftp://h/x"}"#, "url", "must be an http:// or https:// URL"),
            (r#"{"command": "   "}"#, "command", "is empty"),
            (r#"{"command": 7}"#, "command", "expected a string, found 7"),
            (r#"{"command": "c", "args": "-y pkg"}"#, "args", "expected an array of strings, found a string"),
            (r#"{"command": "c", "args": ["ok", 1]}"#, "args[1]", "expected a string, found 1"),
            (r#"{"command": "c", "env": ["A=1"]}"#, "env", "expected an object of strings, found an array"),
            (r#"{"command": "c", "env": {"DEBUG": true}}"#, "env.DEBUG", "expected a string, found true"),
            (r#"{"url": "https://h", "headers": {"X": 1}}"#, "headers.X", "expected a string"),
            (r#"{"command": "c", "disabled": "yes"}"#, "disabled", "expected true or false"),
            (r#"{"command": "c", "prefix": 1}"#, "prefix", "expected a string"),
            (r#"{"command": "c", "timeout_s": 0}"#, "timeout_s", "positive number of seconds"),
            (r#"{"command": "c", "timeout_s": "60"}"#, "timeout_s", "positive number of seconds"),
            (r#"{"command": "c", "idle_timeout_s": -5}"#, "idle_timeout_s", "positive number"),
            (r#"{"command": "c", "domain": ""}"#, "domain", "must not be empty"),
            (r#"{"command": "c", "hot": "read"}"#, "hot", "array of strings"),
            (r#"{"command": "c", "aliases": []}"#, "aliases", "expected an object"),
            (r#"{"command": "c", "aliases": {"read": {"file": 1}}}"#, "aliases.read.file", "expected a string"),
            (r#"{"command": "c", "aliases": {"read": "path"}}"#, "aliases.read", "object of strings"),
            (r#""npx server""#, "", "expected an object describing the server"),
        ];
        for (body, key, words) in cases {
            let text =
                format!(r#"{{"mcpServers": {{"bad": {body}, "good": {{"command": "ok"}}}}}}"#);
            let config = parse_ok(&text);
            let ids: Vec<&str> = config.servers.iter().map(|s| s.id.as_str()).collect();
            assert_eq!(ids, ["good"], "{body}");
            assert_eq!(config.failed.len(), 1, "{body}: {:?}", config.failed);
            let err = &config.failed[0];
            assert_eq!(err.server, "bad", "{body}");
            assert_eq!(err.key, key, "{body}: {err}");
            assert!(err.message.contains(words), "{body}: {err}");
        }
    }

    #[test]
    fn server_error_display_names_server_key_and_variable() {
        let config = one_server(
            r#"{"url": "https://h", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}"#,
        );
        assert_eq!(
            config.failed[0].to_string(),
            "server 'x': headers.Authorization: environment variable GITHUB_TOKEN is not set; \
             set it or remove the reference"
        );
        let whole = ServerConfigError {
            server: "x".into(),
            key: String::new(),
            message: "m".into(),
        };
        assert_eq!(whole.to_string(), "server 'x': m");
    }

    #[test]
    fn sandboxes_come_from_the_entry_or_the_default() {
        let config = parse_ok(
            r#"{"sandbox": {"default": {"read": ["~/shared"]}},
                "mcpServers": {
                  "plain": {"command": "c"},
                  "own": {"command": "c", "sandbox": {"write": ["${HOME}/out"], "network": true}},
                  "free": {"command": "c", "sandbox": "off"},
                  "web": {"url": "https://h"}
                }}"#,
        );
        assert!(config.failed.is_empty(), "{:?}", config.failed);
        let sandbox = |id: &str| config.server(id).and_then(|s| s.sandbox.clone());
        let plain = sandbox("plain").expect("the default applies");
        assert_eq!(plain.read, [PathBuf::from("/home/u/shared")]);
        assert!(!plain.network);
        let own = sandbox("own").expect("its own entry");
        assert!(
            own.read.is_empty(),
            "an own entry replaces the default whole"
        );
        assert_eq!(own.write, [PathBuf::from("/home/u/out")]);
        assert!(own.network);
        assert_eq!(sandbox("free"), None);
        assert_eq!(sandbox("web"), None, "remote servers are not confined");
        let remote = one_server(r#"{"url": "https://h", "sandbox": {"network": false}}"#);
        assert_eq!(
            messages(&remote),
            ["server 'x': 'sandbox' ignored for an HTTP server"]
        );
        // A sandbox is part of the launch identity (a change restarts the server); an
        // unconfined server's hash does not change.
        let unconfined = one_server(r#"{"command": "c"}"#);
        let off = one_server(r#"{"command": "c", "sandbox": "off"}"#);
        let on = one_server(r#"{"command": "c", "sandbox": {}}"#);
        assert_eq!(unconfined.servers[0].hash, off.servers[0].hash);
        assert_ne!(unconfined.servers[0].hash, on.servers[0].hash);
    }

    #[test]
    fn a_bad_sandbox_fails_only_the_servers_that_take_it() {
        let config = parse_ok(
            r#"{"sandbox": {"default": {"read": "~"}},
                "mcpServers": {
                  "takes": {"command": "c"},
                  "own": {"command": "c", "sandbox": {"read": ["relative"]}},
                  "fine": {"command": "c", "sandbox": {"read": ["/srv"]}},
                  "web": {"url": "https://h"}
                }}"#,
        );
        let ids: Vec<&str> = config.servers.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["fine", "web"]);
        let failed: Vec<String> = config.failed.iter().map(ToString::to_string).collect();
        assert_eq!(
            failed,
            [
                "server 'takes': sandbox.default.read: expected an array of strings, found a string",
                "server 'own': sandbox.read[0]: 'relative' is not an absolute path; write it from / or from ~",
            ]
        );
    }

    #[test]
    fn disabled_servers_are_skipped_before_expansion() {
        let config = parse_ok(
            r#"{"mcpServers": {
                "off": {"command": "${NOPE}", "disabled": true},
                "on": {"command": "c", "disabled": false}
            }}"#,
        );
        assert_eq!(config.disabled, ["off"]);
        assert!(config.failed.is_empty(), "{:?}", config.failed);
        assert_eq!(config.servers.len(), 1);
        assert_eq!(config.servers[0].id, "on");
    }

    #[test]
    fn references_to_missing_variables_are_kept_for_the_note() {
        let config = one_server(
            r#"{"command": "c", "args": ["--home", "${HOME}", "${CERT:-}", "${EMPTY}"],
                "env": {"SSL_CERT_FILE": "${CERT:-/etc/ssl/cert.pem}", "T": "${TOKEN:-x}"}}"#,
        );
        let spec = &config.servers[0];
        let missing: Vec<(&str, &str, bool)> = spec
            .missing_vars
            .iter()
            .map(|m| (m.name.as_str(), m.key.as_str(), m.empty))
            .collect();
        assert_eq!(
            missing,
            [
                ("CERT", "env.SSL_CERT_FILE", false),
                ("CERT", "args[2]", false),
                ("EMPTY", "args[3]", true),
            ]
        );
        assert_eq!(
            spec.missing_vars_note().as_deref(),
            Some(
                "note: CERT (referenced by this server's config in env.SSL_CERT_FILE, args[2]) \
                 is not set; EMPTY (referenced by this server's config in args[3]) is empty in \
                 evod's environment; if the server needs them, set it in evod's env file \
                 (`env_file`) and run `evoctl reload`"
            )
        );
        let fine = one_server(r#"{"command": "c", "args": ["${HOME}", "${TOKEN:-x}"]}"#);
        assert_eq!(fine.servers[0].missing_vars_note(), None);
    }

    #[test]
    fn env_flags_become_capabilities() {
        // (env key, env value, capability)
        #[rustfmt::skip]
        let cases = [
            ("XTOOL", "True", Some("x")),
            ("GITHUB_TOOL", "1", Some("github")),
            ("web_search_tool", "YES", Some("web_search")),
            ("Browser__Tool", " true ", Some("browser")),
            ("éTOOL", "1", Some("é")),
            ("XTOOL", "false", None),
            ("XTOOL", "0", None),
            ("XTOOL", "", None),
            ("TOOL", "true", None),
            ("_TOOL", "true", None),
            ("TOOLS", "true", None),
            ("TOOLX", "true", None),
            ("LOG", "true", None),
        ];
        for (key, value, expected) in cases {
            let env = BTreeMap::from([(key.to_owned(), value.to_owned())]);
            let actual: Vec<String> = capabilities(&env).into_iter().collect();
            let expected: Vec<String> = expected.into_iter().map(str::to_owned).collect();
            assert_eq!(actual, expected, "{key}={value}");
        }
    }

    #[test]
    fn capabilities_come_from_expanded_env_on_any_transport() {
        let config = parse_ok(
            r#"{"mcpServers": {
                "a": {"command": "c", "env": {"GITHUB_TOOL": "${FLAG:-yes}", "XTOOL": "no"}},
                "b": {"url": "https://h", "env": {"SEARCH_TOOL": "1"}}
            }}"#,
        );
        let caps = |i: usize| -> Vec<&str> {
            config.servers[i]
                .capabilities
                .iter()
                .map(String::as_str)
                .collect()
        };
        assert_eq!(caps(0), ["github"]);
        assert_eq!(caps(1), ["search"]);
    }

    #[test]
    fn debug_output_redacts_env_and_header_values() {
        let config = parse_ok(
            r#"{"mcpServers": {
                "a": {"command": "c", "env": {"API_KEY": "${TOKEN}"}},
                "b": {"url": "https://h", "headers": {"Authorization": "Bearer ${TOKEN}"}}
            }}"#,
        );
        for text in [format!("{config:?}"), format!("{:#?}", config.servers)] {
            assert!(!text.contains("s3cret"), "{text}");
            assert!(text.contains("\"API_KEY\": <redacted>"), "{text}");
            assert!(text.contains("\"Authorization\": <redacted>"), "{text}");
        }
    }
}
