//! Sandboxed servers: the fixture's `probe` tool, confined by `sandbox` (and
//! `sandbox.default`), tries to read a file outside `read`, write outside
//! `write`, read a planted `~/.ssh/id_ed25519`, connect to a loopback port this
//! test listens on, and have a child (`sh -c 'cat FILE'`) read a file: each is
//! refused unless the entry allows it, and allowed when it does. A sandbox that
//! cannot be set up fails its server alone.

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::thread;

use evo_tests::harness::daemon::{Daemon, server};
use evo_tests::harness::process::TempDir;
use evo_tests::harness::servers::fixture_server;
use serde_json::{Value, json};

/// A loopback port that answers each connection with `hello` (until the test ends).
fn listening_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(b"hello");
        }
    });
    port
}

/// The probe's answer, by attempt.
fn probe(d: &Daemon, tool: &str, args: Value) -> Value {
    let mut c = d.legacy_session();
    let (text, is_error) = c.call_text(tool, args);
    assert!(!is_error, "{tool}: {text}\nlog:\n{}", d.log_text());
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool}: {e}: {text}"))
}

fn with_sandbox(sandbox: Value) -> Value {
    let mut entry = fixture_server(&["--probe"]);
    entry["sandbox"] = sandbox;
    entry
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn a_sandboxed_server_reaches_only_what_its_entry_allows() {
    let files = TempDir::new("sandbox");
    let root = files.path();
    let home = root.join("home");
    for dir in ["home/.ssh", "allowed", "outside", "writable"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    std::fs::write(root.join("allowed/a.txt"), "allowed text").unwrap();
    std::fs::write(root.join("outside/o.txt"), "outside text").unwrap();
    let port = listening_port();

    let d = Daemon::start_with(
        &json!({
            // `boxed` takes the default; `open` allows everything the probe tries;
            // `free` turns the default off.
            "sandbox": {"default": {"read": ["${SANDBOX_ROOT}/allowed"], "write": [path(&root.join("writable"))]}},
            "mcpServers": {
                "boxed": fixture_server(&["--probe"]),
                "open": with_sandbox(json!({
                    "read": ["~/.ssh", path(&root.join("outside"))],
                    "write": ["${SANDBOX_ROOT}/outside"],
                    "network": true
                })),
                "free": with_sandbox(json!("off")),
            }
        }),
        &[],
        &[("HOME", &path(&home)), ("SANDBOX_ROOT", &path(root))],
    );
    d.wait_ready(&["boxed", "open", "free"]);

    let key = path(&home.join(".ssh/id_ed25519"));
    let outside = path(&root.join("outside/o.txt"));
    let everything = json!({
        "read": key,
        "write": path(&root.join("outside/new.txt")),
        "connect": port,
        "spawn_read": outside,
    });
    let refused = probe(&d, "boxed_probe", everything.clone());
    for attempt in ["read", "write", "connect", "spawn_read"] {
        let said = refused[attempt].as_str().unwrap_or_default();
        assert!(said.starts_with("error:"), "boxed {attempt}: {said}");
    }
    // /proc is readable, but not another process's environment: evod's, another server's.
    let status = d.ctl_json(&["status"]);
    let free_pid = server(&status, "free").and_then(|v| v["pid"].as_u64());
    let environs = probe(
        &d,
        "boxed_probe",
        json!({
            "read": format!("/proc/{}/environ", d.pid()),
            "spawn_read": format!("/proc/{}/environ", free_pid.unwrap_or_default()),
        }),
    );
    assert!(
        environs["read"] == "error: Permission denied (os error 13)"
            && environs["spawn_read"]
                .as_str()
                .is_some_and(|s| s.contains("Permission denied"))
            && !environs.to_string().contains("SANDBOX_ROOT"),
        "{environs}"
    );
    assert!(
        refused["read"]
            .as_str()
            .is_some_and(|s| s.contains("Permission denied")),
        "{refused}"
    );
    assert!(!root.join("outside/new.txt").exists());

    let inside = probe(
        &d,
        "boxed_probe",
        json!({
            "read": path(&root.join("allowed/a.txt")),
            "write": path(&root.join("writable/w.txt")),
            "spawn_read": path(&root.join("allowed/a.txt")),
        }),
    );
    assert_eq!(
        inside,
        json!({"read": "ok: allowed text", "write": "ok: written", "spawn_read": "ok: allowed text"})
    );

    for tool in ["open_probe", "free_probe"] {
        let allowed = probe(&d, tool, everything.clone());
        assert_eq!(
            allowed,
            json!({"read": "ok: PRIVATE KEY", "write": "ok: written", "connect": "ok: hello",
                   "spawn_read": "ok: outside text"}),
            "{tool}"
        );
    }

    // Status shows each sandbox, and the refusals as the process told them.
    let status = d.ctl_json(&["status"]);
    let boxed = server(&status, "boxed").expect("boxed in status");
    assert_eq!(
        boxed["sandbox"],
        json!({"read": [path(&root.join("allowed"))], "write": [path(&root.join("writable"))],
               "network": false, "enforced": true})
    );
    assert_eq!(
        server(&status, "open").map(|s| s["sandbox"]["network"].clone()),
        Some(json!(true))
    );
    assert_eq!(
        server(&status, "free").map(|s| s["sandbox"].clone()),
        Some(Value::Null)
    );
    let tail = boxed["stderr_tail"].to_string();
    assert!(
        tail.contains(&format!("probe read {key}: Permission denied")),
        "{tail}"
    );
    let (_, text, _) = d.ctl(&["status"]);
    assert!(
        text.contains(&format!(
            "boxed: read {}; write {}; network off",
            path(&root.join("allowed")),
            path(&root.join("writable"))
        )),
        "{text}"
    );
}

#[test]
fn a_sandbox_that_cannot_be_set_up_fails_its_server_alone() {
    let missing = TempDir::new("sandbox-missing");
    let nowhere = path(&missing.path().join("not-made"));
    let d = Daemon::start(&json!({
        "mcpServers": {
            "bad": with_sandbox(json!({"read": [nowhere]})),
            "typo": with_sandbox(json!({"reads": ["/"]})),
            "good": fixture_server(&[]),
        }
    }));
    d.wait_ready(&["good"]);
    let status = d.wait_status("bad failed", |s| {
        server(s, "bad").is_some_and(|v| v["state"] == "failed")
    });
    let error = server(&status, "bad")
        .and_then(|v| v["error"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains(&format!("sandbox.read[0]: {nowhere} does not exist"))
            && error.contains("create it, or remove it"),
        "{error}"
    );
    assert_eq!(
        server(&status, "bad").and_then(|v| v["pid"].as_u64()),
        None,
        "never started unconfined"
    );
    let typo = server(&status, "typo").expect("typo in status");
    assert_eq!(typo["state"], "failed");
    assert!(
        typo["error"]
            .as_str()
            .is_some_and(|e| e.contains("sandbox.reads: unknown key")),
        "{typo}"
    );
    let mut c = d.legacy_session();
    let (text, is_error) = c.call_text("good_echo", json!({"text": "still serving"}));
    assert_eq!((text.as_str(), is_error), ("still serving", false));
}
