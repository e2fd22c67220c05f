//! A hand-written HTTP/1.1 client (independent of hyper and rmcp, so what is
//! on the wire is what the tests see), an MCP client over it, and evod
//! serving HTTP on a free port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use super::daemon::Daemon;
use super::ports::free_port;
use super::wait::{eventually, with_log};

/// One HTTP response, whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text()))
    }

    /// The JSON-RPC messages of the body: the body itself (JSON), or the
    /// `data:` lines of an event stream.
    pub fn messages(&self) -> Vec<Value> {
        let is_sse = self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if !is_sse {
            return vec![self.json()];
        }
        self.text()
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("bad SSE data ({e}): {d}")))
            .collect()
    }

    /// The JSON-RPC response (or error) among the messages.
    pub fn answer(&self) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC answer in {} {}", self.status, self.text()))
    }
}

/// A keep-alive HTTP/1.1 connection.
pub struct Conn {
    stream: BufReader<TcpStream>,
    host: String,
}

impl Conn {
    pub fn open(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to evod's HTTP port");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            stream: BufReader::new(stream),
            host: format!("127.0.0.1:{port}"),
        }
    }

    /// Sends the head of a request (with `Host` unless given) and `body`.
    pub fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.host));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        // One write: a head and a body sent apart wait on Nagle and the
        // peer's delayed ACK (40 ms a request).
        let mut whole = head.into_bytes();
        whole.extend_from_slice(body);
        let s = self.stream.get_mut();
        s.write_all(&whole).unwrap();
        s.flush().unwrap();
    }

    /// Sends `bytes` as they are: a request of the caller's own making.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let s = self.stream.get_mut();
        s.write_all(bytes).unwrap();
        s.flush().unwrap();
    }

    /// Reads one whole response (Content-Length or chunked).
    pub fn read(&mut self) -> Reply {
        let mut line = String::new();
        self.stream.read_line(&mut line).expect("status line");
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.stream.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if get("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
            loop {
                let mut size = String::new();
                self.stream.read_line(&mut size).unwrap();
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                if n == 0 {
                    let mut end = String::new();
                    self.stream.read_line(&mut end).unwrap();
                    break;
                }
                let mut chunk = vec![0; n + 2];
                self.stream.read_exact(&mut chunk).unwrap();
                body.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = get("content-length").and_then(|n| n.parse::<usize>().ok()) {
            body.resize(n, 0);
            self.stream.read_exact(&mut body).unwrap();
        }
        Reply {
            status,
            headers,
            body,
        }
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        self.send(method, path, headers, body);
        self.read()
    }
}

/// A request on a fresh connection.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    Conn::open(port).request(method, path, headers, body)
}

pub const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
pub const JSON: (&str, &str) = ("Content-Type", "application/json");

/// An MCP client over HTTP: initialize-era with a session id, or 2026-07-28
/// without one.
pub struct HttpMcp {
    pub port: u16,
    pub token: Option<String>,
    pub session: Option<String>,
    pub next: u64,
}

impl HttpMcp {
    fn headers<'a>(
        &'a self,
        extra: &[(&'a str, &'a str)],
        auth: &'a str,
    ) -> Vec<(&'a str, &'a str)> {
        let mut h = vec![ACCEPT, JSON];
        if self.token.is_some() {
            h.push(("Authorization", auth));
        }
        if let Some(s) = &self.session {
            h.push(("Mcp-Session-Id", s.as_str()));
        }
        h.extend_from_slice(extra);
        h
    }

    pub fn post(&mut self, msg: &Value, extra: &[(&str, &str)]) -> Reply {
        let auth = format!("Bearer {}", self.token.clone().unwrap_or_default());
        let headers = self.headers(extra, &auth);
        request(
            self.port,
            "POST",
            "/mcp",
            &headers,
            msg.to_string().as_bytes(),
        )
    }

    /// `initialize` + `notifications/initialized`: a session of its own.
    pub fn initialize(port: u16, token: Option<&str>) -> HttpMcp {
        let mut c = HttpMcp {
            port,
            token: token.map(str::to_owned),
            session: None,
            next: 1,
        };
        let r = c.post(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "evo-it", "version": "1"}}}),
            &[],
        );
        assert_eq!(r.status, 200, "initialize: {}", r.text());
        c.session = Some(
            r.header("mcp-session-id")
                .expect("an Mcp-Session-Id")
                .to_string(),
        );
        let n = c.post(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            &[],
        );
        assert_eq!(n.status, 202, "{}", n.text());
        c
    }

    /// A client of the 2026-07-28 era (no session).
    pub fn modern(port: u16, token: Option<&str>) -> HttpMcp {
        HttpMcp {
            port,
            token: token.map(str::to_owned),
            session: None,
            next: 1,
        }
    }

    /// A request; for a 2026-07-28 client with its per-request envelope and
    /// headers.
    pub fn call_method(&mut self, method: &str, mut params: Value) -> Reply {
        let id = self.next;
        self.next += 1;
        if self.session.is_none() {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "evo-it", "version": "1"}
            });
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let mut extra = vec![
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", method),
            ];
            if method == "tools/call" {
                extra.push(("Mcp-Name", name.as_str()));
            }
            return self.post(
                &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                &extra,
            );
        }
        self.post(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            &[],
        )
    }

    /// `tools/call`: the result.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.call_method("tools/call", json!({"name": tool, "arguments": args}));
        assert_eq!(r.status, 200, "{tool}: {}", r.text());
        let a = r.answer();
        a.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: {a}"))
    }

    /// Exposed names of `tools/list`.
    pub fn tools(&mut self) -> Vec<String> {
        let r = self.call_method("tools/list", json!({}));
        assert_eq!(r.status, 200, "{}", r.text());
        let a = r.answer();
        a["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{a}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }
}

/// The first text of a tool result.
pub fn result_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// evod serving `config` (with `serve.http` merged in) on a free port.
pub fn http_daemon(config: Value, http: Value, args: &[&str]) -> (Daemon, u16) {
    let port = free_port();
    let mut config = config;
    let mut http = http;
    http["listen"] = json!(format!("127.0.0.1:{port}"));
    config["serve"] = json!({ "http": http });
    let d = Daemon::start_with(&config, args, &[]);
    wait_http(&d, port);
    (d, port)
}

pub fn wait_http(d: &Daemon, port: u16) {
    eventually(
        with_log("evod's HTTP endpoint to answer /healthz", &d.log),
        Duration::from_secs(20),
        || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
                && request(port, "GET", "/healthz", &[], b"").status == 200
        },
    );
}
