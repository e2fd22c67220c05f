//! A hand-written MCP client speaking JSON-RPC lines through `evoctl shim`
//! or straight on the control socket (an implementation independent of
//! rmcp, so what is on the wire is what the tests see).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::locations::bin;
use super::process::exit_within;
use super::wait::eventually;

/// The native tools every session lists first (`run_code` with code mode
/// on, the default).
pub const NATIVE_TOOLS: [&str; 5] = [
    "discover_tools",
    "describe_capability",
    "describe_tool",
    "call_tool",
    "run_code",
];

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
        struct HalfClose(UnixStream);
        impl Write for HalfClose {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.write(b)
            }
            fn flush(&mut self) -> io::Result<()> {
                self.0.flush()
            }
        }
        impl Drop for HalfClose {
            fn drop(&mut self) {
                let _ = self.0.shutdown(Shutdown::Write);
            }
        }
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        let child = cmd
            .env_remove("EVO_SOCKET")
            .stdin(Stdio::from(OwnedFd::from(theirs.try_clone().unwrap())))
            .stdout(Stdio::from(OwnedFd::from(theirs)))
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
        let stream = UnixStream::connect(socket).expect("connect");
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
    pub fn close(mut self) -> Option<ExitStatus> {
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
