//! The one config loader: turns `mcp.config.json` into a [`Config`].
//!
//! A pure module. [`parse`] takes the file's text and an environment lookup and returns values;
//! only [`load()`] touches the file system. The supervisor owns the result and diffs successive
//! configs by [`ServerSpec::hash`] on reload.
//!
//! What the loader accepts (docs/configuration.md is the contract):
//!
//! - Servers under `mcpServers` (Claude Desktop, Cursor) and/or `servers` (VS Code, EVOKORE-MCP).
//!   Both present: merged, `mcpServers` first; an id in both keeps the `mcpServers` entry.
//! - `command` means stdio; `url` means Streamable HTTP. `type`/`transport` may say `stdio`,
//!   `http`, `streamable-http`, `streamableHttp` or `sse` (the legacy HTTP+SSE transport, with
//!   `url`); anything else fails that server.
//! - `${VAR}` expands from the environment in `command`, `args`, `env` values, `cwd`, `url` and
//!   `headers` values. `${VAR:-default}` uses `default` when `VAR` is unset or empty, and
//!   `${env:VAR}` (VS Code's spelling) is the same as `${VAR}`. Nothing else is special: `$VAR`
//!   stays as written and there is no escape for a literal `${`.
//! - A server that cannot be used (unset variable, wrong type for a known key, no transport) is
//!   reported in [`Config::failed`] and skipped; the others load. A JSON `null` for a per-server
//!   key counts as absent.
//! - Unknown keys are reported in [`Config::warnings`] with their line (and the known key
//!   they are probably a misspelling of), never fatal.
//! - `env_file` (default `env` beside the config, see `envfile.rs`) is read by [`load()`]
//!   before anything is expanded: its variables win over the process environment in `${VAR}`
//!   and are added to every stdio child's environment (under the server's own `env`), which
//!   makes them part of each stdio server's [`ConfigHash`]. A missing default file is nothing;
//!   a missing named one, a malformed line or a file others can read is a warning.
//! - Fatal ([`ConfigError`]): unreadable file, invalid JSON, a top level that is not an object,
//!   or a wrong type in a top-level section (`mcpServers`, `servers`, `discovery`, `cache`,
//!   `limits`). On reload the caller keeps the running config in force.
//!
//! The files: `settings` (the [`Config`] and its sections), `server` (one server entry),
//! `hash` (a server's launch identity), `oauth` (a remote server's OAuth entries), `overrides`
//! (its per-tool overrides), `load` (the file, its env file, warnings with their lines),
//! `envfile` (that file's format),
//! `expand` (`${VAR}`), `readers` (values of the expected type), `keys` (the known keys),
//! `key_lines` (the line of each key, for warnings), [`serve`] (the HTTP endpoint's
//! section) and `telemetry` (where traces go).

mod diagnostics;
mod envfile;
mod expand;
mod hash;
mod key_lines;
mod keys;
mod load;
mod oauth;
mod overrides;
mod readers;
mod sandbox;
pub mod serve;
mod server;
mod settings;
mod telemetry;

pub use diagnostics::{ConfigWarning, EnvFileRead, ServerConfigError};
pub use hash::{ConfigHash, InvalidConfigHash, short_hash};
pub use keys::known_keys;
pub use load::{ConfigError, load, parse};
pub use oauth::{Grant, OAuthSpec, binding};
pub use overrides::ToolOverride;
pub use sandbox::SandboxSpec;
pub use server::{
    DEFAULT_START_TIMEOUT, DEFAULT_TIMEOUT, MissingVar, ServerSpec, TransportSpec, capabilities,
};
pub use settings::{
    CacheSettings, CodeModeSettings, Config, DEFAULT_CACHE_MAX_AGE_HOURS,
    DEFAULT_INSTRUCTIONS_BUDGET, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_SEARCH_LIMIT, DEFAULT_STORE_PREFIX, DiscoveryMode, DiscoverySettings, IntegrityMode,
    Limits, SearchSettings, StoreSettings, UnknownDiscoveryMode, default_max_concurrent_starts,
    valid_profile_name,
};
pub use telemetry::{OtlpProtocol, TelemetrySettings, otlp_endpoint_error};

/// What the tests of the config files share: an environment, and parsing shortcuts.
#[cfg(test)]
mod test_support {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::{Config, ServerSpec, TransportSpec, parse};

    pub(super) fn env_of(
        pairs: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    pub(super) const ENV: &[(&str, &str)] = &[
        ("HOME", "/home/u"),
        ("TOKEN", "s3cret-token"),
        ("EMPTY", ""),
    ];

    pub(super) fn parse_ok(text: &str) -> Config {
        match parse(text, Path::new("test.json"), &env_of(ENV)) {
            Ok(config) => config,
            Err(err) => panic!("expected {text} to parse, got: {err}"),
        }
    }

    pub(super) fn messages(config: &Config) -> Vec<&str> {
        config.warnings.iter().map(|w| w.message.as_str()).collect()
    }

    /// Parses a config whose only server is `{"x": body}`.
    pub(super) fn one_server(body: &str) -> Config {
        parse_ok(&format!(r#"{{"mcpServers": {{"x": {body}}}}}"#))
    }

    pub(super) fn stdio(
        spec: &ServerSpec,
    ) -> (&str, &[String], &BTreeMap<String, String>, Option<&Path>) {
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
}
