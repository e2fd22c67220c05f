//! The soak: many sessions spread over three instances through a test-side
//! load balancer, through an instance kill and a Redis restart.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use evo_tests::harness::{
    daemon::ctl_at,
    instances::{APPROVE, Instance, approval_id, instance, store_of},
    redis::Redis,
};
use serde_json::{Value, json};

/// Answers the balancer saw cut off (an instance killed under them).
static CUT: AtomicUsize = AtomicUsize::new(0);

/// A request through a test-side load balancer: tried on the instances in
/// turn from `start`, moving on when an instance is down (refused, reset)
/// or cannot serve now (502/503), as a load balancer's retry does. `Err`:
/// no instance answered within the tries (a lost response).
pub(super) fn balanced(
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
            CUT.fetch_add(1, Ordering::Relaxed);
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
struct Ended<'a>(&'a AtomicUsize);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The soak: 3 instances, 50 HTTP sessions x 200 calls spread round-robin,
/// one instance SIGKILLed and restarted and Redis restarted during the run.
/// Every response arrives (through the balancer's retries), every approval
/// passes exactly once, every session's activations are intact.
#[test]
fn soak_three_instances_through_an_instance_kill_and_a_redis_restart() {
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
    // QuarantinedOffers (retried while the store is away).
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
