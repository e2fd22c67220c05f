//! Self-correcting calls (DESIGN.md, "Self-correcting calls"): a proxied call's arguments are
//! checked against the tool's pre-compiled input schema; the mistakes models commonly make
//! (near-miss names, `"5"` for 5, a scalar for a one-element array, …) are repaired silently
//! when the repaired call validates, and anything else becomes a teaching error that says in
//! plain words what was wrong.
//!
//! Pure: values in, values out. The hot path is a valid call: an allocation-free size and depth
//! walk, then one `is_valid` pass. Repair and error text are built only for invalid input.

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
        });
    };
    match measure_object(object, 1, &mut 0) {
        Ok(()) => {}
        Err(Excess::Depth) => {
            return Checked::Invalid(Teaching {
                problems: vec![Excess::Depth.to_string()],
                closest: Vec::new(),
                valid_params: schema.valid_params(),
            });
        }
        // Large arguments (a file's content) are checked but not repaired:
        // validation is one linear pass, repair would copy them.
        Err(Excess::Size) => {
            if schema.validator.is_valid(arguments) {
                return Checked::Valid;
            }
            return Checked::Invalid(Teaching {
                problems: problems(schema, arguments),
                closest: Vec::new(),
                valid_params: schema.valid_params(),
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

/// `arguments` with every rename and coercion repair knows applied, when
/// that changes something and the result is valid.
fn repaired(
    schema: &CompiledSchema,
    arguments: &JsonObject,
    aliases: &BTreeMap<String, String>,
) -> Option<Checked> {
    let doc = schema.doc();
    let mut repairer = Repairer {
        doc,
        fixes: Vec::new(),
    };
    let mut repaired = arguments.clone();
    repairer.repair_object(&mut repaired, doc.root, "", Some(aliases), 1);
    if repairer.fixes.is_empty() {
        return None;
    }
    let repaired = Value::Object(repaired);
    if !schema.validator.is_valid(&repaired) {
        return None;
    }
    let Value::Object(arguments) = repaired else {
        return None;
    };
    Some(Checked::Repaired {
        arguments,
        repair: Repair {
            fixes: repairer.fixes,
        },
    })
}

/// The cold path of [`check`]: `arguments` are known to be invalid as sent.
fn repair_or_teach(
    schema: &CompiledSchema,
    arguments: &JsonObject,
    value: &Value,
    aliases: &BTreeMap<String, String>,
) -> Checked {
    if let Some(fixed) = repaired(schema, arguments, aliases) {
        return fixed;
    }
    let problems = problems(schema, value);
    let mut closest = Vec::new();
    let doc = schema.doc();
    suggest_object(doc, arguments, doc.root, "", Some(aliases), &mut closest);
    Checked::Invalid(Teaching {
        problems,
        closest,
        valid_params: schema.valid_params(),
    })
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

// ---------------------------------------------------------------------------------------------
// The hot path: guards and a copy-free view of the arguments.

/// Why arguments were refused (too deep) or are not repaired (too large).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Excess {
    Depth,
    Size,
}

impl fmt::Display for Excess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Excess::Depth => write!(
                f,
                "the arguments are nested deeper than {MAX_DEPTH} levels of objects and arrays"
            ),
            Excess::Size => write!(
                f,
                "the arguments are larger than 1 MiB ({MAX_BYTES} bytes) as compact JSON; they are validated, not repaired"
            ),
        }
    }
}

/// Adds the compact-JSON size of `object` (at nesting level `depth`) to `size`, stopping at the
/// first limit crossed. Allocation-free, and its recursion is bounded by [`MAX_DEPTH`].
fn measure_object(object: &JsonObject, depth: usize, size: &mut usize) -> Result<(), Excess> {
    if depth > MAX_DEPTH {
        return Err(Excess::Depth);
    }
    // Braces, and per member a colon plus a comma (one too many, which the braces' count absorbs).
    *size += 2 + 2 * object.len().saturating_sub(1) + usize::from(!object.is_empty());
    for (name, value) in object {
        *size += string_json_len(name);
        measure_value(value, depth, size)?;
    }
    if *size > MAX_BYTES {
        return Err(Excess::Size);
    }
    Ok(())
}

fn measure_value(value: &Value, depth: usize, size: &mut usize) -> Result<(), Excess> {
    match value {
        Value::Null | Value::Bool(true) => *size += 4,
        Value::Bool(false) => *size += 5,
        Value::Number(number) => *size += number_json_len(number),
        Value::String(text) => *size += string_json_len(text),
        Value::Array(items) => {
            if depth + 1 > MAX_DEPTH {
                return Err(Excess::Depth);
            }
            *size += 2 + items.len().saturating_sub(1);
            for item in items {
                measure_value(item, depth + 1, size)?;
            }
        }
        Value::Object(object) => measure_object(object, depth + 1, size)?,
    }
    if *size > MAX_BYTES {
        return Err(Excess::Size);
    }
    Ok(())
}

/// Bytes of `text` as a JSON string, escapes and quotes included (serde_json's escaping).
fn string_json_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

fn number_json_len(number: &Number) -> usize {
    struct Count(usize);
    impl fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = write!(count, "{number}");
    count.0
}

// ---------------------------------------------------------------------------------------------
// Reading schemas: local `$ref`s, unions, the types and properties a schema expects.

/// A schema document, for questions asked of its subschemas.
#[derive(Debug, Clone, Copy)]
struct SchemaDoc<'s> {
    root: &'s Value,
}

impl<'s> SchemaDoc<'s> {
    /// Follows local `$ref`s (`#/$defs/x`, `#`); any other reference is left as it is.
    fn resolve(self, mut schema: &'s Value) -> &'s Value {
        for _ in 0..SCHEMA_VISITS {
            let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
                break;
            };
            let root = self.root.as_object();
            schema = match root.and_then(|r| crate::schema::resolve_ref(r, reference)) {
                Some(crate::schema::RefTarget::Root) => self.root,
                Some(crate::schema::RefTarget::Node(target)) => target,
                None => break,
            };
        }
        schema
    }

    /// The properties `schema` declares: its own, its `allOf` parts', and failing those, the
    /// ones of the single `anyOf`/`oneOf` branch declaring any (an optional object).
    fn properties(self, schema: &'s Value) -> Vec<(&'s str, &'s Value)> {
        let mut found = Vec::new();
        self.collect_properties(schema, &mut found, &mut { SCHEMA_VISITS });
        found
    }

    fn collect_properties(
        self,
        schema: &'s Value,
        found: &mut Vec<(&'s str, &'s Value)>,
        visits: &mut usize,
    ) {
        if *visits == 0 {
            return;
        }
        *visits -= 1;
        let schema = self.resolve(schema);
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                if !found.iter().any(|(known, _)| known == name) {
                    found.push((name, property));
                }
            }
        }
        for part in branches(schema, "allOf") {
            self.collect_properties(part, found, visits);
        }
        if found.is_empty()
            && let Some(branch) = self.single_branch(schema, "properties")
        {
            self.collect_properties(branch, found, visits);
        }
    }

    /// The schema of `schema`'s array items: its own `items`, or that of an `allOf` part or of
    /// the single `anyOf`/`oneOf` branch having one. Tuple-style `items` arrays are not followed.
    fn items(self, schema: &'s Value) -> Option<&'s Value> {
        let schema = self.resolve(schema);
        let of = |schema: &'s Value| schema.get("items").filter(|items| !items.is_array());
        of(schema)
            .or_else(|| {
                branches(schema, "allOf")
                    .map(|part| self.resolve(part))
                    .find_map(of)
            })
            .or_else(|| self.single_branch(schema, "items").and_then(of))
    }

    /// The one `anyOf`/`oneOf` branch (resolved) having `keyword`, if exactly one has it.
    fn single_branch(self, schema: &'s Value, keyword: &str) -> Option<&'s Value> {
        let mut found = None;
        for branch in branches(schema, "anyOf").chain(branches(schema, "oneOf")) {
            let branch = self.resolve(branch);
            if branch.get(keyword).is_some() {
                if found.is_some() {
                    return None;
                }
                found = Some(branch);
            }
        }
        found
    }

    /// The JSON types `schema` admits, or None when it does not say (or admits anything).
    fn types(self, schema: &'s Value) -> Option<Types> {
        self.types_within(schema, &mut { SCHEMA_VISITS })
    }

    fn types_within(self, schema: &'s Value, visits: &mut usize) -> Option<Types> {
        if *visits == 0 {
            return None;
        }
        *visits -= 1;
        let schema = self.resolve(schema).as_object()?;
        if let Some(declared) = schema.get("type") {
            return Types::from_keyword(declared);
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(options) = schema.get(union).and_then(Value::as_array) {
                let mut all = Types::NONE;
                for option in options {
                    all = all | self.types_within(option, visits)?;
                }
                return (all != Types::NONE).then_some(all);
            }
        }
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            return parts
                .iter()
                .find_map(|part| self.types_within(part, visits));
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let all = values
                .iter()
                .fold(Types::NONE, |all, value| all | Types::of(value));
            return (all != Types::NONE).then_some(all);
        }
        if let Some(value) = schema.get("const") {
            return Some(Types::of(value));
        }
        if schema.contains_key("properties") || schema.contains_key("required") {
            return Some(Types::OBJECT);
        }
        if schema.contains_key("items") {
            return Some(Types::ARRAY);
        }
        None
    }

    /// A short description of what `schema` accepts: "string", "integer or null",
    /// "array of string", "one of \"asc\", \"desc\"".
    fn label(self, schema: &'s Value) -> Option<String> {
        let resolved = self.resolve(schema);
        if let Some(values) = resolved.get("enum").and_then(Value::as_array) {
            let mut shown: Vec<String> = values.iter().take(8).map(show).collect();
            if values.len() > 8 {
                shown.push("…".into());
            }
            return Some(format!("one of {}", shown.join(", ")));
        }
        let types = self.types(schema)?;
        if types == Types::ARRAY
            && let Some(items) = self.items(schema).and_then(|items| self.types(items))
        {
            return Some(format!("array of {}", items.names().join(" or ")));
        }
        Some(types.names().join(" or "))
    }

    /// The subschema that applies at an instance location, following declared properties and
    /// array items.
    fn at(self, location: &Location) -> Option<&'s Value> {
        let mut schema = self.root;
        for segment in location.segments() {
            let items = match segment {
                LocationSegment::Index(_) => self.items(schema),
                LocationSegment::Property(_) => None,
            };
            schema = match items {
                Some(items) => items,
                None => {
                    let name = segment.to_string();
                    self.properties(schema)
                        .into_iter()
                        .find(|(declared, _)| *declared == name)?
                        .1
                }
            };
        }
        Some(self.resolve(schema))
    }
}

/// The elements of `schema[keyword]` when it is an array.
fn branches<'s>(schema: &'s Value, keyword: &str) -> impl Iterator<Item = &'s Value> {
    schema
        .get(keyword)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A set of JSON Schema types. An integral number is both an integer and a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Types(u8);

impl Types {
    const NONE: Types = Types(0);
    const NULL: Types = Types(1);
    const BOOLEAN: Types = Types(1 << 1);
    const INTEGER: Types = Types(1 << 2);
    const NUMBER: Types = Types(1 << 3);
    const STRING: Types = Types(1 << 4);
    const ARRAY: Types = Types(1 << 5);
    const OBJECT: Types = Types(1 << 6);

    /// Named in the order messages list them, `null` last ("a string or null").
    const NAMED: [(Types, &'static str, &'static str); 7] = [
        (Types::BOOLEAN, "boolean", "a boolean"),
        (Types::INTEGER, "integer", "an integer"),
        (Types::NUMBER, "number", "a number"),
        (Types::STRING, "string", "a string"),
        (Types::ARRAY, "array", "an array"),
        (Types::OBJECT, "object", "an object"),
        (Types::NULL, "null", "null"),
    ];

    fn named(name: &str) -> Option<Types> {
        Self::NAMED
            .iter()
            .find(|(_, known, _)| *known == name)
            .map(|(types, _, _)| *types)
    }

    /// The value of a `type` keyword: a name or an array of names.
    fn from_keyword(keyword: &Value) -> Option<Types> {
        match keyword {
            Value::String(name) => Types::named(name),
            Value::Array(names) => {
                let mut all = Types::NONE;
                for name in names {
                    all = all | Types::named(name.as_str()?)?;
                }
                (all != Types::NONE).then_some(all)
            }
            _ => None,
        }
    }

    fn from_kind(kind: &TypeKind) -> Types {
        match kind {
            TypeKind::Single(single) => Types::named(single.as_str()).unwrap_or(Types::NONE),
            TypeKind::Multiple(set) => set.iter().fold(Types::NONE, |all, single| {
                all | Types::named(single.as_str()).unwrap_or(Types::NONE)
            }),
        }
    }

    fn of(value: &Value) -> Types {
        match value {
            Value::Null => Types::NULL,
            Value::Bool(_) => Types::BOOLEAN,
            Value::Number(number) if is_integral(number) => Types::INTEGER | Types::NUMBER,
            Value::Number(_) => Types::NUMBER,
            Value::String(_) => Types::STRING,
            Value::Array(_) => Types::ARRAY,
            Value::Object(_) => Types::OBJECT,
        }
    }

    fn has(self, other: Types) -> bool {
        self.0 & other.0 != 0
    }

    fn admits(self, value: &Value) -> bool {
        self.has(Types::of(value))
    }

    /// Bare names ("integer"), an integer's "number" dropped when both are present.
    fn names(self) -> Vec<&'static str> {
        self.listed().map(|(_, name, _)| name).collect()
    }

    /// Names with articles for "must be …": "a string, an integer or null".
    fn phrase(self) -> String {
        let words: Vec<&str> = self.listed().map(|(_, _, words)| words).collect();
        match words.split_last() {
            None => "something else".into(),
            Some((last, [])) => (*last).into(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }

    fn listed(self) -> impl Iterator<Item = (Types, &'static str, &'static str)> {
        Self::NAMED.into_iter().filter(move |(types, _, _)| {
            self.has(*types) && !(*types == Types::INTEGER && self.has(Types::NUMBER))
        })
    }
}

impl std::ops::BitOr for Types {
    type Output = Types;
    fn bitor(self, other: Types) -> Types {
        Types(self.0 | other.0)
    }
}

fn is_integral(number: &Number) -> bool {
    number.is_i64() || number.is_u64() || number.as_f64().is_some_and(|f| f.fract() == 0.0)
}

// ---------------------------------------------------------------------------------------------
// Repair.

/// One repair pass over a call's arguments, collecting what it changed.
struct Repairer<'s> {
    doc: SchemaDoc<'s>,
    fixes: Vec<String>,
}

impl<'s> Repairer<'s> {
    /// Renames `object`'s unknown members onto the properties `schema` declares, then repairs
    /// each declared member's value. `aliases` apply at the top level only; `depth` is
    /// `object`'s nesting level (the arguments are level 1).
    fn repair_object(
        &mut self,
        object: &mut JsonObject,
        schema: &'s Value,
        path: &str,
        aliases: Option<&BTreeMap<String, String>>,
        depth: usize,
    ) {
        let declared = self.doc.properties(schema);
        self.rename(object, &declared, path, aliases);
        for (name, value) in object.iter_mut() {
            if let Some((_, property)) = declared.iter().find(|(known, _)| known == name) {
                self.repair_value(value, property, &join(path, name), depth + 1);
            }
        }
    }

    /// Maps unknown names onto declared ones: configured aliases first, then names equal
    /// after normalising, then unambiguous near misses; each pass over all names, so the surer
    /// rule claims a property first. Never onto a name present in `object`.
    fn rename(
        &mut self,
        object: &mut JsonObject,
        declared: &[(&str, &Value)],
        path: &str,
        aliases: Option<&BTreeMap<String, String>>,
    ) {
        let is_declared = |name: &str| declared.iter().any(|(known, _)| *known == name);
        let mut unknown: Vec<&str> = object
            .keys()
            .map(String::as_str)
            .filter(|name| !is_declared(name))
            .collect();
        if unknown.is_empty() {
            return;
        }
        let mut taken: Vec<&str> = object.keys().map(String::as_str).collect();
        let mut renames: Vec<(String, String)> = Vec::new();
        for rule in [
            RenameRule::Alias,
            RenameRule::SameNormalized,
            RenameRule::NearMiss,
        ] {
            unknown.retain(
                |name| match rename_target(rule, name, declared, aliases, &taken) {
                    Some(target) => {
                        taken.push(target);
                        renames.push((name.to_string(), target.to_string()));
                        false
                    }
                    None => true,
                },
            );
        }
        if renames.is_empty() {
            return;
        }
        // Rebuilt rather than removed and re-inserted, so members keep their order.
        for (key, value) in std::mem::take(object) {
            match renames.iter().find(|(from, _)| *from == key) {
                Some((from, to)) => {
                    self.fixes.push(format!(
                        "renamed '{}' to '{}'",
                        join(path, from),
                        join(path, to)
                    ));
                    object.insert(to.clone(), value);
                }
                None => {
                    object.insert(key, value);
                }
            }
        }
    }

    /// Coerces `value` to a type `schema` admits if it has none of them, then repairs inside it.
    fn repair_value(&mut self, value: &mut Value, schema: &'s Value, path: &str, depth: usize) {
        if let Some(types) = self.doc.types(schema)
            && !types.admits(value)
            && let Some((coerced, how)) = coerce(value, types, depth)
        {
            self.fixes.push(match how {
                Coercion::Converted => {
                    format!(
                        "converted '{path}' from {} to {}",
                        show(value),
                        show(&coerced)
                    )
                }
                Coercion::Wrapped => format!("wrapped '{path}' in an array"),
                Coercion::Parsed => format!("parsed '{path}' from a JSON string"),
            });
            *value = coerced;
        }
        match value {
            Value::Object(object) => self.repair_object(object, schema, path, None, depth),
            Value::Array(items) => {
                if let Some(item_schema) = self.doc.items(schema) {
                    for (index, item) in items.iter_mut().enumerate() {
                        self.repair_value(
                            item,
                            item_schema,
                            &format!("{path}[{index}]"),
                            depth + 1,
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

/// The ways a sent name is mapped onto a declared one, surest first.
#[derive(Debug, Clone, Copy)]
enum RenameRule {
    /// The tool's configured aliases.
    Alias,
    /// Equal without case or separators: `filePath`, `file_path`, `FILE-PATH`.
    SameNormalized,
    /// Within [`MAX_EDIT_DISTANCE`] edits of exactly one free declared name.
    NearMiss,
}

/// The name `rule` maps `name` to, if it maps it to exactly one name not in `taken`.
fn rename_target<'a>(
    rule: RenameRule,
    name: &str,
    declared: &[(&'a str, &Value)],
    aliases: Option<&'a BTreeMap<String, String>>,
    taken: &[&str],
) -> Option<&'a str> {
    let free = |target: &&'a str| !taken.contains(target);
    let wanted = normalize(name);
    let declared_names = declared.iter().map(|(known, _)| *known);
    match rule {
        RenameRule::Alias => alias_for(aliases?, name).filter(free),
        RenameRule::SameNormalized => {
            single(declared_names.filter(|known| normalize(known) == wanted)).filter(free)
        }
        RenameRule::NearMiss if wanted.chars().count() >= MIN_FUZZY_LEN => {
            single(declared_names.filter(free).filter(|known| {
                let known = normalize(known);
                known.chars().count() >= MIN_FUZZY_LEN
                    && strsim::levenshtein(&wanted, &known) <= MAX_EDIT_DISTANCE
            }))
        }
        RenameRule::NearMiss => None,
    }
}

/// The configured alias target of `name`: by exact name, else by the one alias equal to it
/// after normalising (an alias `file` also catches `File`).
fn alias_for<'a>(aliases: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    if let Some(target) = aliases.get(name) {
        return Some(target);
    }
    let wanted = normalize(name);
    single(
        aliases
            .iter()
            .filter(|(from, _)| normalize(from) == wanted)
            .map(|(_, to)| to.as_str()),
    )
}

/// The only item, if there is exactly one.
fn single<T>(mut items: impl Iterator<Item = T>) -> Option<T> {
    let first = items.next()?;
    items.next().is_none().then_some(first)
}

/// How a value was coerced, for the fix's wording.
enum Coercion {
    Converted,
    Wrapped,
    Parsed,
}

/// A value of one of `types` made from `value`, which has none of them. `depth` is the nesting
/// level a container would have in `value`'s place: a parsed JSON string must fit below it.
fn coerce(value: &Value, types: Types, depth: usize) -> Option<(Value, Coercion)> {
    match value {
        Value::String(text) => {
            let text = text.trim();
            if types.has(Types::INTEGER | Types::NUMBER)
                && let Some(number) = parse_number(text, types.has(Types::NUMBER))
            {
                return Some((Value::Number(number), Coercion::Converted));
            }
            if types.has(Types::BOOLEAN) {
                for (word, truth) in [("true", true), ("false", false)] {
                    if text.eq_ignore_ascii_case(word) {
                        return Some((Value::Bool(truth), Coercion::Converted));
                    }
                }
            }
            if types.has(Types::OBJECT | Types::ARRAY)
                && (text.starts_with('{') || text.starts_with('['))
                && let Ok(parsed) = serde_json::from_str::<Value>(text)
                && types.admits(&parsed)
                && measure_value(&parsed, depth.saturating_sub(1), &mut 0).is_ok()
            {
                return Some((parsed, Coercion::Parsed));
            }
            wrap(value, types)
        }
        Value::Number(number) if types.has(Types::STRING) => {
            Some((Value::String(number.to_string()), Coercion::Converted))
        }
        Value::Number(_) | Value::Bool(_) => wrap(value, types),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn wrap(value: &Value, types: Types) -> Option<(Value, Coercion)> {
    types
        .has(Types::ARRAY)
        .then(|| (Value::Array(vec![value.clone()]), Coercion::Wrapped))
}

/// A number written as text: integers stay integers; a fraction only where numbers are wanted.
fn parse_number(text: &str, fraction_allowed: bool) -> Option<Number> {
    if let Ok(integer) = text.parse::<i64>() {
        return Some(integer.into());
    }
    if let Ok(integer) = text.parse::<u64>() {
        return Some(integer.into());
    }
    let float = text.parse::<f64>().ok().filter(|f| f.is_finite())?;
    if fraction_allowed {
        Number::from_f64(float)
    } else if float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0 {
        // Integral and exactly representable, so the cast is exact.
        Some((float as i64).into())
    } else {
        None
    }
}

/// Whether `a` and `b` name the same parameter up to case and separators
/// (`sessionId`, `session_id`, `Session-ID`).
pub fn same_name(a: &str, b: &str) -> bool {
    normalize(a) == normalize(b)
}

/// A name compared without case or separators: `filePath`, `file_path`, `FILE-PATH` all
/// become `filepath`.
fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// `parent.name`, or `name` at the top level.
fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

// ---------------------------------------------------------------------------------------------
// Teaching: validation errors in plain words, and the closest valid names.

/// The validation errors of `instance`, in plain words: missing parameters first, unknown
/// ones last, duplicates dropped, at most [`MAX_PROBLEMS`] plus a line counting the rest.
fn problems(schema: &CompiledSchema, instance: &Value) -> Vec<String> {
    let doc = schema.doc();
    let mut ranked: Vec<(u8, String)> = Vec::new();
    let mut more = 0usize;
    let mut read_all = true;
    for (read, error) in schema.validator.iter_errors(instance).enumerate() {
        if read == MAX_ERRORS_READ {
            read_all = false;
            break;
        }
        for problem in describe(doc, &error) {
            if ranked.iter().any(|(_, known)| *known == problem.1) {
                continue;
            }
            if ranked.len() < MAX_PROBLEMS {
                ranked.push(problem);
            } else {
                more += 1;
            }
        }
    }
    ranked.sort_by_key(|(rank, _)| *rank);
    let mut problems: Vec<String> = ranked.into_iter().map(|(_, text)| text).collect();
    if more > 0 || !read_all {
        let count = if read_all {
            more.to_string()
        } else {
            "more".into()
        };
        problems.push(format!("…and {count} other problems"));
    }
    if problems.is_empty() {
        // The validator said no but names nothing; never leave the caller without a reason.
        problems.push("the arguments do not match the input schema".into());
    }
    problems
}

/// Rank of a missing parameter: listed first, it is the most likely one fix.
const RANK_MISSING: u8 = 0;
const RANK_VALUE: u8 = 1;
const RANK_UNKNOWN: u8 = 2;

/// One validation error as (rank, plain words); `additionalProperties` yields one per name.
fn describe(doc: SchemaDoc<'_>, error: &ValidationError<'_>) -> Vec<(u8, String)> {
    let location = error.instance_path();
    let path = display_path(location);
    let subject = if path.is_empty() {
        "the arguments".to_string()
    } else {
        format!("'{path}'")
    };
    let got = show(error.instance());
    let value = |text: String| vec![(RANK_VALUE, text)];
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| show(property), str::to_string);
            let label = doc
                .at(location)
                .and_then(|object| {
                    doc.properties(object)
                        .into_iter()
                        .find(|(declared, _)| *declared == name)
                })
                .and_then(|(_, property)| doc.label(property))
                .map(|label| format!(" ({label})"))
                .unwrap_or_default();
            vec![(
                RANK_MISSING,
                format!("missing required parameter '{}'{label}", join(&path, &name)),
            )]
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => unexpected
            .iter()
            .map(|name| {
                (
                    RANK_UNKNOWN,
                    format!("unknown parameter '{}'", join(&path, name)),
                )
            })
            .collect(),
        ValidationErrorKind::FalseSchema if !path.is_empty() => {
            vec![(RANK_UNKNOWN, format!("parameter '{path}' is not allowed"))]
        }
        ValidationErrorKind::Type { kind } => value(format!(
            "{subject} must be {}, got {got}",
            Types::from_kind(kind).phrase()
        )),
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } => {
            match doc.at(location).and_then(|schema| doc.types(schema)) {
                Some(types) if !types.admits(error.instance()) => {
                    value(format!("{subject} must be {}, got {got}", types.phrase()))
                }
                _ => value(format!(
                    "{subject} matches none of the forms the schema allows, got {got}"
                )),
            }
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => value(format!(
            "{subject} matches more than one of the forms the schema allows (it must match exactly one), got {got}"
        )),
        ValidationErrorKind::Enum { options } => {
            let listed = match options.as_ref() {
                Value::Array(options) => {
                    let mut shown: Vec<String> = options.iter().take(12).map(show).collect();
                    if options.len() > 12 {
                        shown.push("…".into());
                    }
                    shown.join(", ")
                }
                other => show(other),
            };
            value(format!("{subject} must be one of {listed}, got {got}"))
        }
        ValidationErrorKind::Constant { expected_value } => value(format!(
            "{subject} must be {}, got {got}",
            show(expected_value)
        )),
        ValidationErrorKind::Minimum { limit } => {
            value(format!("{subject} must be at least {limit}, got {got}"))
        }
        ValidationErrorKind::Maximum { limit } => {
            value(format!("{subject} must be at most {limit}, got {got}"))
        }
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            value(format!("{subject} must be greater than {limit}, got {got}"))
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            value(format!("{subject} must be less than {limit}, got {got}"))
        }
        ValidationErrorKind::MultipleOf { multiple_of } => value(format!(
            "{subject} must be a multiple of {multiple_of}, got {got}"
        )),
        ValidationErrorKind::MinLength { limit } => value(format!(
            "{subject} must be at least {limit} {} long, got {got}",
            plural(*limit, "character")
        )),
        ValidationErrorKind::MaxLength { limit } => value(format!(
            "{subject} must be at most {limit} {} long, got {got}",
            plural(*limit, "character")
        )),
        ValidationErrorKind::MinItems { limit } => value(format!(
            "{subject} must have at least {limit} {}, got {got}",
            plural(*limit, "item")
        )),
        ValidationErrorKind::MaxItems { limit } => value(format!(
            "{subject} must have at most {limit} {}, got {got}",
            plural(*limit, "item")
        )),
        ValidationErrorKind::MinProperties { limit } => value(format!(
            "{subject} must have at least {limit} {}, got {got}",
            plural(*limit, "property")
        )),
        ValidationErrorKind::MaxProperties { limit } => value(format!(
            "{subject} must have at most {limit} {}, got {got}",
            plural(*limit, "property")
        )),
        ValidationErrorKind::Pattern { pattern } => value(format!(
            "{subject} must match the pattern {pattern}, got {got}"
        )),
        ValidationErrorKind::Format { format } => {
            value(format!("{subject} must be a valid {format}, got {got}"))
        }
        ValidationErrorKind::UniqueItems => {
            value(format!("{subject} must not contain duplicate items"))
        }
        ValidationErrorKind::Contains => value(format!(
            "{subject} must contain at least one item the schema allows, got {got}"
        )),
        ValidationErrorKind::Not { .. } => {
            value(format!("{subject} has a value the schema forbids: {got}"))
        }
        ValidationErrorKind::PropertyNames { error } => value(format!(
            "{subject} has a property name the schema forbids: {error}"
        )),
        _ => value(format!("{subject}: {error}")),
    }
}

fn plural(count: u64, noun: &str) -> String {
    match (count, noun) {
        (1, _) => noun.to_string(),
        (_, "property") => "properties".to_string(),
        _ => format!("{noun}s"),
    }
}

/// An instance location as a caller would write it: `options.mode`, `items[2].name`.
fn display_path(location: &Location) -> String {
    let mut path = String::new();
    for segment in location.segments() {
        match segment {
            LocationSegment::Index(index) => {
                let _ = write!(path, "[{index}]");
            }
            LocationSegment::Property(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&name);
            }
        }
    }
    path
}

/// A value as compact JSON, cut to [`MAX_SHOWN_CHARS`] characters (a 1 MiB string must not
/// make a 1 MiB error).
fn show(value: &Value) -> String {
    /// Keeps the first bytes written and then refuses more, which ends serialisation early.
    struct Prefix(Vec<u8>);
    impl io::Write for Prefix {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            let room = MAX_SHOWN_CHARS * 4 + 4 - self.0.len();
            if room == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            let taken = bytes.len().min(room);
            self.0.extend_from_slice(&bytes[..taken]);
            Ok(taken)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut prefix = Prefix(Vec::new());
    let _ = serde_json::to_writer(&mut prefix, value);
    let text = String::from_utf8_lossy(&prefix.0);
    if text.chars().count() <= MAX_SHOWN_CHARS && prefix.0.len() < MAX_SHOWN_CHARS * 4 + 4 {
        return text.into_owned();
    }
    let mut cut: String = text.chars().take(MAX_SHOWN_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Adds to `closest` the names in `object` (at `path`) that `schema` does not declare, each
/// with the declared names nearest to it, then does the same inside declared members.
fn suggest_object<'s>(
    doc: SchemaDoc<'s>,
    object: &JsonObject,
    schema: &'s Value,
    path: &str,
    aliases: Option<&BTreeMap<String, String>>,
    closest: &mut Vec<(String, String)>,
) {
    let declared = doc.properties(schema);
    for name in object.keys() {
        if declared.iter().any(|(known, _)| known == name) {
            continue;
        }
        let mut names: Vec<&str> = Vec::new();
        if let Some(target) = aliases.and_then(|aliases| alias_for(aliases, name)) {
            names.push(target);
        }
        let free = declared
            .iter()
            .map(|(known, _)| *known)
            .filter(|known| !object.contains_key(*known) && !names.contains(known));
        names.extend(nearest(name, free));
        names.truncate(MAX_SUGGESTIONS);
        if !names.is_empty() {
            closest.push((join(path, name), names.join(", ")));
        }
    }
    for (name, value) in object {
        if let Some((_, property)) = declared.iter().find(|(known, _)| known == name) {
            suggest_value(doc, value, property, &join(path, name), closest);
        }
    }
}

fn suggest_value<'s>(
    doc: SchemaDoc<'s>,
    value: &Value,
    schema: &'s Value,
    path: &str,
    closest: &mut Vec<(String, String)>,
) {
    match value {
        Value::Object(object) => suggest_object(doc, object, schema, path, None, closest),
        Value::Array(items) => {
            if let Some(item_schema) = doc.items(schema) {
                for (index, item) in items.iter().enumerate() {
                    suggest_value(doc, item, item_schema, &format!("{path}[{index}]"), closest);
                }
            }
        }
        _ => {}
    }
}

/// The candidates plausibly meant by `name`, nearest first: equal after normalising, within
/// 40% edits of the longer name (or 2 for names of 5 or more), or one containing the other.
fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let wanted = normalize(name);
    if wanted.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, &str)> = candidates
        .filter_map(|candidate| {
            let known = normalize(candidate);
            let distance = strsim::levenshtein(&wanted, &known);
            let longest = wanted.chars().count().max(known.chars().count());
            let shortest = wanted.chars().count().min(known.chars().count());
            let close = distance * 5 <= longest * 2
                || (distance <= MAX_EDIT_DISTANCE && longest > MIN_FUZZY_LEN)
                || (shortest >= 3 && (known.contains(&wanted) || wanted.contains(&known)));
            close.then_some((distance, candidate))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, candidate)| candidate)
        .collect()
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
        let example = crate::example::example_arguments(&std::sync::Arc::new(
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
        };
        let text = teaching_text("t", &bare, &object(json!({"type": "object"})), "");
        assert!(text.contains("declares no parameters") && !text.contains("example"));
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
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/data/mcp-catalog.json"
        );
        let text = std::fs::read_to_string(path).expect("the catalog file exists");
        let catalog: Value = serde_json::from_str(&text).expect("the catalog is JSON");
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
                for arguments in odd_arguments(&schema) {
                    let _ = check_obj(&schema, &arguments, &no_aliases());
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
