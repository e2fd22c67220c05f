//! The reply line: success with its data, or a refusal with its kind; the
//! data's shape per request; and the plain report of an action.

use serde::{Deserialize, Serialize};
use serde_json::{Value, from_value};

use super::{
    ActivationReport, ApprovalsReport, CtlRequest, DiffReport, LoginReport, ProfileChangeReport,
    ProfilesReport, PromptsReport, ReadReport, ResourcesReport, SearchResults, SessionsReport,
    StatusReport, TokenCreated, TokenList, ToolDescription, ToolList, UiAddress,
};

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
    pub data: Option<Value>,
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
            | CtlRequest::Logout { .. }
            | CtlRequest::SearchForget { .. } => Reply::Action(from_value(data)?),
            CtlRequest::Login { .. } => Reply::Login(from_value(data)?),
            CtlRequest::Docs => Reply::Docs(from_value(data)?),
            CtlRequest::Diff { .. } => Reply::Diff(from_value(data)?),
            CtlRequest::TokenCreate { .. } => Reply::TokenCreated(from_value(data)?),
            CtlRequest::TokenList => Reply::Tokens(from_value(data)?),
            CtlRequest::Ui => Reply::Ui(from_value(data)?),
        })
    }
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
    /// The config's warnings, `file:line: message` (reload repeats them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Changes read but not applied until evod restarts (`serve.http`):
    /// each says what and why. Not empty: `evoctl` exits 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart_needed: Vec<String>,
}
