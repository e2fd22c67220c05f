//! The settings of a config, section by section ([`Config`], `discovery`, `cache`, `store`,
//! `search`, `limits`, `integrity`, `profiles`), their defaults, and the parsing of each section.
//! The servers are read in `server.rs`, the `serve` section in `serve.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use evo_proto::paths;
use serde_json::Value;

use super::diagnostics::{ConfigWarning, EnvFileRead, ServerConfigError, Warnings, section};
use super::expand::{ExpandError, expand_vars};
use super::keys::{
    CACHE_KEYS, CODE_MODE_KEYS, DISCOVERY_KEYS, LIMITS_KEYS, SEARCH_KEYS, STORE_KEYS,
};
use super::readers::{TypeError, boolean, count, describe, positive, present, string, string_list};
use super::serve;
use super::server::ServerSpec;
use super::telemetry::TelemetrySettings;

/// `discovery.search_limit` when unset.
pub const DEFAULT_SEARCH_LIMIT: usize = 8;
/// `discovery.instructions_budget` (bytes) when unset.
pub const DEFAULT_INSTRUCTIONS_BUDGET: usize = 8192;
/// `discovery.startup_wait_ms` when unset: how long a session's first
/// answers wait for servers that are starting with nothing cached.
pub const DEFAULT_STARTUP_WAIT_MS: u64 = 2_000;
/// `cache.max_age_hours` when unset.
pub const DEFAULT_CACHE_MAX_AGE_HOURS: f64 = 24.0;
/// `limits.max_message_bytes` when unset: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// `limits.max_result_bytes` when unset: 1 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024;

/// `limits.max_concurrent_starts` when unset: twice the CPU count, at least 4.
pub fn default_max_concurrent_starts() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    (2 * cpus).max(4)
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
    pub integrity: IntegrityMode,
    /// `profiles`: named sets of tools (exposed names or globs), in file
    /// order. An entry that is not a list of strings is skipped with a warning.
    pub profiles: BTreeMap<String, Vec<String>>,
    /// `serve`: the HTTP endpoint, when there is one.
    pub serve: serve::ServeSettings,
    /// `search`: the embedding model, if any.
    pub search: SearchSettings,
    /// `store`: where state shared by instances lives (Redis), if anywhere.
    pub store: StoreSettings,
    /// `code_mode`: scripts calling tools through `run_code`, and signatures.
    pub code_mode: CodeModeSettings,
    /// `telemetry`: where traces go, read once at start.
    pub telemetry: TelemetrySettings,
    /// Things ignored on the way (unknown keys, duplicate ids, env file lines), each naming
    /// its file and line.
    pub warnings: Vec<ConfigWarning>,
    /// The env file [`load`](super::load()) looked for, and the names (never the values) it set.
    pub env_file: Option<EnvFileRead>,
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

/// `integrity`: what a changed tool definition does. Also part of the control
/// protocol (`evoctl status` shows it).
pub use evo_proto::ctl::IntegrityMode;

/// A profile name: 1 to 64 characters, none of them whitespace or control.
pub fn valid_profile_name(name: &str) -> bool {
    (1..=64).contains(&name.chars().count())
        && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

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
    /// How long a session's first answers (`initialize`, the first lists,
    /// a call by exact name) wait for configured servers that are starting
    /// and have said nothing yet (no cache), in milliseconds; 0 never waits.
    pub startup_wait_ms: u64,
}

impl Default for DiscoverySettings {
    fn default() -> Self {
        DiscoverySettings {
            mode: None,
            hot: Vec::new(),
            search_limit: DEFAULT_SEARCH_LIMIT,
            instructions_budget: DEFAULT_INSTRUCTIONS_BUDGET,
            startup_wait_ms: DEFAULT_STARTUP_WAIT_MS,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSettings {
    /// `search.model`: a model directory, or a model id (`org/name`) that
    /// `evoctl model pull` put in the cache directory. None: lexical only.
    pub model: Option<String>,
    /// `search.query_prefix`: overrides the model's own query prompt.
    pub query_prefix: Option<String>,
    /// `search.threads`: cores the model may use (1 when unset).
    pub threads: usize,
    /// `search.learn`: search learns from the tools sessions end up calling
    /// (on when unset).
    pub learn: bool,
}

impl Default for SearchSettings {
    fn default() -> SearchSettings {
        SearchSettings {
            model: None,
            query_prefix: None,
            threads: 0,
            learn: true,
        }
    }
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
        Some(paths::model_dir(cache_dir, model))
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

/// The `code_mode` section: sessions' `run_code` tool, its limits per run,
/// and the TypeScript signatures in cards and `describe_tool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeModeSettings {
    /// `run_code` is offered and tools carry signatures.
    pub enabled: bool,
    /// Longest a run may take, in milliseconds.
    pub timeout_ms: u64,
    /// Most memory a run's engine may hold, in MiB.
    pub memory_mb: u64,
    /// Most tool calls one run may make.
    pub max_calls: u64,
}

impl Default for CodeModeSettings {
    fn default() -> Self {
        CodeModeSettings {
            enabled: true,
            timeout_ms: 30_000,
            memory_mb: 64,
            max_calls: 100,
        }
    }
}

pub(super) fn parse_code_mode(
    value: &Value,
    warnings: &mut Warnings<'_>,
) -> Result<CodeModeSettings, String> {
    let object = section("code_mode", value, CODE_MODE_KEYS, warnings)?;
    let mut settings = CodeModeSettings::default();
    let at = |key: &str, err: TypeError| format!("code_mode.{key}{}: {}", err.path, err.message);
    if let Some(value) = present(object, "enabled") {
        settings.enabled = boolean(value).map_err(|err| at("enabled", err))?;
    }
    for (key, field) in [
        ("timeout_ms", &mut settings.timeout_ms),
        ("memory_mb", &mut settings.memory_mb),
        ("max_calls", &mut settings.max_calls),
    ] {
        if let Some(value) = present(object, key) {
            *field = count(value)
                .and_then(positive)
                .map_err(|err| at(key, err))? as u64;
        }
    }
    Ok(settings)
}

pub(super) fn parse_discovery(
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
    if let Some(value) = present(object, "startup_wait_ms") {
        settings.startup_wait_ms = count(value).map_err(|err| at("startup_wait_ms", err))? as u64;
    }
    Ok(settings)
}

pub(super) fn parse_cache(
    value: &Value,
    warnings: &mut Warnings<'_>,
) -> Result<CacheSettings, String> {
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

pub(super) fn parse_store(
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
pub(super) fn parse_profiles(
    value: &Value,
    warnings: &mut Warnings<'_>,
) -> BTreeMap<String, Vec<String>> {
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
        if !valid_profile_name(name) {
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

pub(super) fn parse_search(
    value: &Value,
    warnings: &mut Warnings<'_>,
) -> Result<SearchSettings, String> {
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
    settings.learn = match present(object, "learn") {
        None => true,
        Some(v) => boolean(v).map_err(|e| format!("search.learn: {}", e.message))?,
    };
    Ok(settings)
}

/// `integrity`: `pin`, `warn` or `off`. A value that is none of them is a
/// warning and leaves the default, `pin`: a typo never turns the check off.
pub(super) fn parse_integrity(value: &Value, warnings: &mut Warnings<'_>) -> IntegrityMode {
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

pub(super) fn parse_limits(value: &Value, warnings: &mut Warnings<'_>) -> Result<Limits, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::config::test_support::{ENV, env_of, messages, parse_ok};

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
    fn defaults_mean_zero_servers() {
        let config = Config::default();
        assert!(config.servers.is_empty());
        assert_eq!(config.discovery.mode, None);
        assert_eq!(config.discovery.search_limit, 8);
        assert_eq!(config.discovery.instructions_budget, 8192);
        assert_eq!(config.discovery.startup_wait_ms, 2_000);
        assert_eq!(config.cache.max_age_hours, 24.0);
        assert_eq!(config.cache.max_age(), Duration::from_secs(24 * 3600));
        assert_eq!(config.limits.max_message_bytes, 16 * 1024 * 1024);
        assert!(config.limits.max_concurrent_starts >= 4);
        assert_eq!(parse_ok("{}"), config);
    }

    #[test]
    fn code_mode_is_on_with_its_limits_unless_written_otherwise() {
        let on = parse_ok("{}").code_mode;
        assert_eq!(
            (on.enabled, on.timeout_ms, on.memory_mb, on.max_calls),
            (true, 30_000, 64, 100)
        );
        let c = parse_ok(r#"{"code_mode": {"enabled": false, "max_calls": 5}}"#).code_mode;
        assert_eq!((c.enabled, c.max_calls, c.timeout_ms), (false, 5, 30_000));
        for (text, says) in [
            (
                r#"{"code_mode": {"enabled": "no"}}"#,
                "code_mode.enabled: expected",
            ),
            (
                r#"{"code_mode": {"timeout_ms": 0}}"#,
                "code_mode.timeout_ms: must be at least 1",
            ),
            (r#"{"code_mode": true}"#, "code_mode"),
        ] {
            let err = parse(text, Path::new("test.json"), &env_of(ENV))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn integrity_is_pin_unless_warn_or_off_is_written() {
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
    fn profile_names() {
        assert!(valid_profile_name("coding"));
        assert!(valid_profile_name("team-a.support"));
        assert!(!valid_profile_name(""));
        assert!(!valid_profile_name("a b"));
        assert!(!valid_profile_name(&"x".repeat(65)));
    }
}
