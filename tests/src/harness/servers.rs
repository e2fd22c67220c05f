//! Config entries for the child servers the tests run behind evod: the
//! fixture, a replayed recorded server, a server written without an SDK.

use serde_json::{Value, json};

use super::locations::{catalog_excerpt, fixture, repo_root};
use super::process::TempDir;

/// A fixture server entry for a config.
pub fn fixture_server(extra_args: &[&str]) -> Value {
    json!({"command": fixture().to_string_lossy(), "args": extra_args})
}

/// A config entry for a fixture replaying the recorded server `id` from
/// [`catalog_excerpt`]; panics at once if the excerpt does not hold it (a
/// fixture that cannot replay would only fail to become ready).
pub fn replayed(id: &str) -> Value {
    let excerpt = catalog_excerpt();
    let text = std::fs::read_to_string(&excerpt)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", excerpt.display()));
    let catalog: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", excerpt.display()));
    assert!(
        catalog["servers"]
            .as_array()
            .is_some_and(|servers| servers.iter().any(|s| s["id"] == id)),
        "no server {id:?} in {}",
        excerpt.display()
    );
    json!({"command": fixture().to_string_lossy(),
           "args": ["--replay", excerpt.to_string_lossy(), "--server", id]})
}

/// A config entry for `tests/fixtures/raw_server.py` (a server written
/// without an SDK) serving `tools` verbatim; the list is written into `dir`.
pub fn raw_server(dir: &TempDir, tools: &Value) -> Value {
    let file = dir.path().join("tools.json");
    std::fs::write(&file, tools.to_string()).unwrap();
    let script = repo_root().join("tests/fixtures/raw_server.py");
    json!({"command": "python3", "args": [script.to_string_lossy(), file.to_string_lossy()]})
}
