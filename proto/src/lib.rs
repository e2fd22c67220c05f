//! evo's control-socket protocol, shared by `evod` and `evoctl` and nothing else.
//!
//! A connection opens with one handshake line ([`Hello`]) answered by one line
//! ([`Welcome`]). An `mcp` connection then carries MCP's newline-delimited JSON-RPC
//! untouched; a `ctl` connection carries [`CtlRequest`] / [`CtlReply`] lines.
//! Every line is bounded by a size limit ([`frame`]). [`entry`] holds the
//! transport rules of a config entry, which `evoctl import` shares with
//! evod's loader.

pub mod ctl;
pub mod entry;
#[cfg(unix)]
pub mod fdpass;
pub mod frame;
pub mod handshake;
pub mod paths;

pub use ctl::{CtlReply, CtlRequest, Reply};
pub use handshake::{ConnKind, Hello, Welcome};

use serde_json::Value;

/// Version of the handshake and ctl protocol. Bumped on incompatible change; a
/// daemon refuses a handshake with another version, naming both.
pub const PROTOCOL_VERSION: u32 = 1;

/// The JSON type of `value` as evo's error messages name it ("an object",
/// "a string"): the daemon's config loader and evoctl's config editor refuse
/// a file in the same words.
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
