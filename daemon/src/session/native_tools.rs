//! The native tools every session sees, never prefixed: their definitions and
//! the parsing of their arguments.

use std::sync::Arc;

use crate::schema::example;
use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

pub const CALL_TOOL: &str = "call_tool";
pub const DISCOVER_TOOLS: &str = "discover_tools";
pub const DESCRIBE_CAPABILITY: &str = "describe_capability";
pub const DESCRIBE_TOOL: &str = "describe_tool";
pub const RUN_CODE: &str = "run_code";

/// Every native name: a proxied tool exposed under one of these (a server
/// with `prefix: ""`) is a collision the native tool wins (`run_code` is
/// reserved whether or not code mode is on, so turning it on renames
/// nothing).
pub const NAMES: [&str; 5] = [
    DISCOVER_TOOLS,
    DESCRIBE_CAPABILITY,
    CALL_TOOL,
    DESCRIBE_TOOL,
    RUN_CODE,
];

/// Closes the instructions of a dynamic 2026-07-28 session.
pub const MODERN_NOTE: &str = "\nOn this protocol version (2026-07-28) the tool list stays fixed: discover_tools returns matches with their input schemas, and you call a match by its exact name or through call_tool.";

/// After the matches of a 2026-07-28 session's discover_tools.
pub const MODERN_CALL_HINT: &str = "\nCall a match by its exact name, or through call_tool if your client only calls listed tools.";

/// The same, when the agent asked for `activate: true`.
pub const MODERN_NO_ACTIVATION: &str = "\nNot activated: on this protocol version (2026-07-28) the tool list does not change per session, so tools are called by their exact name or through call_tool, not activated. Call a match by its exact name, or through call_tool.";

/// How `evoctl status` names the native tools' owner in a collision.
pub const OWNER: &str = "evo:native";

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema: JsonObject = match schema {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

/// `describe_tool` of a native tool: what it does, its schema and an
/// example, in the shape proxied tools are described.
pub fn describe(name: &str, code_mode: bool) -> Option<String> {
    let tool = tools(code_mode).iter().find(|t| t.name == name)?;
    let schema = serde_json::to_string_pretty(&*tool.input_schema).unwrap_or_default();
    Some(format!(
        "{name} [native: evo's own, always listed]\n\n{}\n\nInput schema:\n{schema}\n\nExample call:\n{}\n",
        tool.description.as_deref().unwrap_or_default(),
        example::example_call(name, &tool.input_schema)
    ))
}

/// The native tools, in the order they are listed (built once): with code
/// mode on, `run_code` last.
pub fn tools(code_mode: bool) -> &'static [Tool] {
    static TOOLS: std::sync::LazyLock<Vec<Tool>> = std::sync::LazyLock::new(|| {
        let mut all = definitions();
        all.push(run_code());
        all
    });
    if code_mode {
        &TOOLS
    } else {
        &TOOLS[..TOOLS.len() - 1]
    }
}

fn run_code() -> Tool {
    tool(
        RUN_CODE,
        "Run a JavaScript async function body inside evo, for a task that needs several tool calls: `await tools.NAME(args)` calls any tool you may call directly, by its exact name (found with discover_tools), and returns its structuredContent when it has one, else its text; a failing tool throws an Error carrying its message. Calls can run together (Promise.all). console.log lines and the value you return (JSON) are the result. Nothing else is there: no file system, network, timers, modules or require. Each call is checked like a direct call (permissions, approvals); limits per run: time, memory, number of calls.",
        json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The body of an async function, e.g. \"const t = await tools.time_get_current_time({timezone: 'UTC'}); console.log(t); return t;\""},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Stop the run after this many milliseconds (at most the configured code_mode.timeout_ms, 30000 by default)."}
            },
            "required": ["code"]
        }),
    )
}

fn definitions() -> Vec<Tool> {
    vec![
        tool(
            DISCOVER_TOOLS,
            "Search every tool evo can reach by what you want to do. Returns one line per match: name, summary, domain, score; with schemas (always on MCP 2026-07-28) each match also carries its input schema, so you can call it next. Before 2026-07-28 the matches are also added to your tool list; either way, call a match by its exact name or through call_tool.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The operation you need and what it acts on, in plain words, e.g. \"convert a time between timezones\". Name the action rather than the situation: \"scale a deployment\", not \"traffic is spiking\"."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most matches to return (default from config, 8)."},
                    "domain": {"type": "string", "description": "Only search this domain (see describe_capability)."},
                    "activate": {"type": "boolean", "default": true, "description": "Make the matches visible in tools/list (default true; sessions before MCP 2026-07-28 only)."},
                    "schemas": {"type": "boolean", "default": false, "description": "Give each match its input schema in compact form (always on for MCP 2026-07-28)."}
                },
                "required": ["query"]
            }),
        ),
        tool(
            DESCRIBE_CAPABILITY,
            "List the domains of tools evo can reach with their tool counts, or the tools of one domain, one line each.",
            json!({
                "type": "object",
                "properties": {
                    "domain": {"type": "string", "description": "A domain to list; omit for every domain."}
                }
            }),
        ),
        tool(
            DESCRIBE_TOOL,
            "Show one tool's full description, input schema and a worked example call.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Exact tool name, e.g. \"time_convert_time\"."}
                },
                "required": ["name"]
            }),
        ),
        tool(
            CALL_TOOL,
            "Call any tool evo can reach by its exact name, whether or not it is listed. Use it when a tool you found is not in your tool list.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Exact tool name, e.g. \"time_get_current_time\"."},
                    "arguments": {"type": "object", "description": "The tool's arguments.", "default": {}}
                },
                "required": ["name"]
            }),
        ),
    ]
}

/// A required string argument of a native tool, with a usage error.
pub fn string_arg<'a>(
    args: Option<&'a JsonObject>,
    key: &str,
    tool: &str,
) -> Result<&'a str, String> {
    args.and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{tool} needs a string \"{key}\""))
}

/// Arguments of `call_tool`.
pub fn parse_call_tool(args: Option<&JsonObject>) -> Result<(String, Option<JsonObject>), String> {
    let args = args.ok_or("call_tool needs {\"name\": \"<tool>\", \"arguments\": {...}}")?;
    let name = args
        .get("name")
        .and_then(Value::as_str)
        .ok_or("call_tool needs a string \"name\": the exact name of the tool to call")?;
    let arguments = match args.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Some(m),
            _ => {
                return Err(
                    "call_tool \"arguments\" must be an object of the tool's arguments".into(),
                );
            }
        },
        Some(_) => {
            return Err("call_tool \"arguments\" must be an object of the tool's arguments".into());
        }
    };
    Ok((name.to_string(), arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> JsonObject {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn call_tool_arguments() {
        let (n, a) =
            parse_call_tool(Some(&obj(json!({"name": "x_y", "arguments": {"a": 1}})))).unwrap();
        assert_eq!(n, "x_y");
        assert_eq!(a.unwrap().get("a"), Some(&json!(1)));
        let (_, a) =
            parse_call_tool(Some(&obj(json!({"name": "x", "arguments": "{\"b\":2}"})))).unwrap();
        assert_eq!(a.unwrap().get("b"), Some(&json!(2)));
        assert!(
            parse_call_tool(Some(&obj(json!({"name": "x"}))))
                .unwrap()
                .1
                .is_none()
        );
        assert!(parse_call_tool(None).is_err());
        assert!(parse_call_tool(Some(&obj(json!({"arguments": {}})))).is_err());
        assert!(parse_call_tool(Some(&obj(json!({"name": "x", "arguments": [1]})))).is_err());
    }

    #[test]
    fn native_schemas_are_objects() {
        for t in tools(true) {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                t.name
            );
        }
    }
}
