//! Loading a config: the file, its env file, the top level and its sections, and the
//! warnings about what was ignored, each with its file and line.
//!
//! Config errors carry `path:line:column`. `${VAR:-default}` and VS Code's `${env:VAR}` are
//! accepted beside `${VAR}`.

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use evo_proto::json_kind;
use serde_json::{Map, Value};

use super::diagnostics::{ConfigWarning, EnvFileRead, Warnings, section, warn_unknown_keys};
use super::envfile;
use super::expand::{Env, expand_vars};
use super::key_lines::KeyLines;
use super::keys::{REGISTRY_KEYS, SANDBOX_KEYS, TOP_LEVEL_KEYS};
use super::readers::{present, string};
use super::serve;
use super::server::parse_server;
use super::settings::{
    Config, parse_cache, parse_code_mode, parse_discovery, parse_integrity, parse_limits,
    parse_profiles, parse_search, parse_store,
};
use super::telemetry::parse_telemetry;

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
    if let Some(value) = present(root, "code_mode") {
        config.code_mode = parse_code_mode(value, &mut warnings).map_err(invalid)?;
    }
    if let Some(value) = present(root, "telemetry") {
        config.telemetry = parse_telemetry(value, &mut warnings).map_err(invalid)?;
    }
    if let Some(value) = present(root, "registry") {
        section("registry", value, REGISTRY_KEYS, &mut warnings).map_err(invalid)?;
    }
    if let Some(value) = present(root, "store") {
        let dir = path.parent().unwrap_or(Path::new("."));
        config.store = parse_store(value, dir, env.lookup, &mut warnings).map_err(invalid)?;
    }

    // `sandbox.default`, applied to each stdio server without its own (checked there, so a
    // mistake in it fails those servers, not the file).
    let sandbox_default = match present(root, "sandbox") {
        Some(value) => {
            let object = section("sandbox", value, SANDBOX_KEYS, &mut warnings).map_err(invalid)?;
            present(object, "default")
        }
        None => None,
    };

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
            match parse_server(section, id, entry, env, sandbox_default, &mut warnings) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{ENV, env_of, messages, parse_ok, stdio};
    use crate::config::{
        DEFAULT_INSTRUCTIONS_BUDGET, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_START_TIMEOUT,
        DEFAULT_TIMEOUT, DiscoveryMode, TransportSpec,
    };

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
    fn unknown_and_ignored_keys_warn() {
        let config = parse_ok(
            r#"{
              "$schema": "https://example.invalid/schema.json",
              "inputs": [],
              "discovery": {"mode": "legacy", "fuzzy": true},
              "cache": {"max_age_hours": 1, "dir": "/tmp"},
              "limits": {"max_message_bytes": 1024, "max_sessions": 3, "max_concurrent_starts": 3},
              "registry": {"url": "https://registry.example", "mirror": 1},
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
                "registry: unknown key 'mirror' ignored",
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
            (r#"{"discovery": {"startup_wait_ms": "2s"}}"#, "invalid", "discovery.startup_wait_ms: expected a whole number"),
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
