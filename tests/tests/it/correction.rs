//! Tiered disclosure and self-correcting calls, against a child that records
//! exactly the arguments it receives.

use evo_tests::harness::{daemon::Daemon, locations::fixture, process::TempDir, servers::replayed};
use serde_json::{Value, json};

struct Setup {
    d: Daemon,
    record: std::path::PathBuf,
    _dir: TempDir,
}

fn setup(extra: Value) -> Setup {
    let dir = TempDir::new("rec");
    let record = dir.path().join("received.jsonl");
    let mut cfg = json!({"mcpServers": {
        "fx": {"command": fixture().to_string_lossy(),
               "env": {"EVO_FIXTURE_RECORD": record.to_string_lossy()},
               "aliases": {"record": {"number": "count"}},
               "hot": ["add"]}
    }});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            cfg[k] = v;
        }
    }
    let d = Daemon::start(&cfg);
    d.wait_ready(&["fx"]);
    Setup {
        d,
        record,
        _dir: dir,
    }
}

fn received(s: &Setup) -> Vec<Value> {
    std::fs::read_to_string(&s.record)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn repaired_calls_reach_the_child_corrected_and_say_so() {
    let s = setup(json!({}));
    let mut c = s.d.legacy_session();
    let cases = [
        // case, snake/camel, string→int, scalar→array, JSON string→object
        (
            json!({"Count": "5", "tags": "solo", "options": "{\"verbose\": true}"}),
            json!({"count": 5, "tags": ["solo"], "options": {"verbose": true}}),
        ),
        // configured alias
        (json!({"number": 3}), json!({"count": 3})),
        // near miss (edit distance 2) and camelCase
        (
            json!({"cuont": 2, "file_path": "/x"}),
            json!({"count": 2, "filePath": "/x"}),
        ),
        // "true" → true inside a nested object
        (
            json!({"count": 1, "options": {"verbose": "true"}}),
            json!({"count": 1, "options": {"verbose": true}}),
        ),
    ];
    for (i, (sent, want)) in cases.iter().enumerate() {
        let r = c.call("fx_record", sent.clone());
        assert_ne!(r["isError"], true, "{sent}: {r}");
        let got = received(&s);
        assert_eq!(got.len(), i + 1, "one call forwarded per case");
        assert_eq!(
            &got[i], want,
            "the child received the corrected arguments for {sent}"
        );
        let fixes = r["_meta"]["evo/repaired"]
            .as_array()
            .unwrap_or_else(|| panic!("no repair note: {r}"));
        assert!(!fixes.is_empty());
    }
    // A valid call is forwarded untouched, with no repair note.
    let r = c.call("fx_record", json!({"count": 9}));
    assert!(
        r.get("_meta")
            .is_none_or(|m| m.get("evo/repaired").is_none()),
        "{r}"
    );
    assert_eq!(received(&s).last().unwrap(), &json!({"count": 9}));
    // Valid as sent (the schema allows extra names), but with a misspelt
    // optional parameter the child would ignore: renamed all the same.
    let r = c.call("fx_record", json!({"count": 3, "file_path": "/y"}));
    assert_eq!(
        received(&s).last().unwrap(),
        &json!({"count": 3, "filePath": "/y"})
    );
    assert_eq!(
        r["_meta"]["evo/repaired"],
        json!(["renamed 'file_path' to 'filePath'"]),
        "{r}"
    );
}

#[test]
fn invalid_calls_teach_and_repeated_failures_are_refused() {
    let s = setup(json!({}));
    let mut c = s.d.legacy_session();
    let bad = json!({"count": "many", "colour": "red"});
    let (first, is_error) = c.call_text("fx_record", bad.clone());
    assert!(is_error);
    assert!(received(&s).is_empty(), "an invalid call is not forwarded");
    assert!(
        first.contains("count") && first.contains("integer"),
        "names the problem: {first}"
    );
    assert!(first.contains("\"required\""), "shows the schema: {first}");
    assert!(
        first.contains("\"name\": \"fx_record\""),
        "shows a corrected example call: {first}"
    );
    let (second, _) = c.call_text("fx_record", bad.clone());
    assert!(
        second.contains("failure 2") && second.contains("describe_tool"),
        "escalates: {second}"
    );
    let (third, is_error) = c.call_text("fx_record", bad.clone());
    assert!(is_error && third.starts_with("Refused"), "{third}");
    // Different arguments reset; a success resets too.
    let (other, _) = c.call_text("fx_record", json!({"count": "lots"}));
    assert!(!other.starts_with("Refused"), "{other}");
    // Child-side failures count as well.
    for n in 1..=2 {
        let (t, e) = c.call_text("fx_fail", json!({"message": "boom"}));
        assert!(e && t.contains("boom"), "child failure {n}: {t}");
    }
    let (t, e) = c.call_text("fx_fail", json!({"message": "boom"}));
    assert!(
        e && t.starts_with("Refused"),
        "the third identical child failure is refused: {t}"
    );
    let (t, _) = c.call_text("fx_fail", json!({"message": "other"}));
    assert_eq!(t, "other");
    // Sessions have their own counters.
    let mut c2 = s.d.legacy_session();
    let (t, _) = c2.call_text("fx_fail", json!({"message": "boom"}));
    assert_eq!(t, "boom");
}

#[test]
fn a_missing_session_id_is_filled_and_the_result_says_so() {
    // Results up to 4 MiB pass whole (the 3 MiB echo below).
    let s = setup(json!({"limits": {"max_result_bytes": 4 << 20}}));
    let mut c = s.d.legacy_session();
    let r = c.call("fx_whoami", json!({}));
    let sessions = s.d.ctl_json(&["sessions"]);
    let id = sessions["sessions"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(r["content"][0]["text"], id.as_str());
    let note = r["content"][1]["text"].as_str().unwrap();
    assert!(note.contains("session_id") && note.contains(&id), "{note}");
    assert!(r["_meta"]["evo/notes"].is_array());
    // A given session_id is left alone, also under another spelling.
    assert_eq!(
        c.call_text("fx_whoami", json!({"session_id": "mine"})).0,
        "mine"
    );
    // Large arguments (over the 1 MiB repair limit) still go through.
    let big = "x".repeat(3 << 20);
    let (text, is_error) = c.call_text("fx_echo", json!({"text": big}));
    assert!(
        !is_error && text.len() == big.len(),
        "{}",
        &text[..200.min(text.len())]
    );
    let r = c.call("fx_whoami", json!({"sessionId": "theirs"}));
    assert_eq!(r["content"][0]["text"], "theirs", "{r}");
    assert_eq!(
        r["_meta"]["evo/repaired"],
        json!(["renamed 'sessionId' to 'session_id'"]),
        "{r}"
    );
}

#[test]
fn hot_tools_are_listed_in_full_and_the_rest_in_instructions() {
    let s = setup(json!({"servers": {"git": replayed("git")}}));
    s.d.wait_ready(&["git"]);
    let mut c = s.d.session(&["--mode", "dynamic"]);
    let init = c.initialize();
    let names = c.tool_names();
    assert!(
        names.contains(&"fx_add".to_string()),
        "config hot: {names:?}"
    );
    assert!(!names.contains(&"git_status".to_string()));
    let instructions = init["result"]["instructions"].as_str().unwrap();
    assert!(instructions.len() <= 8192);
    assert!(instructions.contains("## git"), "{instructions}");
    assert!(instructions.contains("git_status — "), "{instructions}");
    assert!(!instructions.contains("git_git_status"), "{instructions}");
    assert!(
        !instructions.contains("fx_add — "),
        "hot tools are not repeated"
    );
    // Every line names its domain.
    for line in instructions.lines().filter(|l| l.contains(" — ")) {
        assert!(line.ends_with(')'), "{line}");
    }
    // A small budget lists domains with counts and points to describe_capability.
    drop(c);
    let small = setup(
        json!({"discovery": {"instructions_budget": 400}, "servers": {"git": replayed("git")}}),
    );
    small.d.wait_ready(&["git"]);
    let mut c = small.d.session(&["--mode", "dynamic"]);
    let init = c.initialize();
    let instructions = init["result"]["instructions"].as_str().unwrap();
    assert!(instructions.len() <= 400, "{} bytes", instructions.len());
    assert!(
        instructions.contains("describe_capability"),
        "{instructions}"
    );
}

#[test]
fn describe_tools_and_capabilities() {
    let s = setup(json!({}));
    let mut c = s.d.session(&["--mode", "dynamic"]);
    c.initialize();
    let (text, e) = c.call_text("describe_tool", json!({"name": "fx_record"}));
    assert!(!e);
    assert!(
        text.contains("\"count\"") && text.contains("Example call"),
        "{text}"
    );
    let (text, e) = c.call_text("describe_tool", json!({"name": "fx_recrod"}));
    assert!(e && text.contains("fx_record"), "closest names: {text}");
    // evo's own tools are described too.
    let (text, e) = c.call_text("describe_tool", json!({"name": "discover_tools"}));
    assert!(
        !e && text.contains("\"query\"") && text.contains("Example call"),
        "{text}"
    );
    let (text, _) = c.call_text("describe_capability", json!({}));
    assert!(
        text.contains("fx — ") && text.contains("text — 1 tools"),
        "{text}"
    );
    let (text, _) = c.call_text("describe_capability", json!({"domain": "fx"}));
    assert!(
        text.contains("fx_add — ") && text.contains("[hot]"),
        "{text}"
    );
    let (text, e) = c.call_text("describe_capability", json!({"domain": "nope"}));
    assert!(e && text.contains("fx"), "{text}");
    // evoctl describe and docs come from the same registry.
    let (code, out, _) = s.d.ctl(&["describe", "fx_add"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("fx_add [hot]") && out.contains("Example call"),
        "{out}"
    );
    let docs = s.d.dir.path().join("tools.md");
    let (code, _, err) = s.d.ctl(&["docs", "--out", docs.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(&docs).unwrap();
    assert!(md.starts_with("# evo tool reference"));
    assert!(md.contains("### `fx_add` **hot**") && md.contains("### `fx_record`"));
    // With --json: the file is still written, and the output is an object.
    std::fs::remove_file(&docs).unwrap();
    let j = s.d.ctl_json(&["docs", "--out", docs.to_str().unwrap()]);
    assert_eq!(j["bytes"], md.len(), "{j}");
    assert_eq!(std::fs::read_to_string(&docs).unwrap(), md);
    assert_eq!(s.d.ctl_json(&["docs"])["markdown"], md.as_str());
    let (code, _, err) = s.d.ctl(&["describe", "nope_nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("nope_nope"));
    // A person at evoctl is pointed at evoctl search, not the agent's tool.
    assert!(
        err.contains("evoctl search") && !err.contains("discover_tools"),
        "{err}"
    );
}

#[test]
fn odd_schemas_and_hostile_arguments_break_nothing() {
    let s = setup(json!({"servers": {
        "gitlab": replayed("gitlab"),
        "drawio": replayed("drawio")
    }}));
    s.d.wait_ready(&["gitlab", "drawio"]);
    let mut c = s.d.legacy_session();
    let tools = c.request("tools/list", json!({}));
    for t in tools["result"]["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object", "{}", t["name"]);
    }
    // A schema holding only $schema accepts calls.
    let gl: Vec<String> = c
        .tool_names()
        .into_iter()
        .filter(|n| n.starts_with("gitlab_"))
        .collect();
    let (text, e) = c.call_text(&gl[0], json!({"anything": 1}));
    assert!(!e, "{text}");
    // Deeply nested arguments get a clear error, not a crash.
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({"x": deep});
    }
    let (text, e) = c.call_text("fx_record", json!({"count": 1, "options": deep}));
    assert!(e && text.contains("nested"), "{text}");
    assert_eq!(c.call_text("fx_echo", json!({"text": "ok"})).0, "ok");
}

/// The example call in a teaching error, parsed: its `arguments`.
fn corrected_example(text: &str) -> Value {
    let start = text
        .find("Corrected example call:\n")
        .unwrap_or_else(|| panic!("no example in: {text}"))
        + "Corrected example call:\n".len();
    let end = text[start..]
        .find("\n\nInput schema:")
        .map_or(text.len(), |i| start + i);
    let call: Value = serde_json::from_str(&text[start..end])
        .unwrap_or_else(|e| panic!("example is not JSON ({e}): {text}"));
    call["arguments"].clone()
}

/// Names a caller made up (`tz` for mcp-server-time's `timezone`, recorded
/// as published) are all named, and the corrected example carries the
/// caller's own values under the names the tool declares, so following it
/// works: the call it shows reaches the child and succeeds.
#[test]
fn teaching_names_every_unknown_parameter_and_reuses_the_callers_values() {
    let d = Daemon::start(&json!({"mcpServers": {"time": replayed("time")}}));
    d.wait_ready(&["time"]);
    let mut c = d.legacy_session();
    let (text, is_error) = c.call_text(
        "time_get_current_time",
        json!({"tz": "Europe/Paris", "fmt": "iso"}),
    );
    assert!(is_error, "{text}");
    for needle in [
        "missing required parameter 'timezone' (string)",
        "unknown parameter 'tz'",
        "unknown parameter 'fmt'",
        "'tz': did you mean timezone?",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let example = corrected_example(&text);
    assert_eq!(example, json!({"timezone": "Europe/Paris"}), "{text}");
    let (answer, is_error) = c.call_text("time_get_current_time", example);
    assert!(!is_error, "the example works: {answer}");
    assert!(answer.contains("Europe/Paris"), "{answer}");

    // Three made-up names for three required parameters: in order.
    let (text, is_error) = c.call_text(
        "time_convert_time",
        json!({"from": "Europe/Paris", "at": "16:30", "to": "Asia/Tokyo"}),
    );
    assert!(is_error, "{text}");
    for name in ["from", "at", "to"] {
        assert!(
            text.contains(&format!("unknown parameter '{name}'")),
            "{name}: {text}"
        );
    }
    let example = corrected_example(&text);
    assert_eq!(
        example,
        json!({"source_timezone": "Europe/Paris", "time": "16:30", "target_timezone": "Asia/Tokyo"}),
        "{text}"
    );
    let (answer, is_error) = c.call_text("time_convert_time", example);
    assert!(!is_error && answer.contains("Asia/Tokyo"), "{answer}");

    // A value of no fitting type is not carried over: the example is the
    // schema's own.
    let (text, _) = c.call_text("time_get_current_time", json!({"tz": {"name": "x"}}));
    let example = corrected_example(&text);
    assert!(
        example["timezone"].is_string() && example["timezone"] != "x",
        "{text}"
    );
}
