//! An MCP registry on a loopback port, serving the recorded `server.json` records in
//! `tests/fixtures/registry` through the registry's REST API (`GET /v0.1/servers?search=…`,
//! `GET /v0.1/servers/{name}/versions/{version|latest}`), so `evoctl add` is tested against
//! the API's shapes with no network. Each request's path is kept for the tests to read.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::{Value, json};

/// A registry serving `records` until the test process ends.
pub struct FakeRegistry {
    pub url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FakeRegistry {
    /// The records of `tests/fixtures/registry`.
    pub fn recorded() -> FakeRegistry {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/registry");
        let mut records = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let record: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            records.push(record);
        }
        FakeRegistry::serve(records)
    }

    pub fn serve(records: Vec<Value>) -> FakeRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                answer(stream, &records, &seen);
            }
        });
        FakeRegistry { url, requests }
    }

    /// The paths requested so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer(stream: TcpStream, records: &[Value], seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(&stream);
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    // The headers, up to the blank line (GETs have no body).
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line.trim() != "" {
        line.clear();
    }
    let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
    seen.lock().unwrap().push(path.clone());
    let (status, body) = route(&path, records);
    let body = body.to_string();
    let mut out = &stream;
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn route(path: &str, records: &[Value]) -> (&'static str, Value) {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let listed = |r: &Value| json!({"server": r, "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active", "isLatest": true}}});
    let not_found = ("404 Not Found", json!({"error": "Server not found"}));
    if path == "/v0.1/servers" {
        let search = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("search="))
            .map(decode)
            .unwrap_or_default()
            .to_lowercase();
        let found: Vec<Value> = records
            .iter()
            .filter(|r| {
                r["name"]
                    .as_str()
                    .is_some_and(|n| n.to_lowercase().contains(&search))
            })
            .map(listed)
            .collect();
        let count = found.len();
        return (
            "200 OK",
            json!({"servers": found, "metadata": {"count": count}}),
        );
    }
    let Some(rest) = path.strip_prefix("/v0.1/servers/") else {
        return not_found;
    };
    let Some((name, version)) = rest.split_once("/versions/") else {
        return not_found;
    };
    let (name, version) = (decode(name), decode(version));
    let record = records
        .iter()
        .filter(|r| r["name"] == name.as_str())
        .find(|r| version == "latest" || r["version"] == version.as_str());
    match record {
        Some(r) => ("200 OK", listed(r)),
        None => not_found,
    }
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
