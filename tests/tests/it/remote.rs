//! Calls on a Streamable HTTP child (the fixture in `--http` mode, run by
//! the test): they go straight to it (evo's own request ids, `evo-N`), with
//! the same answers rmcp's path gives, and the awkward cases (tool errors,
//! big results, a child that dies mid-call, cancellation, a session the
//! child no longer knows, progress) behave as they did through rmcp.

use std::time::{Duration, Instant};

use evo_tests::harness::{
    daemon::{Daemon, server},
    mcp::text_of,
    ports::free_port,
    servers::HttpChild,
    wait::eventually,
};
use serde_json::{Value, json};

const SHOW_IDS: (&str, &str) = ("EVO_FIXTURE_SHOW_IDS", "1");

fn daemon_for(child: &HttpChild) -> Daemon {
    let d = Daemon::start_with(
        &json!({"mcpServers": {"web": child.entry()}}),
        &["--mode", "legacy"],
        &[],
    );
    d.wait_ready(&["web"]);
    d
}

/// A `tools/call`'s whole answer (result or error), with or without a
/// progress token (with one, the call goes through rmcp).
fn call(c: &mut evo_tests::harness::mcp::McpClient, tool: &str, args: Value, token: bool) -> Value {
    let mut params = json!({"name": tool, "arguments": args});
    if token {
        params["_meta"] = json!({"progressToken": "p1"});
    }
    c.request("tools/call", params)
}

#[test]
fn calls_go_straight_to_the_child_and_answer_as_through_rmcp() {
    let child = HttpChild::start("127.0.0.1:0", &[SHOW_IDS]);
    let d = daemon_for(&child);
    let mut c = d.legacy_session();
    // Another session for rmcp's path: the retry-loop breaker counts a
    // repeated failing call per session.
    let mut other = d.legacy_session();
    let cases = [
        ("web_echo", json!({"text": "héllo \"quoted\"\n"})),
        ("web_add", json!({"a": 2, "b": 40.5})),
        ("web_fail", json!({"message": "on purpose"})),
        ("web_big", json!({"bytes": 300_000})),
    ];
    for (tool, args) in &cases {
        let direct = call(&mut c, tool, args.clone(), false);
        let through_rmcp = call(&mut other, tool, args.clone(), true);
        assert_eq!(
            direct["result"], through_rmcp["result"],
            "{tool}: the direct answer differs from rmcp's"
        );
    }
    let (text, is_error) =
        text_of(&call(&mut c, "web_fail", json!({"message": "x"}), false)["result"]);
    assert!(is_error && text.contains('x'), "{text}");
    assert_eq!(
        text_of(&call(&mut c, "web_big", json!({"bytes": 300_000}), false)["result"])
            .0
            .len(),
        300_000
    );
    // Which path each call took, as the child saw it: evo's own ids for
    // the calls without a progress token, rmcp's numbers for the others.
    let ids = child.ids("tools/call");
    let ours = ids.iter().filter(|id| id.starts_with("\"evo-")).count();
    let rmcps = ids.iter().filter(|id| !id.starts_with('"')).count();
    assert_eq!((ours, rmcps), (6, 4), "{ids:?}");
}

#[test]
fn resource_reads_go_straight_to_the_child_too() {
    let child = HttpChild::start_with("127.0.0.1:0", &["--offers"], &[SHOW_IDS]);
    let d = daemon_for(&child);
    let mut c = d.legacy_session();
    let r = c.request("resources/read", json!({"uri": "fx://echo/hello"}));
    assert_eq!(r["result"]["contents"][0]["text"], "hello", "{r}");
    let r = c.request("resources/read", json!({"uri": "fx://big/200000"}));
    assert_eq!(
        r["result"]["contents"][0]["text"].as_str().map(str::len),
        Some(200_000)
    );
    let ids = child.ids("resources/read");
    assert!(
        ids.len() == 2 && ids.iter().all(|id| id.starts_with("\"evo-")),
        "{ids:?}"
    );
}

#[test]
fn a_child_that_dies_mid_call_fails_the_call_and_comes_back() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = HttpChild::start(&addr, &[SHOW_IDS]);
    let d = daemon_for(&child);
    let mut c = d.legacy_session();
    let started = Instant::now();
    let r = call(&mut c, "web_crash", json!({"code": 4}), false);
    let (text, is_error) = text_of(&r["result"]);
    assert!(is_error && text.contains("'web'"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10), "it hung");
    assert!(
        child
            .ids("tools/call")
            .iter()
            .any(|id| id.starts_with("\"evo-")),
        "the crash went the direct way"
    );
    child.kill();
    // A new child on the same address: a session it never gave out. The
    // call still gets through (rmcp re-initializes, or the server is
    // reconnected), as it did before the direct path.
    let child = HttpChild::start(&addr, &[SHOW_IDS]);
    eventually(
        "the call to get through again",
        Duration::from_secs(30),
        || {
            let r = call(&mut c, "web_echo", json!({"text": "back"}), false);
            text_of(&r["result"]) == ("back".to_string(), false)
        },
    );
    // And later calls are direct again, under the new session.
    let before = child.ids("tools/call").len();
    let r = call(&mut c, "web_echo", json!({"text": "again"}), false);
    assert_eq!(text_of(&r["result"]).0, "again");
    let ids = child.ids("tools/call");
    assert!(
        ids[before..].iter().all(|id| id.starts_with("\"evo-")),
        "{ids:?}"
    );
    let s = d.ctl_json(&["status"]);
    assert_eq!(server(&s, "web").unwrap()["state"], "ready", "{s:#}");
}

#[test]
fn a_session_the_child_forgot_is_renewed_without_failing_the_call() {
    // A child before 2026-07-28: sessions (the later ones are stateless).
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = HttpChild::start_with(&addr, &["--legacy"], &[SHOW_IDS]);
    let d = daemon_for(&child);
    let mut c = d.legacy_session();
    assert_eq!(
        text_of(&call(&mut c, "web_echo", json!({"text": "one"}), false)["result"]).0,
        "one"
    );
    // Restarted between two calls (faster than the 10 s ping): its
    // sessions are gone, and the next POST is answered 404.
    child.kill();
    let child = HttpChild::start_with(&addr, &["--legacy"], &[SHOW_IDS]);
    // Time for the pool to see the old connection closed (a POST that
    // meets the closing connection fails in transport, as through rmcp).
    std::thread::sleep(Duration::from_millis(200));
    let r = call(&mut c, "web_echo", json!({"text": "two"}), false);
    assert_eq!(text_of(&r["result"]), ("two".to_string(), false), "{r}");
    // rmcp sent it again under a new session; the next is direct again.
    let r = call(&mut c, "web_echo", json!({"text": "three"}), false);
    assert_eq!(text_of(&r["result"]).0, "three");
    let ids = child.ids("tools/call");
    assert!(
        ids.last().is_some_and(|id| id.starts_with("\"evo-")),
        "{ids:?}"
    );
}

#[test]
fn a_cancelled_call_is_cancelled_at_the_child() {
    // A child with sessions: a stateless (2026-07-28) one ignores
    // notifications, so only its closed connection would tell it.
    let child = HttpChild::start_with("127.0.0.1:0", &["--legacy"], &[SHOW_IDS]);
    let d = daemon_for(&child);
    let mut c = d.legacy_session();
    c.send(&json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                   "params": {"name": "web_sleep", "arguments": {"ms": 30_000}}}));
    eventually("the sleep to start", Duration::from_secs(10), || {
        child
            .stderr()
            .iter()
            .any(|l| l.contains("sleep 30000 started"))
    });
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 77, "reason": "changed my mind"}}),
    );
    eventually("the child to hear of it", Duration::from_secs(10), || {
        child
            .stderr()
            .iter()
            .any(|l| l.contains("sleep 30000 cancelled"))
    });
    let sent = child.ids("tools/call");
    assert!(
        sent.len() == 1 && sent[0].starts_with("\"evo-"),
        "the sleep went the direct way: {sent:?}"
    );
    // Its connection closed, and the child was also told, by id (a
    // server that does not stop on a closed connection stops on that).
    eventually(
        "the child to be told by id",
        Duration::from_secs(10),
        || child.ids("notifications/cancelled").contains(&sent[0]),
    );
    // The session goes on.
    let r = call(&mut c, "web_echo", json!({"text": "next"}), false);
    assert_eq!(text_of(&r["result"]).0, "next");
}

#[test]
fn progress_still_reaches_the_client() {
    let child = HttpChild::start("127.0.0.1:0", &[SHOW_IDS]);
    let d = daemon_for(&child);
    let mut c = d.legacy_session();
    let r = call(&mut c, "web_progress", json!({"steps": 3}), true);
    assert_eq!(text_of(&r["result"]).0, "done 3");
    c.await_notified("notifications/progress", 3);
    assert!(
        c.notifications
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .all(|n| n["params"]["progressToken"] == "p1"),
        "{:?}",
        c.notifications
    );
}
