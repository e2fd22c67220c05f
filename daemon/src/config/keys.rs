//! The keys the loader knows, by section: unknown keys are warned about (with the known key
//! they are probably a misspelling of), and documentation is checked against the lists.

use super::serve;

pub(super) const TOP_LEVEL_KEYS: &[&str] = &[
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
    "code_mode",
    "telemetry",
    "registry",
    "sandbox",
    "$schema",
];
pub(super) const SERVER_KEYS: &[&str] = &[
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
    "tools",
    "description",
    "auth",
    "oauth",
    "sandbox",
];
/// The keys of one override under a server's `tools`.
pub(super) const TOOL_OVERRIDE_KEYS: &[&str] = &["name", "description", "hidden", "args"];
pub(super) const DISCOVERY_KEYS: &[&str] = &[
    "mode",
    "hot",
    "search_limit",
    "instructions_budget",
    "startup_wait_ms",
];
pub(super) const CACHE_KEYS: &[&str] = &["max_age_hours"];
pub(super) const STORE_KEYS: &[&str] = &["redis_url", "prefix", "tls_ca"];
pub(super) const CODE_MODE_KEYS: &[&str] = &["enabled", "timeout_ms", "memory_mb", "max_calls"];
pub(super) const TELEMETRY_KEYS: &[&str] = &["otlp_endpoint", "protocol", "record_arguments"];
/// Read by `evoctl add`, not by evod: known here so it is not warned about.
pub(super) const REGISTRY_KEYS: &[&str] = &["url"];
pub(super) const SANDBOX_KEYS: &[&str] = &["default"];
pub(super) const SEARCH_KEYS: &[&str] = &["model", "query_prefix", "threads", "learn"];
pub(super) const LIMITS_KEYS: &[&str] = &[
    "max_message_bytes",
    "max_concurrent_starts",
    "max_result_bytes",
];

/// Every key the loader knows, by section (`""` top level, `"server"` per
/// server, `"tools.TOOL"` per tool override), so documentation can be checked against it.
pub fn known_keys() -> Vec<(&'static str, &'static [&'static str])> {
    let mut keys = vec![
        ("", TOP_LEVEL_KEYS),
        ("server", SERVER_KEYS),
        ("tools.TOOL", TOOL_OVERRIDE_KEYS),
        ("discovery", DISCOVERY_KEYS),
        ("cache", CACHE_KEYS),
        ("limits", LIMITS_KEYS),
        ("search", SEARCH_KEYS),
        ("store", STORE_KEYS),
        ("code_mode", CODE_MODE_KEYS),
        ("telemetry", TELEMETRY_KEYS),
        ("registry", REGISTRY_KEYS),
        ("sandbox", SANDBOX_KEYS),
    ];
    keys.extend(serve::known_keys());
    keys
}
