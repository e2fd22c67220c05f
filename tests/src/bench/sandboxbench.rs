//! `evo-bench --sandbox`: what confinement costs. Three fixtures behind one evod, alike but
//! for their `sandbox`: none, Landlock only (`"network": true`), and Landlock with a network
//! namespace (`"network": false`). Cold start: each stops after 0.3 s idle
//! (`idle_timeout_s`), and a call then starts it again (spawn, confinement, handshake, tool
//! list, the call), timed from the client, with no other child running; call latency: echo
//! calls on the running children. The three take turns in rounds (each round in another
//! order), as every comparison here does.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::timing::{median, ms, percentile, us};
use evo_tests::harness::{
    daemon::{Daemon, server},
    servers::fixture_server,
    wait::eventually,
};

const KINDS: [(&str, &str); 3] = [
    ("plain", "unconfined"),
    ("landlock", "confined: files (Landlock), network on"),
    (
        "nonet",
        "confined: files and no network (Landlock + network namespace)",
    ),
];

fn entry(sandbox: Value, idle: bool) -> Value {
    let mut e = fixture_server(&[]);
    if !sandbox.is_null() {
        e["sandbox"] = sandbox;
    }
    if idle {
        e["idle_timeout_s"] = json!(0.3);
    }
    e
}

fn config(idle: bool) -> Value {
    json!({"mcpServers": {
        "plain": entry(Value::Null, idle),
        "landlock": entry(json!({"network": true}), idle),
        "nonet": entry(json!({"network": false}), idle),
    }})
}

pub fn sandbox_benchmarks(quick: bool) {
    let rounds = if quick { 8 } else { 30 };
    println!(
        "# evo sandbox benchmarks ({})",
        if quick { "quick" } else { "full" }
    );

    // Cold starts.
    let d = Daemon::start(&config(true));
    d.wait_ready(&["plain", "landlock", "nonet"]);
    let mut c = d.legacy_session();
    let mut starts: Vec<Vec<Duration>> = vec![Vec::new(); KINDS.len()];
    for round in 0..=rounds {
        // Each round in another order, each start with every child stopped (no other
        // start or stop under way).
        for i in (0..KINDS.len()).map(|k| (k + round) % KINDS.len()) {
            let id = KINDS[i].0;
            eventually(
                "every child stopped when idle",
                Duration::from_secs(30),
                || {
                    let s = d.ctl_json(&["status"]);
                    KINDS
                        .iter()
                        .all(|(id, _)| server(&s, id).is_some_and(|v| v["pid"].is_null()))
                },
            );
            let t = Instant::now();
            let (text, is_error) = c.call_text(&format!("{id}_echo"), json!({"text": "up"}));
            let took = t.elapsed();
            assert_eq!((text.as_str(), is_error), ("up", false), "{id}");
            if round > 0 {
                // Round 0 warms the page cache and evod.
                starts[i].push(took);
            }
        }
    }
    drop(c);
    drop(d);

    // Call latency on running children.
    let d = Daemon::start(&config(false));
    d.wait_ready(&["plain", "landlock", "nonet"]);
    let mut c = d.legacy_session();
    let per_round = if quick { 50 } else { 200 };
    let mut calls: Vec<Vec<Duration>> = vec![Vec::new(); KINDS.len()];
    for round in 0..=rounds {
        for i in (0..KINDS.len()).map(|k| (k + round) % KINDS.len()) {
            let id = KINDS[i].0;
            for n in 0..per_round {
                let t = Instant::now();
                let (text, _) = c.call_text(&format!("{id}_echo"), json!({"text": n.to_string()}));
                let took = t.elapsed();
                assert_eq!(text, n.to_string());
                if round > 0 {
                    calls[i].push(took);
                }
            }
        }
    }

    println!(
        "\n## Cold start: a call that starts a stopped server ({rounds} per kind, alternating)\n"
    );
    println!("| server | median ms | p90 ms | added to unconfined (median) ms |");
    println!("|---|---|---|---|");
    let base = median(&mut starts[0].clone());
    for ((_, name), v) in KINDS.iter().zip(starts.iter_mut()) {
        let m = median(v);
        println!(
            "| {name} | {} | {} | {} |",
            ms(m),
            ms(percentile(v, 0.9)),
            signed_ms(m, base)
        );
    }
    println!(
        "\n## Call latency: echo on a running server ({} calls per kind, alternating)\n",
        per_round * rounds
    );
    println!("| server | median µs | p99 µs |");
    println!("|---|---|---|");
    for ((_, name), v) in KINDS.iter().zip(calls.iter_mut()) {
        v.sort();
        println!(
            "| {name} | {} | {} |",
            us(percentile(v, 0.5)),
            us(percentile(v, 0.99))
        );
    }
}

/// `a - b` in milliseconds with its sign.
fn signed_ms(a: Duration, b: Duration) -> String {
    if a >= b {
        format!("+{}", ms(a - b))
    } else {
        format!("−{}", ms(b - a))
    }
}
