//! `evod`, the evo daemon: actors (one file each) and pure modules.
//!
//! Actors: [`supervisor`], [`child`], [`catalog`], [`session`], [`refresher`].
//! Pure modules (values in, values out): [`config`], [`names`], [`native`],
//! [`schema`], [`search`], [`disclosure`], [`example`], [`repair`],
//! [`breaker`], [`permissions`], [`approvals`]. I/O glue: [`control`] serves
//! the control socket, [`transport`] frames a session's MCP lines,
//! [`childio`] is a stdio child's transport, [`watch`] watches the config
//! files, [`activation`] takes a systemd-passed socket.

pub mod activation;
pub mod approvals;
#[cfg(target_os = "linux")]
pub mod busypoll;
pub mod cache;
pub mod catalog;
pub mod child;
pub mod config;
pub mod control;
pub mod disclosure;
pub mod example;
pub mod lines;
pub mod names;
pub mod native;
pub mod permissions;
pub mod refresher;
pub mod repair;
pub mod schema;
pub mod search;
pub mod session;
pub mod shutdown;
pub mod supervisor;
pub mod watch;

/// The daemon's version, shown in handshakes and `evoctl status`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
