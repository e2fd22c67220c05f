//! `evoctl run FILE.js [--session S]`: a person runs a script the way an
//! agent's `run_code` does, through the same path: evoctl opens an MCP
//! session on the control socket (as the shim does, so the owner's
//! permissions apply and each call shows like any session's) and calls
//! `run_code` with the file's text. With `--session S` the run's session
//! lists S's profile, so the script reaches what S may reach.
//!
//! Output: the script's `console.log` lines, then its value as JSON; a run
//! that stopped prints why on stderr and exits 1. `--json` prints the
//! tool result's `structuredContent` with `ok`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use evo_proto::ctl::{CtlRequest, Reply};
use evo_proto::{Hello, Welcome, paths};
use serde_json::{Value, json};

use crate::connection::{ask, no_daemon_message};
use crate::exit_codes::{EXIT_NO_DAEMON, EXIT_REFUSED, EXIT_USAGE};

/// Longest line read from evod (a result is cut at `limits.max_result_bytes`).
const MAX_LINE: u64 = 64 << 20;

/// What went wrong, with the exit code it means.
struct Failed(u8, String);

pub fn run(
    socket: &Path,
    file: &Path,
    session: Option<&str>,
    timeout_ms: Option<u64>,
    json: bool,
) -> ExitCode {
    match run_script(socket, file, session, timeout_ms) {
        Ok((out, stopped)) => {
            if json {
                let mut shown = out.clone();
                if let Value::Object(m) = &mut shown {
                    m.insert("ok".into(), Value::Bool(stopped.is_none()));
                }
                println!("{shown}");
            } else {
                for line in out["logs"].as_array().into_iter().flatten() {
                    println!("{}", line.as_str().unwrap_or_default());
                }
                if let Some(why) = &stopped {
                    eprintln!("evoctl run: {why}");
                } else {
                    let value = &out["result"];
                    println!(
                        "{}",
                        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
                    );
                }
            }
            if stopped.is_some() {
                ExitCode::from(EXIT_REFUSED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(Failed(code, e)) => {
            if json {
                println!("{}", json!({"ok": false, "error": e}));
            } else {
                eprintln!("evoctl run: {e}");
            }
            ExitCode::from(code)
        }
    }
}

/// The run's `structuredContent`, and the reason it stopped (if it did).
fn run_script(
    socket: &Path,
    file: &Path,
    session: Option<&str>,
    timeout_ms: Option<u64>,
) -> Result<(Value, Option<String>), Failed> {
    let code = std::fs::read_to_string(file).map_err(|e| {
        Failed(
            EXIT_USAGE,
            format!("cannot read the script {}: {e}", file.display()),
        )
    })?;
    let profile = match session {
        Some(s) => profile_of(socket, s)?,
        None => None,
    };
    let conn = paths::connect_blocking(socket)
        .map_err(|e| Failed(EXIT_NO_DAEMON, no_daemon_message(socket, &e)))?;
    let mut hello = Hello::mcp(None, None);
    hello.profile = profile;
    let mut line = serde_json::to_vec(&hello).map_err(|e| Failed(EXIT_REFUSED, e.to_string()))?;
    line.push(b'\n');
    let broken = |e: std::io::Error| {
        Failed(
            EXIT_NO_DAEMON,
            format!("the session with evod broke off: {e}"),
        )
    };
    (&conn).write_all(&line).map_err(broken)?;
    let mut reader = BufReader::new((&conn).take(MAX_LINE));
    let welcome = read_line(&mut reader)?;
    match serde_json::from_slice::<Welcome>(&welcome) {
        Ok(w) if w.ok => {}
        Ok(w) => {
            return Err(Failed(
                EXIT_REFUSED,
                format!("evod refused the session: {}", w.error.unwrap_or_default()),
            ));
        }
        Err(e) => return Err(Failed(EXIT_REFUSED, format!("bad handshake reply: {e}"))),
    }
    let mut arguments = json!({ "code": code });
    if let Some(t) = timeout_ms {
        arguments["timeout_ms"] = json!(t);
    }
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "evoctl-run", "version": env!("CARGO_PKG_VERSION")}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "run_code", "arguments": arguments}}),
    ];
    let mut out = Vec::new();
    for m in &messages {
        out.extend_from_slice(m.to_string().as_bytes());
        out.push(b'\n');
    }
    (&conn).write_all(&out).map_err(broken)?;
    loop {
        let line = read_line(&mut reader)?;
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if message["id"] != 2 {
            continue;
        }
        if let Some(e) = message.get("error") {
            return Err(Failed(
                EXIT_REFUSED,
                e["message"]
                    .as_str()
                    .unwrap_or("run_code failed")
                    .to_string(),
            ));
        }
        let result = &message["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        if result["isError"] == true {
            if result["structuredContent"].is_object() {
                return Ok((result["structuredContent"].clone(), Some(text.to_string())));
            }
            // Not a run: run_code itself was refused (code mode off, no code).
            return Err(Failed(EXIT_REFUSED, text.to_string()));
        }
        return Ok((result["structuredContent"].clone(), None));
    }
}

fn read_line(reader: &mut impl BufRead) -> Result<Vec<u8>, Failed> {
    let mut line = Vec::new();
    match reader.read_until(b'\n', &mut line) {
        Ok(0) => Err(Failed(
            EXIT_NO_DAEMON,
            "evod closed the session before answering (see its log and `evoctl status`)".into(),
        )),
        Ok(_) => Ok(line),
        Err(e) => Err(Failed(
            EXIT_NO_DAEMON,
            format!("the session with evod broke off: {e}"),
        )),
    }
}

/// The profile of session `s` (by id or name).
fn profile_of(socket: &Path, s: &str) -> Result<Option<String>, Failed> {
    match ask(socket, &CtlRequest::Sessions) {
        Ok(Some(Reply::Sessions(report))) => report
            .sessions
            .into_iter()
            .find(|x| x.id == s || x.name.as_deref() == Some(s))
            .map(|x| x.profile)
            .ok_or_else(|| {
                Failed(
                    EXIT_REFUSED,
                    format!("no live session '{s}': see `evoctl sessions`"),
                )
            }),
        Ok(Some(_)) => Err(Failed(EXIT_REFUSED, "unexpected reply from evod".into())),
        Ok(None) => Err(Failed(
            EXIT_NO_DAEMON,
            format!("no daemon at {}", socket.display()),
        )),
        Err(e) => Err(Failed(EXIT_REFUSED, e)),
    }
}
