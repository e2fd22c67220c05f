//! The one config loader: turns `mcp.config.json` into a [`Config`].
//!
//! A pure module. [`parse`] takes the file's text and an environment lookup and returns values;
//! only [`load`] touches the file system. The supervisor owns the result and diffs successive
//! configs by [`ServerSpec::hash`] on reload.
//!
//! What the loader accepts (DESIGN.md, "mcp.config.json", is the contract):
//!
//! - Servers under `mcpServers` (Claude Desktop, Cursor) and/or `servers` (VS Code, EVOKORE-MCP).
//!   Both present: merged, `mcpServers` first; an id in both keeps the `mcpServers` entry.
//! - `command` means stdio; `url` means Streamable HTTP. `type`/`transport` may say `stdio`,
//!   `http`, `streamable-http` or `streamableHttp`; anything else (e.g. `sse`) fails that server.
//! - `${VAR}` expands from the environment in `command`, `args`, `env` values, `cwd`, `url` and
//!   `headers` values. `${VAR:-default}` uses `default` when `VAR` is unset or empty, and
//!   `${env:VAR}` (VS Code's spelling) is the same as `${VAR}`. Nothing else is special: `$VAR`
//!   stays as written and there is no escape for a literal `${`.
//! - A server that cannot be used (unset variable, wrong type for a known key, no transport) is
//!   reported in [`Config::failed`] and skipped; the others load. A JSON `null` for a per-server
//!   key counts as absent.
//! - Unknown keys are reported in [`Config::warnings`] with their line (and the known key
//!   they are probably a misspelling of), never fatal.
//! - `env_file` (default `env` beside the config, see [`envfile`]) is read by [`load`]
//!   before anything is expanded: its variables win over the process environment in `${VAR}`
//!   and are added to every stdio child's environment (under the server's own `env`), which
//!   makes them part of each stdio server's [`ConfigHash`]. A missing default file is nothing;
//!   a missing named one, a malformed line or a file others can read is a warning.
//! - Fatal ([`ConfigError`]): unreadable file, invalid JSON, a top level that is not an object,
//!   or a wrong type in a top-level section (`mcpServers`, `servers`, `discovery`, `cache`,
//!   `limits`). On reload the caller keeps the running config in force.

use evo_proto::entry::{TransportKind, has_http_scheme};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use evo_proto::json_kind;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use key_lines::KeyLines;

mod envfile;
mod key_lines;
pub mod serve;

/// Per-call timeout when a server sets no `timeout_s`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// `discovery.search_limit` when unset.
pub const DEFAULT_SEARCH_LIMIT: usize = 8;
/// `discovery.instructions_budget` (bytes) when unset.
pub const DEFAULT_INSTRUCTIONS_BUDGET: usize = 8192;
/// `cache.max_age_hours` when unset.
pub const DEFAULT_CACHE_MAX_AGE_HOURS: f64 = 24.0;
/// `limits.max_message_bytes` when unset: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// `limits.max_result_bytes` when unset: 1 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024;
/// `start_timeout_s` when unset.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);

/// `limits.max_concurrent_starts` when unset: twice the CPU count, at least 4.
pub fn default_max_concurrent_starts() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    (2 * cpus).max(4)
}

const TOP_LEVEL_KEYS: &[&str] = &[
    "mcpServers",
    "servers",
    "discovery",
    "cache",
    "limits",
    "env_file",
    "integrity",
    "profiles",
    "serve",
    "search",
    "store",
    "$schema",
];
const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "type",
    "transport",
    "headers",
    "disabled",
    "prefix",
    "timeout_s",
    "idle_timeout_s",
    "start_timeout_s",
    "max_result_bytes",
    "domain",
    "hot",
    "aliases",
    "description",
    "auth",
    "oauth",
];
const DISCOVERY_KEYS: &[&str] = &["mode", "hot", "search_limit", "instructions_budget"];
const CACHE_KEYS: &[&str] = &["max_age_hours"];
const STORE_KEYS: &[&str] = &["redis_url", "prefix", "tls_ca"];
const SEARCH_KEYS: &[&str] = &["model", "query_prefix", "threads"];
const LIMITS_KEYS: &[&str] = &[
    "max_message_bytes",
    "max_concurrent_starts",
    "max_result_bytes",
];

/// Every key the loader knows, by section (`""` top level, `"server"` per
/// server), so documentation can be checked against it.
pub fn known_keys() -> Vec<(&'static str, &'static [&'static str])> {
    let mut keys = vec![
        ("", TOP_LEVEL_KEYS),
        ("server", SERVER_KEYS),
        ("discovery", DISCOVERY_KEYS),
        ("cache", CACHE_KEYS),
        ("limits", LIMITS_KEYS),
        ("search", SEARCH_KEYS),
        ("store", STORE_KEYS),
    ];
    keys.extend(serve::known_keys());
    keys
}

/// A loaded config file: what the supervisor starts, and what it tells the user about.
///
/// `Config::default()` is the config of a missing file: zero servers, default settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// Enabled, valid servers in file order (`mcpServers` first, then `servers`). This order
    /// decides name collisions: the first registration wins.
    pub servers: Vec<ServerSpec>,
    /// Servers that could not be used; each is skipped, the others load.
    pub failed: Vec<ServerConfigError>,
    /// Ids of servers with `disabled: true`, in file order.
    pub disabled: Vec<String>,
    pub discovery: DiscoverySettings,
    pub cache: CacheSettings,
    pub limits: Limits,
    /// `integrity`: what a changed tool definition does (`pin` by default).
    pub integrity: crate::integrity::IntegrityMode,
    /// `profiles`: named sets of tools (exposed names or globs), in file
    /// order. An entry that is not a list of strings is skipped with a warning.
    pub profiles: BTreeMap<String, Vec<String>>,
    /// `serve`: the HTTP endpoint, when there is one.
    pub serve: serve::ServeSettings,
    /// `search`: the embedding model, if any.
    pub search: SearchSettings,
    /// `store`: where state shared by instances lives (Redis), if anywhere.
    pub store: StoreSettings,
    /// Things ignored on the way (unknown keys, duplicate ids, env file lines), each naming
    /// its file and line.
    pub warnings: Vec<ConfigWarning>,
    /// The env file [`load`] looked for, and the names (never the values) it set.
    pub env_file: Option<EnvFileRead>,
}

/// The env file as [`load`] read it.
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

impl Config {
    /// The enabled server with this id, if any.
    pub fn server(&self, id: &str) -> Option<&ServerSpec> {
        self.servers.iter().find(|s| s.id == id)
    }
}

/// The discovery mode is part of the control protocol (sessions report it),
/// so its names and parsing live there.
pub use evo_proto::ctl::{DiscoveryMode, UnknownDiscoveryMode};

/// The `discovery` section: defaults for sessions' tool disclosure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoverySettings {
    /// `None` when the file does not say; the caller resolves the mode from flags and
    /// environment first and falls back to [`DiscoveryMode::default`].
    pub mode: Option<DiscoveryMode>,
    /// Exposed (prefixed) names of tools every session sees with full schemas.
    pub hot: Vec<String>,
    /// Default number of `discover_tools` results.
    pub search_limit: usize,
    /// Byte budget for the tool lines in the server `instructions`.
    pub instructions_budget: usize,
}

impl Default for DiscoverySettings {
    fn default() -> Self {
        DiscoverySettings {
            mode: None,
            hot: Vec::new(),
            search_limit: DEFAULT_SEARCH_LIMIT,
            instructions_budget: DEFAULT_INSTRUCTIONS_BUDGET,
        }
    }
}

/// The `cache` section: how long a cached catalog entry counts as fresh.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheSettings {
    /// Older entries are still served, and re-discovered in the background.
    pub max_age_hours: f64,
}

impl CacheSettings {
    /// `max_age_hours` as a duration (saturating for absurdly large values).
    pub fn max_age(&self) -> Duration {
        Duration::try_from_secs_f64(self.max_age_hours * 3600.0).unwrap_or(Duration::MAX)
    }
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            max_age_hours: DEFAULT_CACHE_MAX_AGE_HOURS,
        }
    }
}

/// The `store` section: the shared store of several instances. Without
/// `redis_url` (and `EVO_REDIS_URL`), state lives in files in the cache
/// directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// `redis://` or `rediss://` (`${VAR}` expanded, so a password can come
    /// from the environment or the env file).
    pub redis_url: Option<String>,
    /// Prefix of every key evo writes (`evo:`).
    pub prefix: String,
    /// A PEM file of the CA that signed a `rediss://` server's certificate,
    /// instead of the system's roots (relative to the config's directory).
    pub tls_ca: Option<PathBuf>,
}

/// `store.prefix` when unset.
pub const DEFAULT_STORE_PREFIX: &str = "evo:";

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            redis_url: None,
            prefix: DEFAULT_STORE_PREFIX.to_string(),
            tls_ca: None,
        }
    }
}

/// The `search` section: the sentence-embedding model of the semantic stage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchSettings {
    /// `search.model`: a model directory, or a model id (`org/name`) that
    /// `evoctl model pull` put in the cache directory. None: lexical only.
    pub model: Option<String>,
    /// `search.query_prefix`: overrides the model's own query prompt.
    pub query_prefix: Option<String>,
    /// `search.threads`: cores the model may use (1 when unset).
    pub threads: usize,
}

impl SearchSettings {
    /// Where the model is: `model` as a path when it is absolute, starts
    /// with `.` or `~`, or names a directory; else the id's folder under
    /// `<cache dir>/models/` (where `evoctl model pull ID` puts it).
    pub fn model_dir(&self, config_dir: &Path, cache_dir: &Path) -> Option<PathBuf> {
        let model = self.model.as_deref()?;
        let path = match model.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME")
                .map_or_else(|| PathBuf::from(model), |h| PathBuf::from(h).join(rest)),
            None => PathBuf::from(model),
        };
        if path.is_absolute() || model.starts_with('.') || model.starts_with('~') {
            return Some(config_dir.join(path));
        }
        let beside = config_dir.join(&path);
        if beside.is_dir() {
            return Some(beside);
        }
        Some(evo_proto::paths::model_dir(cache_dir, model))
    }
}

/// The `limits` section: bounds on what clients and children may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted JSON-RPC message, in bytes.
    pub max_message_bytes: usize,
    /// Children starting (handshake and first `tools/list`) at one time;
    /// the others wait their turn.
    pub max_concurrent_starts: usize,
    /// Largest tool result passed on whole; larger ones are cut.
    pub max_result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_concurrent_starts: default_max_concurrent_starts(),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }
}

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
    pub oauth: Option<crate::oauth::OAuthSpec>,
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
            .field("capabilities", &self.capabilities)
            .field("hash", &self.hash)
            .field("missing_vars", &self.missing_vars)
            .field("env_file", &self.env_file)
            .field("oauth", &self.oauth)
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

    fn of(launch: &Launch<'_>) -> ConfigHash {
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

fn hex(bytes: &[u8]) -> String {
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

/// Why a config file could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{}:{line}:{column}: invalid JSON: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// Reads and parses the config file, expanding `${VAR}` from its env file and the process
/// environment (the env file wins).
///
/// A missing file is not an error: it means zero servers (`Config::default()`).
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let process = |name: &str| std::env::var(name).ok();
    let root = parse_root(&text, path)?;
    let keys = KeyLines::of(&text);
    let mut warnings = Warnings::new(path, &keys);
    let (env_path, explicit) = env_file_path(&root, path, &process, &mut warnings);
    let (overlay, read) = read_env_file(&env_path, explicit, &mut warnings);
    let lookup = |name: &str| overlay.get(name).cloned().or_else(|| process(name));
    let env = Env {
        lookup: &lookup,
        overlay: &overlay,
        file: Some(&env_path),
    };
    let mut config = parse_root_value(&root, path, &env, warnings)?;
    config.env_file = Some(read);
    Ok(config)
}

/// Parses config text. `path` only labels errors; `env` looks up variables for `${VAR}`.
/// `env_file` is not read here ([`load`] reads it).
pub fn parse(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let root = parse_root(text, path)?;
    let keys = KeyLines::of(text);
    let env = Env {
        lookup: env,
        overlay: &BTreeMap::new(),
        file: None,
    };
    parse_root_value(&root, path, &env, Warnings::new(path, &keys))
}

/// Where variables come from while a config is expanded.
struct Env<'a> {
    /// `${VAR}` lookup: the env file, then the process environment.
    lookup: &'a dyn Fn(&str) -> Option<String>,
    /// The env file's variables, added to each stdio child's environment.
    overlay: &'a BTreeMap<String, String>,
    /// The env file, for messages.
    file: Option<&'a Path>,
}

/// Warnings as they are found, each placed by its path of keys.
struct Warnings<'a> {
    file: &'a Path,
    keys: &'a KeyLines,
    list: Vec<ConfigWarning>,
}

impl<'a> Warnings<'a> {
    fn new(file: &'a Path, keys: &'a KeyLines) -> Warnings<'a> {
        Warnings {
            file,
            keys,
            list: Vec::new(),
        }
    }

    /// A warning about the key at `at` (its line, when the text has it).
    fn push(&mut self, at: &[&str], message: String) {
        self.list.push(ConfigWarning {
            file: self.file.to_owned(),
            line: self.keys.line(at),
            message,
        });
    }
}

fn parse_root(text: &str, path: &Path) -> Result<Map<String, Value>, ConfigError> {
    let root: Value = serde_json::from_str(text).map_err(|err| parse_error(path, &err))?;
    match root {
        Value::Object(root) => Ok(root),
        other => Err(ConfigError::Invalid {
            path: path.to_owned(),
            message: format!(
                "the top level must be a JSON object, found {}",
                json_kind(&other)
            ),
        }),
    }
}

/// The env file to read, and whether the config names it (`env_file`): relative to the
/// config's directory, `~/` and `${VAR}` (process environment) expanded. A value that cannot
/// be used is a warning, and the default is read.
fn env_file_path(
    root: &Map<String, Value>,
    config: &Path,
    process: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Warnings<'_>,
) -> (PathBuf, bool) {
    let dir = config.parent().unwrap_or(Path::new(""));
    let default = (dir.join("env"), false);
    let Some(value) = present(root, "env_file") else {
        return default;
    };
    let named = match string(value) {
        Ok(raw) => expand_vars(raw, process, &mut Vec::new()).map_err(|err| err.to_string()),
        Err(err) => Err(err.message),
    };
    let named = match named {
        Ok(named) if named.trim().is_empty() => Err("is empty".to_owned()),
        other => other,
    };
    match named {
        Ok(named) => {
            let home = named
                .strip_prefix("~/")
                .and_then(|rest| process("HOME").map(|home| Path::new(&home).join(rest)));
            let path = home.unwrap_or_else(|| PathBuf::from(&named));
            (dir.join(path), true)
        }
        Err(why) => {
            warnings.push(
                &["env_file"],
                format!(
                    "env_file: {why}; reading the default {} instead",
                    default.0.display()
                ),
            );
            default
        }
    }
}

/// Reads the env file: its variables, and what [`load`] reports of it. Its problems are
/// warnings placed in the env file itself (a malformed line) or at the config's `env_file`.
fn read_env_file(
    path: &Path,
    explicit: bool,
    warnings: &mut Warnings<'_>,
) -> (BTreeMap<String, String>, EnvFileRead) {
    let mut read = EnvFileRead {
        path: path.to_owned(),
        ..EnvFileRead::default()
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound && !explicit => {
            return (BTreeMap::new(), read);
        }
        Err(err) => {
            let why = if err.kind() == io::ErrorKind::NotFound {
                "not found".to_owned()
            } else {
                err.to_string()
            };
            warnings.push(
                &["env_file"],
                format!(
                    "env file {} cannot be read ({why}); none of its variables are set",
                    path.display()
                ),
            );
            return (BTreeMap::new(), read);
        }
    };
    read.found = true;
    let file = envfile::parse(&text);
    for (line, message) in file.problems {
        warnings.list.push(ConfigWarning {
            file: path.to_owned(),
            line: Some(line),
            message,
        });
    }
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            warnings.list.push(ConfigWarning {
                file: path.to_owned(),
                line: None,
                message: format!(
                    "other users can access this file (mode {mode:04o}) and it may hold \
                     secrets; run `chmod 600 {}`",
                    path.display()
                ),
            });
        }
    }
    read.names = file.vars.keys().cloned().collect();
    (file.vars, read)
}

fn parse_root_value(
    root: &Map<String, Value>,
    path: &Path,
    env: &Env<'_>,
    mut warnings: Warnings<'_>,
) -> Result<Config, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        path: path.to_owned(),
        message,
    };
    let mut config = Config::default();
    warn_unknown_keys(root, TOP_LEVEL_KEYS, &[], "", &mut warnings);
    if let Some(value) = present(root, "discovery") {
        config.discovery = parse_discovery(value, &mut warnings).map_err(invalid)?;
    }
    if let Some(value) = present(root, "cache") {
        config.cache = parse_cache(value, &mut warnings).map_err(invalid)?;
    }
    if let Some(value) = present(root, "limits") {
        config.limits = parse_limits(value, &mut warnings).map_err(invalid)?;
    }
    if let Some(value) = present(root, "integrity") {
        config.integrity = parse_integrity(value, &mut warnings);
    }
    if let Some(value) = present(root, "profiles") {
        config.profiles = parse_profiles(value, &mut warnings);
    }
    if let Some(value) = present(root, "serve") {
        let dir = path.parent().unwrap_or(Path::new("."));
        config.serve = serve::parse_serve(value, dir, &mut warnings).map_err(invalid)?;
    }
    if let Some(value) = present(root, "search") {
        config.search = parse_search(value, &mut warnings).map_err(invalid)?;
    }
    if let Some(value) = present(root, "store") {
        let dir = path.parent().unwrap_or(Path::new("."));
        config.store = parse_store(value, dir, env.lookup, &mut warnings).map_err(invalid)?;
    }

    let mut seen = HashSet::new();
    for section in ["mcpServers", "servers"] {
        let Some(value) = present(root, section) else {
            continue;
        };
        let Value::Object(entries) = value else {
            return Err(invalid(format!(
                "'{section}' must be an object mapping server ids to servers, found {}",
                json_kind(value)
            )));
        };
        for (id, entry) in entries {
            if !seen.insert(id.as_str()) {
                warnings.push(
                    &[section, id],
                    format!(
                        "server '{id}' is in both mcpServers and servers; the mcpServers entry \
                         is used"
                    ),
                );
                continue;
            }
            match parse_server(section, id, entry, env, &mut warnings) {
                Ok(Some(spec)) => config.servers.push(spec),
                Ok(None) => config.disabled.push(id.clone()),
                Err(err) => config.failed.push(err),
            }
        }
    }
    config.warnings = warnings.list;
    Ok(config)
}

fn parse_error(path: &Path, err: &serde_json::Error) -> ConfigError {
    // serde_json's Display appends " at line L column C"; the variant carries those apart.
    let full = err.to_string();
    let position = format!(" at line {} column {}", err.line(), err.column());
    let message = full.strip_suffix(&position).unwrap_or(&full).to_owned();
    ConfigError::Parse {
        path: path.to_owned(),
        line: err.line(),
        column: err.column(),
        message,
    }
}

/// The value under `key`, treating JSON `null` as absent.
fn present<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

/// Warns about each key of `object` (at path `at`) that is not in `known`, naming the known
/// key it is probably a misspelling of. `label` says where for the message (`discovery`,
/// `server 'fs'`; empty at the top level).
fn warn_unknown_keys(
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
fn section<'a>(
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

fn parse_discovery(
    value: &Value,
    warnings: &mut Warnings<'_>,
) -> Result<DiscoverySettings, String> {
    let object = section("discovery", value, DISCOVERY_KEYS, warnings)?;
    let mut settings = DiscoverySettings::default();
    let at = |key: &str, err: TypeError| format!("discovery.{key}{}: {}", err.path, err.message);
    if let Some(value) = present(object, "mode") {
        let name = string(value).map_err(|err| at("mode", err))?;
        let mode = name
            .parse()
            .map_err(|err: UnknownDiscoveryMode| at("mode", TypeError::new(err.to_string())))?;
        settings.mode = Some(mode);
    }
    if let Some(value) = present(object, "hot") {
        settings.hot = string_list(value).map_err(|err| at("hot", err))?;
    }
    if let Some(value) = present(object, "search_limit") {
        settings.search_limit = count(value)
            .and_then(positive)
            .map_err(|err| at("search_limit", err))?;
    }
    if let Some(value) = present(object, "instructions_budget") {
        settings.instructions_budget =
            count(value).map_err(|err| at("instructions_budget", err))?;
    }
    Ok(settings)
}

fn parse_cache(value: &Value, warnings: &mut Warnings<'_>) -> Result<CacheSettings, String> {
    let object = section("cache", value, CACHE_KEYS, warnings)?;
    let mut settings = CacheSettings::default();
    if let Some(value) = present(object, "max_age_hours") {
        settings.max_age_hours = match value.as_f64() {
            Some(hours) if hours.is_finite() && hours >= 0.0 => hours,
            _ => {
                return Err(format!(
                    "cache.max_age_hours: expected a number of hours (0 or more), found {}",
                    describe(value)
                ));
            }
        };
    }
    Ok(settings)
}

fn parse_store(
    value: &Value,
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Warnings<'_>,
) -> Result<StoreSettings, String> {
    let object = section("store", value, STORE_KEYS, warnings)?;
    let mut settings = StoreSettings::default();
    let text = |key: &str| -> Result<Option<String>, String> {
        match present(object, key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!(
                "store.{key}: expected a string, found {}",
                describe(other)
            )),
        }
    };
    if let Some(raw) = text("redis_url")?.filter(|u| !u.is_empty()) {
        let url = expand_vars(&raw, env, &mut Vec::new()).map_err(|e| match e {
            ExpandError::Unset(name) => format!(
                "store.redis_url: ${{{name}}} is not set (set it in evod's environment or the env file)"
            ),
            ExpandError::Unterminated => "store.redis_url: a '${' has no closing '}'".to_string(),
            ExpandError::Unsupported(r) => {
                format!("store.redis_url: '${{{r}}}' is not a variable reference evo expands")
            }
        })?;
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(
                "store.redis_url: expected a redis:// or rediss:// URL (like redis://127.0.0.1:6379)"
                    .to_string(),
            );
        }
        settings.redis_url = Some(url);
    }
    if let Some(prefix) = text("prefix")? {
        settings.prefix = prefix;
    }
    if let Some(ca) = text("tls_ca")?.filter(|c| !c.is_empty()) {
        settings.tls_ca = Some(dir.join(ca));
    }
    Ok(settings)
}

/// `profiles`: `{"name": ["exposed_name", "glob_*"]}`. A bad entry (a name
/// that is not 1 to 64 printable characters, a value that is not a list of
/// strings) is skipped with a warning naming it; the others load.
fn parse_profiles(value: &Value, warnings: &mut Warnings<'_>) -> BTreeMap<String, Vec<String>> {
    let mut profiles = BTreeMap::new();
    let Value::Object(entries) = value else {
        warnings.push(
            &["profiles"],
            format!(
                "profiles: expected an object of profile names to lists of tools, found {}; \
                 no profiles loaded",
                describe(value)
            ),
        );
        return profiles;
    };
    for (name, tools) in entries {
        if !crate::profiles::valid_name(name) {
            warnings.push(
                &["profiles", name],
                format!(
                    "profile '{name}' skipped: a profile name is 1 to 64 characters, none of \
                     them a space or control character"
                ),
            );
            continue;
        }
        match string_list(tools) {
            Ok(list) => {
                profiles.insert(name.clone(), list);
            }
            Err(err) => warnings.push(
                &["profiles", name],
                format!(
                    "profile '{name}' skipped: profiles.{name}{}: {} (a list of exposed tool \
                     names or globs such as \"github_*\")",
                    err.path, err.message
                ),
            ),
        }
    }
    profiles
}

fn parse_search(value: &Value, warnings: &mut Warnings<'_>) -> Result<SearchSettings, String> {
    let object = section("search", value, SEARCH_KEYS, warnings)?;
    let mut settings = SearchSettings::default();
    let text = |key: &str| -> Result<Option<String>, String> {
        match present(object, key) {
            None => Ok(None),
            Some(Value::String(s)) if key == "model" && s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(format!(
                "search.{key}: expected a string, found {}",
                describe(v)
            )),
        }
    };
    settings.model = text("model")?.map(|m| m.trim().to_string());
    settings.query_prefix = text("query_prefix")?;
    settings.threads = match present(object, "threads") {
        None => 1,
        Some(v) => count(v)
            .and_then(positive)
            .map_err(|e| format!("search.threads: {}", e.message))?,
    };
    Ok(settings)
}

/// `integrity`: `pin`, `warn` or `off`. A value that is none of them is a
/// warning and leaves the default, `pin`: a typo never turns the check off.
fn parse_integrity(value: &Value, warnings: &mut Warnings<'_>) -> crate::integrity::IntegrityMode {
    use crate::integrity::IntegrityMode;
    match value.as_str().and_then(IntegrityMode::parse) {
        Some(mode) => mode,
        None => {
            warnings.push(
                &["integrity"],
                format!(
                    "integrity: expected \"pin\", \"warn\" or \"off\", found {}; using \"pin\"",
                    describe(value)
                ),
            );
            IntegrityMode::Pin
        }
    }
}

fn parse_limits(value: &Value, warnings: &mut Warnings<'_>) -> Result<Limits, String> {
    let object = section("limits", value, LIMITS_KEYS, warnings)?;
    let mut limits = Limits::default();
    if let Some(value) = present(object, "max_message_bytes") {
        limits.max_message_bytes = count(value)
            .and_then(positive)
            .map_err(|err| format!("limits.max_message_bytes{}: {}", err.path, err.message))?;
    }
    if let Some(value) = present(object, "max_result_bytes") {
        limits.max_result_bytes = count(value)
            .and_then(positive)
            .map_err(|err| format!("limits.max_result_bytes{}: {}", err.path, err.message))?;
    }
    if let Some(value) = present(object, "max_concurrent_starts") {
        limits.max_concurrent_starts = count(value)
            .and_then(positive)
            .map_err(|err| format!("limits.max_concurrent_starts{}: {}", err.path, err.message))?;
    }
    Ok(limits)
}

/// The launch identity of a server after expansion: exactly what [`ConfigHash`] covers.
struct Launch<'a> {
    id: &'a str,
    command: Option<&'a str>,
    args: &'a [String],
    env: &'a BTreeMap<String, String>,
    cwd: Option<&'a str>,
    url: Option<&'a str>,
    headers: &'a BTreeMap<String, String>,
    /// The SSE transport and the OAuth settings' binding, when set.
    extra: Option<String>,
}

/// A remote server's `auth` and `oauth` keys: `auth: "oauth"` alone takes
/// the defaults (a person logs in; evo registers itself); `oauth` says more
/// (`grant`, `client_id`, `client_secret`, `scopes`, `client_metadata_url`;
/// `${VAR}` expands in the id and secret).
fn parse_oauth(
    object: &Map<String, Value>,
    expand: &dyn Fn(&str, &str) -> Result<String, ServerConfigError>,
    fail: &dyn Fn(&str, String) -> ServerConfigError,
) -> Result<Option<crate::oauth::OAuthSpec>, ServerConfigError> {
    use crate::oauth::{Grant, OAuthSpec};
    let auth = match present(object, "auth") {
        None => None,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("oauth") => Some(()),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("none") => None,
        Some(other) => {
            return Err(fail(
                "auth",
                format!(
                    "expected \"oauth\" (or \"none\"), found {}",
                    json_kind(other)
                ),
            ));
        }
    };
    let Some(value) = present(object, "oauth") else {
        return Ok(auth.map(|()| OAuthSpec::default()));
    };
    let Value::Object(o) = value else {
        return Err(fail(
            "oauth",
            format!("expected an object, found {}", json_kind(value)),
        ));
    };
    let text = |key: &str| -> Result<Option<String>, ServerConfigError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => expand(&format!("oauth.{key}"), s).map(Some),
            Some(other) => Err(fail(
                &format!("oauth.{key}"),
                format!("expected a string, found {}", json_kind(other)),
            )),
        }
    };
    let grant = match text("grant")?.as_deref() {
        None | Some("authorization_code") => Grant::AuthorizationCode,
        Some("client_credentials") => Grant::ClientCredentials,
        Some(other) => {
            return Err(fail(
                "oauth.grant",
                format!(
                    "'{other}' is not a grant evo uses; use \"authorization_code\" (evoctl login) or \"client_credentials\""
                ),
            ));
        }
    };
    let scopes = match o.get("scopes") {
        None => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| fail("oauth.scopes", "expected strings".to_owned()))?,
        Some(other) => {
            return Err(fail(
                "oauth.scopes",
                format!("expected a list of strings, found {}", json_kind(other)),
            ));
        }
    };
    let spec = OAuthSpec {
        grant,
        client_id: text("client_id")?,
        client_secret: text("client_secret")?,
        scopes,
        client_metadata_url: text("client_metadata_url")?,
    };
    if grant == Grant::ClientCredentials
        && (spec.client_id.is_none() || spec.client_secret.is_none())
    {
        return Err(fail(
            "oauth",
            "grant client_credentials needs client_id and client_secret (e.g. \"${CLIENT_SECRET}\")".to_owned(),
        ));
    }
    Ok(Some(spec))
}

/// Parses one server entry. `Ok(None)` means `disabled: true`.
#[allow(
    clippy::too_many_lines,
    reason = "one key after another, in the order the README documents them"
)]
fn parse_server(
    section: &str,
    id: &str,
    value: &Value,
    env: &Env<'_>,
    warnings: &mut Warnings<'_>,
) -> Result<Option<ServerSpec>, ServerConfigError> {
    let fail = |key: &str, message: String| ServerConfigError {
        server: id.to_owned(),
        key: key.to_owned(),
        message,
    };
    // A wrong type under `key`; the error's path extends the key (`args` + `[2]`).
    let wrong = |key: &str, err: TypeError| fail(&format!("{key}{}", err.path), err.message);
    let missing = std::cell::RefCell::new(Vec::new());
    let expand = |key: &str, raw: &str| {
        let mut found = Vec::new();
        let expanded = expand_vars(raw, env.lookup, &mut found).map_err(|err| match err {
            ExpandError::Unset(name) => fail(key, unset_message(&name, env.file)),
            err => fail(key, err.to_string()),
        })?;
        missing
            .borrow_mut()
            .extend(found.into_iter().map(|(name, empty)| MissingVar {
                name,
                key: key.to_owned(),
                empty,
            }));
        Ok(expanded)
    };

    let Value::Object(object) = value else {
        return Err(fail(
            "",
            format!(
                "expected an object describing the server, found {}",
                json_kind(value)
            ),
        ));
    };
    let location = format!("server '{id}'");
    warn_unknown_keys(object, SERVER_KEYS, &[section, id], &location, warnings);
    if id.is_empty() {
        return Err(fail("", "the server id must not be empty".to_owned()));
    }
    let disabled = present(object, "disabled")
        .map(boolean)
        .transpose()
        .map_err(|err| wrong("disabled", err))?;
    if disabled == Some(true) {
        return Ok(None);
    }

    let get_string = |key: &str| {
        present(object, key)
            .map(|value| string(value).map_err(|err| wrong(key, err)))
            .transpose()
    };
    let command = get_string("command")?;
    let url = get_string("url")?;
    let chosen = transport_kind(object, command.is_some(), url.is_some())
        .map_err(|(key, message)| fail(key, message))?;
    let ignored = |key: &str, warnings: &mut Warnings<'_>| {
        if present(object, key).is_some() {
            let transport = match chosen {
                TransportKind::Stdio => "a stdio",
                TransportKind::Http | TransportKind::Sse => "an HTTP",
            };
            warnings.push(
                &[section, id, key],
                format!("{location}: '{key}' ignored for {transport} server"),
            );
        }
    };

    // `env` is allowed on both transports: on an HTTP server it only carries capability flags.
    let mut child_env = BTreeMap::new();
    if let Some(value) = present(object, "env") {
        for (name, raw) in string_map(value).map_err(|err| wrong("env", err))? {
            let expanded = expand(&format!("env.{name}"), &raw)?;
            child_env.insert(name, expanded);
        }
    }

    let caps = capabilities(&child_env);
    let mut oauth = None;
    let (transport, hash) = match chosen {
        TransportKind::Stdio => {
            ignored("url", warnings);
            ignored("headers", warnings);
            let raw = command.ok_or_else(|| {
                fail(
                    "command",
                    "the server's type is 'stdio' but 'command' is missing".to_owned(),
                )
            })?;
            let command = expand("command", raw)?;
            if command.trim().is_empty() {
                return Err(fail("command", "is empty".to_owned()));
            }
            let mut args = Vec::new();
            if let Some(value) = present(object, "args") {
                for (index, raw) in string_list(value)
                    .map_err(|err| wrong("args", err))?
                    .iter()
                    .enumerate()
                {
                    args.push(expand(&format!("args[{index}]"), raw)?);
                }
            }
            let cwd = get_string("cwd")?
                .map(|raw| expand("cwd", raw))
                .transpose()?;
            // The child's environment: evod's, the env file's, then its own `env`.
            let mut child_env = child_env;
            for (name, value) in env.overlay {
                child_env
                    .entry(name.clone())
                    .or_insert_with(|| value.clone());
            }
            let hash = ConfigHash::of(&Launch {
                id,
                command: Some(&command),
                args: &args,
                env: &child_env,
                cwd: cwd.as_deref(),
                url: None,
                headers: &BTreeMap::new(),
                extra: None,
            });
            let transport = TransportSpec::Stdio {
                command,
                args,
                env: child_env,
                cwd: cwd.map(PathBuf::from),
            };
            (transport, hash)
        }
        TransportKind::Http | TransportKind::Sse => {
            ignored("command", warnings);
            ignored("args", warnings);
            ignored("cwd", warnings);
            let raw = url.ok_or_else(|| {
                fail(
                    "url",
                    "the server's type is 'http' but 'url' is missing".to_owned(),
                )
            })?;
            let url = expand("url", raw)?;
            if !has_http_scheme(&url) {
                return Err(fail("url", "must be an http:// or https:// URL".to_owned()));
            }
            let mut headers = BTreeMap::new();
            if let Some(value) = present(object, "headers") {
                for (name, raw) in string_map(value).map_err(|err| wrong("headers", err))? {
                    let expanded = expand(&format!("headers.{name}"), &raw)?;
                    headers.insert(name, expanded);
                }
            }
            let sse = chosen == TransportKind::Sse;
            oauth = parse_oauth(object, &expand, &fail)?;
            let extra = (sse || oauth.is_some()).then(|| {
                format!(
                    "sse={sse};oauth={}",
                    oauth
                        .as_ref()
                        .map(|o| crate::oauth::binding("", Some(o)))
                        .unwrap_or_default()
                )
            });
            let hash = ConfigHash::of(&Launch {
                id,
                command: None,
                args: &[],
                env: &child_env,
                cwd: None,
                url: Some(&url),
                headers: &headers,
                extra,
            });
            (TransportSpec::Http { url, headers, sse }, hash)
        }
    };

    let prefix = get_string("prefix")?.unwrap_or(id).to_owned();
    let domain = match get_string("domain")? {
        Some("") => return Err(fail("domain", "must not be empty".to_owned())),
        Some(domain) => domain.to_owned(),
        None => id.to_owned(),
    };
    let timeout = match present(object, "timeout_s") {
        Some(value) => seconds(value).map_err(|err| wrong("timeout_s", err))?,
        None => DEFAULT_TIMEOUT,
    };
    let idle_timeout = present(object, "idle_timeout_s")
        .map(|value| seconds(value).map_err(|err| wrong("idle_timeout_s", err)))
        .transpose()?;
    let start_timeout = match present(object, "start_timeout_s") {
        Some(value) => seconds(value).map_err(|err| wrong("start_timeout_s", err))?,
        None => DEFAULT_START_TIMEOUT,
    };
    let max_result_bytes = present(object, "max_result_bytes")
        .map(|value| {
            count(value)
                .and_then(positive)
                .map_err(|err| wrong("max_result_bytes", err))
        })
        .transpose()?;
    let hot = present(object, "hot")
        .map(|value| string_list(value).map_err(|err| wrong("hot", err)))
        .transpose()?
        .unwrap_or_default();
    let mut aliases = BTreeMap::new();
    if let Some(value) = present(object, "aliases") {
        let Value::Object(tools) = value else {
            return Err(wrong("aliases", TypeError::expected("an object", value)));
        };
        for (tool, renames) in tools {
            let renames = string_map(renames).map_err(|err| {
                let path = format!(".{tool}{}", err.path);
                wrong("aliases", err.at(path))
            })?;
            aliases.insert(tool.clone(), renames);
        }
    }

    Ok(Some(ServerSpec {
        id: id.to_owned(),
        capabilities: caps,
        transport,
        prefix,
        timeout,
        idle_timeout,
        start_timeout,
        max_result_bytes,
        domain,
        hot,
        aliases,
        hash,
        missing_vars: missing.into_inner(),
        env_file: env.file.map(Path::to_path_buf),
        oauth,
    }))
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

/// Why `${...}` expansion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ExpandError {
    #[error("environment variable {0} is not set; set it or remove the reference")]
    Unset(String),
    #[error("'${{' without a closing '}}'")]
    Unterminated,
    #[error(
        "'${{{0}}}' is not a supported reference; use ${{VAR}}, ${{VAR:-default}} or ${{env:VAR}}"
    )]
    Unsupported(String),
}

/// Expands `${VAR}`, `${env:VAR}` and `${VAR:-default}` (default when unset or empty; the
/// default is literal text). Anything else is copied as written. Each reference whose variable
/// is unset or empty (so its default, or nothing, was used) is added to `missing` as (name,
/// whether it is set but empty).
fn expand_vars(
    raw: &str,
    env: &dyn Fn(&str) -> Option<String>,
    missing: &mut Vec<(String, bool)>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(ExpandError::Unterminated)?;
        let reference = &after[..end];
        let (name, default) = match reference.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (reference, None),
        };
        let name = name.strip_prefix("env:").unwrap_or(name);
        if !is_var_name(name) {
            return Err(ExpandError::Unsupported(reference.to_owned()));
        }
        match (env(name), default) {
            (Some(value), default) if value.is_empty() => {
                missing.push((name.to_owned(), true));
                out.push_str(default.unwrap_or_default());
            }
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => {
                missing.push((name.to_owned(), false));
                out.push_str(default);
            }
            (None, None) => return Err(ExpandError::Unset(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

use envfile::is_var_name;

/// A value of the wrong shape; `path` locates it below the key being read (`[2]`, `.LOG`).
#[derive(Debug)]
struct TypeError {
    path: String,
    message: String,
}

impl TypeError {
    fn new(message: String) -> TypeError {
        TypeError {
            path: String::new(),
            message,
        }
    }

    fn expected(what: &str, found: &Value) -> TypeError {
        TypeError::new(format!("expected {what}, found {}", describe(found)))
    }

    fn at(self, path: String) -> TypeError {
        TypeError { path, ..self }
    }
}

fn string(value: &Value) -> Result<&str, TypeError> {
    value
        .as_str()
        .ok_or_else(|| TypeError::expected("a string", value))
}

fn boolean(value: &Value) -> Result<bool, TypeError> {
    value
        .as_bool()
        .ok_or_else(|| TypeError::expected("true or false", value))
}

fn string_list(value: &Value) -> Result<Vec<String>, TypeError> {
    let Value::Array(items) = value else {
        return Err(TypeError::expected("an array of strings", value));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            string(item)
                .map(str::to_owned)
                .map_err(|err| err.at(format!("[{index}]")))
        })
        .collect()
}

fn string_map(value: &Value) -> Result<BTreeMap<String, String>, TypeError> {
    let Value::Object(entries) = value else {
        return Err(TypeError::expected("an object of strings", value));
    };
    entries
        .iter()
        .map(|(key, item)| match string(item) {
            Ok(text) => Ok((key.clone(), text.to_owned())),
            Err(err) => Err(err.at(format!(".{key}"))),
        })
        .collect()
}

fn count(value: &Value) -> Result<usize, TypeError> {
    value
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| TypeError::expected("a whole number (0 or more)", value))
}

fn positive(n: usize) -> Result<usize, TypeError> {
    if n == 0 {
        Err(TypeError::new("must be at least 1".to_owned()))
    } else {
        Ok(n)
    }
}

fn seconds(value: &Value) -> Result<Duration, TypeError> {
    value
        .as_f64()
        .filter(|secs| *secs > 0.0)
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| TypeError::expected("a positive number of seconds", value))
}

/// A value for error messages: booleans and numbers verbatim, anything else by kind only, so
/// a misplaced secret (`"env": "TOKEN=..."`) never reaches a log.
fn describe(value: &Value) -> String {
    match value {
        Value::Bool(_) | Value::Number(_) => value.to_string(),
        _ => json_kind(value).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    const ENV: &[(&str, &str)] = &[
        ("HOME", "/home/u"),
        ("TOKEN", "s3cret-token"),
        ("EMPTY", ""),
    ];

    fn parse_ok(text: &str) -> Config {
        match parse(text, Path::new("test.json"), &env_of(ENV)) {
            Ok(config) => config,
            Err(err) => panic!("expected {text} to parse, got: {err}"),
        }
    }

    fn messages(config: &Config) -> Vec<&str> {
        config.warnings.iter().map(|w| w.message.as_str()).collect()
    }

    /// Parses a config whose only server is `{"x": body}`.
    fn one_server(body: &str) -> Config {
        parse_ok(&format!(r#"{{"mcpServers": {{"x": {body}}}}}"#))
    }

    fn stdio(spec: &ServerSpec) -> (&str, &[String], &BTreeMap<String, String>, Option<&Path>) {
        match &spec.transport {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => (command, args, env, cwd.as_deref()),
            other => panic!("expected stdio, got {other:?}"),
        }
    }

    #[test]
    fn the_store_section_reads_a_redis_url_with_variables() {
        let c =
            parse_ok(r#"{"store": {"redis_url": "redis://:${TOKEN}@h:6379", "tls_ca": "ca.pem"}}"#);
        assert_eq!(
            c.store.redis_url.as_deref(),
            Some("redis://:s3cret-token@h:6379")
        );
        assert_eq!(c.store.prefix, DEFAULT_STORE_PREFIX);
        assert_eq!(c.store.tls_ca.as_deref(), Some(Path::new("ca.pem")));
        assert_eq!(parse_ok("{}").store, StoreSettings::default());
        for (text, says) in [
            (
                r#"{"store": {"redis_url": "http://h"}}"#,
                "redis:// or rediss://",
            ),
            (
                r#"{"store": {"redis_url": "redis://:${NOPE}@h"}}"#,
                "${NOPE} is not set",
            ),
            (
                r#"{"store": {"prefix": 3}}"#,
                "store.prefix: expected a string",
            ),
        ] {
            let err = parse(text, Path::new("test.json"), &env_of(ENV))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{text}: {err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
    }

    #[test]
    fn design_example_loads() {
        let config = parse_ok(
            r#"{
              "mcpServers": {
                "fs":   { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                          "env": { "LOG": "${HOME}/fs.log" }, "cwd": "${HOME}" },
                "time": { "command": "uvx", "args": ["mcp-server-time"], "domain": "time", "hot": ["get_current_time"] },
                "gh":   { "type": "http", "url": "https://example.invalid/mcp",
                          "headers": { "Authorization": "Bearer ${GITHUB_TOKEN}" }, "disabled": true }
              },
              "discovery": { "mode": "dynamic", "hot": ["fs_read_text_file"], "search_limit": 8 },
              "cache": { "max_age_hours": 24 }
            }"#,
        );
        let ids: Vec<&str> = config.servers.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["fs", "time"]);
        assert_eq!(config.disabled, ["gh"]);
        assert!(config.failed.is_empty(), "{:?}", config.failed);
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);

        let fs = &config.servers[0];
        let (command, args, env, cwd) = stdio(fs);
        assert_eq!(command, "npx");
        assert_eq!(
            args,
            ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]
        );
        assert_eq!(env.get("LOG").map(String::as_str), Some("/home/u/fs.log"));
        assert_eq!(cwd, Some(Path::new("/home/u")));
        assert_eq!(fs.prefix, "fs");
        assert_eq!(fs.domain, "fs");
        assert_eq!(fs.timeout, DEFAULT_TIMEOUT);
        assert_eq!(fs.idle_timeout, None);
        assert_eq!(fs.start_timeout, DEFAULT_START_TIMEOUT);

        let time = &config.servers[1];
        assert_eq!(time.domain, "time");
        assert_eq!(time.hot, ["get_current_time"]);

        assert_eq!(config.discovery.mode, Some(DiscoveryMode::Dynamic));
        assert_eq!(config.discovery.hot, ["fs_read_text_file"]);
        assert_eq!(config.discovery.search_limit, 8);
        assert_eq!(
            config.discovery.instructions_budget,
            DEFAULT_INSTRUCTIONS_BUDGET
        );
        assert_eq!(config.cache.max_age_hours, 24.0);
        assert_eq!(config.limits.max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES);
    }

    #[test]
    fn defaults_mean_zero_servers() {
        let config = Config::default();
        assert!(config.servers.is_empty());
        assert_eq!(config.discovery.mode, None);
        assert_eq!(config.discovery.search_limit, 8);
        assert_eq!(config.discovery.instructions_budget, 8192);
        assert_eq!(config.cache.max_age_hours, 24.0);
        assert_eq!(config.cache.max_age(), Duration::from_secs(24 * 3600));
        assert_eq!(config.limits.max_message_bytes, 16 * 1024 * 1024);
        assert!(config.limits.max_concurrent_starts >= 4);
        assert_eq!(parse_ok("{}"), config);
    }

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
    fn both_sections_merge_in_file_order_and_first_wins() {
        let config = parse_ok(
            r#"{
              "servers":    {"b": {"command": "from-servers"}, "c": {"command": "c"}},
              "mcpServers": {"z": {"command": "z"}, "b": {"command": "from-mcpServers"}}
            }"#,
        );
        let ids: Vec<&str> = config.servers.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["z", "b", "c"]);
        let (command, ..) = stdio(&config.servers[1]);
        assert_eq!(command, "from-mcpServers");
        assert_eq!(
            messages(&config),
            ["server 'b' is in both mcpServers and servers; the mcpServers entry is used"]
        );
        // The line of the entry that is ignored (the one under `servers`).
        assert_eq!(config.warnings[0].line, Some(2));
    }

    #[test]
    fn integrity_is_pin_unless_warn_or_off_is_written() {
        use crate::integrity::IntegrityMode;
        assert_eq!(parse_ok("{}").integrity, IntegrityMode::Pin);
        for (text, mode) in [
            (r#"{"integrity": "warn"}"#, IntegrityMode::Warn),
            (r#"{"integrity": " OFF "}"#, IntegrityMode::Off),
            (r#"{"integrity": "pin"}"#, IntegrityMode::Pin),
        ] {
            let config = parse_ok(text);
            assert_eq!(
                (config.integrity, config.warnings.len()),
                (mode, 0),
                "{text}"
            );
        }
        for text in [r#"{"integrity": "of"}"#, r#"{"integrity": false}"#] {
            let config = parse_ok(text);
            assert_eq!(config.integrity, IntegrityMode::Pin, "{text}");
            assert!(
                messages(&config)[0]
                    .starts_with("integrity: expected \"pin\", \"warn\" or \"off\""),
                "{:?}",
                messages(&config)
            );
        }
    }

    #[test]
    fn unknown_and_ignored_keys_warn() {
        let config = parse_ok(
            r#"{
              "$schema": "https://example.invalid/schema.json",
              "inputs": [],
              "discovery": {"mode": "legacy", "fuzzy": true},
              "cache": {"max_age_hours": 1, "dir": "/tmp"},
              "limits": {"max_message_bytes": 1024, "max_sessions": 3, "max_concurrent_starts": 3},
              "mcpServers": {
                "fs": {"command": "c", "foo": 1, "description": "fine", "headers": {"A": "b"}},
                "web": {"url": "https://h", "args": ["x"], "cwd": "/"}
              }
            }"#,
        );
        assert_eq!(
            messages(&config),
            [
                "unknown top-level key 'inputs' ignored",
                "discovery: unknown key 'fuzzy' ignored",
                "cache: unknown key 'dir' ignored",
                "limits: unknown key 'max_sessions' ignored",
                "server 'fs': unknown key 'foo' ignored",
                "server 'fs': 'headers' ignored for a stdio server",
                "server 'web': 'args' ignored for an HTTP server",
                "server 'web': 'cwd' ignored for an HTTP server",
            ]
        );
        assert_eq!(config.servers.len(), 2);
        assert_eq!(config.discovery.mode, Some(DiscoveryMode::Legacy));
        assert_eq!(config.cache.max_age_hours, 1.0);
        assert_eq!(config.limits.max_message_bytes, 1024);
        assert_eq!(config.limits.max_concurrent_starts, 3);
    }

    #[test]
    fn warnings_carry_their_line_and_the_near_key() {
        let text = r#"{
  "mcpServers": {
    "fs": {
      "command": "c",
      "timeout": 5,
      "Env": {}
    }
  },
  "servers": {"web": {"url": "https://h", "cmd": "x"}},
  "discovery": {"search-limit": 3},
  "mcpservers": {},
  "limits": {"max_message": 1}, "zzz": 1
}"#;
        let config = parse_ok(text);
        let got: Vec<String> = config.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "test.json:11: unknown top-level key 'mcpservers' ignored; did you mean 'mcpServers'?",
                "test.json:12: unknown top-level key 'zzz' ignored",
                "test.json:10: discovery: unknown key 'search-limit' ignored; did you mean 'search_limit'?",
                "test.json:12: limits: unknown key 'max_message' ignored; did you mean 'max_message_bytes'?",
                "test.json:5: server 'fs': unknown key 'timeout' ignored; did you mean 'timeout_s'?",
                "test.json:6: server 'fs': unknown key 'Env' ignored; did you mean 'env'?",
                "test.json:9: server 'web': unknown key 'cmd' ignored; did you mean 'command'?",
            ]
        );
    }

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

    /// A fresh directory for file tests, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!(
                "evo-config-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create temp dir");
            Scratch(dir)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).expect("write test file");
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
            }
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const UNSET: &str = "EVO_CONFIG_TEST_SURELY_UNSET_4711";

    #[test]
    fn load_reads_the_default_env_file_before_expanding() {
        let dir = Scratch::new("envfile");
        let config = dir.write(
            "mcp.config.json",
            &format!(
                r#"{{"mcpServers": {{
                  "a": {{"command": "c", "args": ["${{HOME}}", "${{{UNSET}}}"], "env": {{"OWN": "mine"}}}},
                  "r": {{"url": "https://h/${{{UNSET}}}"}}
                }}}}"#
            ),
        );
        // No env file: the unset variable fails both servers, naming where to set it.
        let loaded = load(&config).expect("config loads");
        assert!(loaded.servers.is_empty(), "{:?}", loaded.servers);
        assert_eq!(loaded.failed.len(), 2);
        let env_path = dir.0.join("env");
        assert!(
            loaded.failed[0].message.contains(&format!(
                "{UNSET} is not set in evod's environment; set it in {}",
                env_path.display()
            )),
            "{}",
            loaded.failed[0]
        );
        assert_eq!(
            loaded.env_file,
            Some(EnvFileRead {
                path: env_path.clone(),
                found: false,
                names: Vec::new(),
            })
        );
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

        dir.write(
            "env",
            &format!(
                "# secrets\nexport {UNSET}='from file'\nHOME=/from/file\nOWN=theirs\nbad line\n"
            ),
        );
        let loaded = load(&config).expect("config loads");
        assert!(loaded.failed.is_empty(), "{:?}", loaded.failed);
        let (_, args, env, _) = stdio(&loaded.servers[0]);
        // The file wins over the inherited environment.
        assert_eq!(args, ["/from/file", "from file"]);
        // The child gets the file's variables, under its own `env`.
        assert_eq!(env.get("OWN").map(String::as_str), Some("mine"));
        assert_eq!(env.get(UNSET).map(String::as_str), Some("from file"));
        assert_eq!(env.get("HOME").map(String::as_str), Some("/from/file"));
        // A remote server has no process: nothing is added to its env.
        assert_eq!(
            loaded.servers[1].transport,
            TransportSpec::Http {
                url: "https://h/from file".into(),
                headers: BTreeMap::new(),
                sse: false,
            }
        );
        let read = loaded.env_file.as_ref().expect("env file read");
        assert!(read.found);
        assert_eq!(read.names, [UNSET, "HOME", "OWN"]);
        let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [format!(
                "{}:5: expected KEY=VALUE (no '=' found); line skipped",
                env_path.display()
            )]
        );

        // A changed value in the file changes the launch identity (reload restarts the child).
        let before = loaded.servers[0].hash;
        dir.write("env", &format!("{UNSET}=other\nHOME=/from/file\nOWN=x\n"));
        let again = load(&config).expect("config loads");
        assert_ne!(again.servers[0].hash, before);
    }

    #[test]
    fn a_named_env_file_that_is_missing_or_shared_is_a_warning() {
        let dir = Scratch::new("named-envfile");
        let config = dir.write(
            "mcp.config.json",
            "{\n  \"env_file\": \"secrets/evo.env\",\n  \"mcpServers\": {}\n}",
        );
        let loaded = load(&config).expect("config loads");
        let named = dir.0.join("secrets/evo.env");
        let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [format!(
                "{}:2: env file {} cannot be read (not found); none of its variables are set",
                config.display(),
                named.display()
            )]
        );
        // The default file beside the config is not read instead.
        dir.write("env", "A=1\n");
        let loaded = load(&config).expect("config loads");
        assert_eq!(loaded.env_file.map(|r| r.found), Some(false));

        std::fs::create_dir_all(dir.0.join("secrets")).expect("mkdir");
        dir.write("secrets/evo.env", "A=1\n");
        let loaded = load(&config).expect("config loads");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(loaded.env_file.map(|r| r.names), Some(vec!["A".to_owned()]));

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&named, std::fs::Permissions::from_mode(0o644))
                .expect("chmod");
            let loaded = load(&config).expect("config loads");
            assert_eq!(messages(&loaded).len(), 1);
            assert!(
                messages(&loaded)[0].contains("(mode 0644)")
                    && messages(&loaded)[0].contains("chmod 600"),
                "{:?}",
                loaded.warnings
            );
        }

        dir.write("mcp.config.json", "{\"env_file\": 3}");
        let loaded = load(&config).expect("config loads");
        assert_eq!(
            messages(&loaded),
            [format!(
                "env_file: expected a string, found 3; reading the default {} instead",
                dir.0.join("env").display()
            )]
        );
        assert_eq!(loaded.env_file.map(|r| r.found), Some(true));
    }

    #[test]
    fn fatal_errors() {
        // (text, variant, words the Display must contain)
        #[rustfmt::skip]
        let cases = [
            ("{\n  \"mcpServers\": {,}\n}", "parse", "test.json:2:18: invalid JSON: key must be a string"),
            ("", "parse", "test.json:1:0: invalid JSON: EOF"),
            ("[]", "invalid", "test.json: the top level must be a JSON object, found an array"),
            (r#"{"mcpServers": []}"#, "invalid", "'mcpServers' must be an object"),
            (r#"{"servers": "fs"}"#, "invalid", "'servers' must be an object"),
            (r#"{"discovery": {"mode": "fast"}}"#, "invalid", "discovery.mode: unknown discovery mode 'fast'; expected 'legacy' or 'dynamic'"),
            (r#"{"discovery": {"hot": ["a", 2]}}"#, "invalid", "discovery.hot[1]: expected a string, found 2"),
            (r#"{"discovery": {"search_limit": 0}}"#, "invalid", "discovery.search_limit: must be at least 1"),
            (r#"{"discovery": {"instructions_budget": -1}}"#, "invalid", "discovery.instructions_budget: expected a whole number"),
            (r#"{"discovery": true}"#, "invalid", "'discovery' must be an object"),
            (r#"{"cache": {"max_age_hours": -1}}"#, "invalid", "cache.max_age_hours: expected a number of hours"),
            (r#"{"limits": {"max_message_bytes": 1.5}}"#, "invalid", "limits.max_message_bytes: expected a whole number"),
            (r#"{"limits": {"max_concurrent_starts": 0}}"#, "invalid", "limits.max_concurrent_starts: must be at least 1"),
        ];
        for (text, variant, words) in cases {
            let err = match parse(text, Path::new("test.json"), &env_of(ENV)) {
                Ok(config) => panic!("{text:?} parsed: {config:?}"),
                Err(err) => err,
            };
            let actual = match err {
                ConfigError::Read { .. } => "read",
                ConfigError::Parse { .. } => "parse",
                ConfigError::Invalid { .. } => "invalid",
            };
            assert_eq!(actual, variant, "{text:?}: {err}");
            assert!(err.to_string().contains(words), "{text:?}: {err}");
        }
    }

    #[test]
    fn parse_error_carries_line_and_column() {
        let err = parse(
            "{\n  \"a\": 1,\n  \"b\" 2\n}",
            Path::new("c.json"),
            &env_of(ENV),
        );
        match err {
            Err(ConfigError::Parse {
                line,
                column,
                message,
                ..
            }) => assert_eq!((line, column, message.as_str()), (3, 7, "expected `:`")),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn null_sections_and_keys_count_as_absent() {
        let config = parse_ok(
            r#"{"mcpServers": null, "discovery": null,
                "servers": {"x": {"command": "c", "cwd": null, "prefix": null}}}"#,
        );
        let (_, _, _, cwd) = stdio(&config.servers[0]);
        assert_eq!(cwd, None);
        assert_eq!(config.servers[0].prefix, "x");
    }

    #[test]
    fn variable_expansion() {
        use ExpandError::{Unset, Unsupported, Unterminated};
        let env = env_of(&[("A", "1"), ("EMPTY", ""), ("_B2", "b")]);
        #[rustfmt::skip]
        let cases: &[(&str, Result<&str, ExpandError>)] = &[
            ("plain", Ok("plain")),
            ("", Ok("")),
            ("${A}", Ok("1")),
            ("x${A}y${_B2}z", Ok("x1ybz")),
            ("é${A}é", Ok("é1é")),
            ("$A and $", Ok("$A and $")),
            ("${env:A}", Ok("1")),
            ("${EMPTY}", Ok("")),
            ("${MISSING:-fallback}", Ok("fallback")),
            ("${EMPTY:-fallback}", Ok("fallback")),
            ("${A:-fallback}", Ok("1")),
            ("${MISSING:-}", Ok("")),
            ("${MISSING:-a:-b $x}", Ok("a:-b $x")),
            ("${env:MISSING:-d}", Ok("d")),
            ("${MISSING}", Err(Unset("MISSING".into()))),
            ("ok ${A} ${env:MISSING}", Err(Unset("MISSING".into()))),
            ("${A", Err(Unterminated)),
            ("${}", Err(Unsupported(String::new()))),
            ("${1A}", Err(Unsupported("1A".into()))),
            ("${input:pat}", Err(Unsupported("input:pat".into()))),
            ("${workspace Folder}", Err(Unsupported("workspace Folder".into()))),
        ];
        for (input, expected) in cases {
            let actual = expand_vars(input, &env, &mut Vec::new());
            assert_eq!(actual.as_deref(), expected.as_deref(), "{input:?}");
        }
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

    #[test]
    fn load_reads_files_and_treats_missing_as_empty() {
        let dir = std::env::temp_dir().join(format!("evo-config-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");

        let missing = load(&dir.join("absent.json"));
        assert_eq!(missing.ok(), Some(Config::default()));

        let file = dir.join("mcp.config.json");
        std::fs::write(&file, r#"{"servers": {"t": {"command": "uvx"}}}"#).expect("write config");
        let loaded = load(&file).map(|c| c.servers.len());
        assert_eq!(loaded.ok(), Some(1));

        // A directory cannot be read as a file.
        match load(&dir) {
            Err(ConfigError::Read { path, .. }) => assert_eq!(path, dir),
            other => panic!("expected a read error, got {other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
