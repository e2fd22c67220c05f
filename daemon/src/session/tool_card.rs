//! Tool cards: what `discover_tools` returns for a match when the agent is
//! to call it next without `describe_tool` (always on 2026-07-28 sessions,
//! where matches are not activated). A card is the match's line plus its
//! input schema in compact form: the same constraints, fewer bytes.
//!
//! Compact form drops what a model does not need to build a call:
//! `$schema`, `$id`, `$comment`, `examples`, the root's description (the
//! card's summary says it) and titles that only repeat a property's or
//! definition's name; every description keeps its first sentence. Types,
//! `required`, enums, defaults, formats, bounds and `$ref`/`$defs` stay.
//!
//! A schema still over [`CARD_SCHEMA_BUDGET`] is abridged: its top-level
//! properties keep their type, enum, default and a short description, and
//! nested structure is left to `describe_tool` (the card says so). Past the
//! budget even then, only the required properties are shown.
//!
//! The budget is 700 bytes. Abridging goes in steps: top-level properties with type, short enum,
//! default and description; then without descriptions; then only the required ones. Cards are
//! compacted once per entry and kept with it (`ToolEntry::card_schema`).

use serde_json::{Map, Value};

use crate::schema;

/// Bytes of compact JSON a card carries whole; past it the schema is
/// abridged. Five typical cards then stay under 4 KB with their lines.
pub const CARD_SCHEMA_BUDGET: usize = 700;

/// Longest enum an abridged property keeps whole.
const ABRIDGED_ENUM_MAX: usize = 12;

/// Keys that never help build a call.
const DROPPED: [&str; 5] = [
    "$schema",
    "$id",
    "$comment",
    "examples",
    "markdownDescription",
];

/// A tool's input schema as a card shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CardSchema {
    /// The compact schema as one line of JSON.
    pub json: String,
    /// Nested structure was left out: `describe_tool` shows all of it.
    pub abridged: bool,
}

/// The compact form of `input` (a tool's input schema).
pub fn compact(input: &Map<String, Value>) -> CardSchema {
    let mut root = Value::Object(input.clone());
    tidy(&mut root, None);
    if let Value::Object(m) = &mut root {
        m.remove("description");
        m.remove("title");
    }
    let json = root.to_string();
    if json.len() <= CARD_SCHEMA_BUDGET {
        return CardSchema {
            json,
            abridged: false,
        };
    }
    let Value::Object(root) = root else {
        return CardSchema {
            json,
            abridged: false,
        };
    };
    let mut json = String::new();
    for (describe, only_required) in [(true, false), (false, false), (false, true)] {
        json = Value::Object(abridged(&root, describe, only_required)).to_string();
        if json.len() <= CARD_SCHEMA_BUDGET {
            break;
        }
    }
    CardSchema {
        json,
        abridged: true,
    }
}

/// Compacts a schema node in place; `name` is the property or definition
/// it is the schema of.
fn tidy(node: &mut Value, name: Option<&str>) {
    match node {
        Value::Object(m) => {
            for key in DROPPED {
                m.remove(key);
            }
            if let (Some(Value::String(title)), Some(name)) = (m.get("title"), name)
                && same_words(title, name)
            {
                m.remove("title");
            }
            if let Some(Value::String(d)) = m.get_mut("description") {
                let first = schema::summary(Some(d));
                if first == schema::NO_SUMMARY {
                    m.remove("description");
                } else {
                    *d = first;
                }
            }
            for (key, value) in m.iter_mut() {
                match key.as_str() {
                    "properties" | "patternProperties" | "$defs" | "definitions" => {
                        if let Value::Object(children) = value {
                            for (child, schema) in children.iter_mut() {
                                tidy(schema, Some(child));
                            }
                        }
                    }
                    "items"
                    | "additionalProperties"
                    | "not"
                    | "contains"
                    | "if"
                    | "then"
                    | "else" => tidy(value, None),
                    "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                        if let Value::Array(branches) = value {
                            for b in branches {
                                tidy(b, name);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| tidy(i, name)),
        _ => {}
    }
}

/// `"Repo Name"` and `repo_name` say the same words.
fn same_words(title: &str, name: &str) -> bool {
    let fold = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    fold(title) == fold(name)
}

/// The root with each top-level property cut to its type, enum, default
/// and (when `describe`) a short description; only required ones when
/// `only_required`.
fn abridged(root: &Map<String, Value>, describe: bool, only_required: bool) -> Map<String, Value> {
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    out.insert("type".into(), Value::String("object".into()));
    let mut properties = Map::new();
    if let Some(Value::Object(props)) = root.get("properties") {
        for (name, schema) in props {
            if only_required && !required.contains(&name.as_str()) {
                continue;
            }
            properties.insert(name.clone(), Value::Object(shallow(root, schema, describe)));
        }
    }
    out.insert("properties".into(), Value::Object(properties));
    if let Some(r) = root.get("required") {
        out.insert("required".into(), r.clone());
    }
    out
}

/// One property without its nested structure.
fn shallow(root: &Map<String, Value>, schema: &Value, describe: bool) -> Map<String, Value> {
    let mut out = Map::new();
    let Value::Object(m) = resolved(root, schema) else {
        return out;
    };
    match m.get("type") {
        Some(t) => {
            out.insert("type".into(), t.clone());
        }
        None => {
            let types: Vec<Value> = ["anyOf", "oneOf"]
                .iter()
                .filter_map(|k| m.get(*k).and_then(Value::as_array))
                .flatten()
                .filter_map(|b| match resolved(root, b) {
                    Value::Object(b) => b.get("type").cloned(),
                    _ => None,
                })
                .collect();
            if !types.is_empty() {
                out.insert("type".into(), Value::Array(types));
            }
        }
    }
    if let Some(Value::Array(values)) = m.get("enum")
        && values.len() <= ABRIDGED_ENUM_MAX
    {
        out.insert("enum".into(), Value::Array(values.clone()));
    }
    if let Some(d) = m.get("default") {
        out.insert("default".into(), d.clone());
    }
    if describe && let Some(Value::String(d)) = m.get("description") {
        out.insert("description".into(), Value::String(d.clone()));
    }
    out
}

/// A schema with a local `$ref` followed once.
fn resolved<'s>(root: &'s Map<String, Value>, schema: &'s Value) -> &'s Value {
    let target = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| schema::resolve_ref(root, r));
    match target {
        Some(schema::RefTarget::Node(node)) => node,
        _ => schema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn compact_form_keeps_constraints_and_drops_what_repeats() {
        let card = compact(&obj(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "CreateIssueArgs",
            "description": "Arguments. Long text about them.",
            "type": "object",
            "properties": {
                "repo_name": {"type": "string", "title": "Repo Name",
                              "description": "Owner/name of the repository. Must exist. See the docs."},
                "labels": {"type": "array", "items": {"type": "string", "title": "Label name"}},
                "state": {"type": "string", "enum": ["open", "closed"], "default": "open"},
                "meta": {"type": "object", "properties": {"note": {"type": "string", "title": "Note",
                         "description": "A note. With more."}}}
            },
            "required": ["repo_name"],
            "additionalProperties": false
        })));
        assert!(!card.abridged);
        let v: Value = serde_json::from_str(&card.json).unwrap();
        assert_eq!(
            v,
            json!({
                "type": "object",
                "properties": {
                    "repo_name": {"type": "string", "description": "Owner/name of the repository."},
                    "labels": {"type": "array", "items": {"type": "string", "title": "Label name"}},
                    "state": {"type": "string", "enum": ["open", "closed"], "default": "open"},
                    "meta": {"type": "object", "properties": {"note": {"type": "string", "description": "A note."}}}
                },
                "required": ["repo_name"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn a_huge_schema_is_abridged_to_its_top_level_and_says_so() {
        let nested: Map<String, Value> = (0..40)
            .map(|i| {
                (
                    format!("field_{i}"),
                    json!({"type": "string", "description": format!("Field number {i} of the nested record.")}),
                )
            })
            .collect();
        let card = compact(&obj(json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "record": {"$ref": "#/$defs/Record"},
                "mode": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
            },
            "required": ["query"],
            "$defs": {"Record": {"type": "object", "properties": nested}}
        })));
        assert!(card.abridged);
        assert!(card.json.len() <= CARD_SCHEMA_BUDGET, "{}", card.json);
        let v: Value = serde_json::from_str(&card.json).unwrap();
        assert_eq!(v["properties"]["record"], json!({"type": "object"}));
        assert_eq!(v["properties"]["mode"]["type"], json!(["string", "null"]));
        assert_eq!(v["required"], json!(["query"]));
    }

    #[test]
    fn past_the_budget_even_abridged_only_required_properties_stay() {
        let props: Map<String, Value> = (0..200)
            .map(|i| (format!("option_number_{i}"), json!({"type": "boolean"})))
            .collect();
        let mut root = obj(json!({"type": "object", "required": ["option_number_7"]}));
        root.insert("properties".into(), Value::Object(props));
        let card = compact(&root);
        assert!(card.abridged);
        let v: Value = serde_json::from_str(&card.json).unwrap();
        assert_eq!(
            v["properties"],
            json!({"option_number_7": {"type": "boolean"}})
        );
    }
}
