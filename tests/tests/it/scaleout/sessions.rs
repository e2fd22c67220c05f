//! Sessions moving between instances: approvals, activations, profiles,
//! retry counts, in-band questions and event streams decided or resumed on
//! another instance than the one they began on.

use std::time::Duration;

use evo_tests::harness::{
    daemon::Daemon,
    http::{HttpMcp, request, result_text, wait_http},
    instances::{APPROVE, Instance, approval_id, instance, instance_config, instance_of, store_of},
    ports::free_port,
    process::TempDir,
    redis::Redis,
    wait::eventually,
};
use serde_json::{Value, json};

use super::soak::balanced;
use super::{store_status, two_instances};

#[test]
fn an_approval_held_on_a_is_decided_on_b_and_consumed_once() {
    let Some((_redis, a, b)) = two_instances("approvals", APPROVE) else {
        return;
    };
    let mut ca = a.d.legacy_session();
    let mut cb = b.d.legacy_session();
    let (text, e) = ca.call_text("fx_echo", json!({"text": "ship it"}));
    assert!(e, "{text}");
    let id = approval_id(&text);
    // B lists it and approves it.
    let listed = b.d.ctl_json(&["approvals"]);
    assert!(
        listed["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == id.as_str()),
        "{listed}"
    );
    let (code, out, err) = b.d.ctl(&["approve", &id]);
    assert_eq!(code, 0, "{out}{err}");
    // Decided approvals survive any instance's restart.
    let mut a = a;
    a.d.stop();
    a.d.spawn(&[], &[]);
    wait_http(&a.d, a.port);
    let mut ca = a.d.legacy_session();
    // Consumed by the first matching call, on either instance.
    let (text, e) = cb.call_text("fx_echo", json!({"text": "ship it"}));
    assert!(!e, "approved on B, passes on B: {text}");
    let (text, e) = ca.call_text("fx_echo", json!({"text": "ship it"}));
    assert!(e && text.contains("evoctl approve"), "used up: {text}");
    let (code, _, err) = a.d.ctl(&["approve", &id]);
    assert_eq!(code, 1, "already used: {err}");
    // The race: the same call on A and B at the same moment, many times.
    let mut pending = approval_id(&text);
    for round in 0..25 {
        let (code, out, err) = if round % 2 == 0 {
            a.d.ctl(&["approve", &pending])
        } else {
            b.d.ctl(&["approve", &pending])
        };
        assert_eq!(code, 0, "round {round}: {out}{err}");
        let barrier = std::sync::Barrier::new(2);
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| {
                barrier.wait();
                ca.call_text("fx_echo", json!({"text": "ship it"}))
            });
            let tb = s.spawn(|| {
                barrier.wait();
                cb.call_text("fx_echo", json!({"text": "ship it"}))
            });
            (ta.join().unwrap(), tb.join().unwrap())
        });
        let passed = [&ra, &rb].iter().filter(|(_, e)| !*e).count();
        assert_eq!(
            passed, 1,
            "round {round}: exactly one consumption: {ra:?} {rb:?}"
        );
        let held = if ra.1 { &ra.0 } else { &rb.0 };
        pending = approval_id(held);
    }
    // A denial on A refuses on B.
    let (code, _, _) = a.d.ctl(&["deny", &pending]);
    assert_eq!(code, 0);
    let (text, e) = cb.call_text("fx_echo", json!({"text": "ship it"}));
    assert!(e && text.contains("denied"), "{text}");
}

/// A client of one initialize-era session whose requests go to the
/// instances in turn (a round-robin load balancer, test-side).
struct RoundRobin {
    ports: Vec<u16>,
    turn: usize,
    c: HttpMcp,
}

impl RoundRobin {
    fn new(ports: &[u16]) -> RoundRobin {
        RoundRobin {
            ports: ports.to_vec(),
            turn: 1,
            c: HttpMcp::initialize(ports[0], None),
        }
    }

    /// The next instance serves the next request.
    fn next(&mut self) -> &mut HttpMcp {
        self.c.port = self.ports[self.turn % self.ports.len()];
        self.turn += 1;
        &mut self.c
    }
}

#[test]
fn a_session_opened_on_a_goes_on_on_b() {
    let Some((redis, a, b)) = two_instances("http_sessions", "") else {
        return;
    };
    let mut rr = RoundRobin::new(&[a.port, b.port]);
    let id = rr.c.session.clone().unwrap();
    for i in 0..10 {
        let c = rr.next();
        let r = c.call("fx_echo", json!({"text": format!("n{i}")}));
        assert_eq!(r["isError"], false, "request {i} on port {}: {r}", c.port);
        assert_eq!(result_text(&r), format!("n{i}"));
        let tools = rr.next().tools();
        assert!(tools.iter().any(|t| t == "discover_tools"), "{tools:?}");
    }
    // Both instances list it now.
    for i in [&a, &b] {
        let s = i.d.ctl_json(&["sessions"]);
        assert!(
            s["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["io"] == "http"),
            "{s}"
        );
    }
    // The record in Redis holds no secret and names the session.
    assert!(
        redis
            .cli(&["EXISTS", &format!("evo:http:session:{id}")])
            .trim()
            == "1"
    );
    // Ended on B: gone on A too.
    rr.c.port = b.port;
    let r = request(
        b.port,
        "DELETE",
        "/mcp",
        &[("Mcp-Session-Id", id.as_str())],
        b"",
    );
    assert!(
        r.status == 204 || r.status == 202,
        "{} {}",
        r.status,
        r.text()
    );
    eventually("A to forget the session", Duration::from_secs(20), || {
        rr.c.port = a.port;
        rr.c.call_method("tools/list", json!({})).status == 404
    });
    assert_eq!(
        redis
            .cli(&["EXISTS", &format!("evo:http:session:{id}")])
            .trim(),
        "0"
    );
}

#[test]
fn an_instance_killed_mid_session_leaves_it_to_the_others() {
    let Some((_redis, mut a, b)) = two_instances("instance_killed", "") else {
        return;
    };
    let mut c = HttpMcp::initialize(a.port, None);
    assert_eq!(c.call("fx_echo", json!({"text": "on a"}))["isError"], false);
    // SIGKILL: no goodbye.
    if let Some(mut child) = a.d.child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    c.port = b.port;
    let r = c.call("fx_echo", json!({"text": "on b"}));
    assert_eq!(result_text(&r), "on b", "{r}");
    drop(a);
}

/// An initialize-era session's standalone SSE stream (GET), read as it
/// comes.
struct EventStream {
    reader: std::io::BufReader<std::net::TcpStream>,
}

impl EventStream {
    fn open(port: u16, session: &str) -> EventStream {
        use std::io::{BufRead, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        write!(
            s,
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
        )
        .unwrap();
        let mut reader = std::io::BufReader::new(s);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "GET stream: {status}");
        EventStream { reader }
    }

    /// Waits for a `data:` line naming `method`.
    fn wait_for(&mut self, method: &str) -> bool {
        use std::io::BufRead;
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let mut line = String::new();
        while std::time::Instant::now() < deadline {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return false,
                Ok(_) if line.contains(method) => return true,
                Ok(_) => {}
            }
        }
        false
    }
}

#[test]
fn activations_follow_the_session_across_instances() {
    let Some((redis, a, b)) = two_instances("activations", "") else {
        return;
    };
    let store = store_of(&redis);
    let mut c = HttpMcp::initialize(a.port, None);
    let id = c.session.clone().unwrap();
    assert!(!c.tools().contains(&"fx_add".to_string()));
    // Activated on A by the agent (an exact-name call), listed on B.
    assert_eq!(c.call("fx_add", json!({"a": 1, "b": 2}))["isError"], false);
    c.port = b.port;
    eventually("B to list the activation", Duration::from_secs(20), || {
        c.tools().contains(&"fx_add".to_string())
    });
    // The client's stream is held by B; a person activates through A's
    // socket: the list_changed goes out from B.
    let mut stream = EventStream::open(b.port, &id);
    let (code, out, err) = a.d.ctl(&["activate", "--session", &id, "fx_echo"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        stream.wait_for("notifications/tools/list_changed"),
        "list_changed on B's stream"
    );
    assert!(c.tools().contains(&"fx_echo".to_string()));
    // An instance that never held the session reaches it too.
    let third = instance(&store, "", &[]);
    let (code, out, err) = third
        .d
        .ctl(&["deactivate", "--session", &id, "fx_add", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        stream.wait_for("notifications/tools/list_changed"),
        "again on B's stream"
    );
    c.port = a.port;
    eventually("A to drop fx_add", Duration::from_secs(20), || {
        !c.tools().contains(&"fx_add".to_string())
    });
    let (code, _, err) = third
        .d
        .ctl(&["activate", "--session", "nobody-has-this", "fx_add"]);
    assert_eq!(code, 1, "{err}");
    // Named (shim) sessions keep theirs across instances too.
    let mut s1 = a.d.session(&["--session", "dave"]);
    s1.initialize();
    let _ = s1.call("fx_add", json!({"a": 1, "b": 1}));
    drop(s1);
    let mut s2 = b.d.session(&["--session", "dave"]);
    s2.initialize();
    eventually("dave's activations on B", Duration::from_secs(20), || {
        s2.tool_names().contains(&"fx_add".to_string())
    });
}

#[test]
fn profile_changes_reach_every_instance() {
    let Some(redis) = Redis::start("profiles") else {
        return;
    };
    let store = store_of(&redis);
    let config_with_profile = |port: u16| {
        let mut c = instance_config(port, &store);
        c["profiles"] = json!({"coding": ["fx_echo"]});
        c
    };
    let start = |cfg: &dyn Fn(u16) -> Value| {
        let port = free_port();
        let dir = TempDir::new("inst");
        let path = dir.path().join("mcp.config.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&cfg(port)).unwrap()).unwrap();
        let d = Daemon::start_raw(dir, path, &[], &[]);
        wait_http(&d, port);
        Instance { d, port }
    };
    let a = start(&config_with_profile);
    let b = start(&config_with_profile);
    // B lists fx from Redis when A wrote it there first (idle, lazily
    // started), or starts it itself: either way its tools are known.
    b.d.wait_status("B to know fx's tools", |s| {
        s["servers"][0]["tools"].as_u64().unwrap_or(0) > 0
    });
    let mut s = b.d.session(&["--profile", "coding"]);
    s.initialize();
    assert!(!s.tool_names().contains(&"fx_add".to_string()));
    let seen = s.list_changed_count();
    let (code, out, err) = a.d.ctl(&["activate", "--profile", "coding", "fx_add"]);
    assert_eq!(code, 0, "{out}{err}");
    s.await_list_changed(seen);
    eventually(
        "B's session to list fx_add",
        Duration::from_secs(20),
        || s.tool_names().contains(&"fx_add".to_string()),
    );
    // A later instance starts with the change.
    let late = start(&config_with_profile);
    eventually(
        "the late instance to have the change",
        Duration::from_secs(20),
        || {
            late.d.ctl_json(&["profiles"])["profiles"][0]["added"]
                .as_array()
                .is_some_and(|a| a.iter().any(|t| t == "fx_add"))
        },
    );
}

#[test]
fn a_restarted_instance_serves_moved_sessions_at_once() {
    let Some(redis) = Redis::start("restarted") else {
        return;
    };
    let store = store_of(&redis);
    let a = instance(&store, "", &[]);
    let mut b = instance(&store, "", &[]);
    let mut sessions: Vec<String> = (0..8)
        .map(|_| HttpMcp::initialize(a.port, None).session.unwrap())
        .collect();
    if let Some(mut child) = b.d.child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    b.d.spawn(&[], &[]);
    for (n, id) in sessions.drain(..).enumerate() {
        let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                          "params": {"name": "fx_add", "arguments": {"a": n, "b": 1}}});
        let (status, _, r, _) = balanced(&[b.port], 0, Some(&id), &body).expect("answered");
        assert_eq!(status, 200, "{r}");
        assert_eq!(
            r["result"]["content"][0]["text"],
            json!((n + 1).to_string()),
            "session {n}: {r}\n{}",
            b.d.log_text()
        );
    }
}

#[test]
fn api_tokens_live_in_the_store_for_every_instance() {
    let Some(redis) = Redis::start("tokens") else {
        return;
    };
    let store = store_of(&redis);
    let config = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["serve"]["http"]["auth"] = json!({});
        cfg
    };
    let a = instance_of(&config, "", &[]);
    let b = instance_of(&config, "", &[]);
    let (code, out, err) = a.d.ctl(&["token", "create", "carol"]);
    assert_eq!(code, 0, "{err}");
    let token = out.trim().to_string();
    // Known on B (the event), the session moves between them.
    let bearer = format!("Bearer {token}");
    eventually("B to know the token", Duration::from_secs(20), || {
        request(
            b.port,
            "GET",
            "/metrics",
            &[("Authorization", bearer.as_str())],
            b"",
        )
        .status
            == 200
    });
    let mut c = HttpMcp::initialize(b.port, Some(&token));
    c.port = a.port;
    assert_eq!(c.call("fx_add", json!({"a": 2, "b": 2}))["isError"], false);
    let (code, _, err) = b.d.ctl(&["token", "create", "carol"]);
    assert_eq!(code, 1, "one name across instances: {err}");
    let listed = b.d.ctl_json(&["token", "list"]);
    assert!(listed.to_string().contains("carol"), "{listed}");
    assert!(!redis.dump().contains(&token), "only its hash is kept");
    // Revoked on B: refused on A.
    let (code, _, err) = b.d.ctl(&["token", "revoke", "carol"]);
    assert_eq!(code, 0, "{err}");
    eventually(
        "A to refuse the revoked token",
        Duration::from_secs(20),
        || c.call_method("tools/list", json!({})).status == 401,
    );
}

#[test]
fn retry_loop_counts_follow_the_session_across_instances() {
    let Some((redis, a, b)) = two_instances("retry_loop", "") else {
        return;
    };
    let boom = json!({"message": "boom"});
    // A count reaches the other instances through the failure's event, in
    // about a millisecond; an agent retries after its model has read the
    // error (seconds). The test pauses that long before it moves to the
    // other instance after a failure (a retry that beats the event is
    // counted one short: docs/scale-out.md, "How it works").
    let agent_reads = || std::thread::sleep(Duration::from_millis(300));
    // One failing call alternated between A and B trips the breaker at the
    // third, as on one instance (correction::… checks that one).
    let check = |c: &mut HttpMcp, era: &str| {
        let ports = [a.port, b.port];
        for n in 0..2 {
            c.port = ports[n % 2];
            let r = c.call("fx_fail", boom.clone());
            agent_reads();
            let t = result_text(&r);
            assert!(
                r["isError"] == true && t == "boom",
                "{era}: failure {} on port {}: {r}",
                n + 1,
                c.port
            );
            if n == 1 {
                let all = r["content"].to_string();
                assert!(
                    all.contains("failure 2") && all.contains("describe_tool"),
                    "{era}: the second failure (on B) escalates: {r}"
                );
            }
        }
        c.port = a.port;
        let r = c.call("fx_fail", boom.clone());
        let t = result_text(&r);
        assert!(
            r["isError"] == true && t.starts_with("Refused"),
            "{era}: the third identical failure is refused on A: {r}"
        );
        c.port = b.port;
        let t = result_text(&c.call("fx_fail", boom.clone()));
        assert!(t.starts_with("Refused"), "{era}: and on B: {t}");
        // Other arguments reset the count, on every instance.
        let t = result_text(&c.call("fx_fail", json!({"message": "other"})));
        agent_reads();
        assert_eq!(t, "other", "{era}");
        c.port = a.port;
        let t = result_text(&c.call("fx_fail", boom.clone()));
        assert_eq!(t, "boom", "{era}: counted from 1 again");
    };
    let mut legacy = HttpMcp::initialize(a.port, None);
    check(&mut legacy, "initialize era");
    let id = legacy.session.clone().unwrap();
    let counts = redis.cli(&["HGETALL", &format!("evo:brk:{id}")]);
    assert!(counts.contains("fx_fail"), "counted in Redis: {counts}");
    // 2026-07-28: no sessions; the identity's stateless sessions share one
    // count across instances.
    let mut modern = HttpMcp::modern(a.port, None);
    check(&mut modern, "2026-07-28");
    // Another session has its own count.
    let mut other = HttpMcp::initialize(b.port, None);
    let t = result_text(&other.call("fx_fail", json!({"message": "other"})));
    assert_eq!(t, "other");
}

/// A 2026-07-28 `tools/call` from a client that can ask its user
/// (elicitation), with `extra` params (the answer of a retry): the result.
pub(super) fn asking_call(c: &mut HttpMcp, extra: Value) -> Value {
    let mut params = json!({"name": "fx_echo", "arguments": {"text": "ship it"}});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "evo-it", "version": "1"}
    });
    let id = c.next;
    c.next += 1;
    let r = c.post(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "fx_echo"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let a = r.answer();
    a.get("result").cloned().unwrap_or_else(|| panic!("{a}"))
}

/// The `requestState` of an `input_required` result asking for approval.
pub(super) fn asked(r: &Value) -> String {
    assert_eq!(r["resultType"], "input_required", "{r}");
    assert!(r["inputRequests"]["evo/approve"].is_object(), "{r}");
    r["requestState"]
        .as_str()
        .expect("a requestState")
        .to_string()
}

#[test]
fn an_in_band_approval_asked_on_a_is_answered_on_b_once() {
    let Some((redis, a, b)) = two_instances("in_band_approval", APPROVE) else {
        return;
    };
    let mut c = HttpMcp::modern(a.port, None);
    let state = asked(&asking_call(&mut c, json!({})));
    assert_eq!(
        redis.cli(&["EXISTS", &format!("evo:ask:{state}")]).trim(),
        "1",
        "the question is in Redis"
    );
    let accept = json!({
        "inputResponses": {"evo/approve": {"action": "accept", "content": {}}},
        "requestState": state,
    });
    // The retry with the user's answer lands on B: the call is made.
    c.port = b.port;
    let r = asking_call(&mut c, accept.clone());
    assert_eq!(r["isError"], false, "approved on B: {r}");
    assert_eq!(result_text(&r), "ship it");
    // The same answer again, on A or B: used up, the user is asked anew.
    c.port = a.port;
    let again = asked(&asking_call(&mut c, accept.clone()));
    assert_ne!(again, state);
    c.port = b.port;
    asked(&asking_call(&mut c, accept));
    // Raced: one answer sent to A and B at the same moment passes once.
    for round in 0..10 {
        let mut ask = HttpMcp::modern(if round % 2 == 0 { a.port } else { b.port }, None);
        let state = asked(&asking_call(&mut ask, json!({})));
        let answer = json!({
            "inputResponses": {"evo/approve": {"action": "accept", "content": {}}},
            "requestState": state,
        });
        let barrier = std::sync::Barrier::new(2);
        let results: Vec<Value> = std::thread::scope(|s| {
            let runs: Vec<_> = [a.port, b.port]
                .into_iter()
                .map(|port| {
                    let (barrier, answer) = (&barrier, answer.clone());
                    s.spawn(move || {
                        let mut c = HttpMcp::modern(port, None);
                        barrier.wait();
                        asking_call(&mut c, answer)
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let passed = results
            .iter()
            .filter(|r| r["resultType"] != "input_required" && r["isError"] == false)
            .count();
        assert_eq!(
            passed, 1,
            "round {round}: one answer, one call: {results:?}"
        );
    }
    // A decline answered on the other instance refuses.
    c.port = a.port;
    let state = asked(&asking_call(&mut c, json!({})));
    c.port = b.port;
    let r = asking_call(
        &mut c,
        json!({
            "inputResponses": {"evo/approve": {"action": "decline"}},
            "requestState": state,
        }),
    );
    assert!(
        r["isError"] == true && result_text(&r).contains("declined"),
        "{r}"
    );
    // Redis down: the question cannot be asked, and the answer says so.
    drop(redis);
    c.port = a.port;
    let r = asking_call(&mut c, json!({}));
    let t = result_text(&r);
    assert!(
        r["isError"] == true && t.contains("cannot be asked or checked now") && t.contains("Redis"),
        "{r}"
    );
}

/// One SSE event as read off a stream: its id and data.
fn next_event(
    reader: &mut std::io::BufReader<std::net::TcpStream>,
    deadline: std::time::Instant,
) -> Option<(Option<String>, String)> {
    use std::io::BufRead;
    let (mut id, mut data) = (None, String::new());
    let mut line = String::new();
    while std::time::Instant::now() < deadline {
        match reader.read_line(&mut line) {
            Ok(0) => return None,
            // A read timeout: the part of a line read so far is kept.
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                continue;
            }
            Err(_) => return None,
            Ok(_) if !line.ends_with('\n') => continue,
            Ok(_) => {}
        }
        let l = std::mem::take(&mut line);
        let l = l.trim_end_matches(['\r', '\n']);
        if let Some(v) = l.strip_prefix("id:") {
            id = Some(v.trim().to_string());
        } else if let Some(v) = l.strip_prefix("data:") {
            data.push_str(v.trim());
        } else if l.is_empty() && !data.is_empty() {
            return Some((id, data));
        }
    }
    None
}

/// A GET stream of `session` on `port`, resumed after `last` if given.
fn sse_get(
    port: u16,
    session: &str,
    last: Option<&str>,
) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let resume = last
        .map(|l| format!("Last-Event-ID: {l}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n{resume}\r\n"
    )
    .unwrap();
    let mut reader = std::io::BufReader::new(s);
    let mut status = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while status.is_empty() && std::time::Instant::now() < deadline {
        let _ = reader.read_line(&mut status);
    }
    assert!(status.contains(" 200 "), "GET stream: {status}");
    reader
}

/// The next list_changed on the stream: its event id.
fn list_changed(reader: &mut std::io::BufReader<std::net::TcpStream>) -> Option<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while let Some((id, data)) = next_event(reader, deadline) {
        if data.contains("notifications/tools/list_changed") {
            return Some(id.unwrap_or_default());
        }
    }
    None
}

#[test]
fn a_stream_resumed_on_b_gets_the_events_it_missed() {
    let Some((redis, a, b)) = two_instances("resumable_streams", "") else {
        return;
    };
    let c = HttpMcp::initialize(a.port, None);
    let id = c.session.clone().unwrap();
    let mut on_a = sse_get(a.port, &id, None);
    assert_eq!(a.d.ctl(&["activate", "--session", &id, "fx_echo"]).0, 0);
    let seen = list_changed(&mut on_a).expect("list_changed on A's stream");
    assert!(seen.starts_with(&format!("{id}:common/")), "{seen}");
    // The client goes away; meanwhile the list changes again.
    drop(on_a);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(a.d.ctl(&["activate", "--session", &id, "fx_add"]).0, 0);
    let key = format!("evo:ev:{id}:common");
    eventually("the missed event in Redis", Duration::from_secs(10), || {
        redis
            .cli(&["XLEN", &key])
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
            >= 2
    });
    let ttl: i64 = redis.cli(&["TTL", &key]).trim().parse().unwrap_or(-9);
    assert!(ttl > 0, "the stream expires: TTL {ttl}");
    // It reconnects to B with the last id it saw: B replays what it missed…
    let mut on_b = sse_get(b.port, &id, Some(&seen));
    let missed = list_changed(&mut on_b).expect("the missed list_changed, replayed on B");
    assert!(
        missed.starts_with(&format!("{id}:common/")) && missed != seen,
        "{missed} after {seen}"
    );
    // …and the stream goes on live from B.
    assert_eq!(b.d.ctl(&["activate", "--session", &id, "fx_fail"]).0, 0);
    let live = list_changed(&mut on_b).expect("a live list_changed on B's resumed stream");
    assert_ne!(live, missed, "each event once");
    // An id this store never gave replays nothing (an empty stream, no error).
    let r = request(
        b.port,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", id.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Last-Event-ID", "nonsense"),
        ],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn evoctl_sessions_lists_every_instances_sessions() {
    let Some((_redis, mut a, b)) = two_instances("sessions_everywhere", "") else {
        return;
    };
    let name_a = store_status(&a)["instance"].as_str().unwrap().to_string();
    let name_b = store_status(&b)["instance"].as_str().unwrap().to_string();
    assert_ne!(name_a, name_b);
    let _c = HttpMcp::initialize(a.port, None);
    let mut named = b.d.session(&["--session", "erin"]);
    named.initialize();
    let of = |i: &Instance| -> Vec<Value> {
        i.d.ctl_json(&["sessions"])["sessions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    eventually("B to list A's session", Duration::from_secs(20), || {
        of(&b)
            .iter()
            .any(|s| s["instance"] == name_a.as_str() && s["io"] == "http")
    });
    let on_b = of(&b);
    assert!(
        on_b.iter()
            .any(|s| s["instance"] == name_b.as_str() && s["name"] == "erin"),
        "its own, live: {on_b:?}"
    );
    eventually(
        "A to list B's named session",
        Duration::from_secs(20),
        || {
            of(&a)
                .iter()
                .any(|s| s["instance"] == name_b.as_str() && s["name"] == "erin")
        },
    );
    let (code, human, _) = b.d.ctl(&["sessions"]);
    assert_eq!(code, 0);
    assert!(
        human.contains("INSTANCE") && human.contains(&name_a) && human.contains(&name_b),
        "{human}"
    );
    // A dies without a word: its record expires.
    if let Some(mut child) = a.d.child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    eventually(
        "A's sessions to expire from B's list",
        Duration::from_secs(30),
        || !of(&b).iter().any(|s| s["instance"] == name_a.as_str()),
    );
    assert!(of(&b).iter().any(|s| s["name"] == "erin"));
}

#[test]
fn evoctl_reaches_another_instances_session_by_the_id_it_lists() {
    let Some((_redis, a, b)) = two_instances("session_ids", "") else {
        return;
    };
    let name_a = store_status(&a)["instance"].as_str().unwrap().to_string();
    let name_b = store_status(&b)["instance"].as_str().unwrap().to_string();
    let of = |i: &Instance| -> Vec<Value> {
        i.d.ctl_json(&["sessions"])["sessions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let listed_on_a = |instance: &str, io: &str| -> Option<String> {
        of(&a)
            .iter()
            .find(|s| s["instance"] == instance && s["io"] == io)
            .and_then(|s| s["id"].as_str().map(str::to_string))
    };
    // The first session of each instance: a socket one on A, an HTTP one
    // on B (each instance's first, so their local numbers are the same).
    let mut local = a.d.session(&[]);
    local.initialize();
    let mut c = HttpMcp::initialize(b.port, None);
    let http_id = c.session.clone().unwrap();
    let mut stream = EventStream::open(b.port, &http_id);
    let mut theirs = None;
    eventually("A to list B's session", Duration::from_secs(20), || {
        theirs = listed_on_a(&name_b, "http");
        theirs.is_some()
    });
    let theirs = theirs.unwrap();
    let listed = of(&a);
    let mine: Vec<String> = listed
        .iter()
        .filter(|s| s["instance"] == name_a.as_str())
        .filter_map(|s| s["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(mine.len(), 1, "{listed:?}");
    assert!(
        !mine.contains(&theirs),
        "ids unique across instances: {listed:?}"
    );
    // B's session, reached through A's socket by the id A lists.
    let (code, out, err) = a.d.ctl(&["activate", "--session", &theirs, "fx_add"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        stream.wait_for("notifications/tools/list_changed"),
        "list_changed on B's stream"
    );
    assert!(c.tools().contains(&"fx_add".to_string()));
    // A's own id, and a bare local number, name A's session, never B's.
    let r =
        a.d.ctl_json(&["activate", "--session", &mine[0], "fx_echo"]);
    assert_eq!(r["session"], mine[0].as_str(), "{r}");
    let bare = mine[0].split(['@', '-']).next().unwrap().to_string();
    let r = a.d.ctl_json(&["activate", "--session", &bare, "fx_fail"]);
    assert_eq!(r["session"], mine[0].as_str(), "{r}");
    let tools = c.tools();
    assert!(
        !tools.contains(&"fx_echo".to_string()) && !tools.contains(&"fx_fail".to_string()),
        "B's session untouched: {tools:?}"
    );
    assert!(local.tool_names().contains(&"fx_fail".to_string()));
    // An unnamed socket session on B is reached the same way, and
    // deactivated.
    let mut sock = b.d.session(&[]);
    sock.initialize();
    let mut on_b = None;
    eventually(
        "A to list B's socket session",
        Duration::from_secs(20),
        || {
            on_b = of(&a)
                .iter()
                .find(|s| s["instance"] == name_b.as_str() && s["io"] != "http")
                .and_then(|s| s["id"].as_str().map(str::to_string));
            on_b.is_some()
        },
    );
    let on_b = on_b.unwrap();
    assert!(!mine.contains(&on_b) && on_b != theirs, "{on_b}");
    let r = a.d.ctl_json(&["activate", "--session", &on_b, "fx_add"]);
    assert_eq!(r["session"], on_b.as_str(), "{r}");
    assert!(sock.tool_names().contains(&"fx_add".to_string()));
    let r = a.d.ctl_json(&["deactivate", "--session", &on_b, "fx_add"]);
    assert_eq!(r["changed"], json!(["fx_add"]), "{r}");
    assert!(!sock.tool_names().contains(&"fx_add".to_string()));
    // An id of an instance that holds no such session: a clear error.
    let gone = format!("s99{}", &on_b[on_b.find(['@', '-']).unwrap()..]);
    let (code, _, err) = a.d.ctl(&["activate", "--session", &gone, "fx_add"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no live session"), "{err}");
}
