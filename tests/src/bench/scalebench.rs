//! `evo-bench --scaleout`: several evod instances sharing a real
//! redis-server. Calls/s with 1, 2 and 3 instances (16 HTTP sessions whose
//! calls go to the instances in turn), the Redis commands each call costs
//! (counted by Redis itself, `INFO commandstats`, health pings left out),
//! and the latency Redis adds to a call that touches it: a plain call (its
//! response stored as an SSE event for resumption) and a call refused by a
//! person's denial (checked in one Lua script), each on a Redis instance
//! (Redis syncing its append-only file once a second, and before every
//! answer) and on a file-store instance, side by side in alternating rounds.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::timing::{median, us};
use evo_tests::harness::{
    http::{ACCEPT, Conn, JSON},
    instances::{APPROVE, Instance, approval_id, instance, store_of},
    redis::Redis,
};

/// Commands Redis has run, health checks and this benchmark's own
/// `INFO` left out.
fn redis_commands(redis: &Redis) -> u64 {
    redis
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter(|l| !l.starts_with("ping:") && !l.starts_with("info:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// An initialize-era session over keep-alive connections, one per instance.
struct Session {
    id: String,
    conns: Vec<Conn>,
    next: u64,
}

impl Session {
    fn open(ports: &[u16], first: usize) -> Session {
        let mut c = Conn::open(ports[first]);
        let r = c.request(
            "POST",
            "/mcp",
            &[ACCEPT, JSON],
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}})
            .to_string()
            .as_bytes(),
        );
        let id = r
            .header("mcp-session-id")
            .expect("a session id")
            .to_string();
        let n = c.request(
            "POST",
            "/mcp",
            &[ACCEPT, JSON, ("Mcp-Session-Id", &id)],
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert_eq!(n.status, 202);
        Session {
            id,
            conns: ports.iter().map(|&p| Conn::open(p)).collect(),
            next: 1,
        }
    }

    fn call(&mut self, on: usize, tool: &str, args: Value) -> Value {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": "tools/call",
                          "params": {"name": tool, "arguments": args}});
        let id = self.id.clone();
        let r = self.conns[on].request(
            "POST",
            "/mcp",
            &[ACCEPT, JSON, ("Mcp-Session-Id", &id)],
            body.to_string().as_bytes(),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.answer()["result"].clone()
    }
}

/// Calls/s of `clients` sessions making `calls` each, round-robin over the
/// instances; and Redis commands per call.
fn throughput(instances: &[Instance], redis: &Redis, clients: usize, calls: usize) -> (f64, f64) {
    let ports: Vec<u16> = instances.iter().map(|i| i.port).collect();
    let mut sessions: Vec<Session> = (0..clients)
        .map(|k| Session::open(&ports, k % ports.len()))
        .collect();
    // Every instance serves every session once before timing (the move
    // of a session to an instance is a one-off, not the steady state).
    for s in &mut sessions {
        for on in 0..ports.len() {
            let r = s.call(on, "fx_echo", json!({"text": "warm"}));
            assert_eq!(r["isError"], false, "{r}");
        }
    }
    let before = redis_commands(redis);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for (k, s) in sessions.iter_mut().enumerate() {
            let n = ports.len();
            scope.spawn(move || {
                for c in 0..calls {
                    let r = s.call((k + c) % n, "fx_echo", json!({"text": "x"}));
                    assert_eq!(r["isError"], false, "{r}");
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let ops = redis_commands(redis) - before;
    let total = (clients * calls) as f64;
    (total / elapsed.as_secs_f64(), ops as f64 / total)
}

/// A session's call of `fx_echo` that a person denied, so each repeat is
/// refused by the approvals check alone (Redis, or the book in memory).
fn denied(i: &Instance) -> Session {
    let mut s = Session::open(&[i.port], 0);
    let held = s.call(0, "fx_echo", json!({"text": "no"}));
    let id = approval_id(held["content"][0]["text"].as_str().unwrap_or_default());
    let (code, _, err) = i.d.ctl(&["deny", &id]);
    assert_eq!(code, 0, "{err}");
    let r = s.call(0, "fx_echo", json!({"text": "no"}));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("denied")),
        "{r}"
    );
    s
}

pub fn scaleout_benchmarks(quick: bool) {
    let Some(redis) = Redis::start("scaleout bench") else {
        return;
    };
    // Redis as commonly run: an append-only file synced once a second.
    redis.cli(&["CONFIG", "SET", "appendfsync", "everysec"]);
    let store = store_of(&redis);
    let (clients, calls) = if quick { (8, 100) } else { (16, 400) };
    println!(
        "## Scale-out (Redis {}), {clients} HTTP sessions x {calls} calls, round-robin",
        redis.url()
    );
    println!();
    println!("| instances | calls/s | Redis commands per call |");
    println!("| --- | --- | --- |");
    let mut running: Vec<Instance> = Vec::new();
    for n in 1..=3 {
        while running.len() < n {
            running.push(instance(&store, "", &[]));
        }
        let (rate, ops) = throughput(&running, &redis, clients, calls);
        println!("| {n} | {rate:.0} | {ops:.3} |");
    }
    drop(running);
    println!();
    // The latency Redis adds, side by side in alternating rounds: the same
    // call on an instance whose store is Redis as commonly run
    // (`appendfsync everysec`, Redis's default with an append-only file),
    // on one whose Redis syncs its file before every answer (`always`,
    // what the tests run for their restarts of Redis), and on a
    // file-store instance (nothing in Redis).
    let Some(always) = Redis::start("scaleout bench (appendfsync always)") else {
        return;
    };
    let (rounds, per) = if quick { (10, 50) } else { (30, 100) };
    let stores = [store, store_of(&always), json!({})];
    let names = [
        "Redis store (appendfsync everysec)",
        "Redis store (appendfsync always)",
        "file store",
    ];
    // A plain call (initialize era): the response's SSE event written in
    // Redis, or not (file store).
    let plain: Vec<Instance> = stores.iter().map(|s| instance(s, "", &[])).collect();
    let mut sessions: Vec<Session> = plain.iter().map(|i| Session::open(&[i.port], 0)).collect();
    let before = [redis_commands(&redis), redis_commands(&always)];
    let plain_times = alternate(&mut sessions, rounds, per, "x");
    let plain_ops = [
        (redis_commands(&redis) - before[0]) as f64 / (rounds * per) as f64,
        (redis_commands(&always) - before[1]) as f64 / (rounds * per) as f64,
    ];
    drop(sessions);
    drop(plain);
    // A call a person denied, so each repeat is refused by the approvals
    // check alone (one Lua script in Redis, or the book in memory).
    let held: Vec<Instance> = stores.iter().map(|s| instance(s, APPROVE, &[])).collect();
    let mut sessions: Vec<Session> = held.iter().map(denied).collect();
    let denied_times = alternate(&mut sessions, rounds, per, "no");
    for (title, mut times, ops) in [
        ("plain call (initialize era)", plain_times, Some(plain_ops)),
        ("approvals check of a call (refused)", denied_times, None),
    ] {
        println!("| {title} | median µs | p90 µs | added to the file store's median |");
        println!("| --- | --- | --- | --- |");
        let file_median = median(&mut times[2]);
        for (k, name) in names.iter().enumerate() {
            let m = median(&mut times[k]);
            let p90 = times[k][times[k].len() * 9 / 10];
            let ops = match (ops, k) {
                (Some(o), 0 | 1) => format!(" ({:.2} commands per call)", o[k]),
                _ => String::new(),
            };
            let added = if k < 2 {
                us(m.saturating_sub(file_median))
            } else {
                String::new()
            };
            println!("| {name}{ops} | {} | {} | {added} |", us(m), us(p90));
        }
        println!();
    }
}

/// The same call in each session in turn, `per` at a time, `rounds` times:
/// each session's times.
fn alternate(
    sessions: &mut [Session],
    rounds: usize,
    per: usize,
    text: &str,
) -> Vec<Vec<Duration>> {
    let mut times = vec![Vec::with_capacity(rounds * per); sessions.len()];
    for _ in 0..rounds {
        for (s, out) in sessions.iter_mut().zip(times.iter_mut()) {
            for _ in 0..per {
                let t = Instant::now();
                let _ = s.call(0, "fx_echo", json!({"text": text}));
                out.push(t.elapsed());
            }
        }
    }
    times
}
