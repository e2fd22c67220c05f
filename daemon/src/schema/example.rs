//! Worked example calls generated from a tool's input schema, for `describe_tool`
//! and teaching errors: the required fields filled with plausible values.
//!
//! Pure: a schema in, a JSON value out. Values come, in order of preference, from
//! what the schema itself suggests (`examples`, `example`, `const`, `default`,
//! `enum`), then from the type and its constraints, then from the property's name
//! (`path` → `"/path/to/file.txt"`). Where a guess can be checked cheaply
//! (hints, `anyOf` alternatives, patterns) it is checked with `jsonschema`.

use std::cell::Cell;

use crate::schema;
use crate::schema::RefTarget;
use rmcp::model::JsonObject;
use serde_json::{Map, Number, Value, json};

/// How far `$ref`s, combinators and nested schemas are followed; recursive
/// schemas stop here with an empty object or array.
const MAX_DEPTH: usize = 24;

/// How many schema nodes and checks one example may cost; past it, no more
/// alternatives are tried and nested objects and arrays are left empty, so a
/// hostile schema (recursive alternatives that all fail) cannot stall a call.
const BUDGET: usize = 1_000;

/// The schema that accepts anything, for properties and items left unspecified.
static ANYTHING: Value = Value::Bool(true);

/// Example arguments for a tool whose input schema is `schema`: required fields
/// filled with plausible values. Always a JSON object.
pub fn example_arguments(schema: &JsonObject) -> Value {
    let generator = Generator {
        root: schema,
        budget: Cell::new(BUDGET),
    };
    match generator.value_for(schema, None, 0) {
        Value::Object(arguments) => Value::Object(arguments),
        // A root without `type` (some children send only `$schema`) is still an
        // object: tool arguments always are.
        _ => generator.object_value(schema, 0),
    }
}

/// A worked example call as JSON text: `{"name": tool_name, "arguments": {...}}`,
/// pretty-printed.
pub fn example_call(tool_name: &str, schema: &JsonObject) -> String {
    call_text(tool_name, example_arguments(schema))
}

/// A call of `tool_name` with `arguments` as pretty JSON text, the form
/// [`example_call`] shows.
pub fn call_text(tool_name: &str, arguments: Value) -> String {
    let call = json!({"name": tool_name, "arguments": arguments});
    serde_json::to_string_pretty(&call).expect("a JSON value always serializes")
}

/// Generates values for the schemas inside one root schema, which `$ref`s point into.
struct Generator<'a> {
    root: &'a JsonObject,
    /// What is left of [`BUDGET`].
    budget: Cell<usize>,
}

impl Generator<'_> {
    /// A value for `schema`, a subschema of the root; `name` is the property
    /// (or array) it fills, used to pick a readable value.
    fn value_of(&self, schema: &Value, name: Option<&str>, depth: usize) -> Value {
        match schema {
            Value::Object(node) => self.value_for(node, name, depth),
            // Nothing is valid against `false`; null at least shows the slot.
            Value::Bool(false) => Value::Null,
            _ => self.value_for(&Map::new(), name, depth),
        }
    }

    /// The value for a schema object: its hints first, then its `$ref`, `allOf`,
    /// `anyOf`/`oneOf`, then its type.
    fn value_for(&self, node: &Map<String, Value>, name: Option<&str>, depth: usize) -> Value {
        if let Some(value) = self.hint(node) {
            return value;
        }
        let go_deeper = depth < MAX_DEPTH && self.spend();
        if go_deeper {
            if let Some(target) = node
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| self.resolve(r))
            {
                let expanded = self.merge(without(node, "$ref"), target, depth + 1);
                return self.value_for(&expanded, name, depth + 1);
            }
            if let Some(Value::Array(parts)) = node.get("allOf") {
                let mut merged = without(node, "allOf");
                for part in parts.iter().filter_map(Value::as_object) {
                    merged = self.merge(merged, part, depth + 1);
                }
                return self.value_for(&merged, name, depth + 1);
            }
            for combinator in ["anyOf", "oneOf"] {
                if let Some(Value::Array(alternatives)) = node.get(combinator) {
                    return self.alternative_value(node, combinator, alternatives, name, depth);
                }
            }
        }
        match type_of(node) {
            "object" if go_deeper => self.object_value(node, depth),
            "array" if go_deeper => self.array_value(node, name, depth),
            "object" => Value::Object(Map::new()),
            "array" => Value::Array(Vec::new()),
            "integer" => number_value(node, name, true),
            "number" => number_value(node, name, false),
            "boolean" => Value::Bool(true),
            "null" => Value::Null,
            _ => self.string_value(node, name),
        }
    }

    /// The value the schema itself suggests, if it is valid there: `examples`,
    /// `example`, `const`, `default`, then the first non-null `enum` member.
    fn hint(&self, node: &Map<String, Value>) -> Option<Value> {
        if let Some(Value::Null) = node.get("const") {
            return Some(Value::Null);
        }
        let first_example = node
            .get("examples")
            .and_then(Value::as_array)
            .and_then(|e| e.first());
        // An empty default (`""`) is valid but teaches nothing.
        let default = node.get("default").filter(|d| d.as_str() != Some(""));
        let first_enum = node
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|members| members.iter().find(|m| !m.is_null()));
        [
            first_example,
            node.get("example"),
            node.get("const"),
            default,
            first_enum,
        ]
        .into_iter()
        .flatten()
        .find(|hint| !hint.is_null() && self.fits(hint, node))
        .cloned()
    }

    /// Tries each alternative of `anyOf`/`oneOf` (merged with the keywords beside
    /// it) and keeps the first non-null value valid against the whole node.
    fn alternative_value(
        &self,
        node: &Map<String, Value>,
        combinator: &str,
        alternatives: &[Value],
        name: Option<&str>,
        depth: usize,
    ) -> Value {
        let base = without(node, combinator);
        let mut first = None;
        let mut null_allowed = false;
        for alternative in alternatives {
            let Some(alternative) = alternative.as_object() else {
                continue;
            };
            if type_of(alternative) == "null" && !alternative.contains_key("$ref") {
                null_allowed = true;
                continue;
            }
            let merged = self.merge(base.clone(), alternative, depth + 1);
            let value = self.value_for(&merged, name, depth + 1);
            if self.fits(&value, node) {
                return value;
            }
            first.get_or_insert(value);
        }
        if null_allowed && self.fits(&Value::Null, node) {
            return Value::Null;
        }
        first.unwrap_or(Value::Null)
    }

    /// The `required` properties, plus optional ones (declared first, then
    /// invented) only as far as `minProperties` asks.
    fn object_value(&self, node: &Map<String, Value>, depth: usize) -> Value {
        let mut object = Map::new();
        let required = node.get("required").and_then(Value::as_array);
        for key in required.into_iter().flatten().filter_map(Value::as_str) {
            let value = self.value_of(property_schema(node, key), Some(key), depth + 1);
            object.insert(key.to_string(), value);
        }
        let min_properties = as_count(node.get("minProperties")).unwrap_or(0);
        let declared = node.get("properties").and_then(Value::as_object);
        for (key, schema) in declared.into_iter().flatten() {
            if object.len() >= min_properties {
                break;
            }
            if !object.contains_key(key) {
                let value = self.value_of(schema, Some(key), depth + 1);
                object.insert(key.clone(), value);
            }
        }
        let extra_schema = node.get("additionalProperties").unwrap_or(&ANYTHING);
        let mut n = 1;
        while object.len() < min_properties && *extra_schema != Value::Bool(false) {
            let key = format!("key{n}");
            if !object.contains_key(&key) {
                let value = self.value_of(extra_schema, Some(&key), depth + 1);
                object.insert(key, value);
            }
            n += 1;
        }
        Value::Object(object)
    }

    /// At least one element when the items are described, `minItems` in any case,
    /// never more than `maxItems`; distinct elements under `uniqueItems`.
    fn array_value(&self, node: &Map<String, Value>, name: Option<&str>, depth: usize) -> Value {
        // Tuples: `prefixItems` (2020-12) or an array of `items` (drafts 4–7),
        // followed by elements described by `items` or `additionalItems`.
        let (tuple, rest): (&[Value], Option<&Value>) =
            match (node.get("prefixItems"), node.get("items")) {
                (Some(Value::Array(prefix)), rest) => (prefix, rest),
                (_, Some(Value::Array(prefix))) => (prefix, node.get("additionalItems")),
                (_, rest) => (&[], rest),
            };
        let contains = node.get("contains");
        let described = !tuple.is_empty() || rest.is_some() || contains.is_some();
        let min_items = as_count(node.get("minItems")).unwrap_or(0);
        let max_items = as_count(node.get("maxItems")).unwrap_or(usize::MAX);
        let mut count = min_items.max(usize::from(described)).min(max_items);
        if rest == Some(&Value::Bool(false)) {
            count = count.min(tuple.len());
        }
        let unique = node.get("uniqueItems") == Some(&Value::Bool(true));
        let item_name = name.map(singular);
        let mut items: Vec<Value> = Vec::with_capacity(count);
        for i in 0..count {
            let described_by = tuple.get(i).or(rest).unwrap_or(&ANYTHING);
            // The first element also satisfies `contains`.
            let with_contains;
            let schema = match contains {
                Some(contains) if i == 0 => {
                    with_contains = json!({"allOf": [described_by, contains]});
                    &with_contains
                }
                _ => described_by,
            };
            let mut value = self.value_of(schema, item_name, depth + 1);
            if unique && items.contains(&value) {
                match self.distinct_value(schema, &value, &items) {
                    Some(distinct) => value = distinct,
                    None => break,
                }
            }
            items.push(value);
        }
        Value::Array(items)
    }

    /// Another value for `schema` than `like`, not among `taken`: the next `enum`
    /// member, a neighbouring number, a suffixed string, the other boolean.
    fn distinct_value(&self, schema: &Value, like: &Value, taken: &[Value]) -> Option<Value> {
        let node = schema.as_object().cloned().unwrap_or_default();
        let node = self.merge(Map::new(), &node, 0);
        let mut candidates: Vec<Value> = node
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match like {
            Value::String(s) => {
                candidates.extend((2..10).map(|k| Value::String(format!("{s}{k}"))));
                candidates.extend((2..10).map(|k| Value::String(format!("{s}-{k}"))));
                candidates.extend(
                    PATTERN_CANDIDATES
                        .iter()
                        .map(|c| Value::String((*c).into())),
                );
            }
            Value::Number(n) => {
                let step = node
                    .get("multipleOf")
                    .and_then(Value::as_f64)
                    .filter(|s| *s > 0.0)
                    .unwrap_or(1.0);
                let base = n.as_f64().unwrap_or(0.0);
                let integer = n.is_i64() || n.is_u64();
                for k in 1..10 {
                    let k = f64::from(k) * step;
                    candidates.extend([number(base + k, integer), number(base - k, integer)]);
                }
            }
            Value::Bool(b) => candidates.push(Value::Bool(!b)),
            _ => {}
        }
        candidates
            .into_iter()
            .find(|c| !c.is_null() && !taken.contains(c) && self.fits(c, &node))
    }

    /// A string honouring `format`, `pattern` and length bounds; otherwise one
    /// read from the property's name.
    fn string_value(&self, node: &Map<String, Value>, name: Option<&str>) -> Value {
        let min_length = as_count(node.get("minLength")).unwrap_or(0);
        let max_length = as_count(node.get("maxLength")).unwrap_or(usize::MAX);
        let preferred = node
            .get("format")
            .and_then(Value::as_str)
            .and_then(format_example)
            .or_else(|| name.and_then(name_example))
            .unwrap_or("example");
        let fitted = fit_length(preferred, min_length, max_length);
        let Some(pattern) = node.get("pattern").and_then(Value::as_str) else {
            return Value::String(fitted);
        };
        // Only the string keywords, so each candidate costs one regex match.
        let mut check = Map::new();
        check.insert("type".into(), "string".into());
        for key in ["pattern", "minLength", "maxLength", "format"] {
            if let Some(value) = node.get(key) {
                check.insert(key.into(), value.clone());
            }
        }
        if let Some(draft) = self.root.get("$schema") {
            check.insert("$schema".into(), draft.clone());
        }
        let Ok(validator) = jsonschema::validator_for(&Value::Object(check)) else {
            return Value::String(fitted);
        };
        let prefix = literal_prefix(pattern);
        // Lengths the pattern fixes (`{43}`, `{8,}`), for padded candidates.
        let lengths: Vec<usize> = pattern
            .split('{')
            .skip(1)
            .filter_map(|quantifier| quantifier.split([',', '}']).next()?.parse().ok())
            .collect();
        let candidates = [preferred.to_string()]
            .into_iter()
            .chain(PATTERN_CANDIDATES.iter().map(|c| c.to_string()))
            .chain(PATTERN_CANDIDATES.iter().map(|c| format!("{prefix}{c}")))
            .flat_map(|c| {
                let padded = lengths.iter().map(|n| fit_length(&c, *n, *n));
                std::iter::once(fit_length(&c, min_length, max_length))
                    .chain(padded)
                    .collect::<Vec<_>>()
            });
        for candidate in candidates {
            let candidate = Value::String(candidate);
            if validator.is_valid(&candidate) {
                return candidate;
            }
        }
        Value::String(fitted)
    }

    /// The schema a local `$ref` points to (see [`schema::resolve_ref`]).
    fn resolve(&self, reference: &str) -> Option<&Map<String, Value>> {
        match schema::resolve_ref(self.root, reference)? {
            RefTarget::Root => Some(self.root),
            RefTarget::Node(node) => node.as_object(),
        }
    }

    /// `base` with `extra`'s keywords added (its `$ref` expanded first): both
    /// sets of properties, both `required` lists, both `allOf` lists; for any
    /// other keyword `base` wins.
    fn merge(
        &self,
        mut base: Map<String, Value>,
        extra: &Map<String, Value>,
        depth: usize,
    ) -> Map<String, Value> {
        let expanded;
        let extra = match extra
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            Some(target) if depth < MAX_DEPTH => {
                expanded = self.merge(without(extra, "$ref"), target, depth + 1);
                &expanded
            }
            _ => extra,
        };
        for (key, value) in extra {
            match (key.as_str(), base.get_mut(key), value) {
                ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                    for (property, schema) in theirs {
                        match mine.get_mut(property) {
                            Some(existing) if existing != schema => {
                                *existing = json!({"allOf": [existing.take(), schema]});
                            }
                            Some(_) => {}
                            None => {
                                mine.insert(property.clone(), schema.clone());
                            }
                        }
                    }
                }
                ("required" | "allOf", Some(Value::Array(mine)), Value::Array(theirs)) => {
                    for item in theirs {
                        if !mine.contains(item) {
                            mine.push(item.clone());
                        }
                    }
                }
                (_, Some(_), _) => {}
                (_, None, _) => {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
        base
    }

    /// Takes one step from the budget; false once it is spent.
    fn spend(&self) -> bool {
        let left = self.budget.get();
        self.budget.set(left.saturating_sub(1));
        left > 0
    }

    /// Whether `value` is valid against `node`, a subschema, checked on its own
    /// with the root's definitions alongside. A subschema `jsonschema` cannot
    /// compile on its own is given the benefit of the doubt.
    fn fits(&self, value: &Value, node: &Map<String, Value>) -> bool {
        if !self.spend() {
            return true;
        }
        let mut schema = node.clone();
        for key in ["$schema", "$defs", "definitions"] {
            if let Some(shared) = self.root.get(key) {
                schema.entry(key).or_insert_with(|| shared.clone());
            }
        }
        match jsonschema::validator_for(&Value::Object(schema)) {
            Ok(validator) => validator.is_valid(value),
            Err(_) => true,
        }
    }
}

/// The schema of property `key`: its own, else `additionalProperties`, else anything.
fn property_schema<'a>(node: &'a Map<String, Value>, key: &str) -> &'a Value {
    node.get("properties")
        .and_then(|properties| properties.get(key))
        .or_else(|| {
            node.get("additionalProperties")
                .filter(|extra| extra.is_object())
        })
        .unwrap_or(&ANYTHING)
}

/// The JSON type to generate: the declared one (the first besides "null" when
/// several are allowed), else the one the keywords imply, else a string.
fn type_of(node: &Map<String, Value>) -> &str {
    match node.get("type") {
        Some(Value::String(declared)) => return declared,
        Some(Value::Array(declared)) => {
            let types: Vec<&str> = declared.iter().filter_map(Value::as_str).collect();
            if let Some(first) = types.iter().find(|t| **t != "null").or(types.first()) {
                return first;
            }
        }
        _ => {}
    }
    const IMPLIED: &[(&str, &[&str])] = &[
        (
            "object",
            &[
                "properties",
                "required",
                "additionalProperties",
                "patternProperties",
                "minProperties",
            ],
        ),
        (
            "array",
            &[
                "items",
                "prefixItems",
                "minItems",
                "maxItems",
                "contains",
                "uniqueItems",
            ],
        ),
        ("string", &["pattern", "format", "minLength", "maxLength"]),
        (
            "number",
            &[
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
                "multipleOf",
            ],
        ),
    ];
    IMPLIED
        .iter()
        .find(|(_, keywords)| keywords.iter().any(|k| node.contains_key(*k)))
        .map_or("string", |(implied, _)| implied)
}

/// A number within `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`
/// (draft-4 booleans or draft-6 numbers) and a multiple of `multipleOf`,
/// as close as possible to one that suits the property's name.
fn number_value(node: &Map<String, Value>, name: Option<&str>, integer: bool) -> Value {
    let lower = bound(node, "minimum", "exclusiveMinimum", f64::max);
    let upper = bound(node, "maximum", "exclusiveMaximum", f64::min);
    let above = |x: f64| lower.is_none_or(|(b, exclusive)| if exclusive { x > b } else { x >= b });
    let below = |x: f64| upper.is_none_or(|(b, exclusive)| if exclusive { x < b } else { x <= b });
    let step = node
        .get("multipleOf")
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
        .or(integer.then_some(1.0));

    let mut value = name.map_or(1.0, preferred_number);
    if let Some(step) = step {
        value = (value / step).round() * step;
    }
    if let Some((bound, exclusive)) = lower.filter(|_| !above(value)) {
        value = match step {
            Some(step) => {
                let snapped = (bound / step).ceil() * step;
                if above(snapped) {
                    snapped
                } else {
                    snapped + step
                }
            }
            None if exclusive => bound + 1.0,
            None => bound,
        };
    }
    if let Some((bound, exclusive)) = upper.filter(|_| !below(value)) {
        value = match step {
            Some(step) => {
                let snapped = (bound / step).floor() * step;
                if below(snapped) {
                    snapped
                } else {
                    snapped - step
                }
            }
            None if exclusive => bound - 1.0,
            None => bound,
        };
    }
    // A range narrower than one step: its middle.
    if let (Some((low, _)), Some((high, _)), None) = (lower, upper, step)
        && !above(value)
    {
        value = (low + high) / 2.0;
    }
    number(value, integer)
}

/// The tighter of an inclusive bound (`minimum`) and an exclusive one
/// (`exclusiveMinimum`: a number since draft 6, a flag on `minimum` in draft 4),
/// as (bound, exclusive).
fn bound(
    node: &Map<String, Value>,
    inclusive: &str,
    exclusive: &str,
    tighter: fn(f64, f64) -> f64,
) -> Option<(f64, bool)> {
    let inclusive_bound = node.get(inclusive).and_then(Value::as_f64);
    match node.get(exclusive) {
        Some(Value::Bool(true)) => inclusive_bound.map(|b| (b, true)),
        Some(Value::Number(n)) => {
            let exclusive_bound = n.as_f64()?;
            match inclusive_bound {
                Some(b) if tighter(b, exclusive_bound) == b && b != exclusive_bound => {
                    Some((b, false))
                }
                _ => Some((exclusive_bound, true)),
            }
        }
        _ => inclusive_bound.map(|b| (b, false)),
    }
}

/// A JSON number, written without a fraction when it has none.
fn number(value: f64, integer: bool) -> Value {
    if (integer || value.fract() == 0.0) && value.abs() < 9.0e15 {
        Value::from(value.round() as i64)
    } else {
        Number::from_f64(value).map_or(Value::Null, Value::Number)
    }
}

/// A plausible number for a property of this name, before bounds apply.
fn preferred_number(name: &str) -> f64 {
    const RULES: &[(&[&str], f64)] = &[
        (
            &[
                "limit", "count", "size", "max", "top", "num", "k", "n", "results",
            ],
            10.0,
        ),
        (&["port"], 8080.0),
        (&["timeout", "seconds", "secs"], 30.0),
        (&["year"], 2025.0),
        (&["latitude", "lat"], 52.52),
        (&["longitude", "lon", "lng"], 13.405),
    ];
    let words = words(name);
    words
        .iter()
        .rev()
        .find_map(|w| RULES.iter().find(|(keys, _)| keys.contains(&w.as_str())))
        .map_or(1.0, |(_, value)| *value)
}

/// Strings tried in turn against a `pattern` (after the format's and the
/// name's), covering the shapes tool schemas ask for most.
const PATTERN_CANDIDATES: &[&str] = &[
    "example",
    "abc123",
    "ABC-123",
    "123",
    "EXAMPLE",
    "example-name",
    "example_name",
    "example.com",
    "https://example.com",
    "user@example.com",
    "2025-01-15",
    "2025-01-15T09:30:00Z",
    "09:30:00",
    "today",
    "key=value",
    "example.png",
    "#1A2B3C",
    "US",
    "123e4567-e89b-42d3-a456-426614174000",
    "192.0.2.1",
    "1.0.0",
    "0,0,100,100",
    "1:10",
    "/path/to/file.txt",
    "a",
    "",
];

/// A value of a string `format`, for the formats tool schemas use.
fn format_example(format: &str) -> Option<&'static str> {
    Some(match format {
        "date-time" => "2025-01-15T09:30:00Z",
        "date" => "2025-01-15",
        "time" => "09:30:00Z",
        "duration" => "PT1H",
        "email" | "idn-email" => "user@example.com",
        "uri" | "url" | "uri-reference" | "iri" | "iri-reference" => "https://example.com",
        "uri-template" => "https://example.com/{id}",
        "uuid" => "123e4567-e89b-42d3-a456-426614174000",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "hostname" | "idn-hostname" => "example.com",
        "json-pointer" => "/example",
        "regex" => "^example$",
        "path" => "/path/to/file.txt",
        _ => return None,
    })
}

/// A readable value for a string property, read from its name: the last word
/// that means something (`repo_owner` → an owner, `file_id` → an id), with
/// generic words (`name`, `title`) only when nothing else does.
fn name_example(name: &str) -> Option<&'static str> {
    const GENERIC: &[&str] = &["name", "title", "label", "tag"];
    const RULES: &[(&[&str], &str)] = &[
        (&["email", "mail"], "user@example.com"),
        (
            &[
                "url", "uri", "link", "href", "endpoint", "website", "homepage",
            ],
            "https://example.com",
        ),
        (
            &["dir", "directory", "folder", "cwd", "root"],
            "/path/to/dir",
        ),
        (
            &["path", "file", "filepath", "filename"],
            "/path/to/file.txt",
        ),
        (
            &["datetime", "time", "timestamp", "since", "until"],
            "2025-01-15T09:30:00Z",
        ),
        (&["date", "day"], "2025-01-15"),
        (&["id", "uuid", "guid", "key", "token", "cursor"], "abc123"),
        (
            &[
                "owner",
                "org",
                "organization",
                "user",
                "username",
                "login",
                "author",
            ],
            "octocat",
        ),
        (&["repo", "repository"], "hello-world"),
        (&["branch", "ref"], "main"),
        (
            &["sha", "commit", "hash"],
            "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        ),
        (
            &["query", "search", "q", "keyword", "term"],
            "example search",
        ),
        (&["host", "hostname", "domain"], "example.com"),
        (&["ip"], "192.0.2.1"),
        (&["command", "cmd"], "echo hello"),
        (&["sql"], "SELECT 1"),
        (&["language", "lang", "locale"], "en"),
        (&["timezone", "tz", "zone"], "UTC"),
        (&["sheet", "worksheet"], "Sheet1"),
        (&["cell"], "A1"),
        (&["country"], "US"),
        (&["currency"], "USD"),
        (&["color", "colour"], "#1A2B3C"),
        (&["phone"], "+15555550123"),
        (&["version"], "1.0.0"),
        (&["channel"], "general"),
        (
            &[
                "message",
                "text",
                "body",
                "content",
                "comment",
                "prompt",
                "description",
                "note",
                "summary",
            ],
            "Hello from evo",
        ),
        (&["title", "subject"], "Example title"),
        (&["name", "label", "tag"], "example"),
    ];
    let rule_for = |word: &str| {
        let singular = word.strip_suffix('s').unwrap_or(word);
        RULES
            .iter()
            .find(|(keys, _)| keys.contains(&word) || keys.contains(&singular))
            .map(|(_, value)| *value)
    };
    let words = words(name);
    let specific = words
        .iter()
        .rev()
        .filter(|w| !GENERIC.contains(&w.as_str()));
    specific.chain(words.iter().rev()).find_map(|w| rule_for(w))
}

/// The lowercase words of an identifier: `repoOwner`, `repo_owner` and
/// `repo-owner` all give ["repo", "owner"].
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        let boundary = !c.is_alphanumeric() || (c.is_uppercase() && previous_lower);
        if boundary && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        if c.is_alphanumeric() {
            current.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// The name an array's elements go by: `paths` → `path`.
fn singular(name: &str) -> &str {
    name.strip_suffix('s')
        .filter(|s| !s.is_empty())
        .unwrap_or(name)
}

/// `text` padded with `x` to at least `min` characters and cut to at most `max`.
fn fit_length(text: &str, min: usize, max: usize) -> String {
    let length = text.chars().count();
    if length < min {
        let mut padded = text.to_string();
        padded.extend(std::iter::repeat_n('x', min - length));
        padded
    } else {
        text.chars().take(max).collect()
    }
}

/// The literal text a pattern anchored with `^` starts with (`^=` → `=`), so
/// candidates can be tried behind it.
fn literal_prefix(pattern: &str) -> String {
    let Some(rest) = pattern.strip_prefix('^') else {
        return String::new();
    };
    let mut prefix: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || "=:/#@-_ ".contains(*c))
        .collect();
    // A quantifier right after applies to the last character, which is then optional.
    if matches!(rest[prefix.len()..].chars().next(), Some('?' | '*' | '{')) {
        prefix.pop();
    }
    prefix
}

/// Non-negative integer keywords (`minItems`, `maxLength`, …) as a count.
fn as_count(value: Option<&Value>) -> Option<usize> {
    value
        .and_then(Value::as_f64)
        .filter(|n| *n >= 0.0)
        .map(|n| n.ceil() as usize)
}

/// A copy of `node` without `keyword`.
fn without(node: &Map<String, Value>, keyword: &str) -> Map<String, Value> {
    let mut copy = node.clone();
    copy.shift_remove(keyword);
    copy
}

#[cfg(test)]
mod tests;
