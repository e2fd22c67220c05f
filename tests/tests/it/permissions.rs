//! Permissions (EVOKORE-MCP's permissions.yml plus globs) and human approval,
//! through real processes.

use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, server},
    instances::approval_id,
    mcp::NATIVE_TOOLS,
    process::TempDir,
    servers::{fixture_server, raw_server},
    wait::{eventually, with_log},
};
use serde_json::json;

fn start(perms: &str, env: &[(&str, &str)]) -> Daemon {
    let dir = TempDir::new("perm");
    let cfg = dir.path().join("mcp.config.json");
    std::fs::write(
        &cfg,
        serde_json::to_vec(&json!({"mcpServers": {"fx": fixture_server(&[])}})).unwrap(),
    )
    .unwrap();
    if !perms.is_empty() {
        std::fs::write(dir.path().join("permissions.yml"), perms).unwrap();
    }
    let d = Daemon::start_raw(dir, cfg, &[], env);
    d.wait_status("fx listed", |s| {
        server(s, "fx").is_some_and(|v| v["tools"].as_u64() > Some(0) || v["state"] == "ready")
    });
    d
}

fn permissions_path(d: &Daemon) -> std::path::PathBuf {
    d.config.parent().unwrap().join("permissions.yml")
}

#[test]
fn denied_tools_are_invisible_and_refused_with_the_rule() {
    let d = start("rules:\n  \"fx_*\": deny\n  fx_echo: allow\n", &[]);
    let mut c = d.legacy_session();
    let names = c.tool_names();
    assert!(
        names.contains(&"fx_echo".to_string()),
        "exact beats glob: {names:?}"
    );
    assert!(!names.contains(&"fx_add".to_string()), "{names:?}");
    let (text, e) = c.call_text("fx_add", json!({"a": 1, "b": 2}));
    assert!(
        e && text.contains("denied") && text.contains("fx_*"),
        "{text}"
    );
    let (text, e) = c.call_text(
        "call_tool",
        json!({"name": "fx_add", "arguments": {"a": 1, "b": 2}}),
    );
    assert!(e && text.contains("denied"), "{text}");
    // describe_* behave as if it did not exist.
    let (text, e) = c.call_text("describe_tool", json!({"name": "fx_add"}));
    assert!(e && !text.contains("Input schema"), "{text}");
    let (text, _) = c.call_text("describe_capability", json!({"domain": "fx"}));
    assert!(!text.contains("fx_add"), "{text}");
    let r = d.ctl_json(&["search", "add", "two", "numbers"]);
    assert!(
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["name"] != "fx_add"),
        "{r}"
    );
    let mut dy = d.session(&["--mode", "dynamic"]);
    let init = dy.initialize();
    assert!(
        !init["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("fx_add")
    );
    let (code, _, err) = d.ctl(&["activate", "fx_add"]);
    assert_eq!(code, 1);
    assert!(err.contains("denied"), "{err}");
    assert_eq!(c.call_text("fx_echo", json!({"text": "ok"})).0, "ok");
}

#[test]
fn roles_switch_by_reload_and_env() {
    let file = "active_role: readonly\nroles:\n  readonly:\n    default_permission: deny\n    overrides:\n      \"fx_e*\": allow\n  developer:\n    default_permission: allow\n";
    let d = start(file, &[]);
    let mut c = d.legacy_session();
    let names = c.tool_names();
    assert!(names.contains(&"fx_echo".to_string()) && names.contains(&"fx_env".to_string()));
    assert!(!names.contains(&"fx_add".to_string()));
    // Switch roles by editing the file: applies within about a second.
    std::fs::write(
        permissions_path(&d),
        file.replace("active_role: readonly", "active_role: developer"),
    )
    .unwrap();
    eventually(
        with_log("the role switch to apply", &d.log),
        Duration::from_secs(10),
        || c.tool_names().contains(&"fx_add".to_string()),
    );
    c.await_list_changed(0);
    drop(c);
    drop(d);
    // EVO_ROLE overrides active_role.
    let d = start(file, &[("EVO_ROLE", "developer")]);
    let mut c = d.legacy_session();
    assert!(c.tool_names().contains(&"fx_add".to_string()));
}

#[test]
fn invalid_permissions_keep_the_rules_in_force() {
    let d = start("rules:\n  fx_add: deny\n", &[]);
    std::fs::write(permissions_path(&d), "rules:\n  fx_add: perhaps\n").unwrap();
    let s = d.wait_status("permissions error", |s| s["permissions"]["ok"] == false);
    let err = s["permissions"]["error"].as_str().unwrap();
    assert!(
        err.contains("perhaps") && err.contains("permissions.yml"),
        "{err}"
    );
    let mut c = d.legacy_session();
    assert!(
        !c.tool_names().contains(&"fx_add".to_string()),
        "the last good rules stay"
    );
    std::fs::write(permissions_path(&d), "rules:\n  \"fx/*\": deny\n").unwrap();
    let s = d.wait_status("pattern error", |s| {
        s["permissions"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("fx/*"))
    });
    assert_eq!(s["permissions"]["ok"], false);
}

/// Starting with a file evod cannot use fails closed: nothing was in force,
/// and allowing everything would ignore the file's own denials.
#[test]
fn an_unusable_file_at_start_denies_until_fixed() {
    for (file, env, says) in [
        (
            "rules:\n  fx_add: deny\n  fx_echo: maybe\n",
            &[][..],
            "maybe",
        ),
        ("rules: [unclosed\n", &[][..], "permissions.yml"),
        (
            "rules:\n  fx_add: deny\n",
            &[("EVO_ROLE", "nope")][..],
            "nope",
        ),
    ] {
        let d = start(file, env);
        let s = d.ctl_json(&["status"]);
        assert_eq!(s["permissions"]["ok"], false, "{file}");
        let err = s["permissions"]["error"].as_str().unwrap();
        assert!(err.contains(says), "{err}");
        let mut c = d.legacy_session();
        assert_eq!(c.tool_names(), NATIVE_TOOLS.to_vec(), "{file}");
        let (text, is_error) = c.call_text("fx_echo", json!({"text": "x"}));
        assert!(is_error && text.contains("unusable"), "{text}");
        // Fixing the file applies it.
        let fixed = "roles:\n  nope:\n    default_permission: allow\nrules:\n  fx_add: deny\n";
        std::fs::write(permissions_path(&d), fixed).unwrap();
        eventually("the fixed file to apply", Duration::from_secs(10), || {
            c.tool_names().contains(&"fx_echo".to_string())
        });
        assert!(!c.tool_names().contains(&"fx_add".to_string()));
    }
}

#[test]
fn default_deny_without_a_file() {
    let d = start("", &[("EVO_DEFAULT_DENY", "true")]);
    let mut c = d.legacy_session();
    assert_eq!(c.tool_names(), NATIVE_TOOLS.to_vec());
}

#[test]
fn held_calls_pass_once_after_evoctl_approve() {
    let d = start("rules:\n  fx_echo: require_approval\n", &[]);
    let mut c = d.legacy_session();
    let (text, e) = c.call_text("fx_echo", json!({"text": "guarded"}));
    assert!(e && text.contains("evoctl approve"), "{text}");
    let id = approval_id(&text);
    let list = d.ctl_json(&["approvals"]);
    let pending = list["approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["id"], id.as_str());
    assert_eq!(pending[0]["tool"], "fx_echo");
    // Without --json: a table a person reads, one row per held call.
    let (code, table, err) = d.ctl(&["approvals"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        serde_json::from_str::<serde_json::Value>(&table).is_err(),
        "{table}"
    );
    let header = table.lines().next().unwrap_or_default();
    assert!(
        ["ID", "TOOL", "AGE", "ARGUMENTS"]
            .iter()
            .all(|col| header.contains(col)),
        "{table}"
    );
    let row = table.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with(id.as_str()) && row.contains("fx_echo") && row.contains("guarded"),
        "{table}"
    );
    // Asking again gives the same id; other arguments another one.
    let (again, _) = c.call_text("fx_echo", json!({"text": "guarded"}));
    assert!(again.contains(&id));
    let (code, out, err) = d.ctl(&["approve", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("approved"));
    // The identical call passes exactly once, from any session.
    let mut other = d.legacy_session();
    assert_eq!(
        other.call_text("fx_echo", json!({"text": "guarded"})),
        ("guarded".into(), false)
    );
    let (text, e) = c.call_text("fx_echo", json!({"text": "guarded"}));
    assert!(
        e && text.contains("evoctl approve") && !text.contains(&format!("approve {id}`")),
        "{text}"
    );
    // Deny: the identical call is refused.
    let id2 = approval_id(&text);
    let (code, _, _) = d.ctl(&["deny", &id2]);
    assert_eq!(code, 0);
    let (text, e) = c.call_text("fx_echo", json!({"text": "guarded"}));
    assert!(e && text.contains("denied"), "{text}");
    // Unknown or used ids are clear errors.
    let (code, _, err) = d.ctl(&["approve", "ap999"]);
    assert_eq!(code, 1);
    assert!(err.contains("ap999") && err.contains("expired"), "{err}");
    let (code, _, _) = d.ctl(&["approve", &id]);
    assert_eq!(code, 1);
    // Nothing held: says so, in words.
    let (code, out, _) = d.ctl(&["approvals"]);
    assert_eq!((code, out.trim()), (0, "no calls waiting for approval"));
    assert_eq!(d.ctl_json(&["approvals"]), json!({"approvals": []}));
}

#[test]
fn rules_by_annotation_follow_what_each_tool_claims() {
    let dir = TempDir::new("annot");
    let raw = raw_server(
        &dir,
        &json!([
            {"name": "reader", "inputSchema": {"type": "object"},
             "annotations": {"readOnlyHint": true}},
            {"name": "writer", "inputSchema": {"type": "object"},
             "annotations": {"readOnlyHint": false, "destructiveHint": true}},
            {"name": "silent", "inputSchema": {"type": "object"}},
            {"name": "careful", "inputSchema": {"type": "object"},
             "annotations": {"destructiveHint": false, "title": "Careful"}},
            {"name": "liar", "inputSchema": {"type": "object"},
             "annotations": {"readOnlyHint": "yes"}}
        ]),
    );
    let cfg = dir.path().join("mcp.config.json");
    std::fs::write(&cfg, json!({"mcpServers": {"raw": raw}}).to_string()).unwrap();
    std::fs::write(
        dir.path().join("permissions.yml"),
        "active_role: agent\nroles:\n  agent:\n    default_permission: deny\n    overrides:\n      \"@read_only\": allow\n      \"@destructive\": require_approval\n",
    )
    .unwrap();
    let d = Daemon::start_raw(dir, cfg, &[], &[]);
    d.wait_ready(&["raw"]);

    let listed = d.ctl_json(&["list", "--all"]);
    let of = |name: &str| {
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| (t["permission"].clone(), t["rule"].clone()))
    };
    let rule = |r: &str| json!(format!("role 'agent' override '{r}'"));
    assert_eq!(of("raw_reader"), Some((json!("allow"), rule("@read_only"))));
    assert_eq!(
        of("raw_writer"),
        Some((json!("require_approval"), rule("@destructive")))
    );
    // Saying nothing counts as destructive; so does a hint of the wrong
    // type, which is ignored with a warning.
    assert_eq!(
        of("raw_silent"),
        Some((json!("require_approval"), rule("@destructive")))
    );
    assert_eq!(
        of("raw_liar"),
        Some((json!("require_approval"), rule("@destructive")))
    );
    // Claims neither: the role's default denies it, so it is not listed.
    assert_eq!(of("raw_careful"), None, "{listed}");
    assert!(
        d.log_text()
            .contains("annotation of the wrong type ignored"),
        "{}",
        d.log_text()
    );

    // Status names the servers whose own claims the rules rely on.
    let s = d.ctl_json(&["status"]);
    let relied = s["annotations_relied_on"].as_array().unwrap();
    assert!(
        relied.contains(&json!({"server": "raw", "rule": "@read_only", "tools": 1}))
            && relied.contains(&json!({"server": "raw", "rule": "@destructive", "tools": 3})),
        "{s}"
    );
    let (_, out, _) = d.ctl(&["status"]);
    assert!(out.contains("raw (@destructive: 3 tools)"), "{out}");

    // Through a session: the reader runs, the writer waits for a person,
    // the careful one is refused.
    let mut c = d.legacy_session();
    assert_eq!(
        c.call_text("raw_reader", json!({})),
        ("reader".to_string(), false)
    );
    let (text, e) = c.call_text("raw_writer", json!({}));
    assert!(e && text.contains("evoctl approve "), "{text}");
    let id = approval_id(&text);
    let (code, out, err) = d.ctl(&["approve", &id]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        c.call_text("raw_writer", json!({})),
        ("writer".to_string(), false)
    );
    let (text, e) = c.call_text("raw_careful", json!({}));
    assert!(
        e && text.contains("denied") && text.contains("role 'agent' default"),
        "{text}"
    );
}
