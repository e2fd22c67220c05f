//! `evod`, the evo daemon: actors (one file each) and pure modules.
//!
//! Actors: [`supervisor`], [`child`], [`catalog`], [`session`], [`refresher`],
//! [`embedder`] (the search model and the tools' vectors).
//! Pure modules (values in, values out): [`config`], [`names`], [`native`], [`schema`], [`search`], [`disclosure`], [`example`], [`repair`],
//! [`session::breaker`], [`permissions`], [`approvals`], [`integrity`], [`tokens`]. I/O glue: [`control`] serves
//! the control socket, [`http`] the Streamable HTTP endpoint (with [`metrics`]), [`console`] the web console, [`session::transport`] frames a session's MCP lines,
//! [`child::io`] is a stdio child's transport, [`watch`] watches the config
//! files, [`activation`] takes a systemd-passed socket, [`guard`] is the process
//! that ends the children's process groups if evod is killed.

pub mod activation;
pub mod approvals;
#[cfg(target_os = "linux")]
pub mod busypoll;
pub mod cache;
pub mod card;
pub mod catalog;
pub mod child;
pub mod config;
pub mod console;
pub mod control;
pub mod disclosure;
pub mod embedder;
pub mod example;
pub mod guard;
pub mod http;
pub mod integrity;
pub mod lines;
pub mod logtag;
pub mod metrics;
pub mod names;
pub mod native;
pub mod oauth;
pub mod offers;
pub mod permissions;
pub mod private_file;
pub mod profiles;
pub mod refresher;
pub mod repair;
pub mod result_limit;
pub mod schema;
pub mod search;
pub mod session;
pub mod shutdown;
pub mod store;
pub mod supervisor;
pub mod tokens;
pub mod watch;

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
