//! Control requests (`evoctl` → `evod`) and their replies, one JSON line each.
//!
//! The reply payloads are typed so their keys stay stable: DESIGN.md promises
//! them to scripts that read `evoctl … --json`.

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
    },
    Describe {
        name: String,
    },
    Activate {
        tools: Vec<String>,
        #[serde(default)]
        session: Option<String>,
    },
    Deactivate {
        tools: Vec<String>,
        #[serde(default)]
        session: Option<String>,
    },
    Sessions,
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
    pub fn data<T: Serialize>(value: &T) -> CtlReply {
        match serde_json::to_value(value) {
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

/// `evoctl status --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub daemon: DaemonInfo,
    pub servers: Vec<ServerStatus>,
    pub sessions: Vec<SessionInfo>,
    pub duplicates: Vec<Duplicate>,
    pub config: FileStatus,
    pub permissions: FileStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub version: String,
    pub pid: u32,
    pub socket: String,
    pub uptime_s: u64,
    pub tools: usize,
}

/// One configured server as `evoctl status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerStatus {
    pub id: String,
    /// `starting`, `ready`, `idle` (listed from cache, child not started),
    /// `restarting`, `failed`, `stopped`, `disabled`.
    pub state: String,
    /// Tools this server contributes to the catalog.
    pub tools: usize,
    /// Where the listed tools came from: `live`, `cache` or `none`.
    pub source: String,
    pub cached_tools: Option<usize>,
    pub live_tools: Option<usize>,
    /// Short config hash (12 hex digits).
    pub config_hash: String,
    pub restarts: u32,
    pub error: Option<String>,
    pub transport: String,
    pub pid: Option<u32>,
    pub last_refresh_age_s: Option<u64>,
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
    pub ok: bool,
    pub error: Option<String>,
}

/// One live (or remembered named) session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    pub name: Option<String>,
    pub mode: String,
    /// Where the session's MCP messages travel: `stdio` when the shim handed
    /// the client's stdin/stdout to the daemon, `socket` when they are
    /// copied over the control socket.
    #[serde(default)]
    pub io: String,
    pub activated: Vec<String>,
    /// Seconds since the session last sent a request.
    pub last_active: u64,
}

/// `evoctl sessions --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionsReport {
    pub sessions: Vec<SessionInfo>,
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
}

/// `evoctl list --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolList {
    /// The session whose view this is; `None` for `--all`.
    pub session: Option<String>,
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

/// Reply to `activate` / `deactivate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActivationReport {
    pub session: String,
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
    fn approvals_keep_their_keys_and_order() {
        let report = ApprovalsReport {
            approvals: vec![PendingApproval {
                id: "ap1".into(),
                tool: "fx_echo".into(),
                arguments: r#"{"text":"hi"}"#.into(),
                age_s: 3,
            }],
        };
        assert_eq!(
            serde_json::to_string(&report).unwrap(),
            r#"{"approvals":[{"id":"ap1","tool":"fx_echo","arguments":"{\"text\":\"hi\"}","age_s":3}]}"#
        );
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
