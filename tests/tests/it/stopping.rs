//! Every way a child stops ends its whole process tree, even when the child
//! ignores SIGTERM and outlives its stdin: refresh, a reload that restarts or
//! removes it, idle stop, and shutdown (SIGTERM, a grace period, SIGKILL to
//! the process group, reaped).

use std::time::Duration;

use crate::common::*;
use serde_json::{Value, json};

/// A server whose process group leader ignores SIGTERM and, once the
/// fixture under it exits (stdin closed), becomes a `sleep` that also
/// ignores it: only SIGKILL to the group ends it.
fn stubborn_server(extra: Value) -> Value {
    let mut server = json!({
        "command": "sh",
        "args": ["-c", "trap '' TERM; \"$0\"; exec sleep 600", fixture().to_string_lossy()],
    });
    if let (Some(s), Some(e)) = (server.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    server
}

/// Whether any live (non-zombie) process is in process group `pgid`.
fn group_alive(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // After the parenthesised command name: state, ppid, pgrp, …
        let mut fields = stat.rsplit(')').next().unwrap_or("").split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<u32>().ok());
        pgrp == Some(pgid) && state != Some("Z") && state != Some("X")
    })
}

fn pid_of(d: &Daemon, id: &str) -> u32 {
    let status = d.wait_status("a pid", |s| {
        server(s, id).is_some_and(|v| v["state"] == "ready" && v["pid"].as_u64().is_some())
    });
    server(&status, id).unwrap()["pid"].as_u64().unwrap() as u32
}

fn assert_group_ends(pgid: u32, path: &str) {
    eventually(
        format!("{path}: the process group {pgid} of a child that ignores SIGTERM to end"),
        Duration::from_secs(15),
        || !group_alive(pgid),
    );
}

fn write_config(d: &Daemon, config: &Value) {
    let tmp = d.config.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(config).unwrap()).unwrap();
    std::fs::rename(&tmp, &d.config).unwrap();
}

#[test]
fn refresh_ends_the_old_process_tree() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": stubborn_server(json!({}))}}));
    let old = pid_of(&d, "fx");
    assert!(group_alive(old));
    let (code, _, err) = d.ctl(&["refresh", "fx"]);
    assert_eq!(code, 0, "{err}");
    let status = d.wait_status("a new child", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready" && v["pid"] != json!(old))
    });
    assert_group_ends(old, "refresh");
    let new = server(&status, "fx").unwrap()["pid"].as_u64().unwrap() as u32;
    assert!(group_alive(new), "the new child runs");
}

#[test]
fn reload_restart_and_remove_end_the_old_process_trees() {
    let config = json!({"mcpServers": {
        "a": stubborn_server(json!({})),
        "b": stubborn_server(json!({})),
    }});
    let d = Daemon::start(&config);
    let (a, b) = (pid_of(&d, "a"), pid_of(&d, "b"));
    // `a` changes (restarted), `b` goes (removed).
    write_config(
        &d,
        &json!({"mcpServers": {"a": stubborn_server(json!({"env": {"X": "1"}}))}}),
    );
    d.wait_status("a restarted, b removed", |s| {
        server(s, "b").is_none()
            && server(s, "a").is_some_and(|v| v["state"] == "ready" && v["pid"] != json!(a))
    });
    assert_group_ends(a, "reload restart");
    assert_group_ends(b, "reload remove");
}

#[test]
fn idle_stop_ends_the_process_tree() {
    let d = Daemon::start(
        &json!({"mcpServers": {"fx": stubborn_server(json!({"idle_timeout_s": 0.5}))}}),
    );
    let pid = pid_of(&d, "fx");
    d.wait_status("idle", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "idle")
    });
    assert_group_ends(pid, "idle stop");
    // The next call starts it again.
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("fx_echo", json!({"text": "again"})).0, "again");
}

#[test]
fn shutdown_ends_the_process_tree() {
    let mut d = Daemon::start(&json!({"mcpServers": {"fx": stubborn_server(json!({}))}}));
    let pid = pid_of(&d, "fx");
    let status = d.stop();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert_group_ends(pid, "shutdown");
}
