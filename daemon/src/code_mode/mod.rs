//! Code mode: an agent's script run inside evod against the session's
//! tools (see `docs/code-mode.md`).

pub mod engine;
