//! What the servers offer: tools (`list`, `search`, `describe`), resources,
//! resource templates and prompts, and a resource read.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
    /// The part of the lexical score learned from use (`search.learn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<f64>,
}

/// `evoctl list --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolList {
    /// The session whose view this is; `None` for `--all`.
    pub session: Option<String>,
    /// The session's name, when it has one; `null` when it has none (a
    /// stable key of `--json`).
    #[serde(default)]
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
