//! Code mode: an agent's script calls the session's tools as typed functions.

pub mod typescript;
