//! Config entries for the child servers the tests run behind evod: the
//! fixture, a replayed recorded server, a server written without an SDK.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

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

/// The fixture serving Streamable HTTP on a loopback address, run by the
/// test (not by evod), its stderr kept; killed on drop.
pub struct HttpChild {
    child: Child,
    pub url: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl HttpChild {
    /// Starts it on `addr` (`127.0.0.1:0` for any port) with `env`.
    pub fn start(addr: &str, env: &[(&str, &str)]) -> HttpChild {
        Self::start_with(addr, &[], env)
    }

    /// Starts it with fixture options `args` too.
    pub fn start_with(addr: &str, args: &[&str], env: &[(&str, &str)]) -> HttpChild {
        let mut command = Command::new(fixture());
        command
            .args(["--http", addr])
            .args(args)
            .envs(env.iter().copied());
        Self::listening(command)
    }

    /// `raw_server.py` (see [`raw_server`]) serving `tools` verbatim over
    /// Streamable HTTP.
    pub fn raw(dir: &TempDir, tools: &Value) -> HttpChild {
        let file = dir.path().join("tools.json");
        std::fs::write(&file, tools.to_string()).unwrap();
        let mut command = Command::new("python3");
        command
            .arg(repo_root().join("tests/fixtures/raw_server.py"))
            .arg(file)
            .arg("--http");
        Self::listening(command)
    }

    /// Runs `command`, a server that says `listening on URL` on stderr.
    fn listening(mut command: Command) -> HttpChild {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the HTTP server");
        let pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if line.contains("listening on ") {
                    let _ = tx.send(line.clone());
                }
                kept.lock().unwrap().push(line);
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the HTTP server says where it listens");
        let url = first
            .split("listening on ")
            .nth(1)
            .unwrap_or_else(|| panic!("{first}"))
            .to_string();
        HttpChild { child, url, stderr }
    }

    /// Its config entry.
    pub fn entry(&self) -> Value {
        json!({"type": "http", "url": self.url})
    }

    /// The lines it wrote to stderr so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// The ids its requests of `method` came under so far (with
    /// `EVO_FIXTURE_SHOW_IDS` set).
    pub fn ids(&self, method: &str) -> Vec<String> {
        let prefix = format!("evo-fixture: {method} id ");
        self.stderr()
            .iter()
            .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
            .collect()
    }

    /// Ends it now.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpChild {
    fn drop(&mut self) {
        self.kill();
    }
}
