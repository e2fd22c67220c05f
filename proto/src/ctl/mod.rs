//! Control requests (`evoctl` → `evod`) and their replies, one JSON line each.
//!
//! The reply payloads are typed so their keys stay stable: docs/operating.md
//! ("`--json` output") promises them to scripts that read `evoctl … --json`.
//! One file per topic; every name is re-exported here, so `evo_proto::ctl::X`
//! is the one path callers use.

mod access;
mod approvals;
mod catalog;
mod integrity;
mod profiles;
mod reply;
mod request;
mod sessions;
mod status;

pub use access::{LoginReport, TokenCreated, TokenInfo, TokenList, UiAddress};
pub use approvals::{ApprovalsReport, PendingApproval};
pub use catalog::{
    ExampleCall, PromptLine, PromptsReport, ReadContent, ReadReport, ResourceLine, ResourcesReport,
    SearchResults, StageScores, TemplateLine, ToolDescription, ToolLine, ToolList,
};
pub use integrity::{DiffReport, IntegrityMode, QuarantinedTool, ToolDiff};
pub use profiles::{ProfileChangeReport, ProfileInfo, ProfilesReport};
pub use reply::{ActionReport, CtlReply, ErrorKind, Reply};
pub use request::CtlRequest;
pub use sessions::{
    ActivationReport, DiscoveryMode, LOCAL_IDENTITY, SessionEra, SessionInfo, SessionIo,
    SessionsReport, UnknownDiscoveryMode, session_label,
};
pub use status::{
    AnnotationReliance, AuthStatus, AuthWireState, DaemonInfo, Duplicate, FileStatus, FileWarning,
    HttpStatus, SandboxStatus, SearchStatus, ServerState, ServerStatus, Shortened, StatusReport,
    StoreStatus, ToolSource,
};

#[cfg(test)]
mod tests;
