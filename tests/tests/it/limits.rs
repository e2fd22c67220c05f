//! Result limits through real processes: `limits.max_result_bytes` and a
//! server's own `max_result_bytes` cut large results (direct calls and calls
//! through rmcp's request path alike), a reload changes the limit, and
//! invalid UTF-8 in a child's text is replaced rather than losing the call.

use evo_tests::harness::{
    daemon::Daemon,
    process::TempDir,
    servers::{fixture_server, raw_server},
};
use serde_json::{Value, json};

fn texts(r: &Value) -> Vec<String> {
    r["result"]["content"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn results_over_a_servers_limit_are_cut_on_every_call_path() {
    let mut small = fixture_server(&[]);
    small["max_result_bytes"] = json!(10_000);
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": small,
        "wide": fixture_server(&[]),
    }}));
    d.wait_ready(&["fx", "wide"]);
    let mut c = d.legacy_session();

    // Under the limit: whole, untouched.
    let r = c.request(
        "tools/call",
        json!({"name": "fx_big", "arguments": {"bytes": 5_000}}),
    );
    assert_eq!(texts(&r), vec!["x".repeat(5_000)], "{r}");
    assert!(r["result"]["_meta"]["evo/truncated"].is_null(), "{r}");

    // Over it: the direct call path, then the path a progress token takes.
    for params in [
        json!({"name": "fx_big", "arguments": {"bytes": 50_000}}),
        json!({"name": "fx_big", "arguments": {"bytes": 50_000}, "_meta": {"progressToken": "p1"}}),
    ] {
        let r = c.request("tools/call", params.clone());
        let size = r["result"].to_string().len();
        assert!(size <= 10_000, "{size} bytes for {params}");
        let t = texts(&r);
        assert_eq!(t.len(), 2, "{t:?}");
        assert!(
            t[0].len() > 8_000 && t[0].chars().all(|c| c == 'x'),
            "{}",
            t[0].len()
        );
        assert!(
            t[1].contains("max_result_bytes for 'fx'") && t[1].contains("of text were left out"),
            "{}",
            t[1]
        );
        assert_eq!(
            r["result"]["isError"],
            json!(false),
            "a cut result is no error: {r}"
        );
        let cut = &r["result"]["_meta"]["evo/truncated"];
        assert_eq!(cut["limit_bytes"], 10_000, "{r}");
        assert!(cut["original_bytes"].as_u64() > Some(50_000), "{cut}");
    }

    // Another server keeps the default (1 MiB).
    let r = c.request(
        "tools/call",
        json!({"name": "wide_big", "arguments": {"bytes": 50_000}}),
    );
    assert_eq!(texts(&r).len(), 1, "{r}");

    // A reload changes the limit of a running server, without restarting it.
    let pid = c.call_text("fx_pid", json!({})).0;
    let mut config: Value = serde_json::from_slice(&std::fs::read(&d.config).unwrap()).unwrap();
    config["mcpServers"]["fx"]["max_result_bytes"] = json!(100_000);
    std::fs::write(&d.config, config.to_string()).unwrap();
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(code, 0, "{out}{err}");
    let r = c.request(
        "tools/call",
        json!({"name": "fx_big", "arguments": {"bytes": 50_000}}),
    );
    assert_eq!(texts(&r).len(), 1, "the raised limit applies: {r}");
    assert_eq!(c.call_text("fx_pid", json!({})).0, pid, "not restarted");
}

#[test]
fn invalid_utf8_in_a_result_is_replaced_not_lost() {
    let dir = TempDir::new("utf8");
    let raw = raw_server(
        &dir,
        &json!([{"name": "invalid_utf8", "inputSchema": {"type": "object"}}]),
    );
    let d = Daemon::start(&json!({"mcpServers": {"raw": raw}}));
    d.wait_ready(&["raw"]);
    let mut c = d.legacy_session();
    let (text, is_error) = c.call_text("raw_invalid_utf8", json!({}));
    assert!(!is_error, "{text}");
    assert_eq!(
        text, "bad \u{FFFD}\u{FFFD} bytes",
        "replaced, the rest kept"
    );
    // Through the path a progress token takes (rmcp's reader) too.
    let r = c.request(
        "tools/call",
        json!({"name": "raw_invalid_utf8", "arguments": {}, "_meta": {"progressToken": 1}}),
    );
    assert_eq!(
        texts(&r),
        vec!["bad \u{FFFD}\u{FFFD} bytes".to_string()],
        "{r}"
    );
}
