//! Profiles (named sets of tools listed in every mode, changed at run time
//! by a person) and 2026-07-28 discovery, where nothing a request does
//! changes the session's tool list.

use std::process::Stdio;

use evo_tests::harness::{
    daemon::Daemon,
    mcp::{McpClient, shim_command, text_of},
    process::outcome,
    servers::fixture_server,
    wait::eventually,
};
use serde_json::{Value, json};

use evo_tests::harness::mcp::NATIVE_TOOLS as NATIVE;

/// The fixture under `fx` with two profiles: `work` (an exact name and a
/// glob, one of whose matches is denied) and `empty` (a glob matching
/// nothing).
fn profiled() -> Daemon {
    let d = Daemon::start(&json!({
        "mcpServers": {"fx": fixture_server(&[])},
        "profiles": {"work": ["fx_echo", "fx_a*"], "empty": ["zz_*"]}
    }));
    std::fs::write(
        d.dir.path().join("permissions.yml"),
        "rules:\n  fx_add_tool: deny\n",
    )
    .unwrap();
    d.ctl_json(&["reload"]);
    d.wait_ready(&["fx"]);
    d
}

fn proxied(names: &[String]) -> Vec<&str> {
    names
        .iter()
        .map(String::as_str)
        .filter(|n| !NATIVE.contains(n))
        .collect()
}

fn profile<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["profiles"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no profile {name} in {report}"))
}

#[test]
fn profile_tools_are_listed_in_every_mode_and_denied_ones_never() {
    let d = profiled();
    let mut work = d.session(&["--mode", "dynamic", "--profile", "work"]);
    work.initialize();
    assert_eq!(proxied(&work.tool_names()), ["fx_echo", "fx_add"]);
    let mut plain = d.session(&["--mode", "dynamic"]);
    plain.initialize();
    assert!(proxied(&plain.tool_names()).is_empty());
    // Legacy lists every permitted tool, with or without a profile.
    let mut legacy = d.session(&["--mode", "legacy", "--profile", "work"]);
    legacy.initialize();
    let all = legacy.tool_names();
    assert!(all.iter().any(|n| n == "fx_pid") && !all.iter().any(|n| n == "fx_add_tool"));

    let report = d.ctl_json(&["profiles"]);
    let w = profile(&report, "work");
    assert_eq!(w["tools"], json!(["fx_echo", "fx_add"]));
    assert_eq!(w["denied"], json!(["fx_add_tool"]));
    assert_eq!(w["sessions"], 2);
    assert_eq!(w["count"], 2);
    let e = profile(&report, "empty");
    assert_eq!(e["unmatched"], json!(["zz_*"]));
    assert_eq!(e["sessions"], 0);
    // The person's views: profiles, status and sessions.
    let (code, out, _) = d.ctl(&["profiles"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("fx_add_tool [denied by permissions: never listed]"),
        "{out}"
    );
    assert!(out.contains("warning: 'zz_*' matches no tool"), "{out}");
    let (_, status, _) = d.ctl(&["status"]);
    assert!(
        status
            .contains("profile work: 2 tool(s), 2 session(s); denied (never listed): fx_add_tool"),
        "{status}"
    );
    assert!(
        status.contains("profile empty: 0 tool(s), 0 session(s); matching no tool: zz_*"),
        "{status}"
    );
    let sessions = d.ctl_json(&["sessions"]);
    let profiles: Vec<&Value> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["profile"])
        .collect();
    assert_eq!(profiles.iter().filter(|p| **p == "work").count(), 2);
    assert!(sessions["sessions"][0]["era"] == "initialize");
    assert_eq!(d.ctl_json(&["status"])["profiles"][1]["name"], "work");
}

#[test]
fn an_unknown_profile_is_a_usage_error_that_names_the_known_ones() {
    let d = profiled();
    let run = |args: &[&str], env: Option<&str>| {
        let mut cmd = shim_command(&d.socket, args);
        if let Some(p) = env {
            cmd.env("EVO_PROFILE", p);
        }
        outcome(cmd.stdin(Stdio::null()).output().unwrap())
    };
    let (code, _, err) = run(&["--profile", "nope"], None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unknown profile 'nope'; known profiles: empty, work")
            && err.contains("--profile"),
        "{err}"
    );
    let (code, _, err) = run(&[], Some("nope"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("(from EVO_PROFILE)"), "{err}");
    // The flag wins over the environment.
    let mut cmd = shim_command(&d.socket, &["--mode", "dynamic", "--profile", "work"]);
    cmd.env("EVO_PROFILE", "nope");
    let mut c = McpClient::spawn_cmd(&mut cmd);
    c.initialize();
    assert_eq!(proxied(&c.tool_names()), ["fx_echo", "fx_add"]);
    // EVO_PROFILE alone picks the profile.
    let mut cmd = shim_command(&d.socket, &["--mode", "dynamic"]);
    cmd.env("EVO_PROFILE", "work");
    let mut c = McpClient::spawn_cmd(&mut cmd);
    c.initialize();
    assert_eq!(proxied(&c.tool_names()), ["fx_echo", "fx_add"]);
    // --profile together with --session is allowed.
    let mut c = d.session(&["--mode", "dynamic", "--profile", "work", "--session", "w"]);
    c.initialize();
    assert_eq!(proxied(&c.tool_names()), ["fx_echo", "fx_add"]);
}

#[test]
fn a_person_changes_a_profile_for_its_sessions_and_the_change_survives_a_restart() {
    let mut d = profiled();
    let config_before = std::fs::read(&d.config).unwrap();
    let mut a = d.session(&["--mode", "dynamic", "--profile", "work"]);
    a.initialize();
    let mut b = d.session(&["--mode", "dynamic", "--profile", "work"]);
    b.initialize();
    let mut other = d.session(&["--mode", "dynamic", "--profile", "empty"]);
    other.initialize();
    let (seen_a, seen_b) = (a.list_changed_count(), b.list_changed_count());

    let changed = d.ctl_json(&["activate", "--profile", "work", "fx_pid"]);
    assert_eq!(changed["changed"], json!(["fx_pid"]));
    assert_eq!(changed["sessions"], 2);
    a.await_list_changed(seen_a);
    b.await_list_changed(seen_b);
    assert_eq!(proxied(&a.tool_names()), ["fx_echo", "fx_add", "fx_pid"]);
    assert_eq!(proxied(&b.tool_names()), ["fx_echo", "fx_add", "fx_pid"]);
    assert!(proxied(&other.tool_names()).is_empty());
    assert_eq!(other.list_changed_count(), 0);
    // Taking out a tool a pattern matches.
    let seen_a = a.list_changed_count();
    let (code, out, err) = d.ctl(&["deactivate", "--profile", "work", "fx_add"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fx_add taken out of it"), "{out}");
    a.await_list_changed(seen_a);
    assert_eq!(proxied(&a.tool_names()), ["fx_echo", "fx_pid"]);
    // Already so: nothing changes.
    let again = d.ctl_json(&["activate", "--profile", "work", "fx_pid"]);
    assert_eq!(again["changed"], json!([]));

    // Refusals: an unknown profile, an unknown tool, both targets at once.
    let (code, _, err) = d.ctl(&["activate", "--profile", "nope", "fx_pid"]);
    assert_eq!(code, 1);
    assert!(err.contains("known profiles: empty, work"), "{err}");
    let (code, _, err) = d.ctl(&["activate", "--profile", "work", "fx_nope"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("No tool named 'fx_nope'"), "{err}");
    let (code, _, _) = d.ctl(&["activate", "--profile", "work", "--session", "s1", "fx_pid"]);
    assert_eq!(code, 2);

    // Saved in the cache directory; the config file is never rewritten.
    assert_eq!(std::fs::read(&d.config).unwrap(), config_before);
    let saved: Value =
        serde_json::from_slice(&std::fs::read(d.cache.join("profiles.json")).unwrap()).unwrap();
    assert_eq!(
        saved["profiles"]["work"],
        json!({"added": ["fx_pid"], "removed": ["fx_add"]})
    );
    drop((a, b, other));
    d.stop();
    d.spawn(&[], &[]);
    let mut c = d.session(&["--mode", "dynamic", "--profile", "work"]);
    c.initialize();
    assert_eq!(proxied(&c.tool_names()), ["fx_echo", "fx_pid"]);
}

#[test]
fn a_config_edit_that_changes_a_profile_applies_like_any_reload() {
    let d = profiled();
    let mut c = d.session(&["--mode", "dynamic", "--profile", "work"]);
    c.initialize();
    let seen = c.list_changed_count();
    std::fs::write(
        &d.config,
        serde_json::to_vec_pretty(&json!({
            "mcpServers": {"fx": fixture_server(&[])},
            "profiles": {"work": ["fx_sleep"], "empty": []}
        }))
        .unwrap(),
    )
    .unwrap();
    d.ctl_json(&["reload"]);
    c.await_list_changed(seen);
    assert_eq!(proxied(&c.tool_names()), ["fx_sleep"]);
}

#[test]
fn initialize_era_sessions_keep_activations_on_top_of_their_profile() {
    let d = profiled();
    let mut c = d.session(&[
        "--mode",
        "dynamic",
        "--profile",
        "work",
        "--session",
        "dave",
    ]);
    c.initialize();
    let seen = c.list_changed_count();
    c.call("discover_tools", json!({"query": "process id", "limit": 1}));
    c.await_list_changed(seen);
    assert_eq!(proxied(&c.tool_names()), ["fx_echo", "fx_add", "fx_pid"]);
    // An exact-name call of an unlisted tool routes and activates.
    let (text, err) = c.call_text("fx_cwd", json!({}));
    assert!(!err, "{text}");
    assert!(c.tool_names().iter().any(|n| n == "fx_cwd"));
    drop(c);
    let mut again = d.session(&[
        "--mode",
        "dynamic",
        "--profile",
        "work",
        "--session",
        "dave",
    ]);
    again.initialize();
    assert_eq!(
        proxied(&again.tool_names()),
        ["fx_echo", "fx_add", "fx_pid", "fx_cwd"]
    );
}

/// The whole `tools/list` result of a 2026-07-28 session.
fn modern_list(c: &mut McpClient) -> Value {
    let r = c.request("tools/list", json!({}));
    r.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("tools/list failed: {r}"))
}

#[test]
fn on_2026_07_28_nothing_a_request_does_changes_the_list() {
    let d = profiled();
    let mut c = d.session(&["--mode", "dynamic", "--profile", "work"]);
    let discovered = c.discover();
    let instructions = discovered["result"]["instructions"]
        .as_str()
        .unwrap_or_default();
    assert!(
        instructions.contains("2026-07-28") && instructions.contains("call_tool"),
        "{instructions}"
    );
    let first = modern_list(&mut c);
    assert_eq!(first["ttlMs"], 60_000, "{first}");
    assert_eq!(first["cacheScope"], "private", "{first}");
    let names: Vec<String> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(proxied(&names), ["fx_echo", "fx_add"]);

    // A long mixed sequence; after every step the list is the same.
    let steps: Vec<(&str, Value)> = vec![
        ("discover_tools", json!({"query": "process id"})),
        (
            "discover_tools",
            json!({"query": "sleep for a while", "activate": true}),
        ),
        ("fx_pid", json!({})),
        ("call_tool", json!({"name": "fx_cwd", "arguments": {}})),
        ("describe_tool", json!({"name": "fx_sleep"})),
        ("describe_capability", json!({})),
        (
            "discover_tools",
            json!({"query": "environment variables", "domain": "fx", "schemas": true}),
        ),
        ("fx_whoami", json!({})),
        ("fx_nope", json!({})),
        ("discover_tools", json!({"query": "echo text back"})),
        ("fx_echo", json!({"text": "hi"})),
        ("call_tool", json!({"name": "fx_add_tool", "arguments": {}})),
    ];
    for (tool, args) in steps {
        let r = c.call(tool, args.clone());
        let (text, is_error) = text_of(&r);
        match tool {
            "fx_pid" | "fx_whoami" | "fx_echo" => assert!(!is_error, "{tool}: {text}"),
            "call_tool" if args["name"] == "fx_cwd" => assert!(!is_error, "{text}"),
            "call_tool" => assert!(is_error && text.contains("denied"), "{text}"),
            "discover_tools" => {
                // Cards: every match carries its compact schema.
                let matches = text.lines().filter(|l| l.contains(" — ")).count();
                let cards = text.lines().filter(|l| l.starts_with("  input: {")).count();
                assert!(matches > 0 && cards == matches, "{text}");
                if args["activate"] == true {
                    assert!(text.contains("Not activated"), "{text}");
                }
                assert!(!text.contains("now active"), "{text}");
            }
            "describe_capability" => assert!(text.contains("call_tool"), "{text}"),
            _ => {}
        }
        assert_eq!(
            modern_list(&mut c),
            first,
            "the list changed after {tool} {args}"
        );
    }
    // A person cannot activate a tool in one 2026-07-28 connection.
    let sessions = d.ctl_json(&["sessions"]);
    let modern = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["era"] == "2026-07-28")
        .unwrap_or_else(|| panic!("no 2026-07-28 session in {sessions}"));
    let id = modern["id"].as_str().unwrap();
    let (code, _, err) = d.ctl(&["activate", "fx_sleep", "--session", id]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("evoctl activate --profile"), "{err}");
    assert_eq!(modern_list(&mut c), first);
    // A person's change to its profile is what changes it.
    d.ctl_json(&["activate", "--profile", "work", "fx_sleep"]);
    eventually(
        "the profile change to show",
        std::time::Duration::from_secs(5),
        || modern_list(&mut c) != first,
    );
    let after = modern_list(&mut c);
    assert!(
        after["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "fx_sleep")
    );
}

#[test]
fn tools_list_comes_back_in_the_same_order_in_both_eras() {
    let d = Daemon::start(&json!({"mcpServers": {
        "b": fixture_server(&["--extra-tools", "30"]),
        "a": fixture_server(&[]),
    }}));
    d.wait_ready(&["a", "b"]);
    let mut old = d.legacy_session();
    let mut modern = d.session(&["--mode", "legacy"]);
    modern.discover();
    let first_old = old.request("tools/list", json!({}))["result"]["tools"].clone();
    let first_modern = modern_list(&mut modern)["tools"].clone();
    // Config order first (b before a), each child's own order within.
    let names: Vec<&str> = first_old
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let b = names.iter().position(|n| n.starts_with("b_")).unwrap();
    let a = names.iter().position(|n| n.starts_with("a_")).unwrap();
    assert!(b < a, "{names:?}");
    assert_eq!(first_old, first_modern);
    for _ in 0..5 {
        old.call("a_echo", json!({"text": "x"}));
        assert_eq!(
            old.request("tools/list", json!({}))["result"]["tools"],
            first_old
        );
        assert_eq!(modern_list(&mut modern)["tools"], first_modern);
    }
    // The same catalog after a restart of a child: the same order.
    d.ctl_json(&["refresh", "b"]);
    d.wait_ready(&["b"]);
    eventually(
        "b's tools to be back",
        std::time::Duration::from_secs(10),
        || old.request("tools/list", json!({}))["result"]["tools"] == first_old,
    );
}

#[test]
fn initialize_era_discover_gives_cards_when_asked() {
    let d = profiled();
    let mut c = d.session(&["--mode", "dynamic"]);
    c.initialize();
    let (text, _) = c.call_text(
        "discover_tools",
        json!({"query": "add two numbers", "limit": 2, "activate": false}),
    );
    assert!(!text.contains("  input: "), "{text}");
    let (text, _) = c.call_text(
        "discover_tools",
        json!({"query": "add two numbers", "limit": 2, "activate": false, "schemas": true}),
    );
    let card = text
        .lines()
        .find(|l| l.starts_with("  input: "))
        .unwrap_or_else(|| panic!("no card in {text}"));
    let schema: Value = serde_json::from_str(card.trim_start_matches("  input: ")).unwrap();
    assert_eq!(schema["type"], "object", "{schema}");
    assert!(schema.get("$schema").is_none());
}
