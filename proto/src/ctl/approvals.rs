//! Calls held for a person's approval (`evoctl approvals`).

use serde::{Deserialize, Serialize};

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
