//! Dynamic discovery: per-session activation, discover_tools, list_changed,
//! named sessions, mode precedence and the evoctl control plane.

use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, assert_stable_session_keys, server},
    locations::fixture,
    mcp::{McpClient, shim_command},
    servers::{fixture_server, replayed},
    wait::eventually,
};
use serde_json::{Value, json};

/// Tools a dynamic session starts with here: 4 natives and the hot fx_echo.
const START: usize = 6;

fn config() -> Value {
    json!({"mcpServers": {
        "fx": {"command": fixture().to_string_lossy(), "hot": ["echo"]},
        "time": replayed("time"),
        "git": replayed("git")
    }})
}

fn daemon() -> Daemon {
    let d = Daemon::start(&config());
    d.wait_ready(&["fx", "time", "git"]);
    d
}

fn dynamic(d: &Daemon, extra: &[&str]) -> McpClient {
    let mut args = vec!["--mode", "dynamic"];
    args.extend_from_slice(extra);
    let mut c = d.session(&args);
    c.initialize();
    c
}

#[test]
fn dynamic_session_starts_small_and_discovers() {
    let d = daemon();
    let mut c = dynamic(&d, &[]);
    assert_eq!(
        c.tool_names(),
        vec![
            "discover_tools",
            "describe_capability",
            "describe_tool",
            "call_tool",
            "run_code",
            "fx_echo"
        ],
        "natives and hot tools only"
    );
    let (text, is_error) = c.call_text(
        "discover_tools",
        json!({"query": "convert a time between timezones", "limit": 3}),
    );
    assert!(!is_error, "{text}");
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("time_convert_time — "),
        "best match first: {text}"
    );
    assert!(
        first.contains("(time)") && first.contains("score"),
        "{first}"
    );
    c.await_list_changed(0);
    let names = c.tool_names();
    assert!(
        names.contains(&"time_convert_time".to_string()),
        "{names:?}"
    );
    assert!(
        names.len() <= START + 3,
        "at most the 3 matches were activated"
    );
    // activate: false finds without activating.
    let before = c.tool_names();
    let (peek, _) = c.call_text(
        "discover_tools",
        json!({"query": "record changes to the repository", "activate": false, "limit": 2}),
    );
    let peeked = peek
        .lines()
        .next()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(peeked, "git_commit", "{peek}");
    assert_eq!(c.tool_names(), before, "activate:false must not activate");
}

#[test]
fn sessions_never_see_each_others_activations() {
    let d = daemon();
    let mut a = dynamic(&d, &[]);
    let mut b = dynamic(&d, &[]);
    a.call_text(
        "discover_tools",
        json!({"query": "current time in a timezone", "limit": 1}),
    );
    assert!(
        a.tool_names()
            .contains(&"time_get_current_time".to_string())
    );
    assert!(
        !b.tool_names()
            .contains(&"time_get_current_time".to_string())
    );
    // An exact-name call routes without activation, and activates.
    let (text, is_error) = b.call_text("git_status", json!({"repo_path": "/tmp"}));
    assert!(!is_error, "{text}");
    assert!(b.tool_names().contains(&"git_status".to_string()));
    assert!(!a.tool_names().contains(&"git_status".to_string()));
    // call_tool works for tools that are not listed.
    let (text, is_error) = a.call_text(
        "call_tool",
        json!({"name": "fx_add", "arguments": {"a": 1, "b": 2}}),
    );
    assert_eq!((text.as_str(), is_error), ("3", false));
}

#[test]
fn evoctl_activation_reaches_the_live_session() {
    let d = daemon();
    let mut c = dynamic(&d, &[]);
    let sessions = d.ctl_json(&["sessions"]);
    let id = sessions["sessions"][0]["id"].as_str().unwrap().to_string();
    assert_stable_session_keys(&sessions["sessions"][0], &sessions);
    let seen = c.list_changed_count();
    let (code, out, err) = d.ctl(&["activate", "fx_add", "fx_pid", "--session", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id) && out.contains("fx_add"), "{out}");
    c.await_list_changed(seen);
    let names = c.tool_names();
    assert!(names.contains(&"fx_add".to_string()) && names.contains(&"fx_pid".to_string()));
    // Without --session the most recently active session is used, and named.
    let r = d.ctl_json(&["deactivate", "fx_pid"]);
    assert_eq!(r["session"], id.as_str());
    assert_eq!(r["changed"], json!(["fx_pid"]));
    assert!(!c.tool_names().contains(&"fx_pid".to_string()));
    // Any request counts as activity, not only calls: a newer session, then
    // a tools/list on the first makes the first the most recent again.
    let mut newer = dynamic(&d, &[]);
    newer.tool_names();
    // Not a wait for anything: activity times are kept in milliseconds, and
    // the two requests must not share one for "most recent" to be decided.
    std::thread::sleep(Duration::from_millis(30));
    c.tool_names();
    let r = d.ctl_json(&["activate", "fx_pid"]);
    assert_eq!(r["session"], id.as_str(), "{r}");
    d.ctl_json(&["deactivate", "fx_pid", "--session", &id]);
    drop(newer);
    let l = d.ctl_json(&["list", "--session", &id]);
    let listed: Vec<&str> = l["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        vec![
            "discover_tools",
            "describe_capability",
            "describe_tool",
            "call_tool",
            "run_code",
            "fx_echo",
            "fx_add"
        ]
    );
    // Errors: unknown tool, closed session.
    let (code, _, err) = d.ctl(&["activate", "fx_nope", "--session", &id]);
    assert_eq!(code, 1);
    assert!(err.contains("fx_nope"), "{err}");
    assert!(
        err.contains("evoctl search") && !err.contains("discover_tools"),
        "{err}"
    );
    let (code, _, err) = d.ctl(&["activate", "fx_add", "--session", "s999"]);
    assert_eq!(code, 1);
    assert!(err.contains("s999"), "{err}");
    c.close();
    eventually(
        "the closed session to be listed no more",
        Duration::from_secs(5),
        || d.ctl(&["list", "--session", &id]).0 == 1,
    );
}

#[test]
fn named_sessions_keep_activations_across_reconnects_and_restarts() {
    let mut d = daemon();
    let mut c = dynamic(&d, &["--session", "work"]);
    c.call_text(
        "discover_tools",
        json!({"query": "what time is it", "limit": 1}),
    );
    let activated = c.tool_names();
    assert!(activated.len() > START);
    c.close();
    let mut c = dynamic(&d, &["--session", "work"]);
    assert_eq!(c.tool_names(), activated, "reconnect keeps activations");
    let s = d.ctl_json(&["sessions"]);
    assert_eq!(s["sessions"][0]["name"], "work");
    c.close();
    // An unnamed session starts empty.
    let mut u = dynamic(&d, &[]);
    assert_eq!(u.tool_names().len(), START);
    u.close();
    // Restart the daemon on the same cache dir.
    d.stop();
    d.spawn(&[], &[]);
    // Listed again (from the cache: the children start on first call).
    d.wait_status("servers listed", |s| {
        ["fx", "time", "git"]
            .iter()
            .all(|id| server(s, id).is_some_and(|v| v["tools"].as_u64() > Some(0)))
    });
    let mut c = dynamic(&d, &["--session", "work"]);
    assert_eq!(
        c.tool_names(),
        activated,
        "daemon restart keeps activations"
    );
}

/// An initialized session whose shim has `EVO_DISCOVERY_MODE=mode`.
fn shim_with_env(d: &Daemon, mode: &str) -> McpClient {
    let mut cmd = shim_command(&d.socket, &[]);
    cmd.env("EVO_DISCOVERY_MODE", mode);
    let mut c = McpClient::spawn_cmd(&mut cmd);
    c.initialize();
    c
}

#[test]
fn mode_precedence_shim_then_evod_then_env_then_config() {
    let mut cfg = config();
    cfg["discovery"] = json!({"mode": "legacy"});
    // config says legacy.
    let d = Daemon::start(&cfg);
    d.wait_ready(&["fx", "time", "git"]);
    let mut c = d.session(&[]);
    c.initialize();
    assert!(c.tool_names().len() > 10, "config legacy");
    let mut c = d.session(&["--mode", "dynamic"]);
    c.initialize();
    assert_eq!(c.tool_names().len(), START, "shim flag beats config");
    // EVO_DISCOVERY_MODE given to the shim (an MCP client's `env` for evo).
    let mut c = shim_with_env(&d, "dynamic");
    assert_eq!(c.tool_names().len(), START, "the shim's env beats config");
    // A mode evo does not know is refused, naming where it came from.
    let mut cmd = shim_command(&d.socket, &[]);
    cmd.env("EVO_DISCOVERY_MODE", "sideways");
    let mut bad = McpClient::spawn_cmd(&mut cmd);
    assert!(!bad.child.wait().unwrap().success());
    let err = bad.stderr.all();
    assert!(
        err.contains("EVO_DISCOVERY_MODE") && err.contains("sideways"),
        "{err}"
    );
    drop(d);
    // env beats config; evod flag beats env.
    let d = Daemon::start_with(&cfg, &[], &[("EVO_DISCOVERY_MODE", "dynamic")]);
    d.wait_ready(&["fx"]);
    let mut c = d.session(&[]);
    c.initialize();
    assert_eq!(c.tool_names().len(), START, "env beats config");
    let mut c = shim_with_env(&d, "legacy");
    assert!(c.tool_names().len() > START, "the shim's env beats evod's");
    drop(d);
    let d = Daemon::start_with(
        &cfg,
        &["--mode", "legacy"],
        &[("EVO_DISCOVERY_MODE", "dynamic")],
    );
    d.wait_ready(&["fx"]);
    let mut c = d.session(&[]);
    c.initialize();
    assert!(c.tool_names().len() > START, "evod flag beats env");
    let mut c = shim_with_env(&d, "dynamic");
    assert!(
        c.tool_names().len() > START,
        "evod flag beats the shim's env"
    );
    let s = d.ctl_json(&["sessions"]);
    assert_eq!(s["sessions"][0]["mode"], "legacy");
    drop(d);
    // Default: dynamic.
    let d = Daemon::start(&config());
    d.wait_ready(&["fx"]);
    let mut c = d.session(&[]);
    c.initialize();
    assert_eq!(c.tool_names().len(), START, "default dynamic");
}

#[test]
fn bad_discovery_input_gets_reasons_and_the_session_goes_on() {
    let d = daemon();
    let mut c = dynamic(&d, &[]);
    let cases: Vec<(Value, &str)> = vec![
        (json!({"query": ""}), "empty"),
        (json!({"query": "x".repeat(10 * 1024)}), "bytes"),
        (
            json!({"query": "time", "domain": "nowhere"}),
            "no domain 'nowhere'",
        ),
        (json!({"query": "time", "limit": 0}), "limit"),
        (json!({}), "query"),
    ];
    for (args, want) in cases {
        let (text, _) = c.call_text("discover_tools", args.clone());
        assert!(text.contains(want), "{args}: {text}");
    }
    assert_eq!(c.tool_names().len(), START, "nothing was activated");
    let (text, is_error) =
        c.call_text("discover_tools", json!({"query": "time", "domain": "time"}));
    assert!(
        !is_error
            && text
                .lines()
                .all(|l| l.is_empty() || l.contains("(time)") || l.starts_with("These tools")),
        "{text}"
    );
}

#[test]
fn evoctl_search_ranks_and_reports() {
    let d = daemon();
    let r = d.ctl_json(&[
        "search", "convert", "time", "between", "zones", "--limit", "2",
    ]);
    let results = r["results"].as_array().unwrap();
    assert!((1..=2).contains(&results.len()), "{r}");
    assert_eq!(results[0]["name"], "time_convert_time");
    for key in ["name", "summary", "domain", "score"] {
        assert!(results[0].get(key).is_some(), "search result lacks {key}");
    }
    let r = d.ctl_json(&["search", "zzzzqqqq"]);
    assert!(r["results"].as_array().unwrap().is_empty());
    assert!(r["reason"].as_str().unwrap().contains("zzzzqqqq"));
    let (code, out, _) = d.ctl(&["search", "git", "status"]);
    assert_eq!(code, 0);
    assert!(out.contains("git_status"), "{out}");
}

/// A server that cannot be reached and has nothing cached lists no tools,
/// but its capabilities stay searchable: a query naming one says the server
/// exists and why nothing of it is callable.
#[test]
fn capabilities_of_an_unreachable_server_are_searchable() {
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": fixture_server(&[]),
        "gh": {"command": "/nonexistent/evo-github-server", "env": {"GITHUBTOOL": "true"}}
    }}));
    d.wait_status("gh failed", |s| {
        server(s, "gh").is_some_and(|v| v["state"] == "failed")
            && server(s, "fx").is_some_and(|v| v["state"] == "ready")
    });
    let mut c = dynamic(&d, &[]);
    let (text, is_error) = c.call_text(
        "discover_tools",
        json!({"query": "list my github pull requests", "activate": false}),
    );
    assert!(!is_error, "{text}");
    assert!(
        text.contains("Server 'gh' (capabilities: github)") && text.contains("failed"),
        "{text}"
    );
    let r = d.ctl_json(&["search", "github"]);
    let notes = r["unavailable"].as_array().expect("unavailable notes");
    assert!(
        notes[0].as_str().unwrap().contains("evoctl refresh gh"),
        "{r}"
    );
    // A query that names neither says nothing of it.
    let (text, _) = c.call_text(
        "discover_tools",
        json!({"query": "add two numbers", "activate": false}),
    );
    assert!(!text.contains("'gh'"), "{text}");
}

/// While a server is still starting, a search says so: its tools are missing
/// from the answer until it has listed them.
#[test]
fn searches_say_which_servers_are_still_starting() {
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": fixture_server(&[]),
        "slow": fixture_server(&["--delay-start-ms", "6000"]),
    }}));
    d.wait_status("fx ready, slow starting", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready")
            && server(s, "slow").is_some_and(|v| v["state"] == "starting")
    });
    let r = d.ctl_json(&["search", "add", "numbers"]);
    let notes = r["unavailable"].to_string();
    assert!(notes.contains("1 server is still starting: slow"), "{r}");
    assert!(
        !r["results"].as_array().unwrap().is_empty(),
        "fx still answers: {r}"
    );
    let mut c = dynamic(&d, &[]);
    let (text, _) = c.call_text("discover_tools", json!({"query": "add numbers"}));
    assert!(text.contains("1 server is still starting: slow"), "{text}");
    // Once it has listed its tools, the note is gone.
    d.wait_ready(&["slow"]);
    let r = d.ctl_json(&["search", "add", "numbers"]);
    assert!(
        !r["unavailable"].to_string().contains("still starting"),
        "{r}"
    );
}

/// evoctl commands that pick a session by themselves name it by its name
/// when it has one, so a person sees which client they changed.
#[test]
fn evoctl_names_the_session_it_picked() {
    let d = daemon();
    let c = dynamic(&d, &["--session", "dave"]);
    let id = d.ctl_json(&["sessions"])["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, out, err) = d.ctl(&["activate", "fx_add"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim_end(),
        format!("session {id} (dave): activated fx_add"),
        "{out}"
    );
    let (code, out, err) = d.ctl(&["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("session {id} (dave)")), "{out}");
    let j = d.ctl_json(&["activate", "fx_pid"]);
    assert_eq!(j["session"], id.as_str());
    assert_eq!(j["session_name"], "dave");
    drop(c);
}

/// With two sessions open, each command that picks one itself (`list`,
/// `activate`, `deactivate`) says which one, on stdout beside its output
/// and in `--json`: the unnamed newer one by id, the named one by name.
#[test]
fn evoctl_names_the_session_it_picked_among_two() {
    let d = daemon();
    let mut dave = dynamic(&d, &["--session", "dave"]);
    let ids = d.ctl_json(&["sessions"]);
    let dave_id = ids["sessions"][0]["id"].as_str().unwrap().to_string();
    // Activity times are kept in milliseconds; the two must differ.
    std::thread::sleep(Duration::from_millis(30));
    let mut other = dynamic(&d, &[]);
    other.tool_names();
    let sessions = d.ctl_json(&["sessions"]);
    let other_id = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .find(|id| *id != dave_id)
        .unwrap()
        .to_string();
    let (code, out, err) = d.ctl(&["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().next() == Some(format!("session {other_id}").as_str()),
        "list names the newer, unnamed session first on stdout: {out}"
    );
    let j = d.ctl_json(&["list"]);
    assert_eq!(j["session"], other_id.as_str(), "{j}");
    // A stable key: there, `null` for a session without a name.
    assert!(j.get("session_name").is_some_and(Value::is_null), "{j}");
    std::thread::sleep(Duration::from_millis(30));
    dave.tool_names();
    let (code, out, err) = d.ctl(&["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().next() == Some(format!("session {dave_id} (dave)").as_str()),
        "{out}"
    );
    let j = d.ctl_json(&["list"]);
    assert_eq!(
        (j["session"].as_str(), j["session_name"].as_str()),
        (Some(dave_id.as_str()), Some("dave")),
        "{j}"
    );
    let (code, out, err) = d.ctl(&["deactivate", "fx_add"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("session {dave_id} (dave)")), "{out}");
    drop((dave, other));
}

/// A tool whose name already starts with its prefix (`git_status` of server
/// `git`) is exposed once; the doubled name still routes, and a permission
/// rule written for the doubled name still holds.
#[test]
fn names_that_carry_their_prefix_are_not_doubled() {
    let d =
        Daemon::start(&json!({"mcpServers": {"git": replayed("git"), "fx": fixture_server(&[])}}));
    std::fs::write(
        d.config.with_file_name("permissions.yml"),
        "rules:\n  git_git_commit: deny\n",
    )
    .unwrap();
    d.ctl_json(&["reload"]);
    d.wait_ready(&["git", "fx"]);
    let all = d.ctl_json(&["list", "--all"]);
    let names: Vec<&str> = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"git_status") && names.contains(&"fx_echo"),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("git_git_")),
        "{names:?}"
    );
    assert!(
        !names.contains(&"git_commit"),
        "denied under its doubled name: {names:?}"
    );
    let s = d.ctl_json(&["status"]);
    let shortened = s["shortened"].as_array().unwrap();
    assert!(
        shortened
            .iter()
            .any(|t| t["name"] == "git_status" && t["also"] == "git_git_status"),
        "{s}"
    );
    let mut c = d.legacy_session();
    let listed = c.tool_names();
    assert!(listed.contains(&"git_status".to_string()), "{listed:?}");
    // The doubled name routes to the same tool.
    let (text, is_error) = c.call_text("git_git_status", json!({"repo_path": "/tmp"}));
    assert!(!is_error, "{text}");
    let (short, _) = c.call_text("git_status", json!({"repo_path": "/tmp"}));
    assert_eq!(text, short);
    // Denied under either name.
    for name in ["git_commit", "git_git_commit"] {
        let (text, is_error) = c.call_text(name, json!({"repo_path": "/tmp", "message": "m"}));
        assert!(is_error && text.contains("denied"), "{name}: {text}");
    }
}
