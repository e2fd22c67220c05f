//! Hot reload: editors' saves (in place and rename-over) apply within about a
//! second as a diff; invalid files keep the running config; activations
//! follow re-prefixed tools; `evoctl reload` reports what changed.

use std::time::{Duration, Instant};

use evo_tests::harness::{
    daemon::{Daemon, server},
    locations::fixture,
    process::gone_within,
    servers::fixture_server,
    wait::eventually,
};
use serde_json::{Value, json};

fn base() -> Value {
    json!({"mcpServers": {
        "keep": fixture_server(&["--name", "keep"]),
        "gone": fixture_server(&["--name", "gone"]),
        "chg": fixture_server(&["--name", "chg"]),
        "pfx": fixture_server(&["--name", "pfx"])
    }})
}

fn pid_of(d: &Daemon, id: &str) -> Value {
    server(&d.ctl_json(&["status"]), id)
        .map(|s| s["pid"].clone())
        .unwrap_or(Value::Null)
}

/// Saves like an editor that writes a temp file and renames it over.
fn save_atomically(path: &std::path::Path, v: &Value) {
    let tmp = path.with_extension("json.tmp~");
    std::fs::write(&tmp, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn save_in_place(path: &std::path::Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn wait_until(d: &Daemon, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    let s = d.wait_status(what, pred);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "{what} took {:?}",
        t.elapsed()
    );
    s
}

#[test]
fn saved_config_applies_as_a_diff_and_activations_follow() {
    let d = Daemon::start(&base());
    d.wait_ready(&["keep", "gone", "chg", "pfx"]);
    let keep_pid = pid_of(&d, "keep");
    let gone_pid = pid_of(&d, "gone").as_u64().unwrap() as u32;
    let chg_pid = pid_of(&d, "chg");
    let pfx_pid = pid_of(&d, "pfx");
    let mut c = d.session(&["--mode", "dynamic"]);
    c.initialize();
    for t in ["pfx_echo", "gone_echo", "keep_echo"] {
        c.call_text(t, json!({"text": "x"}));
    }
    let names = c.tool_names();
    assert!(names.contains(&"pfx_echo".to_string()) && names.contains(&"gone_echo".to_string()));

    let mut cfg = base();
    cfg["mcpServers"].as_object_mut().unwrap().remove("gone");
    cfg["mcpServers"]["chg"]["args"] = json!(["--name", "chg2"]);
    cfg["mcpServers"]["pfx"]["prefix"] = json!("renamed");
    cfg["mcpServers"]["new"] = fixture_server(&["--name", "new"]);
    save_atomically(&d.config, &cfg);
    let s = wait_until(&d, "reload applied", |s| {
        server(s, "new").is_some_and(|v| v["state"] == "ready")
            && server(s, "gone").is_none()
            && server(s, "chg").is_some_and(|v| v["state"] == "ready" && v["pid"] != chg_pid)
    });
    assert_eq!(
        server(&s, "keep").unwrap()["pid"],
        keep_pid,
        "unchanged child untouched"
    );
    assert_eq!(
        server(&s, "pfx").unwrap()["pid"],
        pfx_pid,
        "a prefix change keeps the child"
    );
    assert!(
        gone_within(gone_pid, Duration::from_secs(5)),
        "removed server's child stopped"
    );
    // Activations: the re-prefixed tool is mapped, the removed one dropped.
    let mut names = Vec::new();
    eventually(
        "activations to follow the reload",
        Duration::from_secs(5),
        || {
            names = c.tool_names();
            names.contains(&"renamed_echo".to_string()) && !names.contains(&"gone_echo".to_string())
        },
    );
    assert!(!names.contains(&"pfx_echo".to_string()));
    assert!(names.contains(&"keep_echo".to_string()));
    c.await_list_changed(0);
    assert_eq!(
        c.call_text("renamed_echo", json!({"text": "moved"})).0,
        "moved"
    );
}

#[test]
fn invalid_files_keep_the_running_config_until_fixed() {
    let d = Daemon::start(&base());
    d.wait_ready(&["keep", "gone", "chg", "pfx"]);
    let keep_pid = pid_of(&d, "keep");
    // Bad JSON, written in place.
    save_in_place(&d.config, "{\n  \"mcpServers\": {\n    \"keep\": \n");
    let s = wait_until(&d, "config error reported", |s| s["config"]["ok"] == false);
    let err = s["config"]["error"].as_str().unwrap();
    assert!(err.contains("mcp.config.json:"), "file and line: {err}");
    assert_eq!(
        server(&s, "gone").unwrap()["state"],
        "ready",
        "running config still in force"
    );
    // Fixing the syntax applies the file, and an entry with an unresolvable
    // variable fails alone, as at start: the valid servers apply.
    let mut cfg = base();
    cfg["mcpServers"]["bad"] = json!({
        "command": fixture().to_string_lossy(),
        "env": {"T": "${EVO_TEST_NOT_SET_ANYWHERE}"}
    });
    cfg["mcpServers"]["extra"] = fixture_server(&[]);
    save_atomically(&d.config, &cfg);
    let s = wait_until(&d, "extra applied and bad failed", |s| {
        server(s, "extra").is_some_and(|v| v["state"] == "ready")
            && server(s, "bad").is_some_and(|v| v["state"] == "failed")
    });
    let bad = server(&s, "bad").unwrap()["error"].as_str().unwrap();
    assert!(
        bad.contains("bad") && bad.contains("EVO_TEST_NOT_SET_ANYWHERE") && bad.contains("env.T"),
        "{bad}"
    );
    assert_eq!(s["config"]["ok"], true, "the file itself loads: {s}");
    assert_eq!(server(&s, "keep").unwrap()["pid"], keep_pid, "untouched");
    // `evoctl reload` lists every entry that cannot be used.
    let r = d.ctl_json(&["reload"]);
    let failed = r["failed"].as_array().expect("failed listed").clone();
    assert_eq!(failed.len(), 1, "{r}");
    assert!(
        failed[0]
            .as_str()
            .unwrap()
            .contains("EVO_TEST_NOT_SET_ANYWHERE"),
        "{r}"
    );
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("failed: ") && out.contains("EVO_TEST_NOT_SET_ANYWHERE"),
        "{out}"
    );
    // Fixing the entry applies it.
    let mut cfg = base();
    cfg["mcpServers"]["extra"] = fixture_server(&[]);
    cfg["mcpServers"]["bad"] = fixture_server(&[]);
    save_atomically(&d.config, &cfg);
    let s = wait_until(&d, "fixed entry applied", |s| {
        s["config"]["ok"] == true
            && server(s, "extra").is_some_and(|v| v["state"] == "ready")
            && server(s, "bad").is_some_and(|v| v["state"] == "ready")
    });
    assert_eq!(server(&s, "keep").unwrap()["pid"], keep_pid);
    assert!(d.log_text().contains("keeping the running config"));
}

#[test]
fn evoctl_reload_reports_changes_and_renames_reprefix() {
    let d = Daemon::start(&base());
    d.wait_ready(&["keep", "gone", "chg", "pfx"]);
    let keep_pid = pid_of(&d, "keep");
    // Unchanged: nothing restarts.
    let r = d.ctl_json(&["reload"]);
    assert!(
        r["message"].as_str().unwrap().contains("no server changed"),
        "{r}"
    );
    assert_eq!(pid_of(&d, "keep"), keep_pid);
    // A renamed id with the same command re-prefixes its tools.
    let mut cfg = base();
    let gone = cfg["mcpServers"]
        .as_object_mut()
        .unwrap()
        .remove("gone")
        .unwrap();
    cfg["mcpServers"]["went"] = gone;
    // Write without the watcher racing us: same content the watcher would see.
    std::fs::write(&d.config, serde_json::to_vec(&cfg).unwrap()).unwrap();
    let r = d.ctl_json(&["reload"]);
    let text = r.to_string();
    assert!(
        text.contains("went (was gone)") || server(&d.ctl_json(&["status"]), "went").is_some(),
        "{r}"
    );
    let s = wait_until(&d, "renamed server listed", |s| {
        server(s, "went").is_some_and(|v| v["tools"].as_u64() == Some(14))
    });
    assert!(server(&s, "gone").is_none());
    let l = d.ctl_json(&["list", "--all"]);
    let names: Vec<&str> = l["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"went_echo") && !names.iter().any(|n| n.starts_with("gone_")));
    // A broken file is a refused reload (exit 1) naming the problem.
    std::fs::write(&d.config, "{ nope").unwrap();
    let (code, _, err) = d.ctl(&["reload"]);
    assert_eq!(code, 1);
    assert!(err.contains("mcp.config.json"), "{err}");
}

/// A reload's summary says what happened: servers it restarted that fail
/// again are named as failed (exit 1), and the config's warnings are
/// repeated, not left to the log.
#[test]
fn reload_says_which_restarted_servers_failed_and_repeats_warnings() {
    let mut cfg = json!({"mcpServers": {
        "fx": fixture_server(&[]),
        "dies": fixture_server(&["--exit-at-start"]),
    }});
    cfg["bogus"] = json!(true);
    let d = Daemon::start(&cfg);
    d.wait_status("fx ready, dies failed", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready")
            && server(s, "dies").is_some_and(|v| v["state"] == "failed")
    });
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(code, 1, "a restarted server failed again: {out}{err}");
    assert!(out.contains("restarted: dies"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("dies: failed: ") && l.contains("exited with status 1")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("warning: ") && l.contains("unknown top-level key 'bogus'")),
        "{out}"
    );
    let j = d.ctl_json(&["reload"]);
    assert!(
        j["warnings"].as_array().is_some_and(|w| w.len() == 1),
        "{j}"
    );
}
