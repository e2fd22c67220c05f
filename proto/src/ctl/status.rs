//! `evoctl status`: the daemon, each configured server, the files it
//! loaded, the search stages and the store.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{IntegrityMode, ProfileInfo, QuarantinedTool, SessionInfo};

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `evoctl status --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub daemon: DaemonInfo,
    pub servers: Vec<ServerStatus>,
    pub sessions: Vec<SessionInfo>,
    pub duplicates: Vec<Duplicate>,
    pub config: FileStatus,
    pub permissions: FileStatus,
    /// Tools whose name already carried their prefix, exposed once
    /// (`git_log`, not `git_git_log`; the doubled form still routes).
    #[serde(default)]
    pub shortened: Vec<Shortened>,
    /// Servers whose annotations a permissions rule relies on.
    #[serde(default)]
    pub annotations_relied_on: Vec<AnnotationReliance>,
    /// The `integrity` setting in force.
    #[serde(default)]
    pub integrity: IntegrityMode,
    /// Tools whose definition changed since evo pinned it: hidden and
    /// refused under `integrity: pin`, listed but shown here under `warn`.
    /// Empty under `off`.
    #[serde(default)]
    pub quarantined: Vec<QuarantinedTool>,
    /// Hot tools (exposed names): listed with full schemas in every session.
    #[serde(default)]
    pub hot: Vec<String>,
    /// Every profile, with its tool count and the sessions using it.
    #[serde(default)]
    pub profiles: Vec<ProfileInfo>,
    /// The HTTP endpoint (`serve.http`), when evod serves one.
    #[serde(default)]
    pub http: Option<HttpStatus>,
    /// The search stages in force and the embedding model's progress.
    #[serde(default)]
    pub search: SearchStatus,
    /// Where state shared by instances lives, and whether it is reachable.
    #[serde(default)]
    pub store: StoreStatus,
}

/// `status --json` `store`: `kind` `file` (the cache directory) or `redis`
/// (`store.redis_url`), whether it is usable now, and why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreStatus {
    pub kind: String,
    pub ok: bool,
    /// The Redis URL, any password masked (`redis` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub error: Option<String>,
    /// This instance's name among those sharing the store (`redis` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

impl Default for StoreStatus {
    fn default() -> Self {
        StoreStatus {
            kind: "file".into(),
            ok: true,
            url: None,
            error: None,
            instance: None,
        }
    }
}

/// `status --json` `search`: which stages rank queries now, and the
/// semantic stage's model and progress.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchStatus {
    /// `lexical`, then `semantic` and `near_duplicates` once every tool is
    /// embedded.
    pub stages: Vec<String>,
    /// `search.model` as configured; `None` when unset.
    pub model: Option<String>,
    /// `off`, `loading`, `embedding`, `ready` or `failed`.
    pub state: String,
    /// Tools with their vector, of `tools`.
    pub embedded: usize,
    pub tools: usize,
    /// Why the semantic stage is not running, and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Queries remembered as evidence for a tool (`search.learn`).
    #[serde(default)]
    pub learned: usize,
}

/// `evoctl status --json`: `http`, the Streamable HTTP endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpStatus {
    /// The address it listens on (`127.0.0.1:8787`).
    pub listen: String,
    /// The MCP path (`/mcp`).
    pub path: String,
    pub tls: bool,
    /// How clients authenticate: `tokens`, `oauth`; empty without auth.
    pub auth: Vec<String>,
    /// Started with `--insecure-no-auth` on an address others can reach.
    pub insecure_no_auth: bool,
    /// Something the person who runs evod should act on.
    pub warning: Option<String>,
}

/// A tool exposed under its own name because it already carried its prefix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Shortened {
    /// The exposed name (`git_log`).
    pub name: String,
    /// The doubled form that still routes to it (`git_git_log`).
    pub also: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub version: String,
    pub pid: u32,
    pub socket: String,
    pub uptime_s: u64,
    pub tools: usize,
    /// Why evod has no guard process (it ends the children's process groups
    /// if evod is killed); `None` while the guard runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard_error: Option<String>,
}

/// One configured server as `evoctl status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerStatus {
    pub id: String,
    pub state: ServerState,
    /// Tools this server contributes to the catalog.
    pub tools: usize,
    /// Where the listed tools came from.
    pub source: ToolSource,
    pub cached_tools: Option<usize>,
    pub live_tools: Option<usize>,
    /// Short config hash (12 hex digits).
    pub config_hash: String,
    pub restarts: u32,
    pub error: Option<String>,
    /// `stdio` or `http`; empty for a server whose config entry failed.
    pub transport: String,
    pub pid: Option<u32>,
    pub last_refresh_age_s: Option<u64>,
    /// For a failed or crashing server: the last lines its child wrote to
    /// stderr, where the cause usually is. Empty otherwise.
    #[serde(default)]
    pub stderr_tail: Vec<String>,
    /// While `starting`: seconds since this start began (its deadline,
    /// `start_timeout_s`, counts from then).
    #[serde(default)]
    pub starting_s: Option<u64>,
    /// While `queued`: its place in the line, 1 for the next to start.
    #[serde(default)]
    pub queue_position: Option<usize>,
    /// Resources, resource templates and prompts it lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resources: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub templates: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompts: usize,
    /// A remote server's OAuth state (`none` for the others).
    #[serde(default)]
    pub auth: AuthStatus,
    /// Its sandbox (`sandbox` in its entry, or `sandbox.default`); `None`: not confined.
    #[serde(default)]
    pub sandbox: Option<SandboxStatus>,
}

/// `status --json` `sandbox` of a server: what its process tree may touch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStatus {
    /// Paths readable (and executable) with everything below them.
    pub read: Vec<String>,
    /// Paths readable and writable with everything below them.
    pub write: Vec<String>,
    /// `false`: no network at all, not even loopback.
    pub network: bool,
    /// Whether evod enforces it here (Linux); elsewhere the server runs unconfined.
    pub enforced: bool,
}

/// A remote server's OAuth state in `evoctl status` (never a token).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthStatus {
    pub state: AuthWireState,
    /// When the access token expires (seconds since the Unix epoch).
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// Why a login is required or the refresh failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `auth.state` in `evoctl status --json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthWireState {
    #[default]
    None,
    Ok,
    LoginRequired,
    RefreshFailed,
}

/// Lifecycle state of one configured server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Listed from the cache; its child is started by the first call.
    Idle,
    /// Waiting for its turn to start (`limits.max_concurrent_starts`
    /// children are starting already).
    Queued,
    Starting,
    Ready,
    /// Went down; starts again after a backoff.
    Restarting,
    /// Crashed too often, or its config entry cannot be used: waits for a
    /// reload or `evoctl refresh`.
    Failed,
    /// Shut down (evod stopping, a reload removing the server), or its
    /// ChildServer no longer answers.
    #[default]
    Stopped,
    /// `disabled: true` in the config.
    Disabled,
    /// A remote server that needs `evoctl login`.
    LoginRequired,
}

impl ServerState {
    /// Queued or starting: its tools may yet appear.
    pub fn is_starting(self) -> bool {
        matches!(self, ServerState::Queued | ServerState::Starting)
    }

    /// The name `evoctl status` shows, also its `--json` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Idle => "idle",
            ServerState::Queued => "queued",
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Restarting => "restarting",
            ServerState::Failed => "failed",
            ServerState::Stopped => "stopped",
            ServerState::Disabled => "disabled",
            ServerState::LoginRequired => "login_required",
        }
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a server's listed tools came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    #[default]
    None,
    /// The catalog cache, written by an earlier discovery.
    Cache,
    /// The running child's own list.
    Live,
}

impl ToolSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSource::None => "none",
            ToolSource::Cache => "cache",
            ToolSource::Live => "live",
        }
    }
}

impl fmt::Display for ToolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool name that more than one registration produced; the first won.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Duplicate {
    pub name: String,
    pub kept: String,
    pub skipped: Vec<String>,
}

/// A config or permissions file and whether its last load succeeded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileStatus {
    pub path: String,
    /// The file loaded and is in force (warnings or not).
    pub ok: bool,
    pub error: Option<String>,
    /// What its last load ignored (unknown keys, skipped env file lines), in the order found.
    #[serde(default)]
    pub warnings: Vec<FileWarning>,
    /// There is no such file: its defaults apply (`ok` all the same).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// One thing a file's load ignored, and where.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileWarning {
    /// The file it is in: the config, or its env file.
    pub file: String,
    /// 1-based; `null` when the place cannot be told.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for FileWarning {
    /// `file:line: message`, or `file: message` without a line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// A permissions rule that decides by a server's annotations (its own
/// claims about its tools, which evo cannot check), and how many of that
/// server's tools it decided.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnnotationReliance {
    pub server: String,
    /// `@read_only`, `@destructive`, `@idempotent` or `@open_world`.
    pub rule: String,
    pub tools: usize,
}
