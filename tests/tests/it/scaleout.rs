//! Scale-out: several evod instances sharing state through a real
//! `redis-server` (started here on a free loopback port with its own data
//! directory, killed at the end). Without redis-server on PATH each test
//! says "skipped".

use std::path::PathBuf;
use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, ctl_at, server},
    http::{HttpMcp, request, result_text, wait_http},
    instances::{APPROVE, Instance, approval_id, instance, instance_config, instance_of, store_of},
    ports::free_port,
    process::TempDir,
    redis::Redis,
    wait::eventually,
};
use serde_json::{Value, json};

/// A Redis of the test's own and two instances on it, with `perms` as
/// their permissions; `None` (after saying "skipped") without redis-server.
fn two_instances(test: &str, perms: &str) -> Option<(Redis, Instance, Instance)> {
    let redis = Redis::start(test)?;
    let store = store_of(&redis);
    let a = instance(&store, perms, &[]);
    let b = instance(&store, perms, &[]);
    Some((redis, a, b))
}

fn readyz(port: u16) -> (u16, String) {
    let r = request(port, "GET", "/readyz", &[], b"");
    (r.status, r.text())
}

fn store_status(i: &Instance) -> Value {
    i.d.ctl_json(&["status"])["store"].clone()
}

#[test]
fn without_a_redis_url_the_store_is_files() {
    let i = instance(&json!({}), "", &[]);
    let s = store_status(&i);
    assert_eq!(s["kind"], "file", "{s}");
    assert_eq!(s["ok"], true, "{s}");
    assert_eq!(readyz(i.port).0, 200);
}

#[test]
fn redis_unreachable_at_start_serves_says_so_and_catches_up() {
    // A port nobody listens on yet; Redis comes up there later.
    let Some(mut redis) = Redis::start("redis_unreachable_at_start") else {
        return;
    };
    redis.kill();
    let i = instance(&store_of(&redis), "", &[]);
    // It serves: calls to children work.
    let mut c = HttpMcp::initialize(i.port, None);
    let r = c.call("fx_echo", json!({"text": "hi"}));
    assert_eq!(r["isError"], false, "{r}");
    let (code, body) = readyz(i.port);
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("Redis") && body.contains(&redis.port.to_string()),
        "{body}"
    );
    eventually(
        "status to name the unreachable Redis",
        Duration::from_secs(10),
        || {
            store_status(&i)["error"]
                .as_str()
                .is_some_and(|e| e.contains("unreachable"))
        },
    );
    let s = store_status(&i);
    assert_eq!(
        (s["kind"].as_str(), s["ok"].as_bool()),
        (Some("redis"), Some(false)),
        "{s}"
    );
    assert!(
        i.d.log_text().contains("shared store unavailable"),
        "{}",
        i.d.log_text()
    );
    let (_, human, _) = i.d.ctl(&["status"]);
    assert!(
        human.contains("store: redis") && human.contains("UNAVAILABLE"),
        "{human}"
    );
    redis.restart();
    eventually(
        "readyz to turn 200 once Redis is up",
        Duration::from_secs(15),
        || readyz(i.port).0 == 200,
    );
    assert_eq!(store_status(&i)["ok"], true);
}

#[test]
fn a_wrong_password_is_a_clear_error_and_the_right_one_works() {
    let Some(redis) = Redis::start_with("redis_password", Some("s3cret-pw"), false) else {
        return;
    };
    let wrong = json!({"redis_url": format!("redis://:nope@127.0.0.1:{}", redis.port)});
    let i = instance(&wrong, "", &[]);
    eventually("the refusal to show", Duration::from_secs(10), || {
        store_status(&i)["error"]
            .as_str()
            .is_some_and(|e| e.contains("password"))
    });
    let (code, body) = readyz(i.port);
    assert_eq!(code, 503);
    assert!(body.contains("password"), "{body}");
    assert!(
        !body.contains("nope"),
        "the password is never shown: {body}"
    );
    assert!(!i.d.log_text().contains("nope"), "nor logged");
    let right = instance(&store_of(&redis), "", &[]);
    eventually("the store to be reachable", Duration::from_secs(10), || {
        store_status(&right)["ok"] == true
    });
    assert!(
        store_status(&right)["url"]
            .as_str()
            .is_some_and(|u| u.contains("***") && !u.contains("s3cret"))
    );
}

#[test]
fn rediss_with_a_private_ca_works() {
    let Some(redis) = Redis::start_with("rediss", None, true) else {
        return;
    };
    let i = instance(&store_of(&redis), "", &[]);
    eventually(
        "the TLS store to be reachable",
        Duration::from_secs(10),
        || store_status(&i)["ok"] == true,
    );
    assert_eq!(readyz(i.port).0, 200);
}

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
fn a_later_instance_serves_the_catalog_from_redis_without_starting_children() {
    let Some(redis) = Redis::start("catalog") else {
        return;
    };
    let store = store_of(&redis);
    let a = instance(&store, "", &[]);
    eventually("A's catalog in Redis", Duration::from_secs(20), || {
        redis.cli(&["HLEN", "evo:catalog"]).trim() != "0"
    });
    let b = instance_of(&|port| instance_config(port, &store), "", &[]);
    let s = b.d.ctl_json(&["status"]);
    let fx = server(&s, "fx").unwrap();
    assert_eq!(
        fx["state"], "idle",
        "listed from the store, not started: {fx}"
    );
    assert_eq!(fx["source"], "cache", "{fx}");
    assert!(fx["cached_tools"].as_u64() > Some(5), "{fx}");
    assert!(fx["pid"].is_null(), "no child spawned: {fx}");
    let mut c = HttpMcp::initialize(b.port, None);
    assert_eq!(
        result_text(&c.call("fx_echo", json!({"text": "lazy"}))),
        "lazy"
    );
    assert_eq!(
        server(&b.d.ctl_json(&["status"]), "fx").unwrap()["state"],
        "ready"
    );
    // Another config hash: the stored entry does not apply.
    let other = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["mcpServers"]["fx"]["env"] = json!({"FX_OTHER": "1"});
        cfg
    };
    let changed = instance_of(&other, "", &[]);
    let fx = server(&changed.d.ctl_json(&["status"]), "fx")
        .unwrap()
        .clone();
    assert_ne!(fx["source"], "cache", "{fx}");
    // Older than cache.max_age_hours: listed at once, re-discovered at once.
    let stale = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["cache"] = json!({"max_age_hours": 0});
        cfg
    };
    let s = instance_of(&stale, "", &[]);
    s.d.wait_ready(&["fx"]);
    assert!(
        s.d.log_text().contains("listed from cache") && s.d.log_text().contains("stale"),
        "{}",
        s.d.log_text()
    );
    drop(a);
}

#[test]
fn no_secret_reaches_redis() {
    let Some(redis) = Redis::start("secrets") else {
        return;
    };
    const ENV_SECRET: &str = "env-secret-4f9a1c";
    let store = store_of(&redis);
    let config = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["mcpServers"]["fx"]["env"] = json!({"FX_API_KEY": ENV_SECRET});
        cfg["serve"]["http"]["auth"] = json!({"tokens_file": "tokens.json"});
        cfg
    };
    let i = instance_of(&config, APPROVE, &[]);
    i.d.wait_ready(&["fx"]);
    let (code, out, err) = i.d.ctl(&["token", "create", "alice"]);
    assert_eq!(code, 0, "{err}");
    let token = out.trim().to_string();
    let mut c = HttpMcp::initialize(i.port, Some(&token));
    assert_eq!(c.call("fx_add", json!({"a": 1, "b": 2}))["isError"], false);
    let held = c.call("fx_echo", json!({"text": "x"}));
    let id = approval_id(&result_text(&held));
    assert_eq!(i.d.ctl(&["approve", &id]).0, 0);
    assert_eq!(c.call("fx_echo", json!({"text": "x"}))["isError"], false);
    let mut s = i.d.session(&["--session", "named"]);
    s.initialize();
    let _ = s.call("fx_add", json!({"a": 1, "b": 1}));
    // Retry-loop counts, SSE events (a list_changed on the session's
    // stream), an in-band approval question, the instance's sessions.
    let _ = c.call("fx_fail", json!({"message": "boom"}));
    let id = c.session.clone().unwrap();
    assert_eq!(i.d.ctl(&["activate", "--session", &id, "fx_sleep"]).0, 0);
    let mut modern = HttpMcp::modern(i.port, Some(&token));
    asked(&asking_call(&mut modern, json!({})));
    eventually("the catalog in Redis", Duration::from_secs(20), || {
        redis.cli(&["HLEN", "evo:catalog"]).trim() != "0"
    });
    eventually(
        "the sessions' record in Redis",
        Duration::from_secs(20),
        || redis.dump().contains("evo:inst:"),
    );
    let dump = redis.dump();
    for key in [
        "evo:http:session:",
        "evo:act:",
        "evo:brk:",
        "evo:ev:",
        "evo:ask:",
        "evo:inst:",
    ] {
        assert!(dump.contains(key), "{key} in {dump}");
    }
    assert!(
        dump.contains("token:alice"),
        "the identity's name is kept: {dump}"
    );
    for secret in [ENV_SECRET, token.as_str(), token.trim_start_matches("evo_")] {
        assert!(!dump.contains(secret), "{secret} reached Redis");
    }
}

#[test]
fn redis_killed_mid_traffic_degrades_clearly_and_catches_up() {
    let Some((mut redis, a, b)) = two_instances("redis_killed", APPROVE) else {
        return;
    };
    let mut c = HttpMcp::initialize(a.port, None);
    let id = c.session.clone().unwrap();
    // A decided approval, not yet used: it must survive Redis's restart.
    let held = c.call("fx_echo", json!({"text": "keep"}));
    let ap = approval_id(&result_text(&held));
    assert_eq!(b.d.ctl(&["approve", &ap]).0, 0);
    redis.kill();
    // Calls to children go on.
    for _ in 0..5 {
        let r = c.call("fx_pid", json!({}));
        assert_eq!(r["isError"], false, "{r}");
    }
    // Cross-instance features say why they cannot serve.
    let r = c.call("fx_echo", json!({"text": "other"}));
    let text = result_text(&r);
    assert!(
        r["isError"] == true
            && text.contains("approvals cannot be checked now")
            && text.contains("Redis"),
        "{text}"
    );
    let mut on_b = HttpMcp {
        port: b.port,
        token: None,
        session: Some(id.clone()),
        next: 50,
    };
    let r = on_b.call_method("tools/list", json!({}));
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("unavailable"), "{}", r.text());
    let (code, _, err) = b.d.ctl(&["approve", "ap999"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unavailable"), "{err}");
    eventually("readyz to say so", Duration::from_secs(10), || {
        let (code, body) = readyz(a.port);
        code == 503 && body.contains("Redis")
    });
    assert_eq!(store_status(&a)["ok"], false);
    // A change made meanwhile, on the instance holding the session.
    let (code, out, err) = a.d.ctl(&["activate", "--session", &id, "fx_add"]);
    assert_eq!(code, 0, "{out}{err}");
    redis.restart();
    eventually("readyz to recover", Duration::from_secs(15), || {
        readyz(a.port).0 == 200
    });
    // Caught up: the session continues on B with its activations.
    eventually("B to serve the session", Duration::from_secs(10), || {
        on_b.call_method("tools/list", json!({})).status == 200
    });
    eventually(
        "the activation made during the outage on B",
        Duration::from_secs(10),
        || on_b.tools().contains(&"fx_add".to_string()),
    );
    // The approval decided before the outage passes once.
    let r = on_b.call("fx_echo", json!({"text": "keep"}));
    assert_eq!(r["isError"], false, "{r}");
    let r = c.call("fx_echo", json!({"text": "keep"}));
    assert_eq!(r["isError"], true, "used once: {r}");
}

/// Answers the balancer saw cut off (an instance killed under them).
static CUT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A request through a test-side load balancer: tried on the instances in
/// turn from `start`, moving on when an instance is down (refused, reset)
/// or cannot serve now (502/503), as a load balancer's retry does. `Err`:
/// no instance answered within the tries (a lost response).
pub fn balanced(
    ports: &[u16],
    start: usize,
    session: Option<&str>,
    body: &Value,
) -> Result<(u16, Option<String>, Value, usize), String> {
    use std::io::{Read, Write};
    let text = body.to_string();
    let mut last = String::new();
    for attempt in 0..60 {
        let port = ports[(start + attempt) % ports.len()];
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n",
            text.len()
        );
        if let Some(s) = session {
            head.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(&text);
        let answer = (|| -> std::io::Result<Vec<u8>> {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            s.write_all(head.as_bytes())?;
            let mut all = Vec::new();
            s.read_to_end(&mut all)?;
            Ok(all)
        })();
        let raw = match answer {
            Ok(raw) if !raw.is_empty() => raw,
            Ok(_) => {
                last = format!("{port}: closed without an answer");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => {
                last = format!("{port}: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if status == 502 || status == 503 {
            last = format!("{port}: {status} {body}");
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let id = head.lines().find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id"))
                .map(|(_, v)| v.trim().to_string())
        });
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        if chunked && !body.ends_with("0\r\n\r\n") {
            // Cut off mid-answer: the instance died under the request.
            last = format!("{port}: answer cut off");
            CUT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            continue;
        }
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_string()
        };
        // JSON, or the answer among an event stream's `data:` lines.
        let json = serde_json::from_str(body.trim()).unwrap_or_else(|_| {
            body.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m.get("result").is_some() || m.get("error").is_some())
                .unwrap_or_else(|| json!({"unreadable": body}))
        });
        return Ok((status, id, json, attempt));
    }
    Err(format!("no instance answered: {last}"))
}

/// A chunked body's data.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// Sets its flag when dropped (a worker that ends, or panics).
struct Ended<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The soak: 3 instances, 50 HTTP sessions x 200 calls spread round-robin,
/// one instance SIGKILLed and restarted and Redis restarted during the run.
/// Every response arrives (through the balancer's retries), every approval
/// passes exactly once, every session's activations are intact.
#[test]
fn soak_three_instances_through_an_instance_kill_and_a_redis_restart() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let Some(redis) = Redis::start("soak") else {
        return;
    };
    const SESSIONS: usize = 50;
    const CALLS: usize = 200;
    let store = store_of(&redis);
    let mut instances: Vec<Instance> = (0..3).map(|_| instance(&store, APPROVE, &[])).collect();
    let ports: Vec<u16> = instances.iter().map(|i| i.port).collect();
    let sockets: Vec<PathBuf> = instances.iter().map(|i| i.d.socket.clone()).collect();
    let done = AtomicUsize::new(0);
    let ended = AtomicUsize::new(0);
    let retried = AtomicUsize::new(0);
    let passes = std::sync::Mutex::new(std::collections::HashMap::<String, usize>::new());
    let redis = std::sync::Mutex::new(redis);
    let started = std::time::Instant::now();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "soak", "version": "1"}}});
    let call = |id: u64, tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": args}})
    };
    std::thread::scope(|scope| {
        // The chaos: SIGKILL instance 2 at a quarter, restart it; restart
        // Redis at 60 %.
        let chaos = scope.spawn(|| {
            let total = SESSIONS * CALLS;
            let waiting = |share: usize| {
                done.load(Ordering::Relaxed) < total * share / 100
                    && ended.load(Ordering::Relaxed) == 0
            };
            while waiting(25) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let victim = &mut instances[2];
            if let Some(mut child) = victim.d.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            std::thread::sleep(Duration::from_millis(500));
            victim.d.spawn(&[], &[]);
            while waiting(60) {
                std::thread::sleep(Duration::from_millis(20));
            }
            redis.lock().unwrap().restart();
        });
        let workers: Vec<_> = (0..10)
            .map(|w| {
                let (ports, sockets, done, retried, passes, ended) =
                    (&ports, &sockets, &done, &retried, &passes, &ended);
                let (init, call) = (&init, &call);
                scope.spawn(move || {
                    let _ended = Ended(ended);
                    let mut sessions = Vec::new();
                    for k in 0..SESSIONS / 10 {
                        let n = w * (SESSIONS / 10) + k;
                        let (status, id, body, _) =
                            balanced(ports, n, None, init).expect("initialize answered");
                        assert_eq!(status, 200, "{body}");
                        let id = id.expect("a session id");
                        balanced(
                            ports,
                            n,
                            Some(&id),
                            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                        )
                        .expect("initialized answered");
                        // Each session activates fx_add by calling it.
                        sessions.push((n, id));
                    }
                    for c in 0..CALLS {
                        for (n, id) in &sessions {
                            let turn = n + c;
                            let (a, b) = (*n as i64, c as i64);
                            let (status, _, body, tries) = balanced(
                                ports,
                                turn,
                                Some(id),
                                &call(c as u64 + 1, "fx_add", json!({"a": a, "b": b})),
                            )
                            .unwrap_or_else(|e| panic!("session {n} call {c}: lost: {e}"));
                            retried.fetch_add(tries, Ordering::Relaxed);
                            assert_eq!(status, 200, "session {n} call {c}: {body}");
                            assert_eq!(
                                body["result"]["content"][0]["text"],
                                json!((a + b).to_string()),
                                "session {n} call {c}: {body}"
                            );
                            done.fetch_add(1, Ordering::Relaxed);
                            if c == CALLS / 2 {
                                approval_round(ports, sockets, *n, id, passes);
                            }
                        }
                    }
                    sessions
                })
            })
            .collect();
        let mut all = Vec::new();
        for w in workers {
            all.extend(w.join().expect("worker"));
        }
        chaos.join().expect("chaos");
        // Every session's activations intact, on any instance.
        for (n, id) in &all {
            let (status, _, body, _) = balanced(
                &ports,
                *n + 1,
                Some(id),
                &json!({"jsonrpc": "2.0", "id": 9999, "method": "tools/list", "params": {}}),
            )
            .expect("tools/list answered");
            assert_eq!(status, 200, "{body}");
            let names: Vec<&str> = body["result"]["tools"]
                .as_array()
                .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
                .unwrap_or_default();
            assert!(
                names.contains(&"fx_add"),
                "session {n} lost its activation: {names:?}"
            );
        }
    });
    let passes = passes.into_inner().unwrap();
    assert_eq!(passes.len(), SESSIONS, "every session ran its approval");
    assert!(
        passes.values().all(|&p| p == 1),
        "duplicate approvals: {passes:?}"
    );
    eprintln!(
        "soak: {} calls in {:.1} s, {} retries through the balancer ({} answers cut off by the SIGKILL, retried), 0 lost, {} approvals each passed once",
        SESSIONS * CALLS,
        started.elapsed().as_secs_f64(),
        retried.load(Ordering::Relaxed),
        CUT.load(Ordering::Relaxed),
        passes.len()
    );
}

/// One approval of session `id`: held, approved through an instance's
/// socket, then the same call raced on two instances until it has passed;
/// records how many times it passed.
fn approval_round(
    ports: &[u16],
    sockets: &[PathBuf],
    n: usize,
    id: &str,
    passes: &std::sync::Mutex<std::collections::HashMap<String, usize>>,
) {
    let text = format!("approve-{n}");
    let body = |rid: u64| {
        json!({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
               "params": {"name": "fx_echo", "arguments": {"text": text}}})
    };
    // Held (retried while the store is away).
    let ap = loop {
        let (_, _, r, _) = balanced(ports, n, Some(id), &body(7000)).expect("held call answered");
        let t = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if t.contains("evoctl approve ") {
            break approval_id(&t);
        }
        assert!(t.contains("cannot be checked now"), "session {n}: {r}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // Approved through instance 0 or 1's socket (they are never killed).
    loop {
        let (code, _, err) = ctl_at(&sockets[n % 2], &["approve", &ap]);
        if code == 0 {
            break;
        }
        assert!(err.contains("unavailable"), "approve {ap}: {err}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut passed = 0;
    loop {
        let barrier = std::sync::Barrier::new(2);
        let results: Vec<Value> = std::thread::scope(|s| {
            let hs: Vec<_> = [0usize, 1]
                .iter()
                .map(|&k| {
                    let (barrier, body) = (&barrier, &body);
                    s.spawn(move || {
                        barrier.wait();
                        balanced(&ports[k..k + 1], 0, Some(id), &body(7001 + k as u64))
                            .map(|(_, _, r, _)| r)
                            .unwrap_or(Value::Null)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut settled = false;
        for r in &results {
            let t = r["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            if r["result"]["isError"] == false {
                passed += 1;
                settled = true;
            } else if t.contains("evoctl approve ") {
                settled = true;
            }
        }
        if settled {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    passes.lock().unwrap().insert(ap, passed);
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
    // counted one short: ARCHITECTURE.md, "Life of shared state").
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
fn asking_call(c: &mut HttpMcp, extra: Value) -> Value {
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
fn asked(r: &Value) -> String {
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
fn api_tokens_work_with_redis_down_at_start_and_catch_up() {
    let Some(mut redis) = Redis::start("tokens_redis_down") else {
        return;
    };
    let store = store_of(&redis);
    let config = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["serve"]["http"]["auth"] = json!({});
        cfg
    };
    let mut a = instance_of(&config, "", &[]);
    let (code, out, err) = a.d.ctl(&["token", "create", "dan"]);
    assert_eq!(code, 0, "{err}");
    let token = out.trim().to_string();
    // This machine keeps a copy of the store's records (hashes only).
    let copy = a.d.dir.path().join("tokens.json");
    eventually(
        "the local copy of the records",
        Duration::from_secs(10),
        || std::fs::read_to_string(&copy).is_ok_and(|t| t.contains("\"dan\"")),
    );
    assert!(!std::fs::read_to_string(&copy).unwrap().contains(&token));
    a.d.stop();
    redis.kill();
    // Started with Redis down: the copy is in force, state features say why.
    a.d.spawn(&[], &[]);
    wait_http(&a.d, a.port);
    let mut c = HttpMcp::initialize(a.port, Some(&token));
    let r = c.call("fx_add", json!({"a": 2, "b": 3}));
    assert_eq!(result_text(&r), "5", "{r}");
    let (code, body) = readyz(a.port);
    assert!(code == 503 && body.contains("Redis"), "{code} {body}");
    let (code, _, err) = a.d.ctl(&["token", "create", "eve"]);
    assert_eq!(code, 1, "no token without the store: {err}");
    assert!(err.contains("Redis") || err.contains("store"), "{err}");
    let wrong = HttpMcp {
        port: a.port,
        token: Some("evo_not-a-token".into()),
        session: None,
        next: 1,
    }
    .post(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "evo-it", "version": "1"}}}),
        &[],
    );
    assert_eq!(wrong.status, 401, "{}", wrong.text());
    // Redis back: caught up; a revocation on another instance is obeyed.
    redis.restart();
    eventually(
        "readyz 200 once Redis is back",
        Duration::from_secs(20),
        || readyz(a.port).0 == 200,
    );
    let b = instance_of(&config, "", &[]);
    let (code, _, err) = b.d.ctl(&["token", "revoke", "dan"]);
    assert_eq!(code, 0, "{err}");
    eventually(
        "A to refuse the revoked token",
        Duration::from_secs(20),
        || c.call_method("tools/list", json!({})).status == 401,
    );
    eventually("A's copy to drop it", Duration::from_secs(10), || {
        std::fs::read_to_string(&copy).is_ok_and(|t| !t.contains("\"dan\""))
    });
}

/// Commands Redis ran since the last `CONFIG RESETSTAT`, by name: health
/// pings, the statistics' own commands and each instance's session list
/// (a `SET` every 3 s, whatever the traffic) left out.
fn commands_since_reset(redis: &Redis) -> std::collections::BTreeMap<String, u64> {
    redis
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .filter(|(name, _)| {
            !(matches!(name.as_str(), "ping" | "info" | "set") || name.starts_with("config"))
        })
        .collect()
}

#[test]
fn a_plain_call_reads_nothing_from_redis_on_any_instance() {
    let Some((redis, a, b)) = two_instances("plain_call_commands", "") else {
        return;
    };
    // Each instance serves the session once, then 10 calls alternate
    // between them: the commands Redis ran for those 10.
    let ten_calls = |c: &mut HttpMcp| {
        for n in 0..12 {
            if n == 2 {
                redis.cli(&["CONFIG", "RESETSTAT"]);
            }
            c.port = [a.port, b.port][n % 2];
            assert_eq!(c.call("fx_echo", json!({"text": "x"}))["isError"], false);
        }
        commands_since_reset(&redis)
    };
    // An initialize-era session opened on A. Each response is stored for
    // resumption (one pipeline); nothing is read for the retry-loop count,
    // on the opener or the other.
    let mut c = HttpMcp::initialize(a.port, None);
    let only: std::collections::BTreeMap<String, u64> =
        [("xadd".to_string(), 10), ("expire".to_string(), 10)].into();
    assert_eq!(ten_calls(&mut c), only, "initialize era");
    // 2026-07-28: the identity's count is read once per instance, then
    // nothing at all (a response answered as JSON is not an SSE event).
    let seen = ten_calls(&mut HttpMcp::modern(a.port, None));
    assert!(
        seen.keys().all(|k| k == "xadd" || k == "expire"),
        "2026-07-28 calls read nothing: {seen:?}"
    );
    // A failure is written, announced, and seen by the other instance
    // without a read there. (A first failure with other arguments
    // activates the tool in the session, which is shared and announced
    // too: done before counting.)
    c.port = a.port;
    assert_eq!(
        c.call("fx_fail", json!({"message": "warm"}))["isError"],
        true
    );
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let fail = json!({"message": "boom"});
    assert_eq!(c.call("fx_fail", fail.clone())["isError"], true);
    std::thread::sleep(Duration::from_millis(300));
    c.port = b.port;
    let r = c.call("fx_fail", fail.clone());
    assert!(r["content"].to_string().contains("failure 2"), "{r}");
    let seen = commands_since_reset(&redis);
    assert_eq!(
        seen.get("hget"),
        Some(&2),
        "only the failure scripts read the hash: {seen:?}"
    );
    assert!(!seen.contains_key("hgetall"), "{seen:?}");
    assert_eq!(
        seen.get("publish"),
        Some(&2),
        "each failure announced: {seen:?}"
    );
}
