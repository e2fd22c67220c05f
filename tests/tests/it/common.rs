//! Harness for integration tests: runs real `evod`, `evoctl` and fixture
//! processes in a private temp directory, and speaks MCP JSON-RPC lines
//! through `evoctl shim` by hand (an implementation independent of rmcp).

#![allow(dead_code)]

use std::fmt::Display;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Directory holding the workspace's built binaries.
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("EVO_BIN_DIR") {
        return PathBuf::from(d);
    }
    // A bin sits beside evod (target/debug); a test binary one level down
    // (target/debug/deps).
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().expect("exe dir");
    if dir.join("evod").exists() {
        return dir.to_path_buf();
    }
    dir.parent().expect("target dir").to_path_buf()
}

pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace`)",
        p.display()
    );
    p
}

pub fn fixture() -> PathBuf {
    bin("evo-fixture")
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The recorded servers the tests replay, shipped in the repository: a few
/// entries of the recorded catalog, exactly as recorded.
pub fn catalog_excerpt() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/catalog-excerpt.json")
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

/// A data file the repository does not ship, named by the environment
/// variable `var` (`EVO_CATALOG`, `EVO_QUERIES_DEV`; a relative path is taken
/// from the repository root). None when `var` is unset; panics when it names
/// no file, so a wrong path is not mistaken for an absent one.
pub fn outside_file(var: &str) -> Option<PathBuf> {
    let path = repo_root().join(std::env::var_os(var)?);
    assert!(path.is_file(), "{var} names {}: not a file", path.display());
    Some(path)
}

/// Says, in one line that cargo's output capture does not swallow, that the
/// running test was not run and why.
pub fn skipped(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().filter(|n| *n != "main").unwrap_or("a test");
    let _ = writeln!(std::io::stderr(), "{test} skipped: {why}");
}

/// `what`, followed by the text of the `log` file as it is when shown: a
/// failure message for [`eventually`] that reads the log only on failure.
pub fn with_log<'a>(what: &'a str, log: &'a Path) -> impl Display + 'a {
    struct WithLog<'a>(&'a str, &'a Path);
    impl Display for WithLog<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let log = std::fs::read_to_string(self.1).unwrap_or_default();
            write!(f, "{}\nlog:\n{log}", self.0)
        }
    }
    WithLog(what, log)
}

/// Calls `holds` every 25 ms until it returns true or `timeout` has passed;
/// whether it held.
fn holds_within(timeout: Duration, mut holds: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if holds() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Waits until `holds` returns true, polling; panics naming `what` once
/// `timeout` has passed. The way to wait for something asynchronous, instead
/// of sleeping a guessed while and then asserting.
pub fn eventually(what: impl Display, timeout: Duration, holds: impl FnMut() -> bool) {
    if !holds_within(timeout, holds) {
        panic!("timed out after {timeout:?} waiting for {what}");
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        // Short: Unix socket paths are limited to ~108 bytes.
        let p = std::env::temp_dir().join(format!(
            "evo-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fixture server entry for a config.
pub fn fixture_server(extra_args: &[&str]) -> Value {
    json!({"command": fixture().to_string_lossy(), "args": extra_args})
}

/// The interop suite's Python (with the official SDK), when `tests/run`
/// has created its venv.
pub fn sdk_python() -> Option<PathBuf> {
    let python = repo_root().join("tests/interop/.venv/bin/python");
    python.exists().then_some(python)
}

/// A config entry for `tests/fixtures/raw_server.py` (a server written
/// without an SDK) serving `tools` verbatim; the list is written into `dir`.
pub fn raw_server(dir: &TempDir, tools: &Value) -> Value {
    let file = dir.path().join("tools.json");
    std::fs::write(&file, tools.to_string()).unwrap();
    let script = repo_root().join("tests/fixtures/raw_server.py");
    json!({"command": "python3", "args": [script.to_string_lossy(), file.to_string_lossy()]})
}

/// A running evod with its own socket, config, cache and log.
pub struct Daemon {
    pub dir: TempDir,
    pub socket: PathBuf,
    pub config: PathBuf,
    pub cache: PathBuf,
    pub log: PathBuf,
    pub child: Option<Child>,
}

impl Daemon {
    /// Writes `config` and starts evod on it, waiting for its socket.
    pub fn start(config: &Value) -> Daemon {
        Self::start_with(config, &[], &[])
    }

    pub fn start_with(config: &Value, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let dir = TempDir::new("d");
        let config_path = dir.path().join("mcp.config.json");
        std::fs::write(&config_path, serde_json::to_vec_pretty(config).unwrap()).unwrap();
        Self::start_raw(dir, config_path, args, env)
    }

    pub fn start_raw(dir: TempDir, config: PathBuf, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let socket = dir.path().join("run").join("evod.sock");
        let cache = dir.path().join("cache");
        let log = dir.path().join("evod.log");
        let mut d = Daemon {
            socket,
            config,
            cache,
            log,
            child: None,
            dir,
        };
        d.spawn(args, env);
        d
    }

    pub fn spawn(&mut self, args: &[&str], env: &[(&str, &str)]) {
        let mut cmd = Command::new(bin("evod"));
        cmd.arg("--config")
            .arg(&self.config)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .env_remove("EVO_DISCOVERY_MODE")
            .env_remove("EVO_SOCKET")
            .env("EVO_LOG", "info,evo_daemon=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&self.log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().expect("spawn evod"));
        self.wait_for_socket();
    }

    pub fn wait_for_socket(&self) {
        eventually(
            with_log(
                &format!("evod to listen on {}", self.socket.display()),
                &self.log,
            ),
            Duration::from_secs(20),
            || std::os::unix::net::UnixStream::connect(&self.socket).is_ok(),
        );
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).expect("daemon running")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs `evoctl --socket S ARGS...`: (exit code, stdout, stderr).
    pub fn ctl(&self, args: &[&str]) -> (i32, String, String) {
        ctl_at(&self.socket, args)
    }

    /// `evoctl ARGS --json`, parsed; panics unless it exits 0.
    pub fn ctl_json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--json");
        let (code, out, err) = self.ctl(&a);
        assert_eq!(
            code,
            0,
            "evoctl {args:?} failed: {err}\n{out}\nlog:\n{}",
            self.log_text()
        );
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("evoctl {args:?}: bad JSON ({e}): {out}"))
    }

    /// Polls `evoctl status --json` until `pred` holds.
    pub fn wait_status(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let mut s = Value::Null;
        if !holds_within(Duration::from_secs(30), || {
            s = self.ctl_json(&["status"]);
            pred(&s)
        }) {
            panic!(
                "timed out waiting for {what}; status: {s:#}\nlog:\n{}",
                self.log_text()
            );
        }
        s
    }

    /// Waits until every listed server is `ready`.
    pub fn wait_ready(&self, ids: &[&str]) -> Value {
        self.wait_status(&format!("servers {ids:?} ready"), |s| {
            ids.iter()
                .all(|id| server(s, id).is_some_and(|v| v["state"] == "ready"))
        })
    }

    /// Opens an MCP session through `evoctl shim` with extra shim args.
    pub fn session(&self, shim_args: &[&str]) -> McpClient {
        McpClient::spawn(&self.socket, shim_args)
    }

    /// An initialized legacy-mode session.
    pub fn legacy_session(&self) -> McpClient {
        let mut c = self.session(&["--mode", "legacy"]);
        c.initialize();
        c
    }

    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: plain signal to our own child.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        exit_within(&mut child, Duration::from_secs(10)).or_else(|| {
            let _ = child.kill();
            child.wait().ok()
        })
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn ctl_at(socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin("evoctl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("EVO_SOCKET")
        .output()
        .expect("run evoctl");
    outcome(out)
}

/// (exit code, stdout, stderr) of a finished command.
pub fn outcome(out: std::process::Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The native tools every session lists first.
pub const NATIVE_TOOLS: [&str; 4] = [
    "discover_tools",
    "describe_capability",
    "describe_tool",
    "call_tool",
];

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The status entry of server `id`.
pub fn server<'a>(status: &'a Value, id: &str) -> Option<&'a Value> {
    status["servers"].as_array()?.iter().find(|s| s["id"] == id)
}

/// Is a process alive (and not a zombie)?
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            state != Some("Z") && state != Some("X")
        }
        Err(_) => false,
    }
}

/// Waits up to `limit` for `child` to exit: its status, or None if it has not.
fn exit_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let mut status = None;
    holds_within(limit, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    status
}

/// Waits up to `limit` for `pid` to be gone.
pub fn gone_within(pid: u32, limit: Duration) -> bool {
    holds_within(limit, || !alive(pid))
}

/// `evoctl --socket SOCKET shim ARGS…`, to spawn with a client of one's own
/// making or extra environment.
pub fn shim_command(socket: &Path, shim_args: &[&str]) -> Command {
    let mut cmd = Command::new(bin("evoctl"));
    cmd.arg("--socket")
        .arg(socket)
        .arg("shim")
        .args(shim_args)
        .env_remove("EVO_PROFILE");
    cmd
}

/// The lines `reader` yields, from a thread; the channel closes at EOF.
fn line_channel(reader: impl BufRead + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in reader.lines() {
            let Ok(l) = line else { return };
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// What a shim wrote to its stderr, gathered by a thread until the pipe
/// closes. Cheap to clone.
#[derive(Clone)]
pub struct Stderr {
    text: Arc<Mutex<String>>,
    closed: Arc<AtomicBool>,
}

impl Stderr {
    /// Gathers `pipe` to its end, from a thread.
    fn gather(mut pipe: impl Read + Send + 'static) -> Stderr {
        let stderr = Stderr {
            text: Default::default(),
            closed: Default::default(),
        };
        let (text, closed) = (stderr.text.clone(), stderr.closed.clone());
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            text.lock().unwrap().push_str(&s);
            closed.store(true, Ordering::SeqCst);
        });
        stderr
    }

    /// For a shim whose stderr is not ours to read: always empty.
    fn none() -> Stderr {
        Stderr {
            text: Default::default(),
            closed: Arc::new(AtomicBool::new(true)),
        }
    }

    /// What has arrived so far.
    pub fn so_far(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// All of it, once the pipe has closed (the shim has exited).
    pub fn all(&self) -> String {
        eventually(
            "the shim's stderr to close",
            Duration::from_secs(10),
            || self.closed.load(Ordering::SeqCst),
        );
        self.so_far()
    }
}

/// A hand-written MCP client over `evoctl shim`'s stdio.
pub struct McpClient {
    pub child: Child,
    stdin: Option<Box<dyn Write + Send>>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    /// Speaks 2026-07-28 ([`McpClient::discover`]): every request carries
    /// the per-request envelope in `_meta`.
    modern: bool,
    /// Notifications seen while waiting for responses.
    pub notifications: Vec<Value>,
    pub stderr: Stderr,
}

impl McpClient {
    pub fn spawn(socket: &Path, shim_args: &[&str]) -> McpClient {
        Self::spawn_cmd(&mut shim_command(socket, shim_args))
    }

    pub fn spawn_cmd(cmd: &mut Command) -> McpClient {
        let mut child = cmd
            .env_remove("EVO_SOCKET")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn evoctl shim");
        let stdout = child.stdout.take().unwrap();
        let stderr = Stderr::gather(child.stderr.take().unwrap());
        let rx = line_channel(BufReader::new(stdout));
        McpClient {
            stdin: child
                .stdin
                .take()
                .map(|s| Box::new(s) as Box<dyn Write + Send>),
            child,
            lines: rx,
            next_id: 1,
            modern: false,
            notifications: Vec::new(),
            stderr,
        }
    }

    /// A shim whose stdin and stdout are one end of a socket pair, the way
    /// Node (libuv) wires a child's stdio. Dropping `stdin` (see `close`)
    /// shuts the write side down.
    pub fn spawn_socketpair(cmd: &mut Command) -> McpClient {
        use std::os::unix::net::UnixStream;
        struct HalfClose(UnixStream);
        impl Write for HalfClose {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.write(b)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                self.0.flush()
            }
        }
        impl Drop for HalfClose {
            fn drop(&mut self) {
                let _ = self.0.shutdown(std::net::Shutdown::Write);
            }
        }
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        let child = cmd
            .env_remove("EVO_SOCKET")
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(
                theirs.try_clone().unwrap(),
            )))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn evoctl shim");
        let reader = BufReader::new(ours.try_clone().unwrap());
        let rx = line_channel(reader);
        McpClient {
            child,
            stdin: Some(Box::new(HalfClose(ours))),
            lines: rx,
            next_id: 1,
            modern: false,
            notifications: Vec::new(),
            stderr: Stderr::none(),
        }
    }

    /// Whether the server's side of the stream ends (EOF) within `limit`;
    /// lines still arriving are skipped.
    pub fn eof_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    /// A session straight on the control socket (no shim): the handshake,
    /// then MCP lines. `child` is a placeholder process kept for the API.
    pub fn connect_socket(socket: &Path, mode: &str) -> McpClient {
        let stream = std::os::unix::net::UnixStream::connect(socket).expect("connect");
        let mut w = stream.try_clone().unwrap();
        w.write_all(format!("{{\"evo\":1,\"kind\":\"mcp\",\"mode\":\"{mode}\"}}\n").as_bytes())
            .unwrap();
        let mut reader = BufReader::new(stream);
        let mut welcome = String::new();
        reader.read_line(&mut welcome).unwrap();
        assert!(welcome.contains("\"ok\":true"), "{welcome}");
        let rx = line_channel(reader);
        let child = Command::new("sleep")
            .arg("3600")
            .spawn()
            .expect("placeholder");
        McpClient {
            child,
            stdin: Some(Box::new(w)),
            lines: rx,
            next_id: 1,
            modern: false,
            notifications: Vec::new(),
            stderr: Stderr::none(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, msg: &Value) {
        let mut b = serde_json::to_vec(msg).unwrap();
        b.push(b'\n');
        self.send_raw(&b);
    }

    /// Next line from the server, parsed, within `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        Some(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("server sent non-JSON ({e}): {line}")),
        )
    }

    /// Waits for the response with `id`, collecting notifications.
    pub fn response(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.recv(left).unwrap_or_else(|| {
                panic!("no response to id {id}; stderr: {}", self.stderr.so_far())
            });
            if msg.get("id") == Some(id)
                && (msg.get("result").is_some() || msg.get("error").is_some())
            {
                return msg;
            }
            if msg.get("method").is_some() && msg.get("id").is_none() {
                self.notifications.push(msg);
            } else if msg.get("method").is_some() {
                // A server→client request (e.g. ping): answer it.
                let rid = msg["id"].clone();
                self.send(&json!({"jsonrpc": "2.0", "id": rid, "result": {}}));
            }
        }
    }

    /// How many notifications with `method` arrived so far.
    pub fn notified(&self, method: &str) -> usize {
        self.notifications
            .iter()
            .filter(|n| n["method"] == method)
            .count()
    }

    /// Waits up to 5 s until `count` notifications with `method` arrived.
    /// Notifications may trail a response: the daemon sends list_changed
    /// after swapping the catalog, so a `tools/list` can show a change
    /// before the notification reaches the client.
    pub fn await_notified(&mut self, method: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.notified(method) < count {
            assert!(
                Instant::now() < deadline,
                "{method}: {} of {count} arrived: {:?}",
                self.notified(method),
                self.notifications
            );
            if let Some(m) = self.recv(Duration::from_millis(100)) {
                self.notifications.push(m);
            }
        }
    }

    /// How many `notifications/tools/list_changed` arrived so far.
    pub fn list_changed_count(&self) -> usize {
        self.notified(LIST_CHANGED)
    }

    /// Waits for a list_changed beyond the first `seen`.
    pub fn await_list_changed(&mut self, seen: usize) {
        self.await_notified(LIST_CHANGED, seen + 1)
    }

    pub fn request(&mut self, method: &str, mut params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        if self.modern && params.is_object() {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "evo-tests", "version": "0"}
            });
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&id)
    }

    /// Opens a 2026-07-28 session (`server/discover`, no `initialize`);
    /// every later request carries the per-request envelope.
    pub fn discover(&mut self) -> Value {
        self.modern = true;
        let r = self.request("server/discover", json!({}));
        assert!(r.get("result").is_some(), "server/discover failed: {r}");
        r
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "evo-tests", "version": "0"}}),
        );
        assert!(r.get("result").is_some(), "initialize failed: {r}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        let r = self.request("tools/list", json!({}));
        r["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools/list failed: {r}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// `tools/call`; returns the result object (panics on a JSON-RPC error).
    pub fn call(&mut self, name: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": name, "arguments": args}));
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call {name} failed: {r}"))
    }

    /// The first text content of a call result.
    pub fn call_text(&mut self, name: &str, args: Value) -> (String, bool) {
        let r = self.call(name, args);
        text_of(&r)
    }

    /// Closes stdin and waits for the shim to exit.
    pub fn close(mut self) -> Option<std::process::ExitStatus> {
        drop(self.stdin.take());
        exit_within(&mut self.child, Duration::from_secs(10)).or_else(|| {
            let _ = self.child.kill();
            None
        })
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (first text content, isError) of a tools/call result.
pub fn text_of(result: &Value) -> (String, bool) {
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (text, result["isError"].as_bool().unwrap_or(false))
}
