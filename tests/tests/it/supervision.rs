//! Supervision and fault tolerance through real processes: crashing, hanging
//! and slow children, cancellation, progress routing, floods, graceful
//! shutdown with calls in flight, and a bounded soak.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use evo_tests::harness::{
    daemon::{Daemon, server},
    locations::{fixture, repo_root},
    mcp::{McpClient, text_of},
    process::{TempDir, rss_kib},
    servers::fixture_server,
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

#[test]
fn crashes_restart_then_fail_until_refreshed() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    d.wait_ready(&["fx"]);
    let mut c = d.legacy_session();
    let pid = c.call_text("fx_pid", json!({})).0;
    // A call whose child dies mid-call gets an isError naming the server.
    let (text, e) = c.call_text("fx_crash", json!({"code": 7}));
    assert!(
        e && text.contains("'fx' closed its connection before answering"),
        "{text}"
    );
    // Restarted at once, with the exit reason on record.
    let s = d.wait_status("restart", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready" && v["restarts"].as_u64() >= Some(1))
    });
    assert_ne!(server(&s, "fx").unwrap()["pid"].to_string(), pid);
    assert!(d.log_text().contains("exited with status 7"));
    assert_eq!(c.call_text("fx_echo", json!({"text": "back"})).0, "back");
    // Repeated crashes in a short window: failed.
    // Each crash call differs: identical failing calls would be refused by
    // the retry-loop breaker before reaching the child.
    let mut code = 10;
    let mut fx = Value::Null;
    eventually(
        with_log("fx to be marked failed after repeated crashes", &d.log),
        Duration::from_secs(30),
        || {
            fx = server(&d.ctl_json(&["status"]), "fx").unwrap().clone();
            if fx["state"] == "ready" {
                code += 1;
                c.call_text("fx_crash", json!({"code": code}));
            }
            fx["state"] == "failed"
        },
    );
    assert!(
        fx["error"].as_str().unwrap().contains("exited with status"),
        "{fx}"
    );
    // The same call while the server is down: each time the state, never
    // the retry-loop breaker's refusal (not these arguments' fault).
    for _ in 0..3 {
        let (text, e) = c.call_text("fx_echo", json!({"text": "x"}));
        assert!(
            e && text.contains("failed") && text.contains("evoctl refresh fx"),
            "{text}"
        );
    }
    d.ctl_json(&["refresh", "fx"]);
    d.wait_ready(&["fx"]);
    assert_eq!(c.call_text("fx_echo", json!({"text": "x"})).0, "x");
}

#[test]
fn timeouts_and_cancellation_reach_the_child() {
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": {"command": fixture().to_string_lossy(), "timeout_s": 0.5}
    }}));
    d.wait_ready(&["fx"]);
    let mut c = d.legacy_session();
    let t = Instant::now();
    let (text, e) = c.call_text("fx_sleep", json!({"ms": 5000}));
    assert!(e && text.contains("timed out"), "{text}");
    assert!(t.elapsed() < Duration::from_secs(4));
    // The late answer is discarded; the next call gets its own answer.
    assert_eq!(c.call_text("fx_echo", json!({"text": "next"})).0, "next");
    // A client cancel is forwarded to the child (it logs the cancel on
    // stderr, which evod captures with the server id).
    c.send(&json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
                   "params": {"name": "fx_sleep", "arguments": {"ms": 400}}}));
    eventually(
        with_log("the child to start sleep 400", &d.log),
        Duration::from_secs(10),
        || d.log_text().contains("sleep 400 started"),
    );
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 900, "reason": "user"}}),
    );
    eventually(
        with_log("the cancel to reach the child", &d.log),
        Duration::from_secs(10),
        || d.log_text().contains("sleep 400 cancelled"),
    );
    let log = d.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("sleep 400 cancelled"))
        .unwrap();
    assert!(
        line.contains("server=fx"),
        "stderr lines carry the server id: {line}"
    );
    assert_eq!(c.call_text("fx_echo", json!({"text": "alive"})).0, "alive");
}

#[test]
fn progress_reaches_only_the_calling_session() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    d.wait_ready(&["fx"]);
    let mut a = d.legacy_session();
    let mut b = d.legacy_session();
    // Every progress notification arrives, and before the call's result,
    // in the order the child sent them (checked over many calls: a race
    // would drop or reorder some).
    for call in 1..=20 {
        let r = a.request(
            "tools/call",
            json!({"name": "fx_progress", "arguments": {"steps": 3},
                   "_meta": {"progressToken": "tok-A"}}),
        );
        assert_eq!(r["result"]["content"][0]["text"], "done 3");
        assert_eq!(
            a.notified("notifications/progress"),
            3 * call,
            "call {call}: progress missing or after the result"
        );
    }
    let steps: Vec<f64> = a
        .notifications
        .iter()
        .filter_map(|n| n["params"]["progress"].as_f64())
        .collect();
    assert!(
        steps.chunks(3).all(|c| c[0] < c[1] && c[1] < c[2]),
        "in order: {steps:?}"
    );
    for n in a
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
    {
        assert_eq!(
            n["params"]["progressToken"], "tok-A",
            "the client's own token"
        );
        assert_eq!(n["params"]["total"], 3.0);
    }
    assert!(
        b.recv(Duration::from_millis(300)).is_none(),
        "the other session hears nothing"
    );
    b.tool_names();
}

#[test]
fn a_child_flooding_stdout_blocks_nobody() {
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": fixture_server(&[]), "calm": fixture_server(&[])
    }}));
    d.wait_ready(&["fx", "calm"]);
    let mut c = d.legacy_session();
    let mut other = d.legacy_session();
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "fx_flood", "arguments": {"lines": 20000}}}));
    assert_eq!(
        other.call_text("calm_echo", json!({"text": "unblocked"})).0,
        "unblocked"
    );
    let r = c.response(&json!(1));
    assert_eq!(r["result"]["content"][0]["text"], "flooded");
    assert_eq!(c.call_text("fx_echo", json!({"text": "fine"})).0, "fine");
}

/// A chatty child's stderr is logged under its server id, at most 50 lines
/// a second; what is dropped is counted in a warning, even when the child
/// then goes quiet.
#[test]
fn child_stderr_is_logged_with_its_id_and_rate_limited() {
    let d = Daemon::start(&json!({"mcpServers": {
        "loud": fixture_server(&["--stderr-burst", "500"])
    }}));
    d.wait_ready(&["loud"]);
    eventually(
        with_log("a warning counting the dropped lines", &d.log),
        Duration::from_secs(10),
        || d.log_text().contains("lines dropped"),
    );
    let log = d.log_text();
    let logged: Vec<&str> = log.lines().filter(|l| l.contains("burst line")).collect();
    assert!(
        !logged.is_empty() && logged.len() <= 50,
        "{} burst lines logged",
        logged.len()
    );
    assert!(logged.iter().all(|l| l.contains("loud")), "{logged:?}");
    let dropped: usize = log
        .lines()
        .filter(|l| l.contains("lines dropped") && l.contains("loud"))
        .filter_map(|l| {
            l.split("dropped=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert_eq!(logged.len() + dropped, 500, "{log}");
}

#[test]
fn shutdown_answers_calls_in_flight() {
    let mut d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    d.wait_ready(&["fx"]);
    let mut c = d.legacy_session();
    c.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": "fx_sleep", "arguments": {"ms": 20000}}}));
    eventually(
        with_log("the call to reach the child", &d.log),
        Duration::from_secs(10),
        || d.log_text().contains("sleep 20000 started"),
    );
    let (code, _, _) = d.ctl(&["stop"]);
    assert_eq!(code, 0);
    let r = c.response(&json!(5));
    let (text, e) = text_of(&r["result"]);
    assert!(e, "an in-flight call gets an error answer at shutdown: {r}");
    assert!(
        text.contains("fx") && text.contains("shutting down"),
        "{text}"
    );
    let st = d.child.take().unwrap().wait().unwrap();
    assert!(st.success());
}

/// 50 sessions × 200 calls against a steady child and one that crashes
/// every 100 calls: every request gets exactly one response, and memory
/// does not grow.
#[test]
fn soak_every_request_gets_exactly_one_response() {
    let d = Daemon::start(&json!({"mcpServers": {
        "steady": fixture_server(&[]),
        "crashy": fixture_server(&["--crash-every", "100"])
    }}));
    d.wait_ready(&["steady", "crashy"]);

    const SESSIONS: usize = 50;
    const CALLS: usize = 200;
    let run = |rounds: usize| -> (usize, usize, usize, usize) {
        let mut clients: Vec<McpClient> = (0..SESSIONS)
            .map(|_| {
                let mut c = McpClient::connect_socket(&d.socket, "legacy");
                c.initialize();
                c
            })
            .collect();
        let totals = std::sync::Mutex::new((0usize, 0usize, 0usize, 0usize));
        std::thread::scope(|s| {
            for (n, c) in clients.iter_mut().enumerate() {
                let totals = &totals;
                s.spawn(move || {
                    let mut answers: HashMap<u64, usize> = HashMap::new();
                    let mut errors = 0;
                    let window = 8u64;
                    let (mut sent, mut got) = (0u64, 0usize);
                    let calls = rounds as u64;
                    let deadline = Instant::now() + Duration::from_secs(90);
                    while got < rounds && Instant::now() < deadline {
                        while sent < calls && sent - got as u64 <= window {
                            let tool = if (sent + n as u64).is_multiple_of(2) { "steady_echo" } else { "crashy_echo" };
                            c.send(&json!({"jsonrpc": "2.0", "id": 10_000 + sent, "method": "tools/call",
                                           "params": {"name": tool, "arguments": {"text": "s"}}}));
                            sent += 1;
                        }
                        let Some(msg) = c.recv(Duration::from_secs(20)) else { break };
                        let Some(id) = msg.get("id").and_then(Value::as_u64) else { continue };
                        *answers.entry(id).or_default() += 1;
                        got += 1;
                        if msg["result"]["isError"] == true || msg.get("error").is_some() {
                            errors += 1;
                        }
                    }
                    let dup = answers.values().filter(|&&n| n > 1).count();
                    let lost = (0..calls).filter(|i| !answers.contains_key(&(10_000 + i))).count();
                    let mut t = totals.lock().unwrap();
                    t.0 += got - errors;
                    t.1 += errors;
                    t.2 += lost;
                    t.3 += dup;
                });
            }
        });
        totals.into_inner().unwrap()
    };
    // Warm up with a full run (allocator pools, connection buffers), then
    // measure memory around a second one.
    let (_, warm_err, warm_lost, warm_dup) = run(CALLS);
    assert_eq!(
        (warm_lost, warm_dup),
        (0, 0),
        "warm-up: every request gets exactly one response"
    );
    assert!(warm_err > 0, "the crashy child did crash");
    let before = rss_kib(d.pid());
    let (ok, err, lost, dup) = run(CALLS);
    let after = rss_kib(d.pid());
    println!(
        "soak: {} calls: ok {ok}, isError {err}, lost {lost}, duplicated {dup}; evod RSS {before} KiB -> {after} KiB",
        SESSIONS * CALLS
    );
    assert_eq!(lost, 0, "every request gets a response");
    assert_eq!(dup, 0, "and only one");
    assert_eq!(ok + err, SESSIONS * CALLS);
    assert!(err > 0, "the crashy child did crash");
    assert!(
        after <= before + before / 10 + 2048,
        "RSS grew from {before} to {after} KiB"
    );
    let s = d.ctl_json(&["status"]);
    assert!(server(&s, "crashy").unwrap()["restarts"].as_u64() >= Some(1));
}

/// A client that sends and never reads cannot make evod buffer without
/// bound, nor slow anyone else down.
#[test]
fn a_client_that_never_reads_is_held_back() {
    use std::io::Write;
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    d.wait_ready(&["fx"]);

    let before = rss_kib(d.pid());
    let stream = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    let mut w = stream.try_clone().unwrap();
    w.write_all(b"{\"evo\":1,\"kind\":\"mcp\",\"mode\":\"legacy\"}\n")
        .unwrap();
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"slow\",\"version\":\"0\"}}}\n").unwrap();
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();
    w.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    // Each answer is ~64 KiB; the client never reads one.
    let mut sent = 0;
    for id in 1..=5000 {
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"fx_big\",\"arguments\":{{\"bytes\":65536}}}}}}\n"
        );
        if w.write_all(request.as_bytes()).is_err() {
            break; // evod stopped reading: the client is held back
        }
        sent += 1;
    }
    // Not a wait for anything: half a second for evod to buffer what it
    // would, before its memory is measured.
    std::thread::sleep(Duration::from_millis(500));
    let during = rss_kib(d.pid());
    let mut other = d.legacy_session();
    assert_eq!(
        other.call_text("fx_echo", json!({"text": "unaffected"})).0,
        "unaffected"
    );
    println!(
        "slow client: {sent} requests written before being held back; evod RSS {before} -> {during} KiB"
    );
    assert!(
        sent < 5000,
        "the daemon kept reading from a client that never reads"
    );
    assert!(
        during < before + 96 * 1024,
        "evod buffered without bound: {before} -> {during} KiB"
    );
    drop(stream);
    drop(w);

    // The same with messages that each get an error reply (a request id
    // already in flight, then garbage): the replies hold the client back too.
    let stream = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    let mut w = stream.try_clone().unwrap();
    w.write_all(b"{\"evo\":1,\"kind\":\"mcp\",\"mode\":\"legacy\"}\n")
        .unwrap();
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"slow\",\"version\":\"0\"}}}\n").unwrap();
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"fx_sleep\",\"arguments\":{\"ms\":20000}}}\n").unwrap();
    w.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let pad = "x".repeat(4096);
    let mut sent = 0;
    for i in 0..20_000 {
        let line = if i % 5000 == 1 {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"pad\":\"{pad}\"}}\n"
            )
        } else {
            format!("not json {pad}\n")
        };
        if w.write_all(line.as_bytes()).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(
        sent < 20_000,
        "the daemon kept reading bad messages from a client that never reads"
    );
}

/// "Failed until reload or `evoctl refresh`": once its cause is fixed, a
/// plain `evoctl reload` (config unchanged) brings a failed server back.
#[test]
fn reload_retries_a_failed_server() {
    let dir = TempDir::new("broken");
    let broken = dir.path().join("broken");
    std::fs::write(&broken, "").unwrap();
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": fixture_server(&["--exit-if", &broken.to_string_lossy()])
    }}));
    d.wait_status("fx failed", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "failed")
    });
    std::fs::remove_file(&broken).unwrap();
    let report = d.ctl_json(&["reload"]);
    assert!(report.to_string().contains("fx"), "{report}");
    d.wait_ready(&["fx"]);
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("fx_echo", json!({"text": "back"})).0, "back");
}

/// A child's log messages (`notifications/message`) reach the sessions that
/// asked for them with `logging/setLevel`, at that level and above, with
/// the server id leading the logger name; other sessions hear nothing.
#[test]
fn child_logs_reach_sessions_that_asked() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    d.wait_ready(&["fx"]);
    let mut a = d.legacy_session();
    let mut b = d.legacy_session();
    let r = a.request("logging/setLevel", json!({"level": "warning"}));
    assert!(r.get("result").is_some(), "{r}");
    for (level, text) in [
        ("error", "disk full"),
        ("info", "routine"),
        ("warning", "slow"),
    ] {
        let said = a.call_text("fx_echo", json!({"text": text, "log_level": level}));
        assert_eq!(said, (text.to_string(), false));
    }
    a.await_notified("notifications/message", 2);
    let logs: Vec<(String, String, String)> = a
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .map(|n| {
            let p = &n["params"];
            let field = |k: &str| p[k].as_str().unwrap_or_default().to_string();
            (field("level"), field("logger"), field("data"))
        })
        .collect();
    assert_eq!(
        logs,
        [
            ("error".into(), "fx/fixture".into(), "disk full".into()),
            ("warning".into(), "fx/fixture".into(), "slow".into()),
        ]
    );
    // b never asked: nothing, even for its own calls.
    b.call_text(
        "fx_echo",
        json!({"text": "b's own", "log_level": "emergency"}),
    );
    assert!(
        b.recv(Duration::from_millis(300)).is_none() && b.notified("notifications/message") == 0,
        "a session that did not ask gets no logs"
    );
}

/// A child that answers nothing for longer than rmcp's `server/discover`
/// probe waits (10 s; a cold `npx` on a busy machine) gets `initialize`
/// after the probe; it then answers both, the probe first. That late answer
/// must not fail the start: evod used to drop the connection on it, the
/// child died writing its next line (`write EPIPE` from npx servers) and
/// was restarted. Both eras: a legacy server answers the probe with an
/// error, a 2026-07-28 one with a result.
#[test]
fn a_child_slower_than_the_discover_probe_starts_on_its_first_try() {
    let dir = TempDir::new("slowprobe");
    let tools = dir.path().join("tools.json");
    std::fs::write(
        &tools,
        json!([{"name": "one", "inputSchema": {"type": "object"}}]).to_string(),
    )
    .unwrap();
    let script = repo_root().join("tests/fixtures/raw_server.py");
    let d = Daemon::start(&json!({"mcpServers": {
        "legacy": {
            "command": "sh",
            "args": ["-c", "sleep 11; exec python3 \"$0\" \"$1\"",
                     script.to_string_lossy(), tools.to_string_lossy()],
        },
        "modern": fixture_server(&["--delay-start-ms", "11000"]),
    }}));
    let s = d.wait_ready(&["legacy", "modern"]);
    for id in ["legacy", "modern"] {
        let v = server(&s, id).unwrap();
        assert_eq!(
            v["restarts"],
            0,
            "{id} was restarted: {v}\nlog:\n{}",
            d.log_text()
        );
    }
    assert!(!d.log_text().contains("child is down"), "{}", d.log_text());
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("legacy_one", json!({})).0, "one");
    assert_eq!(c.call_text("modern_echo", json!({"text": "hi"})).0, "hi");
}
