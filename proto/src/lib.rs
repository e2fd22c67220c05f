//! evo's control-socket protocol, shared by `evod` and `evoctl` and nothing else.
//!
//! A connection opens with one handshake line ([`Hello`]) answered by one line
//! ([`Welcome`]). An `mcp` connection then carries MCP's newline-delimited JSON-RPC
//! untouched; a `ctl` connection carries [`CtlRequest`] / [`CtlReply`] lines.
//! Every line is bounded by a size limit ([`frame`]).

pub mod ctl;
#[cfg(unix)]
pub mod fdpass;
pub mod frame;
pub mod handshake;
pub mod paths;

pub use ctl::{CtlReply, CtlRequest, Reply};
pub use handshake::{ConnKind, Hello, Welcome};

/// Version of the handshake and ctl protocol. Bumped on incompatible change; a
/// daemon refuses a handshake with another version, naming both.
pub const PROTOCOL_VERSION: u32 = 1;
