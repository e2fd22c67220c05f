use rmcp::model::Tool;
use serde_json::{Map, Value, json};

use super::*;
use crate::catalog::snapshot::Snapshot;
use crate::search::{CardParts, card};

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object: {v}"),
    }
}

/// The full signature of a tool `t` with input schema `input`.
fn sig(input: Value) -> String {
    signature("t", &obj(input), None)
}

/// The type a property of schema `schema` gets (the signature's `x`).
fn prop(schema: Value) -> String {
    let s = sig(json!({"type": "object", "properties": {"x": schema}, "required": ["x"]}));
    let inner = s
        .strip_prefix("tools.t(args: { x: ")
        .and_then(|s| s.strip_suffix(" }): Promise<string>"))
        .unwrap_or_else(|| panic!("unexpected shape: {s}"));
    inner.to_owned()
}

#[test]
fn objects_say_required_and_optional_and_the_result_is_text_without_an_output_schema() {
    assert_eq!(
        signature(
            "github_create_issue",
            &obj(json!({
                "type": "object",
                "properties": {
                    "owner": {"type": "string"},
                    "repo": {"type": "string"},
                    "title": {"type": "string"},
                    "body": {"type": "string"},
                    "labels": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["owner", "repo", "title"]
            })),
            Some(&obj(json!({
                "type": "object",
                "properties": {"number": {"type": "integer"}, "url": {"type": "string"}},
                "required": ["number", "url"]
            })))
        ),
        "tools.github_create_issue(args: { owner: string; repo: string; title: string; body?: string; labels?: string[] }): Promise<{ number: number; url: string }>"
    );
    assert_eq!(
        sig(json!({"type": "object", "properties": {"q": {"type": "string"}}})),
        "tools.t(args?: { q?: string }): Promise<string>"
    );
    assert_eq!(
        sig(json!({"type": "object"})),
        "tools.t(args?: Record<string, unknown>): Promise<string>"
    );
    assert_eq!(
        sig(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        "tools.t(args?: {}): Promise<string>"
    );
}

#[test]
fn scalar_types() {
    for (schema, want) in [
        (json!({"type": "string", "format": "date"}), "string"),
        (json!({"type": "integer", "minimum": 0}), "number"),
        (json!({"type": "number"}), "number"),
        (json!({"type": "boolean"}), "boolean"),
        (json!({"type": "null"}), "null"),
        (json!({}), "unknown"),
        (json!(true), "unknown"),
        (json!(false), "never"),
        (json!({"type": "bogus"}), "unknown"),
        (json!({"title": "anything"}), "unknown"),
    ] {
        assert_eq!(prop(schema.clone()), want, "{schema}");
    }
}

#[test]
fn arrays_and_tuples() {
    for (schema, want) in [
        (json!({"type": "array"}), "unknown[]"),
        (
            json!({"type": "array", "items": {"type": "number"}}),
            "number[]",
        ),
        (
            json!({"type": "array", "items": {"type": ["string", "number"]}}),
            "(string | number)[]",
        ),
        (
            json!({"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}),
            "boolean[][]",
        ),
        (
            json!({"type": "array", "prefixItems": [{"type": "number"}, {"type": "string"}]}),
            "[number, string]",
        ),
        (
            json!({"type": "array", "items": [{"type": "number"}, {"type": "number"}]}),
            "[number, number]",
        ),
        (
            json!({"items": {"type": "object", "properties": {"id": {"type": "string"}}}}),
            "{ id?: string }[]",
        ),
    ] {
        assert_eq!(prop(schema.clone()), want, "{schema}");
    }
}

#[test]
fn enums_and_consts_are_literal_unions() {
    for (schema, want) in [
        (
            json!({"type": "string", "enum": ["open", "closed", "all"]}),
            r#""open" | "closed" | "all""#,
        ),
        (json!({"enum": [1, 2, 3, 2]}), "1 | 2 | 3"),
        (json!({"enum": ["a", null, true]}), r#""a" | null | true"#),
        (json!({"enum": []}), "never"),
        (json!({"const": "v1"}), r#""v1""#),
        (json!({"const": 42}), "42"),
        (json!({"const": {"a": 1}}), "unknown"),
        (
            json!({"type": "string", "enum": ["say \"hi\""]}),
            r#""say \"hi\"""#,
        ),
        (
            json!({"type": "array", "items": {"enum": ["x", "y"]}}),
            r#"("x" | "y")[]"#,
        ),
    ] {
        assert_eq!(prop(schema.clone()), want, "{schema}");
    }
}

#[test]
fn unions_type_lists_and_nullable() {
    for (schema, want) in [
        (json!({"type": ["string", "null"]}), "string | null"),
        (json!({"type": ["integer", "number"]}), "number"),
        (
            json!({"anyOf": [{"type": "string"}, {"type": "number"}]}),
            "string | number",
        ),
        (
            json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
            "string | string[]",
        ),
        (
            json!({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}),
            "string | null",
        ),
        (
            json!({"anyOf": [{"type": ["string", "null"]}, {"type": "null"}]}),
            "string | null",
        ),
        // Branches that only say which property is required add nothing to the type.
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                   "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            "{ a?: string; b?: string }",
        ),
        (
            json!({"type": "string", "anyOf": [{"format": "date"}, {"format": "date-time"}]}),
            "string",
        ),
        (json!({"type": "string", "nullable": true}), "string | null"),
        (
            json!({"type": ["string", "null"], "nullable": true}),
            "string | null",
        ),
        (
            json!({"oneOf": [
                {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                {"type": "object", "properties": {"kind": {"const": "b"}, "n": {"type": "number"}}, "required": ["kind", "n"]}
            ]}),
            r#"{ kind: "a" } | { kind: "b"; n: number }"#,
        ),
    ] {
        assert_eq!(prop(schema.clone()), want, "{schema}");
    }
}

#[test]
fn all_of_merges_objects_and_otherwise_intersects() {
    for (schema, want) in [
        (
            json!({"allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "number"}}}
            ]}),
            "{ a: string; b?: number }",
        ),
        (
            json!({"type": "object", "properties": {"c": {"type": "boolean"}}, "required": ["c"],
                   "allOf": [{"$ref": "#/$defs/Base"}]}),
            "{ c: boolean; id: string }",
        ),
        (
            json!({"allOf": [{"type": "string"}, {"enum": ["x", "y"]}]}),
            r#"string & ("x" | "y")"#,
        ),
        (json!({"allOf": [{"minLength": 1}]}), "unknown"),
    ] {
        let s = sig(json!({
            "type": "object",
            "properties": {"x": schema},
            "required": ["x"],
            "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
        }));
        assert_eq!(
            s,
            format!("tools.t(args: {{ x: {want} }}): Promise<string>"),
            "{schema}"
        );
    }
}

#[test]
fn refs_are_inlined_and_recursion_stops_at_unknown() {
    assert_eq!(
        sig(json!({
            "type": "object",
            "properties": {
                "a": {"$ref": "#/$defs/Point"},
                "b": {"$ref": "#/definitions/Color"},
                "c": {"$ref": "#/$defs/Missing"},
                "d": {"$ref": "https://example.com/remote.json"}
            },
            "required": ["a"],
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}},
            "definitions": {"Color": {"enum": ["red", "green"]}}
        })),
        r#"tools.t(args: { a: { x: number; y: number }; b?: "red" | "green"; c?: unknown; d?: unknown }): Promise<string>"#
    );
    // A tree of nodes: the node inside a node is not written out again.
    assert_eq!(
        sig(json!({
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "required": ["root"],
            "$defs": {"Node": {"type": "object", "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
            }, "required": ["name"]}}
        })),
        "tools.t(args: { root: { name: string; children?: unknown[] } }): Promise<string>"
    );
    // A reference to the root itself.
    assert_eq!(
        sig(json!({"type": "object", "properties": {"next": {"$ref": "#"}}})),
        "tools.t(args?: { next?: { next?: unknown } }): Promise<string>"
    );
}

#[test]
fn nesting_past_the_depth_limit_is_unknown() {
    let mut schema = json!({"type": "string"});
    for _ in 0..12 {
        schema = json!({"type": "object", "properties": {"n": schema}, "required": ["n"]});
    }
    let s = signature("t", &obj(schema), None);
    assert_eq!(s.matches("{ n: ").count(), MAX_DEPTH + 1, "{s}");
    assert!(
        s.contains("{ n: unknown }") && !s.contains(": string"),
        "{s}"
    );
}

#[test]
fn additional_and_pattern_properties_are_records_or_index_signatures() {
    for (schema, want) in [
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            "Record<string, string>",
        ),
        (
            json!({"type": "object", "additionalProperties": true}),
            "Record<string, unknown>",
        ),
        (
            json!({"type": "object", "patternProperties": {"^x-": {"type": "number"}}}),
            "Record<string, number>",
        ),
        (
            json!({"type": "object", "properties": {"id": {"type": "string"}},
                   "additionalProperties": {"type": "string"}}),
            "{ id?: string; [key: string]: string }",
        ),
        (
            json!({"type": "object", "properties": {"id": {"type": "string"}},
                   "additionalProperties": false}),
            "{ id?: string }",
        ),
        (
            json!({"additionalProperties": {"type": "array", "items": {"type": "number"}}}),
            "Record<string, number[]>",
        ),
    ] {
        assert_eq!(prop(schema.clone()), want, "{schema}");
    }
}

#[test]
fn names_that_are_not_identifiers_are_quoted() {
    assert_eq!(
        signature(
            "my-server_do.it",
            &obj(json!({"type": "object", "properties": {
                "x-api-key": {"type": "string"}, "2fa": {"type": "string"},
                "$ok": {"type": "string"}, "_also": {"type": "string"}, "with \"quote\"": {"type": "string"}
            }})),
            None
        ),
        r#"tools["my-server_do.it"](args?: { "x-api-key"?: string; "2fa"?: string; $ok?: string; _also?: string; "with \"quote\""?: string }): Promise<string>"#
    );
}

#[test]
fn descriptions_are_short_comments() {
    assert_eq!(
        sig(json!({
            "type": "object",
            "description": "The root's description is the tool's own: not repeated.",
            "properties": {
                "path": {"type": "string", "description": "File to read. Relative paths are resolved from the root."},
                "mode": {"type": "string", "description": "  "},
                "long": {"type": "string", "description": "A very long description that goes on and on about every little detail of the parameter and then some more."},
                "nasty": {"type": "string", "description": "Ends a comment */ early"},
                "nested": {"type": "object", "properties": {"n": {"type": "number", "description": "Inner."}}}
            },
            "required": ["path"]
        })),
        "tools.t(args: { /** File to read. */ path: string; mode?: string; \
         /** A very long description that goes on and on about every little detail of the… */ long?: string; \
         /** Ends a comment * / early */ nasty?: string; nested?: { /** Inner. */ n?: number } }): Promise<string>"
    );
}

#[test]
fn an_output_schema_types_the_result() {
    let input = obj(
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    );
    let output = obj(json!({
        "type": "object",
        "properties": {
            "temperature": {"type": "number", "description": "Degrees Celsius."},
            "conditions": {"$ref": "#/$defs/Conditions"}
        },
        "required": ["temperature"],
        "$defs": {"Conditions": {"enum": ["sunny", "rain"]}}
    }));
    assert_eq!(
        signature("weather_get", &input, Some(&output)),
        r#"tools.weather_get(args: { city: string }): Promise<{ /** Degrees Celsius. */ temperature: number; conditions?: "sunny" | "rain" }>"#
    );
    // Cards shed the output's comments first, then all, then nested objects.
    let full = signature("weather_get", &input, Some(&output));
    assert_eq!(
        card_signature("weather_get", &input, Some(&output), 10_000),
        full
    );
    assert_eq!(
        card_signature("weather_get", &input, Some(&output), full.len() - 1),
        r#"tools.weather_get(args: { city: string }): Promise<{ temperature: number; conditions?: "sunny" | "rain" }>"#
    );
    let nested = obj(json!({"type": "object", "properties": {
        "filter": {"type": "object", "description": "What to match.", "properties": {"tag": {"type": "string"}}}
    }}));
    assert_eq!(
        card_signature("t", &nested, None, 52),
        "tools.t(args?: { filter?: object }): Promise<string>"
    );
    // Then optional properties are counted, and long enums are their type.
    let wide = obj(json!({"type": "object", "properties": {
        "id": {"type": "string"},
        "sort": {"enum": ["a", "b", "c", "d", "e"]},
        "order": {"enum": ["asc", "desc"]},
        "page": {"type": "number"}
    }, "required": ["id", "sort", "order"]}));
    assert_eq!(
        card_signature("t", &wide, Some(&nested), 20),
        r#"tools.t(args: { id: string; sort: string; order: "asc" | "desc"; /* +1 optional */ }): Promise<{ /* +1 optional */ }>"#
    );
}

/// Tools shaped like published servers' (GitHub, file system, fetch, Slack,
/// a database, a browser, time), as the catalog has them.
fn realistic_tools() -> Vec<Tool> {
    let tools = json!([
        {"name": "create_issue", "description": "Create a new issue in a GitHub repository.",
         "inputSchema": {"type": "object", "properties": {
            "owner": {"type": "string", "description": "Repository owner (user or organization)"},
            "repo": {"type": "string", "description": "Repository name"},
            "title": {"type": "string", "description": "Issue title"},
            "body": {"type": "string", "description": "Issue body content"},
            "assignees": {"type": "array", "items": {"type": "string"}, "description": "Usernames to assign to this issue"},
            "labels": {"type": "array", "items": {"type": "string"}, "description": "Labels to apply to this issue"},
            "milestone": {"type": "number", "description": "Milestone number"}},
          "required": ["owner", "repo", "title"], "additionalProperties": false,
          "$schema": "http://json-schema.org/draft-07/schema#"}},
        {"name": "list_issues", "description": "List issues in a GitHub repository with filtering options.",
         "inputSchema": {"type": "object", "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"},
            "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "Filter by state"},
            "labels": {"type": "array", "items": {"type": "string"}},
            "sort": {"type": "string", "enum": ["created", "updated", "comments"]},
            "direction": {"type": "string", "enum": ["asc", "desc"]},
            "since": {"type": "string", "description": "ISO 8601 timestamp"},
            "page": {"type": "number", "minimum": 1}, "per_page": {"type": "number", "maximum": 100}},
          "required": ["owner", "repo"]}},
        {"name": "read_text_file", "description": "Read the complete contents of a file from the file system as text. Handles various text encodings.",
         "inputSchema": {"type": "object", "properties": {
            "path": {"type": "string"},
            "tail": {"type": "number", "description": "If provided, returns only the last N lines of the file"},
            "head": {"type": "number", "description": "If provided, returns only the first N lines of the file"}},
          "required": ["path"]}},
        {"name": "edit_file", "description": "Make line-based edits to a text file.",
         "inputSchema": {"type": "object", "properties": {
            "path": {"type": "string"},
            "edits": {"type": "array", "items": {"type": "object", "properties": {
                "oldText": {"type": "string", "description": "Text to search for - must match exactly"},
                "newText": {"type": "string", "description": "Text to replace with"}},
              "required": ["oldText", "newText"], "additionalProperties": false}},
            "dryRun": {"type": "boolean", "default": false, "description": "Preview changes using git-style diff format"}},
          "required": ["path", "edits"]}},
        {"name": "fetch", "description": "Fetches a URL from the internet and optionally extracts its contents as markdown.",
         "inputSchema": {"type": "object", "title": "Fetch", "properties": {
            "url": {"type": "string", "format": "uri", "minLength": 1, "title": "Url", "description": "URL to fetch"},
            "max_length": {"type": "integer", "default": 5000, "exclusiveMinimum": 0, "exclusiveMaximum": 1000000, "title": "Max Length", "description": "Maximum number of characters to return."},
            "start_index": {"type": "integer", "default": 0, "minimum": 0, "title": "Start Index", "description": "On return output starting at this character index, useful if a previous fetch was truncated and more context is required."},
            "raw": {"type": "boolean", "default": false, "title": "Raw", "description": "Get the actual HTML content of the requested page, without simplification."}},
          "required": ["url"]}},
        {"name": "slack_post_message", "description": "Post a new message to a Slack channel",
         "inputSchema": {"type": "object", "properties": {
            "channel_id": {"type": "string", "description": "The ID of the channel to post to"},
            "text": {"type": "string", "description": "The message text to post"}},
          "required": ["channel_id", "text"]}},
        {"name": "query", "description": "Run a read-only SQL query.",
         "inputSchema": {"type": "object", "properties": {"sql": {"type": "string"},
            "params": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]}}},
          "required": ["sql"]},
         "outputSchema": {"type": "object", "properties": {
            "rows": {"type": "array", "items": {"type": "object", "additionalProperties": true}},
            "rowCount": {"type": "integer"}}, "required": ["rows", "rowCount"]}},
        {"name": "browser_click", "description": "Perform click on a web page",
         "inputSchema": {"type": "object", "properties": {
            "element": {"type": "string", "description": "Human-readable element description used to obtain permission to interact with the element"},
            "ref": {"type": "string", "description": "Exact target element reference from the page snapshot"},
            "doubleClick": {"type": "boolean", "description": "Whether to perform a double click instead of a single click"},
            "button": {"type": "string", "enum": ["left", "right", "middle"], "description": "Button to click, defaults to left"}},
          "required": ["element", "ref"], "additionalProperties": false}},
        {"name": "get_current_time", "description": "Get current time in a specific timezones",
         "inputSchema": {"type": "object", "properties": {
            "timezone": {"type": "string", "description": "IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use 'UTC' as local timezone if no timezone provided by the user."}},
          "required": ["timezone"]},
         "outputSchema": {"type": "object", "properties": {
            "timezone": {"type": "string"}, "datetime": {"type": "string"}, "day_of_week": {"type": "string"}, "is_dst": {"type": "boolean"}},
          "required": ["timezone", "datetime", "day_of_week", "is_dst"]}},
        {"name": "search_pull_requests", "description": "Search for pull requests across GitHub repositories.",
         "inputSchema": {"type": "object", "properties": {
            "query": {"type": "string", "description": "Search query using GitHub pull request search syntax"},
            "sort": {"type": "string", "enum": ["comments", "reactions", "reactions-+1", "reactions--1", "reactions-smile", "reactions-thinking_face", "reactions-heart", "reactions-tada", "interactions", "created", "updated"], "description": "Sort field by number of matches of categories, defaults to best match"},
            "order": {"type": "string", "enum": ["asc", "desc"], "description": "Sort order"},
            "page": {"type": "number", "minimum": 1, "description": "Page number for pagination (min 1)"},
            "perPage": {"type": "number", "minimum": 1, "maximum": 100, "description": "Results per page for pagination (min 1, max 100)"}},
          "required": ["query"]}}
    ]);
    serde_json::from_value(tools).expect("tools")
}

/// Bytes of the cards of `tools` without and with their signatures.
fn card_bytes(servers: &[(String, Vec<Tool>)]) -> (usize, usize, Vec<(f64, String)>) {
    let snapshot = Snapshot::of_tools(servers);
    let (mut without, mut with, mut each) = (0, 0, Vec::new());
    let schema_only = CardParts {
        schema: true,
        signature: false,
    };
    let both = CardParts {
        schema: true,
        signature: true,
    };
    for entry in &snapshot.tools {
        let before = card(entry, 1.0, schema_only).len();
        let after = card(entry, 1.0, both).len();
        without += before;
        with += after;
        each.push(((after - before) as f64 / before as f64, entry.name.clone()));
    }
    (without, with, each)
}

#[test]
fn a_card_grows_by_less_than_half_with_its_signature() {
    let (without, with, mut each) = card_bytes(&[("gh".to_string(), realistic_tools())]);
    let growth = (with - without) as f64 / without as f64;
    assert!(growth < 0.5, "cards grew by {:.0}%", growth * 100.0);
    // A typical card too; one whose output schema is news to the card may grow more.
    each.sort_by(|a, b| a.0.total_cmp(&b.0));
    let median = each[each.len() / 2].0;
    assert!(
        median < 0.5,
        "the median card grew by {:.0}%",
        median * 100.0
    );
}

/// The goal over the real catalog: every card, and all of them together.
#[test]
fn catalog_cards_grow_by_less_than_half() {
    let Some((_, catalog)) = crate::test_catalog::load("typescript::catalog_cards_grow") else {
        return;
    };
    let mut servers = Vec::new();
    for server in catalog["servers"].as_array().expect("servers") {
        let id = server["id"].as_str().expect("id").to_string();
        let tools: Vec<Tool> = server["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| {
                let mut t = t.clone();
                // As the daemon exposes them: some children send only `$schema`.
                if let Some(Value::Object(s)) = t.get_mut("inputSchema") {
                    s.entry("type").or_insert_with(|| json!("object"));
                }
                serde_json::from_value(t).ok()
            })
            .collect();
        servers.push((id, tools));
    }
    let parsed: usize = servers.iter().map(|(_, t)| t.len()).sum();
    let (without, with, mut each) = card_bytes(&servers);
    let growth = (with - without) as f64 / without as f64;
    each.sort_by(|a, b| a.0.total_cmp(&b.0));
    let at = |q: f64| each[((each.len() - 1) as f64 * q) as usize].0 * 100.0;
    println!(
        "catalog cards: {} tools ({parsed} read), {without} bytes without signatures, {with} with: +{:.1}% \
         (per card: median +{:.1}%, p90 +{:.1}%, max +{:.1}% {})",
        each.len(),
        growth * 100.0,
        at(0.5),
        at(0.9),
        at(1.0),
        each.last().map_or("", |e| e.1.as_str())
    );
    assert!(each.len() > 2000, "{} tools", each.len());
    assert!(growth < 0.5, "cards grew by {:.1}%", growth * 100.0);
    assert!(at(0.5) < 50.0, "the median card grew by {:.1}%", at(0.5));
}
