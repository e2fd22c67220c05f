//! Profiles: named tool sets a session lists (`evoctl profiles`, and
//! `activate|deactivate --profile`).

use serde::{Deserialize, Serialize};

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
