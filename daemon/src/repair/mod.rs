//! Self-correcting calls (docs/operating.md, "Self-correcting calls"): a proxied call's arguments
//! are checked against the tool's pre-compiled input schema; the mistakes models commonly make
//! (near-miss names, `"5"` for 5, a scalar for a one-element array, …) are repaired silently when
//! the repaired call validates, and anything else becomes a teaching error that says in plain words
//! what was wrong.
//!
//! Pure: values in, values out. The hot path is a valid call: an allocation-free size and depth
//! walk, then one `is_valid` pass. Repair and error text are built only for invalid input.
//!
//! Repair also runs on calls that are valid as sent when they carry names the schema does not
//! declare (schemas that allow extra properties): a misspelt optional parameter would otherwise
//! reach the child and be ignored. The check is one hash lookup per argument on the valid path.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::io;
use std::sync::Arc;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::{Location, LocationSegment};
use jsonschema::{ValidationError, Validator};
use rmcp::model::JsonObject;
use serde_json::{Number, Value};

use crate::schema::normalize_input_schema;

mod view;
use view::*;
mod reading;
use reading::*;
mod fix;
pub use fix::*;
mod teach;
use teach::*;

/// Deepest nesting of objects and arrays accepted in arguments; the arguments object is level 1.
pub const MAX_DEPTH: usize = 64;
/// Largest arguments repaired, in bytes of compact JSON; larger ones (up to
/// the message limit) are validated but not repaired.
pub const MAX_BYTES: usize = 1 << 20;

/// Problems listed in one teaching error; the rest are summed up in a last line.
const MAX_PROBLEMS: usize = 16;
/// Validation errors read for one teaching error: a huge array of bad items must not turn a
/// rejection into a long computation.
const MAX_ERRORS_READ: usize = 256;
/// Closest valid names offered for one unknown name.
const MAX_SUGGESTIONS: usize = 3;
/// Schema nodes visited for one question about a schema (its types, its properties): bounds
/// `$ref` cycles and `allOf`/`anyOf` fan-out in hostile schemas.
const SCHEMA_VISITS: usize = 256;
/// Shortest name (after normalising) that near-miss renaming applies to, on both sides: at
/// edit distance 2, shorter names match almost anything (`id` ↔ `uuid`, `to` ↔ `top`).
const MIN_FUZZY_LEN: usize = 4;
/// Largest edit distance a near-miss rename may bridge.
const MAX_EDIT_DISTANCE: usize = 2;
/// Longest rendering of a sent value in fixes and problems, in characters.
const MAX_SHOWN_CHARS: usize = 60;

/// A tool's compiled input schema, built once per catalog snapshot entry (not per call).
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    validator: Validator,
    /// The schema the validator was built from, for the repair and teaching walks.
    schema: Value,
}

impl CompiledSchema {
    /// None (with a `tracing::warn` naming `tool`) if the schema cannot be compiled (invalid,
    /// unsupported draft, remote `$ref`): validation is then skipped for that tool. A schema
    /// without `"type": "object"` (such as one holding only `$schema`) gets it first, as clients
    /// are shown it (`schema::normalize_input_schema`).
    ///
    /// `format` is not asserted: whether `"2026-13-01"` is a date is the child's call, and a
    /// proxy that refuses what the child would accept is worse than one that lets it decide.
    pub fn compile(tool: &str, schema: &JsonObject) -> Option<CompiledSchema> {
        let (schema, _) = normalize_input_schema(&Arc::new(schema.clone()));
        let schema = Value::Object(Arc::unwrap_or_clone(schema));
        match jsonschema::options()
            .should_validate_formats(false)
            .build(&schema)
        {
            Ok(validator) => Some(CompiledSchema { validator, schema }),
            Err(error) => {
                tracing::warn!(
                    tool,
                    %error,
                    "input schema cannot be compiled; calls to this tool are forwarded unchecked"
                );
                None
            }
        }
    }

    fn doc(&self) -> SchemaDoc<'_> {
        SchemaDoc { root: &self.schema }
    }

    /// Whether every top-level name in `arguments` is one the root schema's
    /// `properties` declares (the common case, checked without allocating).
    fn declares_all(&self, arguments: &JsonObject) -> bool {
        match self.schema.get("properties").and_then(Value::as_object) {
            Some(declared) => arguments.keys().all(|k| declared.contains_key(k)),
            None => arguments.is_empty(),
        }
    }

    /// The parameters the schema declares at the top level, in schema order.
    fn valid_params(&self) -> Vec<String> {
        let doc = self.doc();
        doc.properties(doc.root)
            .into_iter()
            .map(|(name, _)| name.to_string())
            .collect()
    }
}

/// What was changed to make a call valid, one entry per fix, in plain words, e.g.
/// "renamed 'filepath' to 'path'", "converted 'count' from \"5\" to 5",
/// "wrapped 'tags' in an array", "parsed 'options' from a JSON string".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    pub fixes: Vec<String>,
}

/// The verdict on one call's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// Valid as sent.
    Valid,
    /// Valid after repair: forward `arguments` instead.
    Repaired {
        arguments: JsonObject,
        repair: Repair,
    },
    /// Still invalid after repair: do not forward.
    Invalid(Teaching),
}

/// Everything a teaching error needs. It describes the call as sent, not as repaired: names
/// in `problems` are the caller's own, and `closest` covers names repair would have mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teaching {
    /// Plain words, most fundamental first: "missing required parameter 'path' (string)",
    /// "'count' must be an integer, got \"many\"", "unknown parameter 'colour'".
    pub problems: Vec<String>,
    /// (sent name, closest valid names joined by ", "), for sent names the schema does not
    /// declare; nested names are dotted (`options.colr`).
    pub closest: Vec<(String, String)>,
    /// The top-level parameters the schema declares, in schema order.
    pub valid_params: Vec<String>,
    /// The caller's own values that fit a declared top-level parameter, under that parameter's
    /// name, for the corrected example ([`corrected_arguments`]): values sent under a declared
    /// name, and values sent under an unknown one moved to the parameter it most plausibly
    /// meant; converted as repair converts them.
    pub reusable: Vec<(String, Value)>,
}

/// Checks `arguments` against `schema`, repairing them if that makes them valid.
///
/// `aliases` maps wrong → right top-level names for this tool (the server's `aliases` config).
/// Repair renames and coerces the top-level properties and, recursively, the properties of
/// nested objects (and array items) the schema declares; it never renames onto a name that was
/// also sent and never drops a value: a name it cannot map stays as sent.
///
/// `arguments` is the call's arguments object as a `Value` (what the validator
/// takes, so a valid call is checked without a copy); anything but an object
/// is refused.
pub fn check(
    schema: &CompiledSchema,
    arguments: &Value,
    aliases: &BTreeMap<String, String>,
) -> Checked {
    let Some(object) = arguments.as_object() else {
        return Checked::Invalid(Teaching {
            problems: vec![
                "the arguments must be a JSON object of parameter names and values".into(),
            ],
            closest: Vec::new(),
            valid_params: schema.valid_params(),
            reusable: Vec::new(),
        });
    };
    match measure_object(object, 1, &mut 0) {
        Ok(()) => {}
        Err(Excess::Depth) => {
            return Checked::Invalid(Teaching {
                problems: vec![Excess::Depth.to_string()],
                closest: Vec::new(),
                valid_params: schema.valid_params(),
                reusable: Vec::new(),
            });
        }
        // Large arguments (a file's content) are checked but not repaired:
        // validation is one linear pass, repair would copy them.
        Err(Excess::Size) => {
            if schema.validator.is_valid(arguments) {
                return Checked::Valid;
            }
            let doc = schema.doc();
            let declared = doc.properties(doc.root);
            let unknown: Vec<String> = object
                .keys()
                .filter(|name| !declared.iter().any(|(known, _)| known == name))
                .cloned()
                .collect();
            return Checked::Invalid(Teaching {
                problems: problems(schema, arguments, &unknown),
                closest: Vec::new(),
                valid_params: schema.valid_params(),
                reusable: Vec::new(),
            });
        }
    }
    if schema.validator.is_valid(arguments) {
        if schema.declares_all(object) {
            return Checked::Valid;
        }
        // Valid, but with names the schema does not declare (it allows
        // extra properties): a misspelt optional parameter the child would
        // silently ignore. Rename what maps unambiguously.
        return repaired(schema, object, aliases).unwrap_or(Checked::Valid);
    }
    repair_or_teach(schema, object, arguments, aliases)
}

/// `arguments` with every rename and coercion repair knows applied, and what was changed.
fn repair_all(
    schema: &CompiledSchema,
    arguments: &JsonObject,
    aliases: &BTreeMap<String, String>,
) -> (JsonObject, Vec<String>) {
    let doc = schema.doc();
    let mut repairer = Repairer {
        doc,
        fixes: Vec::new(),
    };
    let mut repaired = arguments.clone();
    repairer.repair_object(&mut repaired, doc.root, "", Some(aliases), 1);
    (repaired, repairer.fixes)
}

/// `arguments` with every rename and coercion repair knows applied, when
/// that changes something and the result is valid.
fn repaired(
    schema: &CompiledSchema,
    arguments: &JsonObject,
    aliases: &BTreeMap<String, String>,
) -> Option<Checked> {
    let (repaired, fixes) = repair_all(schema, arguments, aliases);
    valid_repair(schema, repaired, fixes).ok()
}

/// A repair, if it changed something and made the arguments valid; else the arguments as
/// repair left them.
fn valid_repair(
    schema: &CompiledSchema,
    repaired: JsonObject,
    fixes: Vec<String>,
) -> Result<Checked, JsonObject> {
    if fixes.is_empty() {
        return Err(repaired);
    }
    let repaired = Value::Object(repaired);
    let valid = schema.validator.is_valid(&repaired);
    let Value::Object(arguments) = repaired else {
        unreachable!("made an object just above")
    };
    if !valid {
        return Err(arguments);
    }
    Ok(Checked::Repaired {
        arguments,
        repair: Repair { fixes },
    })
}

/// The cold path of [`check`]: `arguments` are known to be invalid as sent.
fn repair_or_teach(
    schema: &CompiledSchema,
    arguments: &JsonObject,
    value: &Value,
    aliases: &BTreeMap<String, String>,
) -> Checked {
    let (fixed, fixes) = repair_all(schema, arguments, aliases);
    let fixed = match valid_repair(schema, fixed, fixes) {
        Ok(repaired) => return repaired,
        Err(fixed) => fixed,
    };
    let doc = schema.doc();
    let mut closest = Vec::new();
    let mut unknown = Vec::new();
    suggest_object(
        doc,
        arguments,
        doc.root,
        "",
        Some(aliases),
        &mut closest,
        &mut unknown,
    );
    let reuse = reusable_values(doc, &fixed);
    // An unknown name given a place only by the value it carries still
    // gets a pointer to that place.
    for (from, to) in reuse.moved {
        if !closest.iter().any(|(sent, _)| *sent == from) {
            closest.push((from, to));
        }
    }
    Checked::Invalid(Teaching {
        problems: problems(schema, value, &unknown),
        closest,
        valid_params: schema.valid_params(),
        reusable: reuse.values,
    })
}

/// The example arguments `example` (made from the schema) with the caller's reusable values in
/// place of made-up ones, each kept only where the schema then accepts it; in schema order.
pub fn corrected_arguments(schema: &CompiledSchema, teaching: &Teaching, example: Value) -> Value {
    let Value::Object(example) = example else {
        return example;
    };
    if teaching.reusable.is_empty() {
        return Value::Object(example);
    }
    let doc = schema.doc();
    let order: Vec<&str> = doc
        .properties(doc.root)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let build = |kept: &[&(String, Value)]| -> Value {
        let mut arguments = JsonObject::new();
        for name in &order {
            if let Some((_, value)) = kept.iter().find(|(reused, _)| reused == name) {
                arguments.insert((*name).to_string(), value.clone());
            } else if let Some(value) = example.get(*name) {
                arguments.insert((*name).to_string(), value.clone());
            }
        }
        for (name, value) in &example {
            if !arguments.contains_key(name) {
                arguments.insert(name.clone(), value.clone());
            }
        }
        Value::Object(arguments)
    };
    let mut kept: Vec<&(String, Value)> = teaching.reusable.iter().collect();
    // Each round drops the values the schema refuses where they stand; the
    // made-up value comes back there. Errors elsewhere (a made-up value the
    // generator got wrong) are not the caller's.
    let mut arguments = build(&kept);
    for _ in 0..teaching.reusable.len() {
        let refused: Vec<String> = schema
            .validator
            .iter_errors(&arguments)
            .take(MAX_ERRORS_READ)
            .filter_map(|error| match error.instance_path().segments().next() {
                Some(LocationSegment::Property(name)) => Some(name.to_string()),
                _ => None,
            })
            .collect();
        let before = kept.len();
        kept.retain(|(name, _)| !refused.contains(name));
        if kept.len() == before {
            break;
        }
        arguments = build(&kept);
    }
    // A value refused through another parameter (`dependentRequired`, `if`/`then`) is not
    // worth an example that fails where the schema's own passes.
    if !schema.validator.is_valid(&arguments) {
        let made_up = Value::Object(example);
        if schema.validator.is_valid(&made_up) {
            return made_up;
        }
    }
    arguments
}

/// The `isError` text: what was wrong in plain words, the closest valid parameter names, the
/// valid parameters, a corrected example call (built elsewhere; omitted when empty) and the
/// schema.
pub fn teaching_text(
    tool: &str,
    teaching: &Teaching,
    schema: &JsonObject,
    example_call: &str,
) -> String {
    let root = Value::Object(schema.clone());
    let doc = SchemaDoc { root: &root };
    let declared = doc.properties(&root);
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();

    let mut text = format!(
        "The call to '{tool}' was not sent: its arguments do not match the tool's input schema.\n"
    );
    if !teaching.problems.is_empty() {
        text.push_str("\nWhat was wrong:\n");
        for problem in &teaching.problems {
            let _ = writeln!(text, "- {problem}");
        }
    }
    if !teaching.closest.is_empty() {
        text.push_str("\nClosest valid names:\n");
        for (sent, names) in &teaching.closest {
            let _ = writeln!(text, "- '{sent}': did you mean {names}?");
        }
    }
    if teaching.valid_params.is_empty() {
        text.push_str("\nThe schema declares no parameters.\n");
    } else {
        text.push_str("\nValid parameters:\n");
        for name in &teaching.valid_params {
            let mut notes: Vec<String> = Vec::new();
            if let Some(label) = declared
                .iter()
                .find(|(declared, _)| declared == name)
                .and_then(|(_, property)| doc.label(property))
            {
                notes.push(label);
            }
            if required.contains(&name.as_str()) {
                notes.push("required".into());
            }
            if notes.is_empty() {
                let _ = writeln!(text, "- {name}");
            } else {
                let _ = writeln!(text, "- {name} ({})", notes.join(", "));
            }
        }
    }
    if !example_call.is_empty() {
        let _ = write!(text, "\nCorrected example call:\n{example_call}\n");
    }
    let _ = write!(text, "\nInput schema:\n{root}\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_obj(
        schema: &CompiledSchema,
        arguments: &JsonObject,
        aliases: &BTreeMap<String, String>,
    ) -> Checked {
        check(schema, &Value::Object(arguments.clone()), aliases)
    }
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(object) => object,
            other => panic!("not an object: {other}"),
        }
    }

    fn compiled(schema: Value) -> CompiledSchema {
        CompiledSchema::compile("test", &object(schema)).expect("schema compiles")
    }

    /// A file-reading tool with a bit of everything; no unknown parameters allowed.
    fn files_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "file_path": {"type": "string"},
                "query": {"type": "string"},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "recursive": {"type": "boolean"},
                "label": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "order": {"enum": ["asc", "desc"]},
                "options": {
                    "type": "object",
                    "properties": {
                        "maxDepth": {"type": "integer"},
                        "follow_links": {"type": "boolean"}
                    },
                    "additionalProperties": false
                },
                "filters": {"$ref": "#/$defs/Filter"}
            },
            "required": ["path"],
            "additionalProperties": false,
            "$defs": {
                "Filter": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"field": {"type": "string"}, "value": {"type": "string"}},
                        "required": ["field"],
                        "additionalProperties": false
                    }
                }
            }
        })
    }

    #[test]
    fn refs_resolve_with_percent_encoded_names_as_in_examples() {
        // `#/$defs/a%20b` names the definition "a b" (the same rule example
        // generation uses: one resolver in `schema`).
        let schema = json!({
            "type": "object",
            "properties": {"filter": {"$ref": "#/$defs/a%20b"}},
            "required": ["filter"],
            "$defs": {"a b": {"type": "object", "properties": {"max_depth": {"type": "integer"}}, "additionalProperties": false}}
        });
        let (arguments, fixes) = repaired(check(
            &compiled(schema.clone()),
            &json!({"filter": {"maxDepth": "2"}}),
            &no_aliases(),
        ));
        assert_eq!(arguments, json!({"filter": {"max_depth": 2}}));
        assert!(
            fixes.iter().any(|f| f.contains("'filter.max_depth'")),
            "{fixes:?}"
        );
        let example = crate::schema::example::example_arguments(&std::sync::Arc::new(
            schema.as_object().cloned().unwrap_or_default(),
        ));
        assert!(example["filter"].is_object(), "{example}");
    }

    fn no_aliases() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn repaired(checked: Checked) -> (Value, Vec<String>) {
        match checked {
            Checked::Repaired { arguments, repair } => (Value::Object(arguments), repair.fixes),
            other => panic!("expected a repair, got {other:?}"),
        }
    }

    #[test]
    fn singular_and_plural_names_are_renamed() {
        let schema = compiled(json!({
            "type": "object",
            "properties": {
                "entities": {"type": "array", "items": {"type": "string"}},
                "boxes": {"type": "array", "items": {"type": "string"}},
                "category": {"type": "string"},
                "address": {"type": "string"}
            },
            "additionalProperties": false
        }));
        let (arguments, fixes) = repaired(check(
            &schema,
            &json!({"entity": ["a"], "box": ["b"], "categories": "c", "addresses": "d"}),
            &no_aliases(),
        ));
        assert_eq!(
            arguments,
            json!({"entities": ["a"], "boxes": ["b"], "category": "c", "address": "d"})
        );
        assert_eq!(fixes.len(), 4, "{fixes:?}");
        assert!(
            fixes.contains(&"renamed 'entity' to 'entities'".to_string()),
            "{fixes:?}"
        );
        // Two declared names of one word: not guessed.
        let both = compiled(json!({
            "type": "object",
            "properties": {"item": {"type": "string"}, "items": {"type": "string"}, "name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": false
        }));
        assert!(matches!(
            check(&both, &json!({"name": "n", "itemes": "x"}), &no_aliases()),
            Checked::Invalid(_)
        ));
    }

    #[test]
    fn each_repair_rule() {
        let schema = compiled(files_schema());
        let aliases: BTreeMap<String, String> = [("file".to_string(), "path".to_string())].into();
        #[rustfmt::skip]
        let cases: Vec<(Value, Value, Vec<&str>)> = vec![
            // 1. configured aliases
            (json!({"file": "a"}), json!({"path": "a"}), vec!["renamed 'file' to 'path'"]),
            // 2. case and separators
            (json!({"PATH": "a"}), json!({"path": "a"}), vec!["renamed 'PATH' to 'path'"]),
            (json!({"path": "a", "filePath": "b"}), json!({"path": "a", "file_path": "b"}),
                vec!["renamed 'filePath' to 'file_path'"]),
            (json!({"path": "a", "FILE-PATH": "b"}), json!({"path": "a", "file_path": "b"}),
                vec!["renamed 'FILE-PATH' to 'file_path'"]),
            (json!({"path": "a", "Max_Depth": 1}), json!({"path": "a", "Max_Depth": 1}), vec![]),
            // 3. near misses: Levenshtein ≤ 2 to exactly one free declared property
            (json!({"path": "a", "qurey": "q"}), json!({"path": "a", "query": "q"}),
                vec!["renamed 'qurey' to 'query'"]),
            (json!({"path": "a", "recursve": true}), json!({"path": "a", "recursive": true}),
                vec!["renamed 'recursve' to 'recursive'"]),
            (json!({"pathh": "a"}), json!({"path": "a"}), vec!["renamed 'pathh' to 'path'"]),
            // 4. coercion guided by the property schema
            (json!({"path": "a", "count": "5"}), json!({"path": "a", "count": 5}),
                vec![r#"converted 'count' from "5" to 5"#]),
            (json!({"path": "a", "count": " 7 "}), json!({"path": "a", "count": 7}),
                vec![r#"converted 'count' from " 7 " to 7"#]),
            (json!({"path": "a", "ratio": "5.5"}), json!({"path": "a", "ratio": 5.5}),
                vec![r#"converted 'ratio' from "5.5" to 5.5"#]),
            (json!({"path": "a", "recursive": "TRUE"}), json!({"path": "a", "recursive": true}),
                vec![r#"converted 'recursive' from "TRUE" to true"#]),
            (json!({"path": "a", "recursive": "false"}), json!({"path": "a", "recursive": false}),
                vec![r#"converted 'recursive' from "false" to false"#]),
            (json!({"path": "a", "tags": "x"}), json!({"path": "a", "tags": ["x"]}),
                vec!["wrapped 'tags' in an array"]),
            (json!({"path": "a", "ids": "[1, 2]"}), json!({"path": "a", "ids": [1, 2]}),
                vec!["parsed 'ids' from a JSON string"]),
            (json!({"path": "a", "ids": 3}), json!({"path": "a", "ids": [3]}),
                vec!["wrapped 'ids' in an array"]),
            (json!({"path": "a", "ids": "3"}), json!({"path": "a", "ids": [3]}),
                vec!["wrapped 'ids' in an array", r#"converted 'ids[0]' from "3" to 3"#]),
            (json!({"path": "a", "options": "{\"maxDepth\": 2}"}),
                json!({"path": "a", "options": {"maxDepth": 2}}),
                vec!["parsed 'options' from a JSON string"]),
            (json!({"path": 42}), json!({"path": "42"}), vec![r#"converted 'path' from 42 to "42""#]),
            (json!({"path": "a", "label": 1.5}), json!({"path": "a", "label": "1.5"}),
                vec![r#"converted 'label' from 1.5 to "1.5""#]),
            (json!({"path": "a", "limit": "10"}), json!({"path": "a", "limit": 10}),
                vec![r#"converted 'limit' from "10" to 10"#]),
            // several rules at once
            (json!({"File": "a", "Count": "2", "tags": "t"}),
                json!({"path": "a", "count": 2, "tags": ["t"]}),
                vec!["renamed 'File' to 'path'", "renamed 'Count' to 'count'",
                     r#"converted 'count' from "2" to 2"#, "wrapped 'tags' in an array"]),
        ];
        for (sent, want, fixes) in cases {
            let arguments = object(sent.clone());
            let checked = check_obj(&schema, &arguments, &aliases);
            if fixes.is_empty() {
                assert!(
                    matches!(checked, Checked::Invalid(_)),
                    "{sent}: {checked:?}"
                );
                continue;
            }
            let (got, got_fixes) = repaired(checked);
            assert_eq!(got, want, "{sent}");
            assert_eq!(got_fixes, fixes, "{sent}");
            // A repaired call validates as it is.
            assert_eq!(
                check_obj(&schema, &object(got), &aliases),
                Checked::Valid,
                "{sent}"
            );
        }
    }

    /// A schema that allows extra properties accepts a misspelt optional
    /// name as valid; it is still mapped onto the declared one.
    #[test]
    fn misspelt_optional_names_are_renamed_in_valid_calls() {
        let schema = compiled(json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer"},
                "filePath": {"type": "string"},
                "max_results": {"type": "integer"},
                "enabled": {"type": "boolean"}
            },
            "required": ["count"]
        }));
        let aliases: BTreeMap<String, String> =
            [("n".to_string(), "max_results".to_string())].into();
        #[rustfmt::skip]
        let cases = [
            (json!({"count": 1, "file_path": "/x"}), json!({"count": 1, "filePath": "/x"})),
            (json!({"count": 1, "filepth": "/x"}), json!({"count": 1, "filePath": "/x"})),
            (json!({"count": 1, "maxResults": 3}), json!({"count": 1, "max_results": 3})),
            (json!({"count": 1, "n": 3}), json!({"count": 1, "max_results": 3})),
            (json!({"count": 1, "enabeld": true}), json!({"count": 1, "enabled": true})),
        ];
        for (sent, want) in cases {
            let (got, fixes) = repaired(check_obj(&schema, &object(sent.clone()), &aliases));
            assert_eq!(got, want, "{sent}");
            assert_eq!(fixes.len(), 1, "{sent}: {fixes:?}");
        }
        // Names that map to nothing, or onto a name also sent, stay as sent.
        for sent in [
            json!({"count": 1, "colour": "red"}),
            json!({"count": 1, "filePath": "/a", "file_path": "/b"}),
        ] {
            assert_eq!(
                check_obj(&schema, &object(sent.clone()), &aliases),
                Checked::Valid,
                "{sent}"
            );
        }
    }

    #[test]
    fn nested_objects_and_array_items() {
        let schema = compiled(files_schema());
        let cases = [
            (
                json!({"path": "a", "options": {"max_depth": "3", "followLinks": "no"}}),
                None,
            ),
            (
                json!({"path": "a", "options": {"max_depth": "3", "followLinks": "False"}}),
                Some((
                    json!({"path": "a", "options": {"maxDepth": 3, "follow_links": false}}),
                    vec![
                        "renamed 'options.max_depth' to 'options.maxDepth'",
                        "renamed 'options.followLinks' to 'options.follow_links'",
                        r#"converted 'options.maxDepth' from "3" to 3"#,
                        r#"converted 'options.follow_links' from "False" to false"#,
                    ],
                )),
            ),
            (
                // Items reached through a `$ref`.
                json!({"path": "a", "filters": [{"Field": "x", "value": 1}]}),
                Some((
                    json!({"path": "a", "filters": [{"field": "x", "value": "1"}]}),
                    vec![
                        "renamed 'filters[0].Field' to 'filters[0].field'",
                        "converted 'filters[0].value' from 1 to \"1\"",
                    ],
                )),
            ),
            (
                json!({"path": "a", "filters": "[{\"field\": \"x\"}]"}),
                Some((
                    json!({"path": "a", "filters": [{"field": "x"}]}),
                    vec!["parsed 'filters' from a JSON string"],
                )),
            ),
        ];
        for (sent, want) in cases {
            let checked = check_obj(&schema, &object(sent.clone()), &no_aliases());
            match want {
                None => assert!(
                    matches!(checked, Checked::Invalid(_)),
                    "{sent}: {checked:?}"
                ),
                Some((want, fixes)) => {
                    let (got, got_fixes) = repaired(checked);
                    assert_eq!(got, want, "{sent}");
                    assert_eq!(got_fixes, fixes, "{sent}");
                }
            }
        }
    }

    #[test]
    fn repair_stays_unambiguous_and_keeps_data() {
        let schema = compiled(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "file_path": {"type": "string"},
                "filePath": {"type": "string"},
                "name1": {"type": "string"},
                "name2": {"type": "string"},
                "id": {"type": "string"}
            },
            "additionalProperties": false
        }));
        // (sent, the unknown names left in place)
        let cases = [
            // The target was sent too: never rename onto it.
            (json!({"path": "a", "PATH": "b"}), vec!["PATH"]),
            (json!({"path": "a", "pathh": "b"}), vec!["pathh"]),
            // Two declared names normalise alike.
            (json!({"FILEPATH": "a"}), vec!["FILEPATH"]),
            // Two declared names within the edit distance.
            (json!({"name3": "a"}), vec!["name3"]),
            // Too short to guess at.
            (json!({"uuid": "a"}), vec!["uuid"]),
            (json!({"pth": "a"}), vec!["pth"]),
        ];
        for (sent, left) in cases {
            let Checked::Invalid(teaching) =
                check_obj(&schema, &object(sent.clone()), &no_aliases())
            else {
                panic!("{sent}: expected Invalid");
            };
            let unknown: Vec<String> = left
                .iter()
                .map(|name| format!("unknown parameter '{name}'"))
                .collect();
            assert_eq!(teaching.problems, unknown, "{sent}");
        }
    }

    #[test]
    fn unknown_names_stay_where_the_schema_allows_them() {
        let schema = compiled(json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "count": {"type": "integer"}},
            "required": ["path"]
        }));
        let sent = object(json!({"path": "a", "colour": "red", "count": "2"}));
        let (got, fixes) = repaired(check_obj(&schema, &sent, &no_aliases()));
        assert_eq!(got, json!({"path": "a", "colour": "red", "count": 2}));
        assert_eq!(fixes, [r#"converted 'count' from "2" to 2"#]);
        // Valid as sent, even with an unknown name: nothing to repair.
        let sent = object(json!({"path": "a", "colour": "red"}));
        assert_eq!(check_obj(&schema, &sent, &no_aliases()), Checked::Valid);
    }

    #[test]
    fn hopeless_calls_teach() {
        let schema = compiled(files_schema());
        let aliases: BTreeMap<String, String> = [("where".to_string(), "path".to_string())].into();
        let cases = [
            (
                json!({"pth": "/tmp", "count": "many", "zzz": 1}),
                vec![
                    "missing required parameter 'path' (string)",
                    r#"'count' must be an integer, got "many""#,
                    "unknown parameter 'pth'",
                    "unknown parameter 'zzz'",
                ],
                vec![("pth", "path")],
            ),
            (
                json!({"path": "a", "order": "up", "limit": "lots", "options": {"colr": 1}}),
                vec![
                    r#"'order' must be one of "asc", "desc", got "up""#,
                    r#"'limit' must be an integer or null, got "lots""#,
                    "unknown parameter 'options.colr'",
                ],
                vec![],
            ),
            (
                json!({"path": "a", "filters": [{"value": "v", "feild": "f", "valeu": "w"}]}),
                vec![
                    "missing required parameter 'filters[0].field' (string)",
                    "unknown parameter 'filters[0].feild'",
                    "unknown parameter 'filters[0].valeu'",
                ],
                vec![("filters[0].feild", "field")],
            ),
            (
                // The alias target was sent too; the teaching still points at it.
                json!({"where": "a", "path": "x", "count": []}),
                vec![
                    "'count' must be an integer, got []",
                    "unknown parameter 'where'",
                ],
                vec![("where", "path")],
            ),
        ];
        for (sent, problems, closest) in cases {
            let Checked::Invalid(teaching) = check_obj(&schema, &object(sent.clone()), &aliases)
            else {
                panic!("{sent}: expected Invalid");
            };
            assert_eq!(teaching.problems, problems, "{sent}");
            let closest: Vec<(String, String)> = closest
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            assert_eq!(teaching.closest, closest, "{sent}");
            assert_eq!(teaching.valid_params[..3], ["path", "file_path", "query"]);
        }
    }

    #[test]
    fn value_problems_in_plain_words() {
        let schema = compiled(json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "s": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-z]+$"},
                "xs": {"type": "array", "minItems": 1, "uniqueItems": true},
                "k": {"const": "fixed"}
            }
        }));
        let cases = [
            (json!({"n": 0}), "'n' must be at least 1, got 0"),
            (json!({"n": 11}), "'n' must be at most 10, got 11"),
            (json!({"n": 1.5}), "'n' must be an integer, got 1.5"),
            (
                json!({"s": "a"}),
                r#"'s' must be at least 2 characters long, got "a""#,
            ),
            (
                json!({"s": "abcd"}),
                r#"'s' must be at most 3 characters long, got "abcd""#,
            ),
            (
                json!({"s": "AB"}),
                r#"'s' must match the pattern ^[a-z]+$, got "AB""#,
            ),
            (json!({"xs": []}), "'xs' must have at least 1 item, got []"),
            (
                json!({"xs": [1, 1]}),
                "'xs' must not contain duplicate items",
            ),
            (json!({"k": "other"}), r#"'k' must be "fixed", got "other""#),
        ];
        for (sent, problem) in cases {
            let Checked::Invalid(teaching) =
                check_obj(&schema, &object(sent.clone()), &no_aliases())
            else {
                panic!("{sent}: expected Invalid");
            };
            assert_eq!(teaching.problems, [problem], "{sent}");
        }
    }

    /// `depth` nested objects in all, the arguments object included.
    fn nested(depth: usize) -> JsonObject {
        let mut value = json!({});
        for _ in 1..depth {
            value = json!({ "a": value });
        }
        object(value)
    }

    #[test]
    fn depth_and_size_guards() {
        let schema = compiled(json!({"type": "object"}));
        let big = "x".repeat(MAX_BYTES);
        let cases = [
            (nested(MAX_DEPTH), None),
            (nested(MAX_DEPTH + 1), Some(Excess::Depth)),
            (object(json!({"a": [[[[[nested(MAX_DEPTH - 6)]]]]]})), None),
            (
                object(json!({"a": [[[[[nested(MAX_DEPTH - 5)]]]]]})),
                Some(Excess::Depth),
            ),
            (object(json!({"a": &big[..MAX_BYTES - 8]})), None),
            // Larger arguments are validated, not refused.
            (object(json!({"a": &big[..MAX_BYTES - 7]})), None),
            (object(json!({"a": "\n".repeat(MAX_BYTES / 2)})), None),
        ];
        for (index, (arguments, excess)) in cases.into_iter().enumerate() {
            let checked = check_obj(&schema, &arguments, &no_aliases());
            match excess {
                None => assert_eq!(checked, Checked::Valid, "case {index}"),
                Some(excess) => {
                    let Checked::Invalid(teaching) = checked else {
                        panic!("case {index}: expected Invalid");
                    };
                    assert_eq!(teaching.problems, [excess.to_string()], "case {index}");
                }
            }
        }
        assert!(Excess::Depth.to_string().contains("deeper than 64 levels"));
        assert!(Excess::Size.to_string().contains("larger than 1 MiB"));
        let mut size = 0;
        assert_eq!(
            measure_object(&object(json!({"a": &big[..MAX_BYTES - 7]})), 1, &mut size),
            Err(Excess::Size)
        );
        // Large and invalid: taught, without repair.
        let typed = compiled(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        );
        let Checked::Invalid(teaching) =
            check_obj(&typed, &object(json!({"a": &big[..]})), &no_aliases())
        else {
            panic!("a large invalid call is refused");
        };
        assert!(
            teaching.problems[0].contains("'n'"),
            "{:?}",
            teaching.problems
        );
    }

    #[test]
    fn measured_size_is_the_compact_json_size() {
        let values = [
            json!({}),
            json!({"a": null, "b": true, "c": false, "d": [], "e": [1, -2, 3.25, 1e300]}),
            json!({"s": "quote\" back\\ \n\t\r\u{8}\u{c} \u{1} \u{7f} é 🦀", "o": {"x": [{}]}}),
        ];
        for value in values {
            let mut size = 0;
            measure_object(value.as_object().unwrap(), 1, &mut size).unwrap();
            assert_eq!(
                size,
                serde_json::to_string(&value).unwrap().len(),
                "{value}"
            );
        }
    }

    #[test]
    fn compile_adds_type_object_and_skips_what_it_cannot_build() {
        let only_schema = object(json!({"$schema": "http://json-schema.org/draft-07/schema#"}));
        let schema = CompiledSchema::compile("gitlab_push_files", &only_schema).expect("compiles");
        assert_eq!(schema.schema["type"], "object");
        assert_eq!(
            check_obj(&schema, &object(json!({"any": 1})), &no_aliases()),
            Checked::Valid
        );
        let broken = [
            json!({"type": "object", "properties": {"a": {"type": "strng"}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}}),
            json!({"$schema": "https://example.com/my-own-draft", "type": "object"}),
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}),
        ];
        for schema in broken {
            assert!(
                CompiledSchema::compile("broken", &object(schema.clone())).is_none(),
                "{schema}"
            );
        }
    }

    #[test]
    fn teaching_text_says_it_all() {
        let schema = files_schema();
        let compiled = compiled(schema.clone());
        let Checked::Invalid(teaching) = check_obj(
            &compiled,
            &object(json!({"pth": "/tmp", "count": "many"})),
            &no_aliases(),
        ) else {
            panic!("expected Invalid");
        };
        let example = r#"{"name": "fs_read", "arguments": {"path": "/tmp"}}"#;
        let text = teaching_text("fs_read", &teaching, &object(schema), example);
        for needle in [
            "'fs_read'",
            "- missing required parameter 'path' (string)",
            r#"- 'count' must be an integer, got "many""#,
            "- unknown parameter 'pth'",
            "- 'pth': did you mean path?",
            "- path (string, required)",
            "- tags (array of string)",
            "- limit (integer or null)",
            r#"- order (one of "asc", "desc")"#,
            example,
            r#""required":["path"]"#,
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        let bare = Teaching {
            problems: vec!["x".into()],
            closest: vec![],
            valid_params: vec![],
            reusable: vec![],
        };
        let text = teaching_text("t", &bare, &object(json!({"type": "object"})), "");
        assert!(text.contains("declares no parameters") && !text.contains("example"));
    }

    /// mcp-server-time's two tools, as published: extra names allowed.
    fn time_schemas() -> (Value, Value) {
        let tz = json!({"type": "string", "description": "IANA timezone name"});
        (
            json!({"type": "object", "properties": {"timezone": tz}, "required": ["timezone"]}),
            json!({"type": "object", "properties": {
                "source_timezone": tz, "time": {"type": "string"}, "target_timezone": tz
            }, "required": ["source_timezone", "time", "target_timezone"]}),
        )
    }

    /// Every name the schema does not declare is named, also where the schema lets extra
    /// names pass, and also below the top level; each once.
    #[test]
    fn every_unknown_name_is_named() {
        let (current, _) = time_schemas();
        let Checked::Invalid(teaching) = check(
            &compiled(current),
            &json!({"tz": "Europe/Paris", "fmt": "iso"}),
            &no_aliases(),
        ) else {
            panic!("expected Invalid");
        };
        assert_eq!(
            teaching.problems,
            [
                "missing required parameter 'timezone' (string)",
                "unknown parameter 'tz'",
                "unknown parameter 'fmt'",
            ]
        );
        // `tz` is too short to be a near miss of anything; its value points it at the one
        // unset required string.
        assert_eq!(
            teaching.closest,
            [("tz".to_string(), "timezone".to_string())]
        );
        let nested = compiled(json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}, "options": {"type": "object", "properties": {"deep": {"type": "boolean"}}}},
            "required": ["n"]
        }));
        let Checked::Invalid(teaching) = check(
            &nested,
            &json!({"n": "x", "options": {"colr": 1, "deep": true}, "zzz": [], "yyy": null}),
            &no_aliases(),
        ) else {
            panic!("expected Invalid");
        };
        assert_eq!(
            teaching.problems,
            [
                r#"'n' must be an integer, got "x""#,
                "unknown parameter 'zzz'",
                "unknown parameter 'yyy'",
                "unknown parameter 'options.colr'",
            ]
        );
        // Where the schema refuses extra names too, each is still named once.
        let strict = compiled(files_schema());
        let Checked::Invalid(teaching) =
            check(&strict, &json!({"zzz": 1, "yyy": 2}), &no_aliases())
        else {
            panic!("expected Invalid");
        };
        let unknown: Vec<&String> = teaching
            .problems
            .iter()
            .filter(|p| p.starts_with("unknown"))
            .collect();
        assert_eq!(
            unknown,
            ["unknown parameter 'zzz'", "unknown parameter 'yyy'"]
        );
    }

    /// The corrected example keeps the caller's values where their type fits a parameter they
    /// plausibly meant, and falls back to the schema's example elsewhere; it always validates.
    #[test]
    fn corrected_examples_reuse_the_callers_values() {
        let (current, convert) = time_schemas();
        let add = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
        let mixed = json!({"type": "object", "properties": {
            "text": {"type": "string"}, "count": {"type": "integer"},
            "log_level": {"enum": ["debug", "info", "error"]}
        }, "required": ["text", "count"]});
        let sorted = json!({"type": "object", "properties": {
            "order": {"type": "string", "enum": ["asc", "desc"]}, "query": {"type": "string"}
        }, "required": ["order"], "additionalProperties": false});
        // (schema, sent, the example's arguments; None: the schema's own example)
        #[rustfmt::skip]
        let cases = [
            (&current, json!({"tz": "Europe/Paris"}), Some(json!({"timezone": "Europe/Paris"}))),
            // A near miss that repair would not guess at still finds its parameter.
            (&current, json!({"zone": "UTC", "x": 1}), Some(json!({"timezone": "UTC"}))),
            (&convert, json!({"from": "Europe/Paris", "at": "10:00", "to": "Asia/Tokyo"}),
                Some(json!({"source_timezone": "Europe/Paris", "time": "10:00", "target_timezone": "Asia/Tokyo"}))),
            // Types decide: 5 goes to the integer, "hi" to the string, whatever the order;
            // a valid optional value is kept as sent.
            (&mixed, json!({"n": 5, "words": "hi", "log_level": "info"}),
                Some(json!({"text": "hi", "count": 5, "log_level": "info"}))),
            // Converted as repair converts: "7" is the integer 7.
            (&mixed, json!({"body": "hi", "num": "7"}), Some(json!({"text": "hi", "count": 7}))),
            // A value of no fitting type stays out; the other one is kept.
            (&add, json!({"x": "many", "y": 2}), Some(json!({"a": 2}))),
            // Fits the type, not the enum: the schema's value instead, and the valid one kept.
            (&sorted, json!({"sort": "up", "query": "q"}), Some(json!({"query": "q"}))),
            (&current, json!({"n": {"a": 1}}), None),
        ];
        for (schema, sent, reused) in cases {
            let compiled = compiled(schema.clone());
            let Checked::Invalid(teaching) = check(&compiled, &sent, &no_aliases()) else {
                panic!("{sent}: expected Invalid");
            };
            let made_up = crate::schema::example::example_arguments(&object(schema.clone()));
            let example = corrected_arguments(&compiled, &teaching, made_up.clone());
            assert!(
                compiled.validator.is_valid(&example),
                "{sent}: the example must be valid: {example}"
            );
            match reused {
                None => assert_eq!(example, made_up, "{sent}"),
                Some(reused) => {
                    for (name, value) in reused.as_object().unwrap() {
                        assert_eq!(&example[name], value, "{sent}: {name} in {example}");
                    }
                    // The rest is the schema's own example; no unknown name is carried over.
                    for (name, value) in example.as_object().unwrap() {
                        if reused.get(name).is_none() {
                            assert_eq!(Some(value), made_up.get(name), "{sent}: {name}");
                        }
                    }
                }
            }
        }
        // The made-up value is back where the caller's was refused.
        let compiled = compiled(sorted.clone());
        let Checked::Invalid(teaching) = check(&compiled, &json!({"sort": "up"}), &no_aliases())
        else {
            panic!("expected Invalid");
        };
        assert_eq!(teaching.reusable, [("order".to_string(), json!("up"))]);
        let example = corrected_arguments(
            &compiled,
            &teaching,
            crate::schema::example::example_arguments(&object(sorted)),
        );
        assert!(
            matches!(example["order"].as_str(), Some("asc" | "desc")),
            "{example}"
        );
    }

    #[test]
    fn shown_values_are_cut() {
        assert_eq!(show(&json!("many")), r#""many""#);
        let long = show(&json!("é".repeat(10_000)));
        assert_eq!(long.chars().count(), MAX_SHOWN_CHARS);
        assert!(long.ends_with('…'));
        let long = show(&Value::from(vec![1; 10_000]));
        assert_eq!(long.chars().count(), MAX_SHOWN_CHARS);
    }

    /// Every input schema in the published catalog compiles or is reported; the `$schema`-only
    /// ones compile once typed; and no odd arguments make `check` panic.
    #[test]
    fn every_catalog_schema() {
        let Some((_, catalog)) = crate::test_catalog::load("repair::every_catalog_schema") else {
            return;
        };
        let (mut compiled_count, mut skipped) = (0, Vec::new());
        for server in catalog["servers"].as_array().expect("servers") {
            let server_id = server["id"].as_str().expect("id");
            for tool in server["tools"].as_array().expect("tools") {
                let name = format!("{server_id}/{}", tool["name"].as_str().expect("name"));
                let Some(input) = tool["inputSchema"].as_object() else {
                    skipped.push(name);
                    continue;
                };
                let Some(schema) = CompiledSchema::compile(&name, input) else {
                    skipped.push(name);
                    continue;
                };
                compiled_count += 1;
                let made_up = crate::schema::example::example_arguments(input);
                for arguments in odd_arguments(&schema) {
                    if let Checked::Invalid(teaching) =
                        check_obj(&schema, &arguments, &no_aliases())
                    {
                        let example = corrected_arguments(&schema, &teaching, made_up.clone());
                        // Never worse than the schema's own example.
                        assert!(
                            !schema.validator.is_valid(&made_up)
                                || schema.validator.is_valid(&example),
                            "{name}: {arguments:?} gave {example}"
                        );
                    }
                }
            }
        }
        eprintln!(
            "catalog: {compiled_count} schemas compiled, {} skipped {skipped:?}",
            skipped.len()
        );
        assert!(compiled_count > 2000, "{compiled_count} compiled");
        assert!(
            !skipped
                .iter()
                .any(|name| name.starts_with("gitlab/") || name.starts_with("obsidian/")),
            "{skipped:?}"
        );
    }

    /// Arguments a confused or hostile caller might send to a tool with this schema.
    fn odd_arguments(schema: &CompiledSchema) -> Vec<JsonObject> {
        let names = schema.valid_params();
        let each = |make: &dyn Fn(&str) -> Value| -> JsonObject {
            names
                .iter()
                .map(|name| (name.clone(), make(name)))
                .collect()
        };
        vec![
            JsonObject::new(),
            object(json!({"": {}, "~0/1": [], "x": null})),
            each(&|_| json!("5")),
            each(&|_| json!("true")),
            each(&|_| json!("{\"a\": [1, {\"b\": \"2\"}]}")),
            each(&|_| json!("[1, \"2\", null]")),
            each(&|_| json!(null)),
            each(&|_| json!([[{}]])),
            each(&|_| json!({"a": {"b": "c"}})),
            each(&|_| json!(1.5)),
            names
                .iter()
                .map(|name| (name.to_uppercase() + "x", json!("1")))
                .collect(),
        ]
    }
}
