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
pub use fix::same_name;
use fix::*;
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
mod tests;
