//! Control requests (`evoctl` → `evod`): one JSON line each, tagged by `cmd`.

use serde::{Deserialize, Serialize};

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
    /// `evoctl search forget [TOOL]`: drop what search learned from use,
    /// for one tool or all.
    SearchForget {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
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
