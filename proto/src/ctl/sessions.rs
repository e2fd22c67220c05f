//! Sessions: how each is seen (`evoctl sessions`), the discovery mode and
//! transport it has, and the tools activated in it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A session as messages name it: `s3 (dave)` when it has a name, else `s3`.
pub fn session_label(id: &str, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("{id} ({name})"),
        None => id.to_string(),
    }
}

/// Which tools `tools/list` returns to a session (docs/configuration.md,
/// "Clients and the shim").
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
    /// With the shared store: the instance holding it (its copy there);
    /// `null` without one (a stable key of `sessions --json`).
    #[serde(default)]
    pub instance: Option<String>,
}

impl fmt::Display for SessionEra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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

/// Reply to `activate` / `deactivate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActivationReport {
    pub session: String,
    /// The session's name, when it has one (`evoctl shim --session NAME`);
    /// `null` when it has none (a stable key of `--json`).
    #[serde(default)]
    pub session_name: Option<String>,
    pub changed: Vec<String>,
    pub activated: Vec<String>,
}
