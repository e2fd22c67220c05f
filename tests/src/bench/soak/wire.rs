//! The soak's client side: a keep-alive HTTP/1.1 connection that reports
//! failures instead of panicking (instances and Redis die under it), and an
//! MCP session of either era over it that retries what a client behind a
//! load balancer retries and says what became of each call.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One HTTP response: status, session id header, JSON-RPC answer (if any).
pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
    pub body: String,
}

impl Answer {
    /// The JSON-RPC response among the body's messages: the body itself
    /// (JSON) or an event stream's `data:` lines.
    pub fn rpc(&self) -> Option<Value> {
        if let Ok(v) = serde_json::from_str::<Value>(self.body.trim()) {
            return Some(v);
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
    }
}

/// A keep-alive connection to one port, opened again after any failure.
pub struct Wire {
    port: u16,
    stream: Option<BufReader<TcpStream>>,
}

impl Wire {
    pub fn new(port: u16) -> Wire {
        Wire { port, stream: None }
    }

    /// POSTs `body` to `/mcp`; any I/O failure drops the connection.
    pub fn post(&mut self, headers: &[(&str, &str)], body: &str) -> io::Result<Answer> {
        let r = self.exchange(headers, body);
        if r.is_err() {
            self.stream = None;
        }
        r
    }

    fn exchange(&mut self, headers: &[(&str, &str)], body: &str) -> io::Result<Answer> {
        let deadline = Instant::now() + ANSWER_WITHIN;
        if self.stream.is_none() {
            let s = TcpStream::connect(("127.0.0.1", self.port))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            s.set_nodelay(true)?;
            self.stream = Some(BufReader::new(s));
        }
        let stream = self.stream.as_mut().ok_or(io::ErrorKind::NotConnected)?;
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.port,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        stream.get_mut().write_all(head.as_bytes())?;
        let (answer, close) = read_answer(stream, deadline)?;
        if close {
            self.stream = None;
        }
        Ok(answer)
    }
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed")
}

/// How long a request may go without its whole answer, keep-alive events
/// notwithstanding (they reset the socket's read timeout): past it the
/// request counts as unanswered.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// Reads one response (Content-Length or chunked; the body as text), and
/// whether the peer closes the connection after it; a body still open at
/// `deadline` is an error of kind `TimedOut`.
fn read_answer(stream: &mut BufReader<TcpStream>, deadline: Instant) -> io::Result<(Answer, bool)> {
    let mut line = String::new();
    if stream.read_line(&mut line)? == 0 {
        return Err(eof());
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, line.clone()))?;
    let (mut length, mut chunked, mut session, mut close) = (None, false, None, false);
    loop {
        let mut h = String::new();
        if stream.read_line(&mut h)? == 0 {
            return Err(eof());
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let Some((k, v)) = h.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        match k.as_str() {
            "content-length" => length = v.parse::<usize>().ok(),
            "transfer-encoding" => chunked = v.contains("chunked"),
            "mcp-session-id" => session = Some(v.to_string()),
            "connection" => close = v.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no answer within {} s ({} bytes of the stream so far)",
                        ANSWER_WITHIN.as_secs(),
                        body.len()
                    ),
                ));
            }
            let mut size = String::new();
            if stream.read_line(&mut size)? == 0 {
                return Err(eof());
            }
            let n = usize::from_str_radix(size.trim(), 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, size.clone()))?;
            let mut chunk = vec![0; n + 2];
            stream.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        stream.read_exact(&mut body)?;
    } else if close {
        stream.read_to_end(&mut body)?;
    }
    let answer = Answer {
        status,
        session,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    Ok((answer, close))
}

/// Which MCP era a session speaks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize`, then `Mcp-Session-Id` on every request.
    Initialize,
    /// 2026-07-28: no session; each request carries its envelope.
    PerRequest,
}

/// What became of one call.
pub enum Outcome {
    /// The right answer.
    Ok,
    /// An answer that says the call failed (a child that crashed under it).
    Refused(String),
    /// No answer, or a wrong one.
    Lost(String),
}

/// One call's record: what became of it, how long it took (retries
/// included), how many times it was sent again, whether its session had
/// to initialize anew.
pub struct Record {
    pub outcome: Outcome,
    pub took: Duration,
    pub retries: usize,
    pub reinitialized: bool,
}

/// How many times a request is sent again (after a transport failure,
/// 502/503/504, or a 404 session) before the call counts as lost: ~15 s of
/// pauses, longer than an instance restart or a Redis restart.
const TRIES: usize = 80;

/// An MCP session through one port (the load balancer's).
pub struct Session {
    pub era: Era,
    pub id: Option<String>,
    wire: Wire,
    auth: String,
    next: u64,
}

impl Session {
    pub fn new(port: u16, token: &str, era: Era) -> Session {
        Session {
            era,
            id: None,
            wire: Wire::new(port),
            auth: format!("Bearer {token}"),
            next: 1,
        }
    }

    /// `initialize` + `notifications/initialized` (initialize era only),
    /// retried through outages.
    pub fn initialize(&mut self) -> Result<(), String> {
        if self.era == Era::PerRequest {
            return Ok(());
        }
        self.id = None;
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "evo-soak", "version": "1"}}})
        .to_string();
        let mut last = String::new();
        for _ in 0..TRIES {
            let head = headers(&self.auth, self.id.as_deref(), &[]);
            match self.wire.post(&head, &init) {
                Ok(a) if a.status == 200 && a.session.is_some() => {
                    self.id = a.session;
                    let head = headers(&self.auth, self.id.as_deref(), &[]);
                    let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
                    match self.wire.post(&head, done) {
                        Ok(n) if n.status == 202 => return Ok(()),
                        Ok(n) => last = format!("initialized: {} {}", n.status, n.body),
                        Err(e) => last = format!("initialized: {e}"),
                    }
                    self.id = None;
                }
                Ok(a) => last = format!("initialize: {} {}", a.status, a.body),
                Err(e) => last = format!("initialize: {e}"),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(last)
    }

    /// One `tools/call`, sent again while the way to an instance is broken;
    /// `expect` is the text the right answer carries.
    pub fn call(&mut self, tool: &str, args: Value, expect: &str) -> Record {
        let start = Instant::now();
        let (mut retries, mut reinitialized) = (0, false);
        let mut last = String::new();
        for _ in 0..TRIES {
            let (status, rpc) = match self.send_call(tool, &args) {
                Ok(a) => (a.status, a.rpc()),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    // Sent and open, never answered: lost (sending it again
                    // would hide that).
                    last = format!("session {:?}: {e}", self.id);
                    break;
                }
                Err(e) => {
                    last = format!("transport: {e}");
                    retries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            match status {
                200 => {
                    let outcome = judge(rpc.as_ref(), expect);
                    return Record {
                        outcome,
                        took: start.elapsed(),
                        retries,
                        reinitialized,
                    };
                }
                404 if self.era == Era::Initialize => {
                    reinitialized = true;
                    if let Err(e) = self.initialize() {
                        last = format!("re-initialize: {e}");
                        break;
                    }
                }
                502..=504 => {
                    last = format!("{status}");
                    retries += 1;
                    std::thread::sleep(Duration::from_millis(200));
                }
                _ => {
                    last = format!(
                        "{status}: {}",
                        rpc.map(|v| v.to_string()).unwrap_or_default()
                    );
                    break;
                }
            }
        }
        Record {
            outcome: Outcome::Lost(last),
            took: start.elapsed(),
            retries,
            reinitialized,
        }
    }

    /// Sends one `tools/call` as this session's era does.
    pub fn send_call(&mut self, tool: &str, args: &Value) -> io::Result<Answer> {
        let id = self.next;
        self.next += 1;
        let mut params = json!({"name": tool, "arguments": args});
        if self.era == Era::PerRequest {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "evo-soak", "version": "1"}
            });
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
            .to_string();
        let extra: Vec<(&str, &str)> = match self.era {
            Era::PerRequest => vec![
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", tool),
            ],
            Era::Initialize => Vec::new(),
        };
        let head = headers(&self.auth, self.id.as_deref(), &extra);
        self.wire.post(&head, &body)
    }

    /// The same call on a connection of its own to `port` (an approval
    /// race's contender): the answer's first text and whether it is an error.
    /// Contenders of one race run at once in the same session, so each
    /// brings its own request id (`contender`): reusing an id while its
    /// request is open is a protocol error evod refuses.
    pub fn contend(
        &self,
        contender: u64,
        port: u16,
        tool: &str,
        args: &Value,
    ) -> Option<(bool, String)> {
        let mut other = Session {
            era: self.era,
            id: self.id.clone(),
            wire: Wire::new(port),
            auth: self.auth.clone(),
            next: 900_000 + contender,
        };
        let a = other.send_call(tool, args).ok()?;
        let rpc = a.rpc()?;
        let failed = rpc.get("error").is_some() || rpc["result"]["isError"] == true;
        Some((failed, first_text(&rpc)))
    }
}

/// A request's headers: the credential, the session (if any), `extra`.
fn headers<'a>(
    auth: &'a str,
    session: Option<&'a str>,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![("Authorization", auth)];
    if let Some(id) = session {
        h.push(("Mcp-Session-Id", id));
    }
    h.extend_from_slice(extra);
    h
}

/// The first text of a JSON-RPC answer (or its error's message).
pub fn first_text(rpc: &Value) -> String {
    if let Some(m) = rpc["error"]["message"].as_str() {
        return m.to_string();
    }
    rpc["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn judge(rpc: Option<&Value>, expect: &str) -> Outcome {
    let Some(rpc) = rpc else {
        return Outcome::Lost("200 without a JSON-RPC answer".into());
    };
    let text = first_text(rpc);
    if rpc.get("error").is_some() || rpc["result"]["isError"] == true {
        Outcome::Refused(text)
    } else if text == expect {
        Outcome::Ok
    } else {
        Outcome::Lost(format!("wrong answer {text:?}, expected {expect:?}"))
    }
}
