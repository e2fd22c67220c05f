use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{CallAnswer, Limits, Outcome, Stopped, ToolCall, run};

const LIMITS: Limits = Limits {
    timeout: Duration::from_secs(5),
    memory_bytes: 32 << 20,
    max_calls: 100,
};

/// Runs `code` with tools answered by `answer` on another thread (as the
/// session's pipeline would): `add` adds, `fail` fails, others echo.
fn run_with(code: &str, limits: Limits) -> Outcome {
    let (call_tx, call_rx) = mpsc::channel::<ToolCall>();
    let (answer_tx, answer_rx) = mpsc::channel::<CallAnswer>();
    let tools = std::thread::spawn(move || {
        for c in call_rx {
            let args: Value = serde_json::from_str(&c.args).unwrap();
            let answer = match c.tool.as_str() {
                "fx_add" => {
                    Ok((args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()).to_string())
                }
                "fx_fail" => Err("fx_fail failed: as asked".to_string()),
                "fx_never" => continue,
                _ => Ok(json!({"tool": c.tool, "args": args}).to_string()),
            };
            if answer_tx.send(CallAnswer { id: c.id, answer }).is_err() {
                return;
            }
        }
    });
    let cancel = Arc::new(AtomicBool::new(false));
    let out = run(
        code,
        limits,
        move |c| call_tx.send(c).is_ok(),
        &answer_rx,
        &cancel,
    );
    drop(answer_rx);
    let _ = tools.join();
    out
}

fn value(out: &Outcome) -> Value {
    match &out.value {
        Ok(text) => serde_json::from_str(text).unwrap(),
        Err(e) => panic!("stopped: {e:?}, logs {:?}", out.logs),
    }
}

#[test]
fn a_script_returns_json_and_logs() {
    let out = run_with(
        r#"console.log("hi", {a: 1}); return {n: 1 + 1, s: "x"};"#,
        LIMITS,
    );
    assert_eq!(value(&out), json!({"n": 2, "s": "x"}));
    assert_eq!(out.logs, vec![r#"hi {"a":1}"#]);
    let out = run_with("const x = 1;", LIMITS);
    assert_eq!(value(&out), Value::Null);
}

#[test]
fn tools_are_called_and_awaited_in_parallel() {
    let out = run_with(
        r#"const sums = await Promise.all(Array.from({length: 20}, (_, i) => tools.fx_add({a: i, b: 1})));
           const echo = await tools.fx_echo({text: "t"});
           return {sums, echo};"#,
        LIMITS,
    );
    let v = value(&out);
    assert_eq!(v["sums"], json!((1..=20).collect::<Vec<i64>>()));
    assert_eq!(v["echo"], json!({"tool": "fx_echo", "args": {"text": "t"}}));
    assert_eq!(out.calls, 21);
}

#[test]
fn a_tool_error_throws_and_can_be_caught() {
    let out = run_with(
        r#"try { await tools.fx_fail({}); } catch (e) { return "caught: " + e.message; }"#,
        LIMITS,
    );
    assert_eq!(value(&out), json!("caught: fx_fail failed: as asked"));
    let out = run_with(r#"await tools.fx_fail({});"#, LIMITS);
    assert_eq!(
        out.value,
        Err(Stopped::Threw("Error: fx_fail failed: as asked".into()))
    );
}

#[test]
fn limits_stop_the_script_and_say_which() {
    let short = Limits {
        timeout: Duration::from_millis(300),
        ..LIMITS
    };
    let started = Instant::now();
    assert_eq!(
        run_with("while (true) {}", short).value,
        Err(Stopped::Timeout)
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // A catch does not save a loop past its deadline.
    let out = run_with("for (;;) { try { while (true) {} } catch (e) {} }", short);
    assert_eq!(out.value, Err(Stopped::Timeout));
    // Waiting on a call that never answers ends at the deadline too.
    let out = run_with("await tools.fx_never({});", short);
    assert_eq!(out.value, Err(Stopped::Timeout));
    assert_eq!(out.calls, 1);

    let out = run_with(
        "const a = []; while (true) { a.push(new Array(100000).fill(1)); }",
        LIMITS,
    );
    assert_eq!(out.value, Err(Stopped::Memory));

    let few = Limits {
        max_calls: 3,
        ..LIMITS
    };
    let out = run_with(
        r#"for (let i = 0; i < 10; i++) { try { await tools.fx_add({a: i, b: 0}); } catch (e) {} } return "went on";"#,
        few,
    );
    assert_eq!(out.value, Err(Stopped::MaxCalls));
    assert_eq!(out.calls, 3);
}

#[test]
fn nothing_of_the_host_is_reachable() {
    for (code, expect) in [
        ("return typeof require;", "undefined"),
        ("return typeof fetch;", "undefined"),
        ("return typeof process;", "undefined"),
        ("return typeof setTimeout;", "undefined"),
        ("return typeof std;", "undefined"),
        ("return typeof os;", "undefined"),
        ("return typeof __evo_call;", "undefined"),
        ("return typeof __evo_done;", "undefined"),
        (
            "return Object.getOwnPropertyNames(globalThis).filter(k => k.startsWith('__evo')).join() || 'none';",
            "none",
        ),
        ("return typeof XMLHttpRequest;", "undefined"),
    ] {
        assert_eq!(value(&run_with(code, LIMITS)), json!(expect), "{code}");
    }
    // eval runs in the same empty world.
    assert_eq!(
        value(&run_with("return eval('typeof require');", LIMITS)),
        json!("undefined")
    );
    let out = run_with("await import('os');", LIMITS);
    assert!(matches!(out.value, Err(Stopped::Threw(_))), "{out:?}");
    let out = run_with("import * as fs from 'fs';", LIMITS);
    assert!(
        matches!(&out.value, Err(Stopped::Threw(t)) if t.starts_with("SyntaxError")),
        "{out:?}"
    );
    let out = run_with("require('fs');", LIMITS);
    assert!(
        matches!(&out.value, Err(Stopped::Threw(t)) if t.contains("require")),
        "{out:?}"
    );
    // The tools object cannot be replaced or extended.
    let out = run_with(
        "tools.fx_add = () => 1; return await tools.fx_add({a: 1, b: 1});",
        LIMITS,
    );
    assert!(
        matches!(&out.value, Err(Stopped::Threw(t)) if t.starts_with("TypeError")),
        "{out:?}"
    );
}

#[test]
fn what_is_not_json_or_never_settles_is_an_error() {
    let out = run_with("return () => 1;", LIMITS);
    assert!(matches!(out.value, Err(Stopped::NotJson(_))), "{out:?}");
    let out = run_with("return 10n;", LIMITS);
    assert!(matches!(out.value, Err(Stopped::NotJson(_))), "{out:?}");
    let out = run_with("const o = {}; o.o = o; return o;", LIMITS);
    assert!(matches!(out.value, Err(Stopped::NotJson(_))), "{out:?}");
    let started = Instant::now();
    let out = run_with("await new Promise(() => {});", LIMITS);
    assert_eq!(out.value, Err(Stopped::Stalled));
    assert!(started.elapsed() < Duration::from_secs(2));
    let out = run_with("throw 'plain';", LIMITS);
    assert_eq!(out.value, Err(Stopped::Threw("uncaught \"plain\"".into())));
}

#[test]
fn cancelling_stops_a_run() {
    let (_call_tx, _call_rx) = mpsc::channel::<ToolCall>();
    let (_answer_tx, answer_rx) = mpsc::channel::<CallAnswer>();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let out = run("while (true) {}", LIMITS, |_| true, &answer_rx, &cancel);
    assert_eq!(out.value, Err(Stopped::Cancelled));
}
