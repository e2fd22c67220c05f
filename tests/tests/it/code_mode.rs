//! Code mode (`run_code`) through real processes: evod, the shim, the
//! fixture server, permissions and approvals as a person gives them.

use evo_tests::harness::{
    daemon::{Daemon, server},
    instances::approval_id,
    mcp::{McpClient, text_of},
    process::TempDir,
    servers::fixture_server,
};
use serde_json::{Value, json};

const PERMISSIONS: &str = "rules:\n  fx_pid: deny\n  fx_env: require_approval\n";

fn start(code_mode: Value) -> Daemon {
    let dir = TempDir::new("code");
    let cfg = dir.path().join("mcp.config.json");
    let config = json!({"mcpServers": {"fx": fixture_server(&[])}, "code_mode": code_mode});
    std::fs::write(&cfg, serde_json::to_vec(&config).unwrap()).unwrap();
    std::fs::write(dir.path().join("permissions.yml"), PERMISSIONS).unwrap();
    let d = Daemon::start_raw(dir, cfg, &[], &[]);
    d.wait_status("fx listed", |s| {
        server(s, "fx").is_some_and(|v| v["tools"].as_u64() > Some(0))
    });
    d
}

/// `run_code` with `code`: (structuredContent, first text, isError).
fn run(c: &mut McpClient, code: &str, extra: Value) -> (Value, String, bool) {
    let mut args = json!({ "code": code });
    if let (Value::Object(a), Value::Object(e)) = (&mut args, extra) {
        a.extend(e);
    }
    let r = c.call("run_code", args);
    let (text, is_error) = text_of(&r);
    (r["structuredContent"].clone(), text, is_error)
}

#[test]
fn a_script_chains_tools_in_parallel_through_the_session() {
    let d = start(json!({}));
    let mut c = d.session(&[]);
    c.initialize();
    assert!(c.tool_names().contains(&"run_code".to_string()));
    let (out, text, is_error) = run(
        &mut c,
        r#"const s = await tools.fx_add({a: 2, b: 3});
           const e = await tools.fx_echo({text: "sum " + s});
           const all = await Promise.all(Array.from({length: 20}, (_, i) => tools.fx_add({a: i, b: i})));
           console.log("done", all.length);
           return {s, e, all};"#,
        json!({}),
    );
    assert!(!is_error, "{text}");
    let all: Vec<String> = (0..20).map(|i| (2 * i).to_string()).collect();
    assert_eq!(out["result"], json!({"s": "5", "e": "sum 5", "all": all}));
    assert_eq!(out["logs"], json!(["done 20"]));
    assert_eq!(out["calls"], 22);
    // Its calls are the session's own: they activated what they called,
    // as direct calls do in dynamic mode.
    let sessions = d.ctl_json(&["sessions"]);
    let activated = sessions["sessions"][0]["activated"].to_string();
    assert!(
        activated.contains("fx_add") && activated.contains("fx_echo"),
        "{sessions:#}"
    );
}

#[test]
fn a_script_reaches_only_what_the_session_may_call() {
    let d = start(json!({}));
    let mut c = d.session(&[]);
    c.initialize();
    // Denied: the same refusal a direct call gets, as an Error.
    let (out, text, is_error) = run(
        &mut c,
        "try { await tools.fx_pid({}); } catch (e) { return e.message; }",
        json!({}),
    );
    assert!(!is_error, "{text}");
    assert!(
        out["result"].as_str().is_some_and(|m| m.contains("denied")),
        "{out}"
    );
    // Unknown: the teaching error.
    let (out, _, _) = run(
        &mut c,
        "try { await tools.fx_nope({}); } catch (e) { return e.message; }",
        json!({}),
    );
    assert!(
        out["result"]
            .as_str()
            .is_some_and(|m| m.contains("fx_nope")),
        "{out}"
    );
    // Needs approval: held, the script told the id; approved, run again.
    let script = r#"return await tools.fx_env({name: "HOME"});"#;
    let (_, text, is_error) = run(&mut c, script, json!({}));
    assert!(is_error && text.contains("evoctl approve "), "{text}");
    let id = approval_id(&text);
    let (code, _, err) = d.ctl(&["approve", &id]);
    assert_eq!(code, 0, "{err}");
    let (out, text, is_error) = run(&mut c, script, json!({}));
    assert!(!is_error, "{text}");
    assert!(out["result"].is_string(), "{out}");
    // A tool's own error throws, with its message.
    let (_, text, is_error) = run(
        &mut c,
        r#"await tools.fx_fail({message: "boom"});"#,
        json!({}),
    );
    assert!(is_error && text.contains("threw Error: boom"), "{text}");
    // evo's own tools are not for scripts.
    let (_, text, is_error) = run(
        &mut c,
        r#"await tools.call_tool({name: "fx_pid"});"#,
        json!({}),
    );
    assert!(is_error && text.contains("evo's own tools"), "{text}");
}

#[test]
fn limits_stop_a_script_and_the_session_goes_on() {
    let d = start(json!({"max_calls": 3, "memory_mb": 8}));
    let mut c = d.session(&[]);
    c.initialize();
    let (out, text, is_error) = run(
        &mut c,
        "console.log('before'); while (true) {}",
        json!({"timeout_ms": 300}),
    );
    assert!(
        is_error && text.contains("ran past its time (300 ms"),
        "{text}"
    );
    assert_eq!(out["logs"], json!(["before"]));
    let (out, text, is_error) = run(
        &mut c,
        "for (let i = 0; i < 10; i++) await tools.fx_add({a: i, b: 0});",
        json!({}),
    );
    assert!(
        is_error && text.contains("more than 3 tool calls"),
        "{text}"
    );
    assert_eq!(out["calls"], 3);
    let (_, text, is_error) = run(
        &mut c,
        "const a = []; while (true) a.push(new Array(100000).fill(1));",
        json!({}),
    );
    assert!(
        is_error && text.contains("more than its memory (8 MiB"),
        "{text}"
    );
    // A call waiting past the deadline is cancelled with the run.
    let (_, text, is_error) = run(
        &mut c,
        "await tools.fx_sleep({ms: 20000});",
        json!({"timeout_ms": 500}),
    );
    assert!(is_error && text.contains("ran past its time"), "{text}");
    for (code, says) in [
        ("return () => 1;", "no JSON form"),
        ("await new Promise(() => {});", "nothing will settle"),
        ("require('fs');", "require"),
        ("await import('fs');", "threw"),
        ("return fetch('http://127.0.0.1:1/');", "fetch"),
        ("syntax error here", "SyntaxError"),
    ] {
        let (_, text, is_error) = run(&mut c, code, json!({}));
        assert!(is_error && text.contains(says), "{code}: {text}");
    }
    for (code, want) in [
        ("return typeof setTimeout;", "undefined"),
        ("return typeof process;", "undefined"),
        ("return eval('typeof require');", "undefined"),
    ] {
        let (out, text, is_error) = run(&mut c, code, json!({}));
        assert!(!is_error, "{code}: {text}");
        assert_eq!(out["result"], want, "{code}");
    }
    assert_eq!(
        text_of(&c.call("fx_echo", json!({"text": "still here"}))),
        ("still here".into(), false)
    );
}

#[test]
fn with_code_mode_off_there_is_no_run_code() {
    let d = start(json!({"enabled": false}));
    let mut c = d.session(&[]);
    c.initialize();
    assert!(!c.tool_names().contains(&"run_code".to_string()));
    let (text, is_error) = text_of(&c.call("run_code", json!({"code": "return 1;"})));
    assert!(is_error && text.contains("run_code"), "{text}");
}

#[test]
fn a_person_runs_a_script_with_evoctl_run() {
    let d = start(json!({}));
    let dir = TempDir::new("script");
    let script = dir.path().join("task.js");
    std::fs::write(
        &script,
        "const n = await tools.fx_add({a: 40, b: 2});\nconsole.log('sum', n);\nreturn {n};\n",
    )
    .unwrap();
    let path = script.to_str().unwrap();
    let (code, out, err) = d.ctl(&["run", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("sum 42\n"), "{out}");
    assert!(out.contains("\"n\": \"42\""), "{out}");
    let (code, out, _) = d.ctl(&["--json", "run", path]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["ok"].clone(), v["result"].clone(), v["calls"].clone()),
        (json!(true), json!({"n": "42"}), json!(1))
    );
    // The owner's permissions hold: an approval stops it, naming the id.
    std::fs::write(&script, "return await tools.fx_env({name: 'HOME'});").unwrap();
    let (code, _, err) = d.ctl(&["run", path]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("evoctl approve "), "{err}");
    let (code, _, err) = d.ctl(&["run", path, "--session", "nobody"]);
    assert_eq!(code, 1);
    assert!(err.contains("no live session 'nobody'"), "{err}");
    let (code, _, err) = d.ctl(&["run", "/nonexistent/x.js"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot read the script /nonexistent/x.js"),
        "{err}"
    );
}
