//! `evod`, the evo daemon. `ARCHITECTURE.md` at the repository root is the
//! map; each module's own doc says what it holds and why it is so.
//!
//! Actors (a folder each): [`supervisor`], [`child`], [`catalog`] (with the
//! Refresher), [`session`], and the search model's embedder in [`search`].
//! Fronts that make sessions: [`control`] (the control socket) and [`http`]
//! (Streamable HTTP), with [`console`] (the web console) beside them.
//! Pure modules (values in, values out): [`config`], [`policy`], [`search`],
//! [`repair`], [`schema`], [`names`]. Shared state: [`store`]. Credentials
//! of HTTP callers: [`auth`]; evo's own logins to remote servers: [`oauth`].
//! Process plumbing: [`runtime`]. Counters: [`metrics`]; traces:
//! [`telemetry`]. Errors as a person
//! reads them: [`error_text`]. Agents' scripts (`run_code`): [`code_mode`].

pub mod auth;
pub mod catalog;
pub mod child;
pub mod code_mode;
pub mod config;
pub mod console;
pub mod control;
pub mod error_text;
pub mod http;
pub mod metrics;
pub mod names;
pub mod oauth;
pub mod policy;
pub mod repair;
pub mod runtime;
pub mod schema;
pub mod search;
pub mod session;
pub mod store;
pub mod supervisor;
pub mod telemetry;

/// The daemon's version, shown in handshakes and `evoctl status`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// For tests that check the real 2,529-tool catalog, which lives outside the
/// repository: its path comes from `EVO_CATALOG` (CI sets it).
#[cfg(test)]
pub(crate) mod test_catalog {
    use std::io::Write;

    /// The catalog's path and JSON, or `None` after saying on stderr (past
    /// the test harness's capture) that `test` was not run and why. A set
    /// variable naming no readable catalog fails the test.
    pub fn load(test: &str) -> Option<(String, serde_json::Value)> {
        let Some(path) = std::env::var_os("EVO_CATALOG") else {
            let _ = writeln!(
                std::io::stderr(),
                "skipped: {test}: EVO_CATALOG is not set (the 2,529-tool catalog lives outside the repository)"
            );
            return None;
        };
        // A relative path is taken from the repository root, as in tests/.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(path)
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("EVO_CATALOG={path}: cannot read it: {e}"));
        let catalog = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("EVO_CATALOG={path}: not JSON: {e}"));
        Some((path, catalog))
    }
}
