//! Control requests (`evoctl` → `evod`) and their replies, one JSON line each.
//!
//! The reply payloads are typed so their keys stay stable: DESIGN.md promises
//! them to scripts that read `evoctl … --json`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One control request. Serialised with a `cmd` tag: `{"cmd":"status"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum CtlRequest {
    Status,
    /// Tools visible to a session (`session` id or name; else the most recently
    /// active session), or the whole catalog with `all`.
    List {
        #[serde(default)]
        session: Option<String>,
        #[serde(default)]
        all: bool,
    },
    Search {
        query: String,
        #[serde(default)]
        limit: Option<usize>,
        /// Each result carries each stage's score (`evoctl search --explain`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        explain: bool,
    },
    Describe {
        name: String,
    },
    /// Activate tools in a session, or (with `profile`) add them to a
    /// profile for every session using it.
    Activate {
        tools: Vec<String>,
        #[serde(default)]
        session: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
    },
    Deactivate {
        tools: Vec<String>,
        #[serde(default)]
        session: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
    },
    Sessions,
    /// Every profile with its tools and the sessions using it.
    Profiles,
    /// Resources and resource templates (of one server, with `server`).
    Resources {
        #[serde(default)]
        server: Option<String>,
    },
    /// Prompts, under their exposed names.
    Prompts,
    /// Read one resource through its owning server.
    Read {
        uri: String,
    },
    Reload,
    Refresh {
        #[serde(default)]
        server: Option<String>,
    },
    Approve {
        id: String,
    },
    Deny {
        id: String,
    },
    Approvals,
    Docs,
    Stop,
    /// Old and new definitions of a server's quarantined (or, under
    /// `integrity: warn`, changed) tools; `tool` is an exposed or upstream name.
    Diff {
        server: String,
        #[serde(default)]
        tool: Option<String>,
    },
    /// Accept the new definitions of a server's changed tools (or of one).
    Trust {
        server: String,
        #[serde(default)]
        tool: Option<String>,
    },
    /// A new API token for the HTTP endpoint: the reply carries the token
    /// itself, once; the tokens file keeps only its SHA-256.
    TokenCreate {
        name: String,
        #[serde(default)]
        role: Option<String>,
        #[serde(default)]
        profile: Option<String>,
    },
    /// The API tokens (names, roles, profiles, dates; never a token).
    TokenList,
    /// Forget a token: refused from the next request on, and the sessions
    /// opened with it end.
    TokenRevoke {
        name: String,
    },
    /// The web console's address with a one-time sign-in token (`evoctl
    /// ui`); evod starts a loopback listener for it when `serve.http` is off.
    Ui,
    /// `evoctl login SERVER`: without `wait`, starts the login and answers
    /// with the URL to open; with `wait`, answers once that login ended.
    Login {
        server: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        wait: bool,
    },
    /// `evoctl logout SERVER`: revoke where supported, forget the tokens.
    Logout {
        server: String,
    },
}

impl CtlRequest {
    /// Parses one request line, with an error message meant for a person.
    pub fn parse(line: &[u8]) -> Result<CtlRequest, String> {
        serde_json::from_slice(line).map_err(|e| format!("invalid control request: {e}"))
    }
}

/// Why the daemon refused a request. Maps to `evoctl` exit code 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    InvalidRequest,
    UnknownTool,
    UnknownSession,
    UnknownServer,
    NotFound,
    Unsupported,
    Internal,
}

/// One reply line: `{"ok":true,"data":{…}}` or `{"ok":false,"kind":…,"error":"…"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CtlReply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CtlReply {
    pub fn data(reply: Reply) -> CtlReply {
        match serde_json::to_value(&reply) {
            Ok(v) => CtlReply {
                ok: true,
                data: Some(v),
                kind: None,
                error: None,
            },
            Err(e) => CtlReply::error(ErrorKind::Internal, format!("reply not serialisable: {e}")),
        }
    }

    pub fn error(kind: ErrorKind, message: impl Into<String>) -> CtlReply {
        CtlReply {
            ok: false,
            data: None,
            kind: Some(kind),
            error: Some(message.into()),
        }
    }
}

/// The `data` of a successful reply: one shape per request, serialised as
/// that shape alone. The request a reply answers says which shape it is, so
/// [`Reply::decode`] takes the request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[allow(
    clippy::large_enum_variant,
    reason = "one reply is built per control request and serialised at once"
)]
pub enum Reply {
    /// `status`.
    Status(StatusReport),
    /// `list`.
    Tools(ToolList),
    /// `search`.
    Search(SearchResults),
    /// `describe`.
    Tool(ToolDescription),
    /// `activate`, `deactivate`.
    Activation(ActivationReport),
    /// `activate --profile`, `deactivate --profile`.
    ProfileChange(ProfileChangeReport),
    /// `sessions`.
    Sessions(SessionsReport),
    /// `profiles`.
    Profiles(ProfilesReport),
    /// `resources`.
    Resources(ResourcesReport),
    /// `prompts`.
    Prompts(PromptsReport),
    /// `read`.
    Read(ReadReport),
    /// `approvals`.
    Approvals(ApprovalsReport),
    /// `reload`, `refresh`, `approve`, `deny`, `stop`.
    Action(ActionReport),
    /// `docs`: the Markdown reference.
    Docs(String),
    /// `diff`.
    Diff(DiffReport),
    /// `token create`.
    TokenCreated(TokenCreated),
    /// `token list`.
    Tokens(TokenList),
    /// `ui`.
    Ui(UiAddress),
    /// `login`.
    Login(LoginReport),
}

impl Reply {
    /// Reads the `data` of a successful reply to `request`.
    pub fn decode(request: &CtlRequest, data: Value) -> Result<Reply, serde_json::Error> {
        use serde_json::from_value;
        Ok(match request {
            CtlRequest::Status => Reply::Status(from_value(data)?),
            CtlRequest::List { .. } => Reply::Tools(from_value(data)?),
            CtlRequest::Search { .. } => Reply::Search(from_value(data)?),
            CtlRequest::Describe { .. } => Reply::Tool(from_value(data)?),
            CtlRequest::Activate {
                profile: Some(_), ..
            }
            | CtlRequest::Deactivate {
                profile: Some(_), ..
            } => Reply::ProfileChange(from_value(data)?),
            CtlRequest::Activate { .. } | CtlRequest::Deactivate { .. } => {
                Reply::Activation(from_value(data)?)
            }
            CtlRequest::Sessions => Reply::Sessions(from_value(data)?),
            CtlRequest::Profiles => Reply::Profiles(from_value(data)?),
            CtlRequest::Resources { .. } => Reply::Resources(from_value(data)?),
            CtlRequest::Prompts => Reply::Prompts(from_value(data)?),
            CtlRequest::Read { .. } => Reply::Read(from_value(data)?),
            CtlRequest::Approvals => Reply::Approvals(from_value(data)?),
            CtlRequest::Reload
            | CtlRequest::Refresh { .. }
            | CtlRequest::Approve { .. }
            | CtlRequest::Deny { .. }
            | CtlRequest::Stop
            | CtlRequest::Trust { .. }
            | CtlRequest::TokenRevoke { .. }
            | CtlRequest::Logout { .. } => Reply::Action(from_value(data)?),
            CtlRequest::Login { .. } => Reply::Login(from_value(data)?),
            CtlRequest::Docs => Reply::Docs(from_value(data)?),
            CtlRequest::Diff { .. } => Reply::Diff(from_value(data)?),
            CtlRequest::TokenCreate { .. } => Reply::TokenCreated(from_value(data)?),
            CtlRequest::TokenList => Reply::Tokens(from_value(data)?),
            CtlRequest::Ui => Reply::Ui(from_value(data)?),
        })
    }
}

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

/// `evoctl ui --json`: where the web console is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UiAddress {
    /// The address to open: signs the browser in once (the token in it
    /// works a single time), then the console.
    pub url: String,
    /// The console's own address, without a token.
    pub console: String,
    /// `http` (under `/ui` on the `serve.http` listener) or `loopback`
    /// (a listener evod started for the console alone).
    pub served: String,
    /// Seconds the sign-in token stays valid if unused.
    pub expires_s: u64,
}

/// Reply to `token create`: the token, shown this once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenCreated {
    pub name: String,
    /// The bearer token; evod keeps only its SHA-256.
    pub token: String,
    pub role: Option<String>,
    pub profile: Option<String>,
    /// RFC 3339, UTC.
    pub created: String,
    /// The tokens file it was recorded in.
    pub file: String,
}

/// One API token as `token list` shows it (never the token).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub name: String,
    pub role: Option<String>,
    pub profile: Option<String>,
    pub created: String,
}

/// `evoctl token list --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
    pub file: String,
}

/// A tool whose definition differs from the one evo pinned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuarantinedTool {
    /// The server's id.
    pub server: String,
    /// The tool's name at that server.
    pub tool: String,
    /// Its exposed name.
    pub name: String,
    /// The definition's fields that changed since it was pinned (MCP
    /// names: `description`, `inputSchema`, …), never their new text.
    pub changed: Vec<String>,
    /// How many lists since then brought a definition unlike the one
    /// before (a child that changes it on every list counts up).
    pub drift: u32,
}

/// `integrity` in the config: what evo does when a pinned tool's
/// definition changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IntegrityMode {
    /// Quarantine the tool: hidden and refused until `evoctl trust`.
    #[default]
    Pin,
    /// Log it and show it in `evoctl status`; the tool stays usable.
    Warn,
    /// Record nothing, check nothing.
    Off,
}

impl IntegrityMode {
    pub fn as_str(self) -> &'static str {
        match self {
            IntegrityMode::Pin => "pin",
            IntegrityMode::Warn => "warn",
            IntegrityMode::Off => "off",
        }
    }

    /// Case-insensitive, surrounding whitespace ignored.
    pub fn parse(value: &str) -> Option<IntegrityMode> {
        [IntegrityMode::Pin, IntegrityMode::Warn, IntegrityMode::Off]
            .into_iter()
            .find(|m| value.trim().eq_ignore_ascii_case(m.as_str()))
    }
}

impl fmt::Display for IntegrityMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `evoctl diff --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiffReport {
    pub server: String,
    /// One entry per changed tool asked about; empty when none differs.
    pub tools: Vec<ToolDiff>,
    /// What was found, in words (why `tools` is empty, when it is).
    pub message: String,
}

/// One tool's pinned and current definitions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolDiff {
    /// The tool's name at its server.
    pub tool: String,
    /// Its exposed name.
    pub name: String,
    pub changed: Vec<String>,
    pub drift: u32,
    /// The pinned definition: canonical JSON (sorted keys) of name, title,
    /// description, inputSchema, outputSchema, annotations.
    pub old: Value,
    /// The definition the server lists now, in the same form.
    pub new: Value,
    /// A unified diff of the two, pretty-printed.
    pub diff: String,
}

/// A session as messages name it: `s3 (dave)` when it has a name, else `s3`.
pub fn session_label(id: &str, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("{id} ({name})"),
        None => id.to_string(),
    }
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

/// `evoctl login`: the URL to open (when starting), what happened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginReport {
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub message: String,
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

/// Which tools `tools/list` returns to a session (DESIGN.md, "Discovery modes").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiscoveryMode {
    /// Every native and permitted proxied tool.
    Legacy,
    /// Native tools, hot tools and the session's activated tools.
    #[default]
    Dynamic,
}

impl DiscoveryMode {
    /// The name used in the config file, on the command line and in `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            DiscoveryMode::Legacy => "legacy",
            DiscoveryMode::Dynamic => "dynamic",
        }
    }

    /// Parses a mode given by `source` (`--mode`, an environment variable),
    /// whose name the error leads with.
    pub fn parse_from(value: &str, source: &str) -> Result<DiscoveryMode, String> {
        value
            .parse()
            .map_err(|e: UnknownDiscoveryMode| format!("{source}: {e}"))
    }
}

impl fmt::Display for DiscoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A discovery mode name that is neither `legacy` nor `dynamic`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown discovery mode '{0}'; expected 'legacy' or 'dynamic'")]
pub struct UnknownDiscoveryMode(pub String);

impl FromStr for DiscoveryMode {
    type Err = UnknownDiscoveryMode;

    /// Case-insensitive, surrounding whitespace ignored (the value often comes from an
    /// environment variable).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        if name.eq_ignore_ascii_case("legacy") {
            Ok(DiscoveryMode::Legacy)
        } else if name.eq_ignore_ascii_case("dynamic") {
            Ok(DiscoveryMode::Dynamic)
        } else {
            Err(UnknownDiscoveryMode(s.to_owned()))
        }
    }
}

/// Where a session's MCP messages travel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionIo {
    /// The shim handed the client's stdin and stdout to the daemon.
    Stdio,
    /// The shim copies them over the control socket.
    #[default]
    Socket,
    /// Streamable HTTP (`serve.http`).
    Http,
}

/// Which MCP era a session speaks: the `initialize` handshake (2024-11-05
/// to 2025-11-25) or the 2026-07-28 per-request envelope.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SessionEra {
    #[default]
    #[serde(rename = "initialize")]
    Initialize,
    #[serde(rename = "2026-07-28")]
    Modern,
}

/// The identity of the local owner in `sessions` and `approvals`: the
/// control socket's user, and HTTP clients when there is no auth.
pub const LOCAL_IDENTITY: &str = "local";

impl SessionEra {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEra::Initialize => "initialize",
            SessionEra::Modern => "2026-07-28",
        }
    }
}
impl SessionIo {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionIo::Stdio => "stdio",
            SessionIo::Socket => "socket",
            SessionIo::Http => "http",
        }
    }
}

impl fmt::Display for SessionIo {
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

impl std::fmt::Display for FileWarning {
    /// `file:line: message`, or `file: message` without a line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// One live (or remembered named) session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    pub name: Option<String>,
    pub mode: DiscoveryMode,
    #[serde(default)]
    pub io: SessionIo,
    pub activated: Vec<String>,
    /// Seconds since the session last sent a request.
    pub last_active: u64,
    /// The MCP era its requests speak (`initialize` until one says else).
    #[serde(default)]
    pub era: SessionEra,
    /// Who the session belongs to: `local` for the local owner (the socket,
    /// or HTTP without auth), else the HTTP identity (`token:NAME`,
    /// `oauth:SUB`).
    #[serde(default)]
    pub identity: Option<String>,
    /// The profile its identity (or the shim) chose.
    #[serde(default)]
    pub profile: Option<String>,
    /// The permissions role its identity carries; `None`: `active_role`.
    #[serde(default)]
    pub role: Option<String>,
    /// With the shared store: the instance holding it (its copy there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

impl fmt::Display for SessionEra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One profile in `evoctl profiles` (and, without `tools`, in `status`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileInfo {
    pub name: String,
    /// The config's names and globs.
    pub patterns: Vec<String>,
    /// Added and taken out at run time (`evoctl activate|deactivate --profile`).
    #[serde(default)]
    pub added: Vec<String>,
    #[serde(default)]
    pub removed: Vec<String>,
    /// The tools it lists now (exposed names, catalog order).
    #[serde(default)]
    pub tools: Vec<String>,
    /// How many tools it lists now.
    pub count: usize,
    /// Tools it names that permissions deny: never listed.
    #[serde(default)]
    pub denied: Vec<String>,
    /// Patterns and added names that match no tool.
    #[serde(default)]
    pub unmatched: Vec<String>,
    /// Live sessions using it.
    pub sessions: usize,
}

/// One resource in `evoctl resources`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceLine {
    pub uri: String,
    pub name: String,
    /// The server that owns it.
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One resource template in `evoctl resources`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateLine {
    pub uri_template: String,
    pub name: String,
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `evoctl resources --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourcesReport {
    pub resources: Vec<ResourceLine>,
    pub templates: Vec<TemplateLine>,
}

/// One prompt in `evoctl prompts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptLine {
    /// The exposed name.
    pub name: String,
    pub server: String,
    /// The server's own name for it.
    pub upstream: String,
    pub summary: String,
    /// Its arguments, required ones first marked `*`.
    pub arguments: Vec<String>,
}

/// `evoctl prompts --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptsReport {
    pub prompts: Vec<PromptLine>,
}

/// One part of a read resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadContent {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64, as MCP carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// `evoctl read --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadReport {
    pub uri: String,
    pub server: String,
    pub contents: Vec<ReadContent>,
}

/// `evoctl profiles --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfilesReport {
    pub profiles: Vec<ProfileInfo>,
}

/// Reply to `activate --profile` / `deactivate --profile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileChangeReport {
    pub profile: String,
    /// Tools whose membership changed.
    pub changed: Vec<String>,
    /// The profile's tools now.
    pub tools: Vec<String>,
    /// Live sessions using it (told with list_changed when it changed).
    pub sessions: usize,
}

/// `evoctl sessions --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionsReport {
    pub sessions: Vec<SessionInfo>,
    /// Why other instances' sessions are missing (the shared store did not
    /// answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// One tool in `list` and `search` replies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolLine {
    pub name: String,
    pub summary: String,
    pub domain: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hot: bool,
    /// `evoctl list`: its effective permission (`allow`,
    /// `require_approval`) and the rule that decided it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// `evoctl search --explain`: each stage's score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<StageScores>,
}

/// Each search stage's score of one result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageScores {
    /// The lexical (BM25F) score.
    pub lexical: f64,
    /// Cosine of the tool's and the query's embeddings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic: Option<f64>,
    /// Both, normalised per query and weighed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused: Option<f64>,
    /// The result this one was pulled up next to as its near-duplicate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_duplicate_of: Option<String>,
    /// How similar the two are (cosine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
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

/// `evoctl list --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolList {
    /// The session whose view this is; `None` for `--all`.
    pub session: Option<String>,
    /// The session's name, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    pub tools: Vec<ToolLine>,
}

/// `evoctl search --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    pub query: String,
    pub results: Vec<ToolLine>,
    /// Why the result is empty, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Servers the query names (by id or capability) that have no tools
    /// listed, each as a sentence saying why and what to do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

/// `evoctl describe --json`: one tool in full.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolDescription {
    /// The exposed name.
    pub name: String,
    pub summary: String,
    pub domain: String,
    /// The id of the server that has it.
    pub server: String,
    /// Its name at that server.
    pub upstream: String,
    pub hot: bool,
    /// The server's description, whole.
    pub description: Option<String>,
    pub input_schema: Map<String, Value>,
    /// A call built from the schema.
    pub example: ExampleCall,
    /// All of the above as `evoctl describe` prints it.
    pub text: String,
}

/// A tool call as a client would send it: `{"name", "arguments"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExampleCall {
    pub name: String,
    pub arguments: Value,
}

/// Reply to `activate` / `deactivate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActivationReport {
    pub session: String,
    /// The session's name, when it has one (`evoctl shim --session NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    pub changed: Vec<String>,
    pub activated: Vec<String>,
}

/// Reply to `stop`, `reload`, `refresh`: what happened, in words and lists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActionReport {
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarted: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reprefixed: Vec<String>,
    /// Entries that cannot be used (reload): each names its server and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Tools whose new definitions were accepted (`trust`), as `server:tool`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted: Vec<String>,
}

/// One call held until a person approves or denies it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// What `evoctl approve` / `evoctl deny` take.
    pub id: String,
    pub tool: String,
    /// The call's arguments as JSON, already cut short by the daemon.
    pub arguments: String,
    /// Seconds since the call was first held.
    pub age_s: u64,
    /// Whose call it is: `local` (the local owner) or the HTTP identity
    /// (`token:NAME`, `oauth:SUB`). Only a call of the same identity
    /// consumes the approval.
    #[serde(default)]
    pub identity: Option<String>,
}

/// `evoctl approvals --json`: calls waiting for approval, in the order held.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApprovalsReport {
    pub approvals: Vec<PendingApproval>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_with_cmd_tag() {
        let cases = [
            (CtlRequest::Status, r#"{"cmd":"status"}"#),
            (
                CtlRequest::List {
                    session: None,
                    all: true,
                },
                r#"{"cmd":"list","session":null,"all":true}"#,
            ),
            (
                CtlRequest::Search {
                    query: "time".into(),
                    limit: Some(3),
                    explain: false,
                },
                r#"{"cmd":"search","query":"time","limit":3}"#,
            ),
        ];
        for (req, json) in cases {
            assert_eq!(serde_json::to_string(&req).unwrap(), json);
            assert_eq!(CtlRequest::parse(json.as_bytes()).unwrap(), req);
        }
        assert_eq!(
            CtlRequest::parse(br#"{"cmd":"list"}"#).unwrap(),
            CtlRequest::List {
                session: None,
                all: false
            }
        );
    }

    #[test]
    fn ui_asks_for_the_console_and_reads_its_address() {
        assert_eq!(
            CtlRequest::parse(br#"{"cmd":"ui"}"#).unwrap(),
            CtlRequest::Ui
        );
        let data = serde_json::json!({"url": "http://127.0.0.1:1/ui/login?token=t", "console": "http://127.0.0.1:1/ui/", "served": "loopback", "expires_s": 600});
        let Reply::Ui(u) = Reply::decode(&CtlRequest::Ui, data.clone()).unwrap() else {
            panic!("not a ui reply");
        };
        assert_eq!(u.served, "loopback");
        assert_eq!(serde_json::to_value(Reply::Ui(u)).unwrap(), data);
    }

    #[test]
    fn approvals_keep_their_keys_and_order() {
        let report = ApprovalsReport {
            approvals: vec![PendingApproval {
                id: "ap1".into(),
                tool: "fx_echo".into(),
                arguments: r#"{"text":"hi"}"#.into(),
                age_s: 3,
                identity: Some(LOCAL_IDENTITY.into()),
            }],
        };
        assert_eq!(
            serde_json::to_string(&report).unwrap(),
            r#"{"approvals":[{"id":"ap1","tool":"fx_echo","arguments":"{\"text\":\"hi\"}","age_s":3,"identity":"local"}]}"#
        );
    }

    /// Each state's wire name is its `as_str`, and the one `--json` has
    /// always printed.
    #[test]
    fn enums_keep_their_wire_names() {
        fn wire<T: Serialize>(v: T) -> String {
            serde_json::to_value(v)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        }
        let states = [
            (ServerState::Idle, "idle"),
            (ServerState::Queued, "queued"),
            (ServerState::Starting, "starting"),
            (ServerState::Ready, "ready"),
            (ServerState::Restarting, "restarting"),
            (ServerState::Failed, "failed"),
            (ServerState::Stopped, "stopped"),
            (ServerState::Disabled, "disabled"),
        ];
        for (state, name) in states {
            assert_eq!((wire(state), state.as_str()), (name.into(), name));
            assert_eq!(
                serde_json::from_value::<ServerState>(name.into()).unwrap(),
                state
            );
        }
        let sources = [
            (ToolSource::None, "none"),
            (ToolSource::Cache, "cache"),
            (ToolSource::Live, "live"),
        ];
        for (source, name) in sources {
            assert_eq!((wire(source), source.as_str()), (name.into(), name));
        }
        for (mode, name) in [
            (DiscoveryMode::Legacy, "legacy"),
            (DiscoveryMode::Dynamic, "dynamic"),
        ] {
            assert_eq!((wire(mode), mode.as_str()), (name.into(), name));
        }
        for (io, name) in [
            (SessionIo::Stdio, "stdio"),
            (SessionIo::Socket, "socket"),
            (SessionIo::Http, "http"),
        ] {
            assert_eq!((wire(io), io.as_str()), (name.into(), name));
        }
    }

    #[test]
    fn discovery_mode_from_str() {
        #[rustfmt::skip]
        let cases = [
            ("legacy", Some(DiscoveryMode::Legacy)),
            ("Dynamic", Some(DiscoveryMode::Dynamic)),
            (" LEGACY ", Some(DiscoveryMode::Legacy)),
            ("", None),
            ("static", None),
        ];
        for (input, expected) in cases {
            assert_eq!(input.parse::<DiscoveryMode>().ok(), expected, "{input:?}");
        }
        let err = "static".parse::<DiscoveryMode>().err();
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("unknown discovery mode 'static'; expected 'legacy' or 'dynamic'")
        );
        assert_eq!(DiscoveryMode::default(), DiscoveryMode::Dynamic);
        assert_eq!(DiscoveryMode::Legacy.to_string(), "legacy");
        let json = serde_json::to_string(&DiscoveryMode::Legacy).ok();
        assert_eq!(json.as_deref(), Some("\"legacy\""));
        assert_eq!(
            DiscoveryMode::parse_from("x", "--mode").unwrap_err(),
            "--mode: unknown discovery mode 'x'; expected 'legacy' or 'dynamic'"
        );
    }

    /// A reply's data is its payload alone, no variant tag, and reads back
    /// as the shape its request asks for.
    #[test]
    fn replies_are_their_payload_and_decode_by_request() {
        let session = SessionInfo {
            id: "s1".into(),
            name: None,
            mode: DiscoveryMode::Legacy,
            io: SessionIo::Stdio,
            activated: vec!["fx_echo".into()],
            last_active: 2,
            era: SessionEra::Modern,
            identity: Some("token:ci".into()),
            profile: None,
            role: None,
            instance: None,
        };
        let reply = Reply::Sessions(SessionsReport {
            sessions: vec![session],
            unavailable: None,
        });
        let line = serde_json::to_string(&CtlReply::data(reply.clone())).unwrap();
        assert_eq!(
            line,
            r#"{"ok":true,"data":{"sessions":[{"id":"s1","name":null,"mode":"legacy","io":"stdio","activated":["fx_echo"],"last_active":2,"era":"2026-07-28","identity":"token:ci","profile":null,"role":null}]}}"#
        );
        let back: CtlReply = serde_json::from_str(&line).unwrap();
        assert_eq!(
            Reply::decode(&CtlRequest::Sessions, back.data.unwrap()).unwrap(),
            reply
        );

        let action = Reply::Action(ActionReport {
            message: "evod is shutting down".into(),
            ..Default::default()
        });
        let data = serde_json::to_value(&action).unwrap();
        assert_eq!(
            data,
            serde_json::json!({"message": "evod is shutting down"})
        );
        assert_eq!(
            Reply::decode(&CtlRequest::Stop, data.clone()).unwrap(),
            action
        );
        // The request decides the shape: an action report is no status.
        assert!(Reply::decode(&CtlRequest::Status, data).is_err());
        let docs = Reply::decode(&CtlRequest::Docs, "# evo\n".into()).unwrap();
        assert_eq!(docs, Reply::Docs("# evo\n".into()));
    }

    /// `describe --json` keeps the keys and order it had as a `json!` object.
    #[test]
    fn tool_description_keeps_its_keys_and_order() {
        let tool = ToolDescription {
            name: "fx_echo".into(),
            summary: "Echoes.".into(),
            domain: "fx".into(),
            server: "fx".into(),
            upstream: "echo".into(),
            hot: false,
            description: None,
            input_schema: serde_json::json!({"type": "object"})
                .as_object()
                .cloned()
                .unwrap(),
            example: ExampleCall {
                name: "fx_echo".into(),
                arguments: serde_json::json!({}),
            },
            text: "fx_echo\n".into(),
        };
        assert_eq!(
            serde_json::to_string(&Reply::Tool(tool.clone())).unwrap(),
            r#"{"name":"fx_echo","summary":"Echoes.","domain":"fx","server":"fx","upstream":"echo","hot":false,"description":null,"input_schema":{"type":"object"},"example":{"name":"fx_echo","arguments":{}},"text":"fx_echo\n"}"#
        );
        let data = serde_json::to_value(&tool).unwrap();
        let request = CtlRequest::Describe {
            name: "fx_echo".into(),
        };
        assert_eq!(Reply::decode(&request, data).unwrap(), Reply::Tool(tool));
    }

    /// The keys DESIGN.md ("Fine points") promises for `status --json`.
    #[test]
    fn server_status_keeps_its_keys() {
        let server = ServerStatus {
            id: "fx".into(),
            state: ServerState::Ready,
            tools: 3,
            source: ToolSource::Live,
            cached_tools: Some(3),
            live_tools: Some(3),
            config_hash: "0123456789ab".into(),
            restarts: 0,
            error: None,
            transport: "stdio".into(),
            pid: Some(7),
            last_refresh_age_s: None,
            stderr_tail: vec!["boom".into()],
            starting_s: Some(12),
            queue_position: None,
            resources: 2,
            templates: 0,
            prompts: 1,
            auth: AuthStatus {
                state: AuthWireState::Ok,
                expires_at: Some(1_800_000_000),
                error: None,
            },
        };
        assert_eq!(
            serde_json::to_string(&server).unwrap(),
            r#"{"id":"fx","state":"ready","tools":3,"source":"live","cached_tools":3,"live_tools":3,"config_hash":"0123456789ab","restarts":0,"error":null,"transport":"stdio","pid":7,"last_refresh_age_s":null,"stderr_tail":["boom"],"starting_s":12,"queue_position":null,"resources":2,"prompts":1,"auth":{"state":"ok","expires_at":1800000000}}"#
        );
    }

    /// `status --json`'s integrity keys (documented in README), and the
    /// requests and reply of `diff`/`trust`.
    #[test]
    fn integrity_keeps_its_keys() {
        let held = QuarantinedTool {
            server: "fx".into(),
            tool: "echo".into(),
            name: "fx_echo".into(),
            changed: vec!["description".into()],
            drift: 2,
        };
        assert_eq!(
            serde_json::to_string(&held).unwrap(),
            r#"{"server":"fx","tool":"echo","name":"fx_echo","changed":["description"],"drift":2}"#
        );
        let status = serde_json::to_value(StatusReport::default()).unwrap();
        assert_eq!(status["integrity"], "pin");
        assert_eq!(status["quarantined"], serde_json::json!([]));
        // A daemon from before integrity still reads.
        let mut old = status.clone();
        if let Some(o) = old.as_object_mut() {
            o.remove("integrity");
            o.remove("quarantined");
        }
        assert_eq!(
            serde_json::from_value::<StatusReport>(old)
                .unwrap()
                .integrity,
            IntegrityMode::Pin
        );
        for (mode, name) in [
            (IntegrityMode::Pin, "pin"),
            (IntegrityMode::Warn, "warn"),
            (IntegrityMode::Off, "off"),
        ] {
            assert_eq!(serde_json::to_value(mode).unwrap(), name);
            assert_eq!(IntegrityMode::parse(&name.to_uppercase()), Some(mode));
        }
        assert_eq!(IntegrityMode::parse("pinned"), None);
        let diff = CtlRequest::Diff {
            server: "fx".into(),
            tool: Some("echo".into()),
        };
        let line = serde_json::to_string(&diff).unwrap();
        assert_eq!(line, r#"{"cmd":"diff","server":"fx","tool":"echo"}"#);
        assert_eq!(CtlRequest::parse(line.as_bytes()).unwrap(), diff);
        assert_eq!(
            CtlRequest::parse(br#"{"cmd":"trust","server":"fx"}"#).unwrap(),
            CtlRequest::Trust {
                server: "fx".into(),
                tool: None
            }
        );
        let report = DiffReport {
            server: "fx".into(),
            tools: vec![ToolDiff {
                tool: "echo".into(),
                name: "fx_echo".into(),
                changed: vec!["description".into()],
                drift: 1,
                old: serde_json::json!({"description": "a"}),
                new: serde_json::json!({"description": "b"}),
                diff: "--- a\n+++ b\n".into(),
            }],
            message: "m".into(),
        };
        let data = serde_json::to_value(Reply::Diff(report.clone())).unwrap();
        assert_eq!(
            data["tools"][0]
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>()),
            Some(
                ["tool", "name", "changed", "drift", "old", "new", "diff"]
                    .map(String::from)
                    .to_vec()
            )
        );
        assert_eq!(Reply::decode(&diff, data).unwrap(), Reply::Diff(report));
    }

    #[test]
    fn file_status_keeps_its_keys_and_reads_without_warnings() {
        let f = FileStatus {
            path: "/c/mcp.config.json".into(),
            ok: true,
            error: None,
            warnings: vec![FileWarning {
                file: "/c/mcp.config.json".into(),
                line: Some(5),
                message: "m".into(),
            }],
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap_or_default(),
            r#"{"path":"/c/mcp.config.json","ok":true,"error":null,"warnings":[{"file":"/c/mcp.config.json","line":5,"message":"m"}]}"#
        );
        // A daemon from before `warnings` existed still reads.
        let old: Result<FileStatus, _> =
            serde_json::from_str(r#"{"path":"p","ok":false,"error":"e"}"#);
        assert_eq!(old.ok().map(|f| f.warnings.len()), Some(0));
    }

    #[test]
    fn bad_requests_are_errors() {
        for bad in [
            &b""[..],
            b"{}",
            br#"{"cmd":"explode"}"#,
            br#"{"cmd":"search"}"#,
            br#"{"cmd":"search","query":"x","bogus":1}"#,
            b"[1,2]",
        ] {
            assert!(CtlRequest::parse(bad).is_err());
        }
    }
}
