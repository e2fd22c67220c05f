//! Bad input on the control socket and inside MCP sessions: each bad message
//! gets a clear error for that message (or that connection), and the session
//! and the daemon go on.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use evo_tests::harness::{daemon::Daemon, servers::fixture_server};
use serde_json::{Value, json};

fn daemon() -> Daemon {
    let d = Daemon::start(&json!({
        "mcpServers": {"fx": fixture_server(&[])},
        "limits": {"max_message_bytes": 1048576}
    }));
    d.wait_ready(&["fx"]);
    d
}

fn error_code(msg: &Value) -> i64 {
    msg["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {msg}"))
}

#[test]
fn bad_messages_in_a_session_get_errors_and_the_session_goes_on() {
    let d = daemon();
    let mut c = d.legacy_session();
    let timeout = Duration::from_secs(10);

    c.send_raw(b"{this is not json\n");
    let r = c.recv(timeout).expect("an answer to malformed JSON");
    assert_eq!(error_code(&r), -32700, "{r}");
    assert!(r["id"].is_null());

    c.send_raw(b"\xff\xfe\xfd garbage\n");
    assert_eq!(error_code(&c.recv(timeout).unwrap()), -32700);

    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"params\":{}}\n");
    let r = c.recv(timeout).unwrap();
    assert_eq!(error_code(&r), -32600, "{r}");
    assert_eq!(r["id"], 77, "the id is echoed when it can be read");

    let r = c.request("no/such/method", json!({}));
    assert_eq!(error_code(&r), -32601, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no/such/method"),
        "{r}"
    );
    // Standard MCP methods evo does not serve say so, in words.
    for method in ["resources/list", "prompts/list", "completion/complete"] {
        let r = c.request(method, json!({}));
        assert_eq!(error_code(&r), -32601, "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(method) && message.contains("not served by evo"),
            "{message}"
        );
    }

    // tools/call with params of the wrong shape: invalid params, saying what.
    for (params, says) in [
        (json!({"arguments": {}}), "'name' is missing"),
        (json!({"name": 7}), "'name' must be a string"),
        (
            json!({"name": "fx_echo", "arguments": [1]}),
            "'arguments' must be an object",
        ),
        (json!(null), "params are missing"),
    ] {
        let r = c.request("tools/call", params.clone());
        assert_eq!(error_code(&r), -32602, "{params}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{params}: {message}");
    }

    // A response to a request never made is not answered.
    c.send(&json!({"jsonrpc": "2.0", "id": 4242, "result": {}}));

    // Oversized: discarded with an error naming the limit.
    let mut big = b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"fx_echo\",\"arguments\":{\"text\":\"".to_vec();
    big.extend(std::iter::repeat_n(b'x', 2 * 1024 * 1024));
    big.extend(b"\"}}}\n");
    c.send_raw(&big);
    let r = c.recv(timeout).unwrap();
    assert_eq!(error_code(&r), -32600, "{r}");
    assert_eq!(r["id"], 5, "answered under its own id: {r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("1048576"),
        "{r}"
    );

    // A second request under the id of one still in flight is refused; the
    // first is answered as usual: each gets exactly one answer.
    c.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                   "params": {"name": "fx_sleep", "arguments": {"ms": 300}}}));
    c.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                   "params": {"name": "fx_echo", "arguments": {"text": "twin"}}}));
    let first = c.recv(timeout).unwrap();
    assert_eq!(first["id"], 9);
    assert!(
        first["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already used")),
        "{first}"
    );
    let second = c.recv(timeout).unwrap();
    assert_eq!(second["id"], 9);
    assert!(second["result"].is_object(), "{second}");
    assert!(
        c.recv(Duration::from_millis(300)).is_none(),
        "a third answer"
    );

    // A child's answer over the limit (limits.max_message_bytes, 1 MiB here)
    // fails that call at once, with the reason, instead of leaving it to
    // time out.
    let (text, is_error) = c.call_text("fx_big", json!({"bytes": 2 << 20}));
    assert!(
        is_error && text.contains("'fx' answered with more than 1048576 bytes"),
        "not a timeout: {text}"
    );

    // Still alive, and nothing else was sent in between.
    assert_eq!(c.call_text("fx_echo", json!({"text": "alive"})).0, "alive");
    assert!(
        c.recv(Duration::from_millis(200)).is_none(),
        "no stray replies"
    );
}

#[test]
fn garbage_handshake_gets_one_error_line_and_a_close() {
    let d = daemon();
    for garbage in [
        &b"hello there\n"[..],
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n",
        b"{\"evo\":99,\"kind\":\"mcp\"}\n",
    ] {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(garbage).unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ok"], false);
        assert!(v["error"].as_str().unwrap().contains("handshake"), "{v}");
        let mut rest = String::new();
        assert_eq!(
            r.read_line(&mut rest).unwrap(),
            0,
            "connection closed after the error"
        );
    }
    // A 20 MiB line without a newline is refused too.
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let chunk = vec![b'a'; 1 << 20];
    let mut refused = false;
    for _ in 0..20 {
        if s.write_all(&chunk).is_err() {
            refused = true;
            break;
        }
    }
    if !refused {
        let mut line = String::new();
        let _ = BufReader::new(&s).read_line(&mut line);
        assert!(line.contains("\"ok\":false"), "{line}");
    }
    // Half a handshake line, then silence: refused and closed after 10 s,
    // not held open.
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"{\"evo\":1,").unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("no handshake line within 10 s"), "{line}");
    assert_eq!(r.read_line(&mut String::new()).unwrap(), 0, "closed");
    // The daemon still serves.
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("fx_echo", json!({"text": "fine"})).0, "fine");
}

#[test]
fn bad_control_requests_get_errors_on_a_live_connection() {
    let d = daemon();
    let s = UnixStream::connect(&d.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut read = || {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    w.write_all(b"{\"evo\":1,\"kind\":\"ctl\"}\n").unwrap();
    assert_eq!(read()["ok"], true);
    for bad in ["nonsense", "{\"cmd\":\"explode\"}", "{\"cmd\":\"search\"}"] {
        w.write_all(format!("{bad}\n").as_bytes()).unwrap();
        let v = read();
        assert_eq!(v["ok"], false, "{bad}: {v}");
        assert_eq!(v["kind"], "invalid_request");
    }
    w.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
    let v = read();
    assert_eq!(v["ok"], true);
    assert_eq!(v["data"]["servers"][0]["id"], "fx");
}
