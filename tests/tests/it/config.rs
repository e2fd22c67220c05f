//! The config file as a person meets it: the env file beside it (read at
//! start and on every reload, seen by children, never shown), warnings with
//! `file:line` in `evoctl status`, and a failed child's note about the
//! variables its config refers to and evod lacks.

use std::path::Path;
use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, server},
    locations::fixture,
    mcp::{McpClient, text_of},
    process::TempDir,
    servers::fixture_server,
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

/// Writes an env file as a person should: readable by them alone.
fn write_env(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, text).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Starts evod on `config` with `env` (when given; `@DIR@` in it is the
/// daemon's directory) beside it before it starts.
fn start_with_env(config: &Value, env: Option<&str>) -> Daemon {
    let dir = TempDir::new("cfg");
    let config_path = dir.path().join("mcp.config.json");
    std::fs::write(&config_path, serde_json::to_vec_pretty(config).unwrap()).unwrap();
    if let Some(text) = env {
        let text = text.replace("@DIR@", &dir.path().display().to_string());
        write_env(&dir.path().join("env"), &text);
    }
    Daemon::start_raw(dir, config_path, &[], &[])
}

fn env_of(c: &mut McpClient, name: &str) -> String {
    c.call_text("fx_env", json!({"name": name})).0
}

#[test]
fn env_file_reaches_children_and_is_read_again_on_reload() {
    let mut fx = fixture_server(&[]);
    fx["cwd"] = json!("${EVO_IT_DIR}");
    let config = json!({"mcpServers": {"fx": fx}});
    let d = start_with_env(
        &config,
        Some("# evo\nexport EVO_IT_SECRET='s3cret-one'\nEVO_IT_DIR=\"@DIR@\"\nEVO_IT_GONE=1\n"),
    );
    let s = d.wait_ready(&["fx"]);
    assert_eq!(s["config"]["ok"], true);
    assert_eq!(s["config"]["warnings"], json!([]), "{s:#}");
    let mut c = d.legacy_session();
    // The child sees the file's variables, and `${VAR}` in its config
    // expanded from the file (without it, `${EVO_IT_DIR}` is unset).
    assert_eq!(env_of(&mut c, "EVO_IT_SECRET"), "s3cret-one");
    assert_eq!(env_of(&mut c, "EVO_IT_GONE"), "1");
    assert_eq!(
        c.call_text("fx_cwd", json!({})).0,
        d.dir.path().display().to_string()
    );
    let pid = server(&s, "fx").unwrap()["pid"].clone();

    // Editing the env file applies: its children restart with the new value.
    let dir = d.dir.path().display().to_string();
    write_env(
        &d.dir.path().join("env"),
        &format!("EVO_IT_SECRET=s3cret-two\nEVO_IT_DIR={dir}\n"),
    );
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(code, 0, "{out}{err}");
    let s = d.wait_status("fx restarted with the new env", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready" && v["pid"] != pid)
    });
    let mut c = d.legacy_session();
    assert_eq!(env_of(&mut c, "EVO_IT_SECRET"), "s3cret-two");
    // A variable gone from the file is gone for the child too (evod's own
    // environment never had it).
    assert_eq!(env_of(&mut c, "EVO_IT_GONE"), "<unset>");

    // Values are never shown: not in status, not in the log.
    let (_, human, _) = d.ctl(&["status"]);
    for text in [s.to_string(), human, d.log_text()] {
        assert!(
            !text.contains("s3cret-one") && !text.contains("s3cret-two"),
            "a value from the env file leaked:\n{text}"
        );
    }
    assert!(d.log_text().contains("env file read"), "{}", d.log_text());
}

#[test]
fn without_an_env_file_the_config_is_ok_and_children_keep_evods_environment() {
    let d = start_with_env(&json!({"mcpServers": {"fx": fixture_server(&[])}}), None);
    let s = d.wait_ready(&["fx"]);
    assert_eq!(s["config"]["ok"], true);
    assert_eq!(s["config"]["error"], Value::Null);
    assert_eq!(s["config"]["warnings"], json!([]));
    let (code, out, _) = d.ctl(&["status"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!("config {}: ok\n", d.config.display())),
        "{out}"
    );
    let mut c = d.legacy_session();
    // Inherited from the test through evod.
    assert_eq!(env_of(&mut c, "EVO_LOG"), "info,evo_daemon=debug");
}

const WARNED: &str = r#"{
  "mcpServers": {
    "fx": {
      "command": "FIXTURE",
      "timeout": 5
    }
  },
  "bogus": true
}
"#;

#[test]
fn config_warnings_show_with_file_and_line_until_fixed() {
    let dir = TempDir::new("cfg");
    let config = dir.path().join("mcp.config.json");
    let fixture = fixture().to_string_lossy().into_owned();
    std::fs::write(&config, WARNED.replace("FIXTURE", &fixture)).unwrap();
    // A malformed env file line is a warning of its own, placed in that file.
    let env = dir.path().join("env");
    write_env(&env, "A=1\nnot an assignment\n");
    let d = Daemon::start_raw(dir, config.clone(), &[], &[]);
    let s = d.wait_ready(&["fx"]);
    let path = config.display().to_string();
    assert_eq!(s["config"]["ok"], true, "{s:#}");
    assert_eq!(
        s["config"]["warnings"],
        json!([
            {"file": env.display().to_string(), "line": 2,
             "message": "expected KEY=VALUE (no '=' found); line skipped"},
            {"file": path, "line": 8, "message": "unknown top-level key 'bogus' ignored"},
            {"file": path, "line": 5,
             "message": "server 'fx': unknown key 'timeout' ignored; did you mean 'timeout_s'?"},
        ]),
        "{s:#}"
    );
    let (_, out, _) = d.ctl(&["status"]);
    assert!(
        out.contains(&format!(
            "config {path}: ok, 3 warnings\n  {}:2: expected KEY=VALUE (no '=' found); line skipped\n  \
             {path}:8: unknown top-level key 'bogus' ignored\n  \
             {path}:5: server 'fx': unknown key 'timeout' ignored; did you mean 'timeout_s'?\n",
            env.display()
        )),
        "{out}"
    );
    // Logged once for the load.
    let log = d.log_text();
    assert_eq!(
        log.matches(&format!("{path}:5: server 'fx': unknown key 'timeout'"))
            .count(),
        1,
        "{log}"
    );

    // Fixing both files clears them; the reload's own log says nothing more.
    write_env(&env, "A=1\n");
    std::fs::write(
        &config,
        WARNED
            .replace("FIXTURE", &fixture)
            .replace("\"timeout\"", "\"timeout_s\"")
            .replace(",\n  \"bogus\": true", ""),
    )
    .unwrap();
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(code, 0, "{out}{err}");
    let s = d.wait_status("warnings cleared", |s| s["config"]["warnings"] == json!([]));
    assert_eq!(s["config"]["ok"], true);
    let (_, out, _) = d.ctl(&["status"]);
    assert!(out.contains(&format!("config {path}: ok\n")), "{out}");
    assert_eq!(
        d.log_text()
            .matches(&format!("{path}:5: server 'fx': unknown key 'timeout'"))
            .count(),
        1
    );
}

#[test]
fn a_failed_child_names_the_variables_its_config_lacks_until_the_env_file_sets_them() {
    let mut broken = fixture_server(&["--exit-at-start"]);
    broken["env"] = json!({"SSL_CERT_FILE": "${EVO_IT_CERT:-}"});
    let config = json!({"mcpServers": {
        "broken": broken,
        "plain": fixture_server(&["--exit-at-start"]),
    }});
    let d = start_with_env(&config, None);
    let env = d.dir.path().join("env");
    let note = format!(
        "note: EVO_IT_CERT (referenced by this server's config in env.SSL_CERT_FILE) is not set \
         in evod's environment; if the server needs it, set it in {} and run `evoctl reload`",
        env.display()
    );
    let s = d.wait_status("broken to fail with the note", |s| {
        server(s, "broken").is_some_and(|v| v["error"].as_str().is_some_and(|e| e.ends_with(&note)))
            && server(s, "plain").is_some_and(|v| v["error"].is_string())
    });
    let plain = server(&s, "plain").unwrap()["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        !plain.contains("note:"),
        "a server that refers to nothing gets no note: {plain}"
    );
    let (_, out, _) = d.ctl(&["status"]);
    assert!(out.contains("note: EVO_IT_CERT"), "{out}");

    // Set in the env file, the variable is no longer missing: the child (still
    // broken) restarts with it and its error carries no note.
    // The reload says it (exit 1, and which restarted server failed again).
    write_env(&env, "EVO_IT_CERT=/etc/ssl/certs/ca.pem\n");
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("broken: failed: "), "{out}");
    eventually(
        with_log("broken to fail without the note", &d.log),
        Duration::from_secs(30),
        || {
            let s = d.ctl_json(&["status"]);
            server(&s, "broken").is_some_and(|v| {
                v["error"]
                    .as_str()
                    .is_some_and(|e| !e.is_empty() && !e.contains("note:"))
            })
        },
    );
}

/// A config that is not valid JSON is not invisible from the client: what
/// the session's agent sees (the instructions, an empty search, an unknown
/// tool) says the config could not be read, where, and that `evoctl status`
/// has the details; fixing the file clears it.
#[test]
fn an_unreadable_config_is_told_to_the_sessions_agent() {
    let dir = TempDir::new("cfg");
    let config = dir.path().join("mcp.config.json");
    std::fs::write(&config, "{\n  \"mcpServers\": {\n    \"fx\": \n").unwrap();
    let d = Daemon::start_raw(dir, config.clone(), &[], &[]);
    d.wait_status("config error reported", |s| s["config"]["ok"] == false);
    let path = config.display().to_string();
    let told = |text: &str, what: &str| {
        assert!(
            text.contains("could not read its config")
                && text.contains(&path)
                && text.contains("evoctl status"),
            "{what}: {text}"
        );
    };
    let mut c = d.session(&["--mode", "dynamic"]);
    let init = c.initialize();
    told(
        init["result"]["instructions"].as_str().unwrap_or_default(),
        "instructions",
    );
    let (text, _) = c.call_text("discover_tools", json!({"query": "echo some text"}));
    told(&text, "an empty discover_tools");
    let (text, is_error) = c.call_text("call_tool", json!({"name": "fx_echo", "arguments": {}}));
    assert!(is_error, "{text}");
    told(&text, "an unknown tool");
    let r = c.call("fx_echo", json!({"text": "x"}));
    let (text, _) = text_of(&r);
    told(&text, "an unknown tool called by name");
    drop(c);
    // Fixed: nothing more is said of it.
    std::fs::write(
        &config,
        serde_json::to_vec(&json!({"mcpServers": {"fx": fixture_server(&[])}})).unwrap(),
    )
    .unwrap();
    d.wait_ready(&["fx"]);
    let mut c = d.session(&["--mode", "dynamic"]);
    let init = c.initialize();
    let text = init["result"]["instructions"].as_str().unwrap_or_default();
    assert!(!text.contains("could not read"), "{text}");
}
