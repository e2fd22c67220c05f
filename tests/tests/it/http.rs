//! The HTTP endpoint (`serve.http`): a real evod listening on a free
//! loopback port, spoken to by a hand-written HTTP/1.1 client (independent
//! of hyper and rmcp), so what is on the wire is what the tests see.

use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, assert_stable_session_keys},
    http::{ACCEPT, Conn, HttpMcp, JSON, http_daemon, request, result_text, wait_http},
    locations::bin,
    ports::free_port,
    process::{TempDir, outcome, rss_kib},
    servers::fixture_server,
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

fn fx_config() -> Value {
    json!({"mcpServers": {"fx": fixture_server(&[])}})
}

#[test]
fn both_eras_share_the_path_and_sessions_list_them() {
    let (d, port) = http_daemon(fx_config(), json!({}), &["--mode", "legacy"]);
    d.wait_ready(&["fx"]);
    let mut old = HttpMcp::initialize(port, None);
    assert!(old.tools().contains(&"fx_echo".to_string()));
    let r = old.call("fx_echo", json!({"text": "over http"}));
    assert_eq!(result_text(&r), "over http");

    let mut modern = HttpMcp::modern(port, None);
    let discover = modern.call_method("server/discover", json!({}));
    assert_eq!(discover.status, 200, "{}", discover.text());
    assert!(
        discover.answer()["result"]["supportedVersions"]
            .to_string()
            .contains("2026-07-28"),
        "{}",
        discover.text()
    );
    assert!(
        discover.header("mcp-session-id").is_none(),
        "no sessions in 2026-07-28"
    );
    let r = modern.call("fx_add", json!({"a": 2, "b": 3}));
    assert_eq!(result_text(&r), "5");

    let sessions = d.ctl_json(&["sessions"]);
    let list = sessions["sessions"].as_array().unwrap();
    let http: Vec<&Value> = list.iter().filter(|s| s["io"] == "http").collect();
    assert_eq!(http.len(), 2, "{sessions:#}");
    assert_stable_session_keys(http[0], &sessions);
    let mut eras: Vec<&str> = http.iter().map(|s| s["era"].as_str().unwrap()).collect();
    eras.sort_unstable();
    assert_eq!(eras, ["2026-07-28", "initialize"]);
    assert!(
        http.iter().all(|s| s["identity"] == "local"),
        "no auth: the local owner"
    );

    // DELETE ends the session; its id is then unknown (404: re-initialize).
    let sid = old.session.clone().unwrap();
    let gone = request(port, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], b"");
    assert_eq!(gone.status, 204, "{}", gone.text());
    let after = old.call_method("tools/list", json!({}));
    assert_eq!(after.status, 404, "{}", after.text());
    eventually(
        "the deleted session to leave `evoctl sessions`",
        Duration::from_secs(5),
        || {
            let s = d.ctl_json(&["sessions"]);
            s["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["io"] == "http")
                .count()
                == 1
        },
    );
    let unknown = HttpMcp {
        session: Some("no-such-session".into()),
        ..HttpMcp::modern(port, None)
    }
    .call_method("tools/list", json!({}));
    assert_eq!(unknown.status, 404);
}

#[test]
fn bad_input_gets_one_answer_each_and_the_session_goes_on() {
    let cfg =
        json!({"mcpServers": {"fx": fixture_server(&[])}, "limits": {"max_message_bytes": 4096}});
    let (d, port) = http_daemon(cfg, json!({}), &["--mode", "legacy"]);
    d.wait_ready(&["fx"]);
    let mut c = HttpMcp::initialize(port, None);
    let sid = c.session.clone().unwrap();
    let session = ("Mcp-Session-Id", sid.as_str());
    let post = |headers: &[(&str, &str)], body: &[u8]| request(port, "POST", "/mcp", headers, body);

    let r = post(&[ACCEPT, JSON, session], b"{not json");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32700)),
        "{}",
        r.text()
    );
    assert_eq!(r.json()["id"], Value::Null);

    let r = post(
        &[ACCEPT, JSON, session],
        br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32600)),
        "{}",
        r.text()
    );
    assert!(r.text().contains("batch"));

    let r = post(
        &[ACCEPT, JSON, session],
        br#"{"id": 9, "method": "tools/list"}"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        (r.json()["id"].clone(), r.json()["error"]["code"].clone()),
        (json!(9), json!(-32600))
    );

    let r = post(&[ACCEPT, ("Content-Type", "text/plain"), session], b"{}");
    assert_eq!(r.status, 415, "{}", r.text());
    let r = post(
        &[JSON, session],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(r.status, 406, "missing Accept: {}", r.text());

    // Over the limit by Content-Length: answered at once, the body unread
    // (the client never sends it).
    let mut conn = Conn::open(port);
    conn.send(
        "POST",
        "/mcp",
        &[ACCEPT, JSON, session, ("Content-Length", "100000000")],
        b"",
    );
    let r = conn.read();
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(r.text().contains("4096"), "{}", r.text());
    // Over the limit without a declared length (chunked): cut off at the limit.
    let mut chunked = Conn::open(port);
    let big = "x".repeat(8000);
    let body = format!("{:x}\r\n{big}\r\n0\r\n\r\n", big.len());
    let mut raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMcp-Session-Id: {sid}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    raw.push_str(&body);
    chunked.send_raw(raw.as_bytes());
    let r = chunked.read();
    assert_eq!(r.status, 413, "{}", r.text());

    // Host and origin, checked before anything else.
    let r = post(
        &[ACCEPT, JSON, session, ("Host", "attacker.example")],
        b"{}",
    );
    assert_eq!(r.status, 403, "{}", r.text());
    let r = post(
        &[
            ACCEPT,
            JSON,
            session,
            ("Origin", "https://attacker.example"),
        ],
        b"{}",
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("allowed_origins"), "{}", r.text());

    // After all that, the session still works.
    let r = c.call("fx_echo", json!({"text": "still here"}));
    assert_eq!(result_text(&r), "still here");
    let r = c.call_method("no/such/method", json!({}));
    assert_eq!(r.answer()["error"]["code"], -32601, "{}", r.text());
}

#[test]
fn origins_from_loopback_and_the_allowed_list_pass() {
    let (d, port) = http_daemon(
        fx_config(),
        json!({"allowed_origins": ["https://app.example"]}),
        &[],
    );
    d.wait_ready(&["fx"]);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "o", "version": "1"}}});
    for (origin, status) in [
        ("http://localhost:5173", 200),
        ("https://app.example", 200),
        ("https://app.example:8443", 403),
        ("http://evil.example", 403),
    ] {
        let r = request(
            port,
            "POST",
            "/mcp",
            &[ACCEPT, JSON, ("Origin", origin)],
            init.to_string().as_bytes(),
        );
        assert_eq!(r.status, status, "{origin}: {}", r.text());
    }
}

#[test]
fn health_and_readiness() {
    let (mut d, port) = http_daemon(fx_config(), json!({}), &[]);
    assert_eq!(request(port, "GET", "/healthz", &[], b"").status, 200);
    let ready = request(port, "GET", "/readyz", &[], b"");
    assert_eq!(ready.status, 200, "{}", ready.text());
    // A config that does not load: not ready, and the answer says why.
    std::fs::write(&d.config, b"{ broken").unwrap();
    d.stop();
    d.spawn(&["--http", &format!("127.0.0.1:{port}")], &[]);
    wait_http(&d, port);
    let r = request(port, "GET", "/readyz", &[], b"");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("config"), "{}", r.text());
    assert_eq!(request(port, "GET", "/nowhere", &[], b"").status, 404);
}

#[test]
fn beyond_loopback_without_auth_is_refused_at_start() {
    let dir = TempDir::new("open");
    let cfg = dir.path().join("mcp.config.json");
    std::fs::write(&cfg, b"{}").unwrap();
    let port = free_port();
    let run = |extra: &[&str]| {
        std::process::Command::new(bin("evod"))
            .arg("--config")
            .arg(&cfg)
            .arg("--socket")
            .arg(dir.path().join("s.sock"))
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(["--http", &format!("0.0.0.0:{port}")])
            .args(extra)
            .env_remove("EVO_SOCKET")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let (code, _, err) = outcome(run(&[]));
    assert_ne!(code, 0, "evod must refuse: {err}");
    assert!(
        err.contains("--insecure-no-auth") && err.contains("serve.http.auth"),
        "{err}"
    );
    assert!(
        !dir.path().join("s.sock").exists(),
        "it did not start serving"
    );

    let cfg_value = json!({"mcpServers": {"fx": fixture_server(&[])}});
    let mut d = Daemon::start_with(
        &cfg_value,
        &["--http", &format!("0.0.0.0:{port}"), "--insecure-no-auth"],
        &[],
    );
    wait_http(&d, port);
    assert!(
        d.log_text().contains("WITHOUT AUTHENTICATION"),
        "{}",
        d.log_text()
    );
    let status = d.ctl_json(&["status"]);
    assert_eq!(status["http"]["insecure_no_auth"], true, "{status:#}");
    assert!(
        status["http"]["warning"]
            .as_str()
            .unwrap()
            .contains("no authentication")
    );
    let (_, text, _) = d.ctl(&["status"]);
    assert!(
        text.contains("WARNING") && text.contains("authentication"),
        "{text}"
    );
    d.stop();
}

/// A client that never reads what evod sends it (here: the child's log
/// messages it asked for, on its session's stream) is held back, not
/// buffered without bound: evod's memory stays flat while another client
/// makes the child log 20 MB at it, and that other client is served.
#[test]
fn a_client_that_never_reads_is_held_back_not_buffered() {
    let (d, port) = http_daemon(fx_config(), json!({}), &["--mode", "legacy"]);
    d.wait_ready(&["fx"]);
    let mut deaf = HttpMcp::initialize(port, None);
    let r = deaf.call_method("logging/setLevel", json!({"level": "info"}));
    assert_eq!(r.status, 200, "{}", r.text());
    // Its stream for server messages, opened and never read.
    let sid = deaf.session.clone().unwrap();
    let mut stream = Conn::open(port);
    stream.send(
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &sid)],
        b"",
    );
    let mut busy = HttpMcp::initialize(port, None);
    let text = "x".repeat(64 * 1024);
    busy.call("fx_echo", json!({"text": "warm up", "log_level": "info"}));
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(d.pid());
    let started = std::time::Instant::now();
    for _ in 0..300 {
        let r = busy.call("fx_echo", json!({"text": text, "log_level": "info"}));
        assert_eq!(r["isError"], false);
    }
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let grown = rss_kib(d.pid()).saturating_sub(before);
    assert!(
        grown < 12 * 1024,
        "evod grew {grown} KiB while a client did not read ~20 MB sent its way"
    );
    assert!(
        took < Duration::from_secs(60),
        "the busy client was held up: {took:?}"
    );
    drop(stream);
}

/// `session_timeout_s`: an HTTP session nobody uses ends, in both eras (the
/// client of an initialize-era one gets 404 and initializes again).
#[test]
fn idle_http_sessions_end() {
    let (d, port) = http_daemon(fx_config(), json!({"session_timeout_s": 2}), &[]);
    d.wait_ready(&["fx"]);
    let mut old = HttpMcp::initialize(port, None);
    let mut modern = HttpMcp::modern(port, None);
    assert!(modern.tools().contains(&"discover_tools".to_string()));
    let http_sessions = || {
        d.ctl_json(&["sessions"])["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["io"] == "http")
            .count()
    };
    assert_eq!(http_sessions(), 2);
    eventually(
        with_log("idle HTTP sessions to end", &d.log),
        Duration::from_secs(15),
        || http_sessions() == 0,
    );
    assert_eq!(old.call_method("tools/list", json!({})).status, 404);
    // Used again, each era is served (a new session).
    assert!(!HttpMcp::initialize(port, None).tools().is_empty());
    assert!(modern.tools().contains(&"discover_tools".to_string()));
}

/// rmcp answers on the stream of the last request registered under a
/// JSON-RPC id: a second request reusing an open id in the same session
/// would take the first one's answer and leave the first stream with
/// keep-alives only, for ever. The second is refused; the first answered.
#[test]
fn a_request_id_reused_while_its_request_is_open_is_refused() {
    let (d, port) = http_daemon(fx_config(), json!({}), &["--mode", "legacy"]);
    d.wait_ready(&["fx"]);
    let mcp = HttpMcp::initialize(port, None);
    let session = mcp.session.clone().expect("a session id");
    let headers = [ACCEPT, JSON, ("Mcp-Session-Id", session.as_str())];
    let call = |tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
               "params": {"name": tool, "arguments": args}})
        .to_string()
    };
    let mut first = Conn::open(port);
    first.send(
        "POST",
        "/mcp",
        &headers,
        call("fx_sleep", json!({"ms": 1500})).as_bytes(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let second = request(
        port,
        "POST",
        "/mcp",
        &headers,
        call("fx_echo", json!({"text": "second"})).as_bytes(),
    );
    assert_eq!(second.status, 409, "{}", second.text());
    let refusal = second.json();
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("request id 77 is still in flight")),
        "{refusal}"
    );
    let answer = first.read().answer();
    assert_eq!(answer["id"], 77, "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
    // Answered, the id is free again.
    let again = request(
        port,
        "POST",
        "/mcp",
        &headers,
        call("fx_echo", json!({"text": "again"})).as_bytes(),
    );
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(result_text(&again.answer()["result"]), "again");
}
