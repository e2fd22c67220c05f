//! Search that learns from use: a session's `discover_tools` queries count
//! for the tool it then calls; a later session's near-same query finds that
//! tool first, a query sharing only some words ranks as before; denied calls,
//! calls with no search before and replaced tools count nothing; what was
//! learned survives a restart, `search forget` drops it, `search.learn:
//! false` learns nothing.

use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, server},
    locations::{fixture, repo_root},
    mcp::McpClient,
    process::TempDir,
    servers::replayed,
    skipped,
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

/// A reformulation the plain ranking puts `git_log` far down for.
const FEEDBACK: &str = "see who wrote the last few changes";
/// The same request in slightly other words.
const TEST: &str = "who wrote the last few changes";
/// Shares words with the feedback but asks for something else.
const CONTROL: &str = "show the last few changes staged";

fn start(search: Value, perms: &str) -> Daemon {
    let dir = TempDir::new("learn");
    let cfg = dir.path().join("mcp.config.json");
    let config = json!({"search": search, "mcpServers": {
        "fx": {"command": fixture().to_string_lossy()},
        "time": replayed("time"),
        "git": replayed("git")
    }});
    std::fs::write(&cfg, serde_json::to_vec(&config).unwrap()).unwrap();
    if !perms.is_empty() {
        std::fs::write(dir.path().join("permissions.yml"), perms).unwrap();
    }
    let d = Daemon::start_raw(dir, cfg, &[], &[]);
    d.wait_ready(&["fx", "time", "git"]);
    d
}

fn session(d: &Daemon) -> McpClient {
    let mut c = d.session(&["--mode", "dynamic"]);
    c.initialize();
    c
}

/// `evoctl search --explain` for `query`: its results, best first.
fn explained(d: &Daemon, query: &str) -> Vec<Value> {
    let mut args = vec!["search", "-n", "20", "--explain"];
    args.extend(query.split(' '));
    d.ctl_json(&args)["results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The tools `evoctl search` ranks for `query`, best first.
fn ranking(d: &Daemon, query: &str) -> Vec<String> {
    explained(d, query)
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn learned_part(d: &Daemon, query: &str, tool: &str) -> Option<f64> {
    explained(d, query)
        .iter()
        .find(|t| t["name"] == tool)
        .and_then(|t| t["explain"]["learned"].as_f64())
}

fn learned_count(d: &Daemon) -> u64 {
    d.ctl_json(&["status"])["search"]["learned"]
        .as_u64()
        .expect("status --json search.learned")
}

/// A session's search for `query`, then a call of `tool` (through
/// `call_tool`, as a client that does not refresh its list would).
fn search_and_call(c: &mut McpClient, query: &str, tool: &str, args: Value) -> (String, bool) {
    let (text, e) = c.call_text("discover_tools", json!({"query": query}));
    assert!(!e, "{text}");
    c.call_text("call_tool", json!({"name": tool, "arguments": args}))
}

fn first_line_of(c: &mut McpClient, query: &str) -> String {
    let (text, e) = c.call_text("discover_tools", json!({"query": query, "activate": false}));
    assert!(!e, "{text}");
    text.lines().next().unwrap_or_default().to_string()
}

fn repo() -> Value {
    json!({"repo_path": "."})
}

#[test]
fn a_called_tool_is_found_first_by_later_sessions() {
    let mut d = start(json!({}), "");
    let before = ranking(&d, TEST);
    let control_before = ranking(&d, CONTROL);
    let at = before.iter().position(|t| t == "git_log");
    assert!(
        at.is_none_or(|i| i >= 3),
        "the test needs a query that ranks git_log low: {before:?}"
    );
    assert_eq!(learned_count(&d), 0);
    // `evoctl search` teaches nothing.
    ranking(&d, FEEDBACK);
    assert_eq!(learned_count(&d), 0);

    let mut c = session(&d);
    let (text, e) = search_and_call(&mut c, FEEDBACK, "git_log", repo());
    assert!(!e, "{text}");
    assert_eq!(learned_count(&d), 1);
    drop(c);

    let mut fresh = session(&d);
    let first = first_line_of(&mut fresh, TEST);
    assert!(first.starts_with("git_log — "), "learned: {first}");
    assert!(learned_part(&d, TEST, "git_log").is_some_and(|p| p > 0.0));
    assert_eq!(
        ranking(&d, CONTROL),
        control_before,
        "the control query moved"
    );

    // Kept across a restart, in the cache directory.
    let file = d.cache.join("learned-queries.json");
    eventually(
        with_log("learned-queries.json", &d.log),
        Duration::from_secs(10),
        || std::fs::read_to_string(&file).is_ok_and(|t| t.contains("git_log")),
    );
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(!saved.contains("repo_path"), "no arguments kept: {saved}");
    d.stop();
    d.spawn(&[], &[]);
    // Served from the catalog cache: listed, not started.
    d.wait_status("git listed", |s| {
        server(s, "git").is_some_and(|g| g["tools"].as_u64() > Some(0))
    });
    assert_eq!(learned_count(&d), 1);
    assert_eq!(ranking(&d, TEST)[0], "git_log");

    // "forget" and a word naming no tool: more likely a search; nothing is
    // forgotten and the error says how to do either.
    let (code, _, err) = d.ctl(&["search", "forget", "password"]);
    assert_ne!(code, 0);
    assert!(err.contains("evoctl search \"forget password\""), "{err}");
    assert_eq!(learned_count(&d), 1);
    // Quoted, the words are searched.
    let (code, out, err) = d.ctl(&["search", "forget password"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(learned_count(&d), 1);

    // Forget one tool: the ranking is as it was.
    let (code, out, err) = d.ctl(&["search", "forget", "git_log"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(learned_count(&d), 0);
    assert_eq!(ranking(&d, TEST), before);
}

#[test]
fn denied_unsearched_and_replaced_calls_count_nothing() {
    let d = start(json!({}), "rules:\n  git_log: deny\n");
    let mut c = session(&d);
    // Denied.
    let (text, e) = search_and_call(&mut c, FEEDBACK, "git_log", repo());
    assert!(e, "{text}");
    assert_eq!(learned_count(&d), 0, "a denied call counted");
    drop(c);
    // Called by exact name with no search before.
    let mut c = session(&d);
    let (text, e) = c.call_text(
        "call_tool",
        json!({"name": "fx_echo", "arguments": {"text": "hi"}}),
    );
    assert!(!e, "{text}");
    assert_eq!(learned_count(&d), 0, "a call with no search counted");
    // Replaced: git_show called, then a new search and git_status instead.
    let (text, e) = search_and_call(
        &mut c,
        "look at what I changed",
        "git_show",
        json!({"repo_path": ".", "revision": "HEAD"}),
    );
    assert!(!e, "{text}");
    assert_eq!(learned_count(&d), 1);
    let (text, e) = search_and_call(&mut c, "what files did I change", "git_status", repo());
    assert!(!e, "{text}");
    assert_eq!(
        learned_count(&d),
        2,
        "both queries count for git_status only"
    );
    assert!(learned_part(&d, "look at what I changed", "git_show").is_none());
    assert!(learned_part(&d, "look at what I changed", "git_status").is_some());
    // Forget everything.
    let (code, _, _) = d.ctl(&["search", "forget"]);
    assert_eq!(code, 0);
    assert_eq!(learned_count(&d), 0);
}

#[test]
fn learning_off_learns_nothing() {
    let d = start(json!({"learn": false}), "");
    let before = ranking(&d, TEST);
    let mut c = session(&d);
    let (text, e) = search_and_call(&mut c, FEEDBACK, "git_log", repo());
    assert!(!e, "{text}");
    assert_eq!(learned_count(&d), 0);
    assert_eq!(ranking(&d, TEST), before);
}

/// The unpacked test model (`EVO_TEST_MODEL`, set by tests/run), or None
/// and a "skipped" line.
fn test_model() -> Option<std::path::PathBuf> {
    match std::env::var_os("EVO_TEST_MODEL") {
        Some(p) => Some(repo_root().join(p)),
        None => {
            skipped("EVO_TEST_MODEL is unset (tests/run unpacks all-MiniLM-L6-v2 and sets it)");
            None
        }
    }
}

/// With a model, a remembered query counts for a reworded one through its
/// vector, also after a restart (the vectors are embedded again), and not
/// for a query about something else.
#[test]
fn with_a_model_reworded_queries_learn_too() {
    let Some(model) = test_model() else { return };
    let mut d = start(json!({"model": model.to_string_lossy()}), "");
    let ready = |d: &Daemon| {
        d.wait_status("every tool embedded", |s| s["search"]["state"] == "ready");
    };
    ready(&d);
    // Shares two of the feedback's five terms: only its vector matches.
    let reworded = "who wrote the most recent changes";
    let control = "what time is it in Tokyo";
    let before = ranking(&d, reworded);
    let control_before = ranking(&d, control);
    let mut c = session(&d);
    let (text, e) = search_and_call(&mut c, FEEDBACK, "git_log", repo());
    assert!(!e, "{text}");
    assert!(
        before
            .iter()
            .position(|t| t == "git_log")
            .is_none_or(|i| i > 0),
        "{before:?}"
    );
    assert_eq!(ranking(&d, reworded)[0], "git_log");
    assert_eq!(ranking(&d, control), control_before);
    d.stop();
    d.spawn(&[], &[]);
    ready(&d);
    eventually(
        with_log("learned vectors", &d.log),
        Duration::from_secs(30),
        || {
            ranking(&d, reworded)
                .first()
                .is_some_and(|t| t == "git_log")
        },
    );
}

/// A tool that leaves the catalog (its server removed from the config)
/// loses what was learned for it.
#[test]
fn a_tool_leaving_the_catalog_is_forgotten() {
    let d = start(json!({}), "");
    let mut c = session(&d);
    let (text, e) = search_and_call(
        &mut c,
        "what time is it in Tokyo",
        "time_get_current_time",
        json!({"timezone": "Asia/Tokyo"}),
    );
    assert!(!e, "{text}");
    assert_eq!(learned_count(&d), 1);
    let config = json!({"mcpServers": {
        "fx": {"command": fixture().to_string_lossy()},
        "git": replayed("git")
    }});
    std::fs::write(&d.config, serde_json::to_vec(&config).unwrap()).unwrap();
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(code, 0, "{out}{err}");
    eventually(
        with_log("the time server's evidence dropped", &d.log),
        Duration::from_secs(10),
        || learned_count(&d) == 0,
    );
}
