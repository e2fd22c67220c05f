//! Tool integrity: the tools whose definition changed since evo pinned it,
//! the `integrity` setting, and `evoctl diff`.
//!
//! The integrity keys: `evoctl status --json` has `integrity` (the mode) and `quarantined`
//! (`[{server, tool, name, changed, drift}]`; under `warn` the same list, of tools left usable).
//! `evoctl diff --json` is `{server, tools: [{tool, name, changed, drift, old, new, diff}],
//! message}`. `trust` answers like the other actions, with `trusted: ["server:tool"]`. `diff` with
//! nothing changed, and `trust` with nothing to trust, exit 0 and say so; an unknown server or tool
//! exits 1.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
