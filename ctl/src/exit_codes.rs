//! evoctl's exit codes, the same for every command and for the shim:
//! docs/operating.md ("Exit codes") promises them to scripts.

/// 0 ok, 1 refused (by the daemon, or a local command
/// such as `setup` that could not do its job safely), 2 usage, 3 no daemon.
pub const EXIT_REFUSED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_NO_DAEMON: u8 = 3;
