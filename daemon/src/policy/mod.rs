//! What a caller may do with a tool, decided from values (no actors, no I/O):
//! [`permissions`] (the permissions file's allow / deny / require_approval),
//! [`approvals`] (a person's approval of one held call), [`integrity`]
//! (pins of tool definitions and the quarantine of changed ones) and
//! [`profiles`] (named sets of tools a session lists).

pub mod approvals;
pub mod integrity;
pub mod permissions;
pub mod profiles;
