//! Starting children: the start gate (`limits.max_concurrent_starts`), the
//! per-server start deadline (`start_timeout_s`) and how a timeout on a
//! saturated machine is told from a broken server. (A child too slow for the
//! `server/discover` probe: `supervision.rs`.)

use std::time::{Duration, Instant};

use evo_tests::harness::{
    daemon::{Daemon, server},
    locations::{fixture, repo_root, sdk_python},
    servers::fixture_server,
    skipped,
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

fn states(s: &Value) -> Vec<(String, String)> {
    s["servers"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| {
                    let id = v["id"].as_str().unwrap_or_default().to_string();
                    (id, v["state"].as_str().unwrap_or_default().to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn children_wait_their_turn_to_start() {
    // Six children that each take a second to answer initialize, two start
    // slots: the others wait in line, shown as `queued` with their place.
    let servers: serde_json::Map<String, Value> = (1..=6)
        .map(|i| {
            (
                format!("s{i}"),
                fixture_server(&["--delay-start-ms", "1000"]),
            )
        })
        .collect();
    let begun = Instant::now();
    let d = Daemon::start(&json!({
        "mcpServers": servers,
        "limits": {"max_concurrent_starts": 2}
    }));
    let mut saw_queue = None;
    let mut saw_starting_time = false;
    eventually("all six ready", Duration::from_secs(60), || {
        let s = d.ctl_json(&["status"]);
        for v in s["servers"].as_array().into_iter().flatten() {
            if v["state"] == "queued" && saw_queue.is_none() {
                saw_queue = Some(v["queue_position"].clone());
            }
            if v["state"] == "starting" && v["starting_s"].is_u64() {
                saw_starting_time = true;
            }
        }
        states(&s).iter().all(|(_, st)| st == "ready")
    });
    let took = begun.elapsed();
    let queue = saw_queue.expect("some servers were queued");
    assert!(queue.as_u64().is_some_and(|n| n >= 1), "{queue}");
    assert!(
        saw_starting_time,
        "starting servers show how long they have run"
    );
    // Three rounds of one second: had all started together, about one.
    assert!(
        took >= Duration::from_millis(2800),
        "6 starts of 1 s through 2 slots took {took:?}"
    );
    let s = d.ctl_json(&["status"]);
    for v in s["servers"].as_array().unwrap() {
        assert_eq!(v["restarts"], 0, "{v}");
    }
    // The human table shows the line too.
    let (_, out, _) = d.ctl(&["status"]);
    assert!(out.contains("ready"), "{out}");
}

#[test]
fn the_human_status_shows_the_line() {
    let servers: serde_json::Map<String, Value> = (1..=3)
        .map(|i| {
            (
                format!("q{i}"),
                fixture_server(&["--delay-start-ms", "4000"]),
            )
        })
        .collect();
    let d = Daemon::start(&json!({
        "mcpServers": servers,
        "limits": {"max_concurrent_starts": 1}
    }));
    let mut out = String::new();
    eventually(
        "a queued server in the table",
        Duration::from_secs(10),
        || {
            out = d.ctl(&["status"]).1;
            out.contains("queued #1") && out.contains("queued #2")
        },
    );
    assert!(out.contains("starting "), "{out}");
    assert!(
        out.contains("1 starting, 2 queued for a start slot (limits.max_concurrent_starts)"),
        "{out}"
    );
}

#[test]
fn a_start_deadline_is_per_server_and_a_lone_timeout_is_a_crash() {
    let d = Daemon::start(&json!({"mcpServers": {
        "slow": {
            "command": fixture().to_string_lossy(),
            "args": ["--delay-start-ms", "30000"],
            "start_timeout_s": 1
        },
        "fx": fixture_server(&[])
    }}));
    let s = d.wait_status("slow to time out", |s| {
        server(s, "slow").is_some_and(|v| v["restarts"].as_u64() >= Some(1))
    });
    let slow = server(&s, "slow").unwrap();
    let err = slow["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("within 1s (start_timeout_s)"),
        "the error names the deadline and its setting: {slow}"
    );
    assert!(
        !err.contains("other"),
        "alone, it was not excused by others starting: {err}"
    );
    assert_eq!(server(&s, "fx").unwrap()["state"], "ready", "{s}");
    assert!(d.log_text().contains("child is down"));
}

#[test]
fn a_timeout_while_others_start_is_not_a_crash() {
    // Two children slower than their deadline, both starting at once: each
    // times out while the other is starting, so neither is counted as
    // crashing at first; both go back to the end of the line.
    let slow = |_: ()| {
        json!({
            "command": fixture().to_string_lossy(),
            "args": ["--delay-start-ms", "30000"],
            "start_timeout_s": 1
        })
    };
    let d = Daemon::start(&json!({
        "mcpServers": {"a": slow(()), "b": slow(())},
        "limits": {"max_concurrent_starts": 2}
    }));
    let s = d.wait_status("an excused timeout", |s| {
        server(s, "a").is_some_and(|v| {
            v["error"]
                .as_str()
                .is_some_and(|e| e.contains("while another child was starting; starting it again"))
        })
    });
    let a = server(&s, "a").unwrap();
    assert_ne!(a["state"], "failed", "{a}");
    let log = d.log_text();
    assert!(log.contains("not counted as a crash"), "{log}");
    // Excused a few times at most: a server that never answers is still
    // found out, as crashing, in the end.
    d.wait_status("timeouts counted once no longer excused", |s| {
        server(s, "a").is_some_and(|v| v["restarts"].as_u64() >= Some(4))
    });
    assert!(d.log_text().contains("child is down"));
}

#[test]
fn a_modern_server_slower_than_the_probe_is_probed_again_alone() {
    // The official Python SDK's servers answer `server/discover` but never
    // the `initialize` rmcp sends when the probe took over 10 s (a cold or
    // loaded start): such a start used to hang until its deadline and crash
    // in a loop. Once the late answer shows the server is modern, it is
    // started again at once and probed with `server/discover` alone.
    let Some(python) = sdk_python() else {
        skipped("needs tests/interop/.venv with the Python SDK (tests/run creates it)");
        return;
    };
    let script = repo_root().join("tests/fixtures/sdk_server.py");
    let d = Daemon::start(&json!({"mcpServers": {"py": {
        "command": "sh",
        "args": ["-c", "[ -e \"$0.started\" ] || { touch \"$0.started\"; sleep 11; }; exec \"$1\" \"$2\" py",
                 d_marker(), python.to_string_lossy(), script.to_string_lossy()]
    }}}));
    let mut s = Value::Null;
    eventually(
        with_log("py ready after one quick restart", &d.log),
        Duration::from_secs(45),
        || {
            s = d.ctl_json(&["status"]);
            server(&s, "py").is_some_and(|v| v["state"] == "ready")
        },
    );
    let py = server(&s, "py").unwrap();
    assert_eq!(py["restarts"], 1, "{py}");
    let log = d.log_text();
    assert!(log.contains("probing with server/discover alone"), "{log}");
    assert!(
        !log.contains("child is down"),
        "not counted as a crash: {log}"
    );
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("py_echo", json!({"text": "hi"})).0, "hi");
}

/// A path unique to this test run: its first start sleeps, a restart not.
fn d_marker() -> String {
    let dir = std::env::temp_dir().join(format!("evo-probe-{}", std::process::id()));
    let _ = std::fs::remove_file(dir.with_extension("started"));
    dir.to_string_lossy().into_owned()
}
