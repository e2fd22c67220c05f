//! Code mode's TypeScript signatures through evod: `discover_tools` cards and
//! `describe_tool` (and `evoctl describe`) carry each tool's signature while
//! `code_mode.enabled` is on (the default), and say nothing of it when it is off.

use evo_tests::harness::{
    daemon::Daemon, mcp::McpClient, process::TempDir, servers::fixture_server,
};
use serde_json::{Value, json};

/// The fixture under `fx`, and a fixture under `wx` replaying one tool that
/// has an output schema (as a published server lists it).
fn daemon(code_mode: Option<Value>) -> (Daemon, TempDir) {
    let dir = TempDir::new("sig");
    let recorded = dir.0.join("tools.json");
    let tools = json!({"servers": [{"id": "weather", "tools": [{
        "name": "get_forecast",
        "description": "Get the weather forecast for a city.",
        "inputSchema": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, like Paris."},
            "days": {"type": "integer", "minimum": 1}
        }, "required": ["city"]},
        "outputSchema": {"type": "object", "properties": {
            "city": {"type": "string"},
            "days": {"type": "array", "items": {"$ref": "#/$defs/Day"}}
        }, "required": ["city", "days"],
        "$defs": {"Day": {"type": "object", "properties": {
            "date": {"type": "string"}, "sky": {"enum": ["sun", "rain"]}
        }, "required": ["date", "sky"]}}}
    }]}]});
    std::fs::write(&recorded, tools.to_string()).unwrap();
    let replay = recorded.to_string_lossy().into_owned();
    let mut config = json!({"mcpServers": {
        "fx": fixture_server(&[]),
        "wx": fixture_server(&["--replay", &replay, "--server", "weather"]),
    }});
    if let Some(c) = code_mode {
        config["code_mode"] = c;
    }
    let d = Daemon::start(&config);
    d.wait_ready(&["fx", "wx"]);
    (d, dir)
}

fn modern_session(d: &Daemon) -> McpClient {
    let mut c = d.session(&["--mode", "dynamic"]);
    c.discover();
    c
}

/// The card lines of `text` (a `discover_tools` answer) that start with `label`.
fn card_lines<'t>(text: &'t str, label: &str) -> Vec<&'t str> {
    let prefix = format!("  {label}: ");
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .collect()
}

const FORECAST: &str = "tools.wx_get_forecast(args: { /** City name, like Paris. */ city: string; days?: number }): \
Promise<{ city: string; days: { date: string; sky: \"sun\" | \"rain\" }[] }>";

#[test]
fn cards_and_describe_tool_carry_signatures_with_code_mode_on() {
    let (d, _dir) = daemon(None);
    let mut c = modern_session(&d);
    let (text, is_error) = c.call_text(
        "discover_tools",
        json!({"query": "weather forecast for a city", "limit": 1}),
    );
    assert!(!is_error, "{text}");
    assert_eq!(card_lines(&text, "input").len(), 1, "{text}");
    // A card gives its signature less than half the room of the rest: the
    // nested result is `object` there, and written out by describe_tool.
    assert_eq!(
        card_lines(&text, "signature"),
        [
            "tools.wx_get_forecast(args: { city: string; days?: number }): Promise<{ city: string; days: object[] }>"
        ],
        "{text}"
    );

    let (text, _) = c.call_text(
        "discover_tools",
        json!({"query": "add two numbers", "limit": 1}),
    );
    assert_eq!(
        card_lines(&text, "signature"),
        ["tools.fx_add(args: { a: number; b: number }): Promise<string>"],
        "{text}"
    );

    let (text, is_error) = c.call_text("describe_tool", json!({"name": "wx_get_forecast"}));
    assert!(!is_error, "{text}");
    assert!(
        text.contains(&format!(
            "\nTypeScript (in run_code; returns the result's structuredContent):\n{FORECAST}\n"
        )),
        "{text}"
    );
    let (text, _) = c.call_text("describe_tool", json!({"name": "fx_echo"}));
    assert!(
        text.contains(
            "\nTypeScript (in run_code; returns the result's text):\ntools.fx_echo(args: { text: string; \
             /** Also send the text as a log message (notifications/message) at this level. */ \
             log_level?: \"debug\" | \"info\" | \"notice\" | \"warning\" | \"error\" | \"critical\" | \"alert\" | \"emergency\" }): \
             Promise<string>\n"
        ),
        "{text}"
    );

    // Initialize-era cards (asked for with `schemas`) carry it too.
    let mut old = d.session(&["--mode", "dynamic"]);
    old.initialize();
    let (text, _) = old.call_text(
        "discover_tools",
        json!({"query": "add two numbers", "limit": 1, "activate": false, "schemas": true}),
    );
    assert_eq!(card_lines(&text, "signature").len(), 1, "{text}");

    // A person's `evoctl describe` says the same.
    let described = d.ctl_json(&["describe", "wx_get_forecast"]);
    let text = described["text"].as_str().unwrap_or_default();
    assert!(text.contains(FORECAST), "{described}");
}

#[test]
fn without_code_mode_there_are_no_signatures() {
    let (d, _dir) = daemon(Some(json!({"enabled": false})));
    let mut c = modern_session(&d);
    let (text, _) = c.call_text(
        "discover_tools",
        json!({"query": "weather forecast for a city", "limit": 3}),
    );
    assert!(!card_lines(&text, "input").is_empty(), "{text}");
    assert!(card_lines(&text, "signature").is_empty(), "{text}");
    let (text, is_error) = c.call_text("describe_tool", json!({"name": "wx_get_forecast"}));
    assert!(!is_error && text.contains("Input schema:"), "{text}");
    assert!(
        !text.contains("TypeScript") && !text.contains("tools.wx_get_forecast"),
        "{text}"
    );
    let described = d.ctl_json(&["describe", "wx_get_forecast"]);
    assert!(!described.to_string().contains("TypeScript"), "{described}");
}
