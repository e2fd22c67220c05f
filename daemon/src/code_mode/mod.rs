//! Code mode: an agent's script runs inside evod and calls the session's
//! tools as typed async functions (see `docs/code-mode.md`): the engine that
//! runs it, and the TypeScript signatures that tell the agent what each
//! tool takes and returns.

pub mod engine;
pub mod typescript;
