//! TypeScript signatures of tools, as a code-mode script calls them:
//! `tools.github_create_issue(args: { title: string; body?: string }): Promise<string>`.
//!
//! A signature is written from the tool's input schema and, when it has one, its output
//! schema: a script's call returns the result's `structuredContent` (typed by the output
//! schema) or else its text (`Promise<string>`). It is one line: it goes on a
//! `discover_tools` card next to the compact JSON schema, and the goal there is that a card
//! grows by less than half, so the signature says types, not constraints (formats, bounds
//! and defaults stay in the JSON), and descriptions are comments of one short sentence.
//! [`card_signature`] sheds comments, then nested structure, then optional properties, to
//! fit the room a card leaves it.
//!
//! What is read: `type` (one or a list), `properties` with `required` (`?` for the others),
//! `additionalProperties` and `patternProperties` (`Record<string, T>`, or an index
//! signature beside properties), `items` and `prefixItems` (arrays and tuples), `enum` and
//! `const` (literal unions), `anyOf`/`oneOf` (unions), `allOf` (objects merged, else an
//! intersection), `nullable` (OpenAPI's `| null`) and local `$ref`s, inlined where used.
//! A `$ref` already being inlined further up (a recursive schema) and anything nested
//! deeper than [`MAX_DEPTH`] is `unknown`; so is what the schema does not constrain.

use serde_json::{Map, Value};

use crate::schema::{self, RefTarget};

/// Deepest nesting written out; below it a type is `unknown`.
pub const MAX_DEPTH: usize = 8;

/// Longest description comment, in characters (first sentence only).
pub const COMMENT_MAX_CHARS: usize = 80;

/// The full signature of tool `name`: every type written out, descriptions as comments.
pub fn signature(
    name: &str,
    input: &Map<String, Value>,
    output: Option<&Map<String, Value>>,
) -> String {
    render(name, input, output, Detail::Full)
}

/// The signature of tool `name` in at most `room` bytes if it can be: the full one, then
/// without the output's comments, then without any comment, then with the objects nested
/// in the arguments (which the card's JSON shows) and then in the result written `object`,
/// then also with optional top-level properties counted instead of named and long enums as
/// their type. Past `room` even then, that last form all the same (`describe_tool` has all
/// of it).
pub fn card_signature(
    name: &str,
    input: &Map<String, Value>,
    output: Option<&Map<String, Value>>,
    room: usize,
) -> String {
    let mut text = String::new();
    for detail in [
        Detail::Full,
        Detail::InputComments,
        Detail::Types,
        Detail::ShallowArgs,
        Detail::Shallow,
        Detail::Required,
    ] {
        text = render(name, input, output, detail);
        if text.len() <= room {
            break;
        }
    }
    text
}

/// How much of the schemas a signature writes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// Everything, with comments.
    Full,
    /// Comments on the arguments only.
    InputComments,
    /// No comments.
    Types,
    /// No comments; objects nested in the arguments are `object`.
    ShallowArgs,
    /// No comments; objects nested below the top level are `object`.
    Shallow,
    /// As `Shallow`, with optional top-level properties counted (`/* +3 optional */`) and
    /// enums of more than [`SHORT_ENUM`] values written as their type.
    Required,
}

/// Longest enum a `Detail::Required` signature writes out.
const SHORT_ENUM: usize = 4;

fn render(
    name: &str,
    input: &Map<String, Value>,
    output: Option<&Map<String, Value>>,
    detail: Detail,
) -> String {
    let callee = if is_identifier(name) {
        format!("tools.{name}")
    } else {
        format!("tools[{}]", Value::String(name.to_owned()))
    };
    let comments = matches!(detail, Detail::Full | Detail::InputComments);
    let shallow_args = matches!(
        detail,
        Detail::ShallowArgs | Detail::Shallow | Detail::Required
    );
    let mut args = Writer::new(input, comments, detail, shallow_args);
    let args_type = args.type_of(&Value::Object(input.clone()), 0);
    // A tool with nothing required can be called without arguments.
    let optional = if required_of(input).is_empty() {
        "?"
    } else {
        ""
    };
    let returns = match output {
        None => "string".to_owned(),
        Some(out) => Writer::new(
            out,
            detail == Detail::Full,
            detail,
            matches!(detail, Detail::Shallow | Detail::Required),
        )
        .type_of(&Value::Object(out.clone()), 0),
    };
    format!("{callee}(args{optional}: {args_type}): Promise<{returns}>")
}

/// Writes the TypeScript type of the nodes of one root schema.
struct Writer<'s> {
    root: &'s Map<String, Value>,
    comments: bool,
    /// Objects below the top level are `object`.
    shallow: bool,
    /// Optional top-level properties are counted, long enums are their type.
    collapse: bool,
    /// The `$ref`s being inlined, outermost first: one met again is a recursion.
    inlining: Vec<String>,
}

impl<'s> Writer<'s> {
    fn new(
        root: &'s Map<String, Value>,
        comments: bool,
        detail: Detail,
        shallow: bool,
    ) -> Writer<'s> {
        Writer {
            root,
            comments,
            shallow,
            collapse: detail == Detail::Required,
            inlining: Vec::new(),
        }
    }

    /// The type of `node`, `depth` levels below the root.
    fn type_of(&mut self, node: &Value, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return UNKNOWN.into();
        }
        let node = match node {
            Value::Object(m) => m,
            Value::Bool(false) => return "never".into(),
            _ => return UNKNOWN.into(),
        };
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            return self.referenced(reference, depth);
        }
        let mut parts = Vec::new();
        if let Some(value) = node.get("const") {
            parts.push(literal(value));
        } else if let Some(Value::Array(values)) = node.get("enum") {
            let mut literals = Vec::new();
            let long = self.collapse && values.len() > SHORT_ENUM;
            for v in values {
                push_unique(&mut literals, if long { type_name(v) } else { literal(v) });
            }
            parts.push(if literals.is_empty() {
                "never".into()
            } else {
                literals.join(" | ")
            });
        } else if let Some(t) = self.own_type(node, depth) {
            parts.push(t);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = node.get(key) {
                let union = self.union(branches, depth);
                // `unknown` branches (a `required` alone, a format) say nothing of the type.
                if union != UNKNOWN {
                    parts.push(union);
                }
            }
        }
        if let Some(Value::Array(branches)) = node.get("allOf") {
            let all = self.all_of(node, branches, depth);
            if all != UNKNOWN {
                // Merged into one object with the node's own properties: it replaces them.
                if all.starts_with('{') && parts.first().is_some_and(|p| p.starts_with('{')) {
                    parts.remove(0);
                }
                parts.push(all);
            }
        }
        let mut text = intersection(parts);
        if node.get("nullable") == Some(&Value::Bool(true))
            && !text.split(" | ").any(|t| t == "null")
        {
            text = format!("{text} | null");
        }
        text
    }

    /// A `$ref` inlined, or `unknown` when it cannot be (remote, missing, recursive).
    fn referenced(&mut self, reference: &str, depth: usize) -> String {
        if self.inlining.iter().any(|r| r == reference) {
            return UNKNOWN.into();
        }
        let root = self.root;
        let target = match schema::resolve_ref(root, reference) {
            Some(RefTarget::Node(node)) => node.clone(),
            Some(RefTarget::Root) => Value::Object(root.clone()),
            None => return UNKNOWN.into(),
        };
        self.inlining.push(reference.to_owned());
        let text = self.type_of(&target, depth + 1);
        self.inlining.pop();
        text
    }

    /// The type `type` (or, without it, `properties` or `items`) gives a node.
    fn own_type(&mut self, node: &Map<String, Value>, depth: usize) -> Option<String> {
        match node.get("type") {
            Some(Value::String(t)) => Some(self.named(t, node, depth)),
            Some(Value::Array(types)) => {
                let mut union = Vec::new();
                for t in types.iter().filter_map(Value::as_str) {
                    let one = self.named(t, node, depth);
                    if one == UNKNOWN {
                        return Some(one);
                    }
                    push_unique(&mut union, one);
                }
                (!union.is_empty()).then(|| union.join(" | "))
            }
            _ if ["properties", "additionalProperties", "patternProperties"]
                .iter()
                .any(|k| node.contains_key(*k)) =>
            {
                Some(self.object(node, depth))
            }
            _ if node.contains_key("items") || node.contains_key("prefixItems") => {
                Some(self.array(node, depth))
            }
            _ => None,
        }
    }

    /// The type of JSON Schema type `name` with the rest of `node`.
    fn named(&mut self, name: &str, node: &Map<String, Value>, depth: usize) -> String {
        match name {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => self.array(node, depth),
            "object" => self.object(node, depth),
            _ => UNKNOWN.into(),
        }
    }

    fn array(&mut self, node: &Map<String, Value>, depth: usize) -> String {
        let tuple = match (node.get("prefixItems"), node.get("items")) {
            (Some(Value::Array(items)), _) | (None, Some(Value::Array(items))) => Some(items),
            _ => None,
        };
        if let Some(items) = tuple {
            let types: Vec<String> = items.iter().map(|i| self.type_of(i, depth + 1)).collect();
            return format!("[{}]", types.join(", "));
        }
        match node.get("items") {
            Some(items) => format!("{}[]", grouped(&self.type_of(items, depth + 1))),
            None => "unknown[]".into(),
        }
    }

    fn object(&mut self, node: &Map<String, Value>, depth: usize) -> String {
        if self.shallow && depth > 0 {
            return "object".into();
        }
        let empty = Map::new();
        let properties = match node.get("properties") {
            Some(Value::Object(p)) => p,
            _ => &empty,
        };
        let required = required_of(node);
        let rest = self.rest(node, depth);
        if properties.is_empty() {
            return match rest {
                Some(t) => format!("Record<string, {t}>"),
                None if node.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    "{}".into()
                }
                None => "Record<string, unknown>".into(),
            };
        }
        let mut members = Vec::with_capacity(properties.len() + 1);
        let mut uncounted = 0;
        for (name, schema) in properties {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            if self.collapse && depth == 0 && !optional.is_empty() {
                uncounted += 1;
                continue;
            }
            let comment = match self.comments {
                true => comment(schema),
                false => String::new(),
            };
            let t = self.type_of(schema, depth + 1);
            members.push(format!("{comment}{}{optional}: {t}", key(name)));
        }
        if let Some(t) = rest {
            members.push(format!("[key: string]: {t}"));
        }
        if uncounted > 0 {
            let mut text = members.iter().map(|m| format!("{m}; ")).collect::<String>();
            text.push_str(&format!("/* +{uncounted} optional */"));
            return format!("{{ {text} }}");
        }
        format!("{{ {} }}", members.join("; "))
    }

    /// The type of properties not named (`additionalProperties`, `patternProperties`), or
    /// `None` when the schema leaves them open (or closed) without a type.
    fn rest(&mut self, node: &Map<String, Value>, depth: usize) -> Option<String> {
        let mut types = Vec::new();
        if let Some(extra @ Value::Object(_)) = node.get("additionalProperties") {
            types.push(self.type_of(extra, depth + 1));
        }
        if let Some(Value::Object(patterns)) = node.get("patternProperties") {
            for schema in patterns.values() {
                types.push(self.type_of(schema, depth + 1));
            }
        }
        if types.is_empty() {
            return None;
        }
        let mut union = Vec::new();
        for t in types {
            if t == UNKNOWN {
                return Some(t);
            }
            push_unique(&mut union, t);
        }
        Some(union.join(" | "))
    }

    /// `anyOf`/`oneOf` branches as a union; `unknown` if any branch is.
    fn union(&mut self, branches: &[Value], depth: usize) -> String {
        let mut types = Vec::new();
        for b in branches {
            let t = self.type_of(b, depth + 1);
            if t == UNKNOWN {
                return t;
            }
            for part in split_union(&t) {
                push_unique(&mut types, part);
            }
        }
        if types.is_empty() {
            return "never".into();
        }
        types.join(" | ")
    }

    /// `allOf`: branches that are all objects (with the node's own properties) merged into
    /// one; otherwise the branches' intersection.
    fn all_of(&mut self, node: &Map<String, Value>, branches: &[Value], depth: usize) -> String {
        let mut resolved: Vec<Map<String, Value>> = Vec::new();
        let mut objects = true;
        for b in branches {
            match self.deref(b) {
                Some(m) if is_plain_object(&m) => resolved.push(m),
                _ => objects = false,
            }
        }
        let own_is_object = node.contains_key("properties")
            || node.get("type") == Some(&Value::String("object".into()));
        if objects && !resolved.is_empty() {
            let mut merged = Map::new();
            let mut properties = Map::new();
            let mut required: Vec<Value> = Vec::new();
            let sources = own_is_object.then_some(node).into_iter().chain(&resolved);
            for source in sources {
                if let Some(Value::Object(p)) = source.get("properties") {
                    for (k, v) in p {
                        properties.insert(k.clone(), v.clone());
                    }
                }
                for r in source
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if !required.contains(r) {
                        required.push(r.clone());
                    }
                }
                for k in ["additionalProperties", "patternProperties"] {
                    if let Some(v) = source.get(k) {
                        merged.insert(k.into(), v.clone());
                    }
                }
            }
            merged.insert("type".into(), Value::String("object".into()));
            merged.insert("properties".into(), Value::Object(properties));
            merged.insert("required".into(), Value::Array(required));
            return self.object(&merged, depth);
        }
        let mut parts = Vec::new();
        for b in branches {
            let t = self.type_of(b, depth + 1);
            if t != UNKNOWN {
                push_unique(&mut parts, t);
            }
        }
        intersection(parts)
    }

    /// A node with its `$ref` (one level) followed, if it has one that is not recursive.
    fn deref(&self, node: &Value) -> Option<Map<String, Value>> {
        let m = node.as_object()?;
        let Some(reference) = m.get("$ref").and_then(Value::as_str) else {
            return Some(m.clone());
        };
        if self.inlining.iter().any(|r| r == reference) {
            return None;
        }
        match schema::resolve_ref(self.root, reference)? {
            RefTarget::Node(Value::Object(target)) => Some(target.clone()),
            RefTarget::Root => Some(self.root.clone()),
            RefTarget::Node(_) => None,
        }
    }
}

const UNKNOWN: &str = "unknown";

/// An object schema with nothing that would not survive merging (no union, ref, enum).
fn is_plain_object(m: &Map<String, Value>) -> bool {
    let typed_object = match m.get("type") {
        Some(Value::String(t)) => t == "object",
        None => true,
        _ => false,
    };
    typed_object
        && !["$ref", "anyOf", "oneOf", "allOf", "enum", "const", "items"]
            .iter()
            .any(|k| m.contains_key(*k))
        && (m.contains_key("properties") || m.contains_key("required"))
}

/// The names `required` lists.
fn required_of(node: &Map<String, Value>) -> Vec<&str> {
    node.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A JSON value as a TypeScript literal type; `unknown` for arrays and objects.
fn literal(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        _ => UNKNOWN.into(),
    }
}

/// The type of a JSON value: `string` for `"a"`.
fn type_name(value: &Value) -> String {
    match value {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
        _ => UNKNOWN,
    }
    .into()
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// The bytes of `t` outside brackets and string literals, with their positions: where a
/// type written by this module has its top-level `|` and `&`.
fn top_level(t: &str) -> impl Iterator<Item = (usize, u8)> + '_ {
    let (mut level, mut quoted, mut escaped) = (0i32, false, false);
    t.bytes().enumerate().filter(move |&(_, b)| {
        if quoted {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => quoted = false,
                _ => {}
            }
            return false;
        }
        match b {
            b'"' => quoted = true,
            b'{' | b'(' | b'[' | b'<' => level += 1,
            b'}' | b')' | b']' | b'>' => level -= 1,
            _ => return level == 0,
        }
        false
    })
}

/// The members of a union written by this module (split at its top level only).
fn split_union(t: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, b) in top_level(t) {
        if b == b'|' && i > 0 && t[i..].starts_with("| ") {
            parts.push(t[start..i - 1].to_owned());
            start = i + 2;
        }
    }
    parts.push(t[start..].to_owned());
    parts
}

/// `t` in parentheses when it is a union or intersection at its top level, so that it can
/// be an array's element or an intersection's member.
fn grouped(t: &str) -> String {
    let bytes = t.as_bytes();
    if top_level(t).any(|(i, b)| matches!(b, b'|' | b'&') && i > 0 && bytes[i - 1] == b' ') {
        format!("({t})")
    } else {
        t.to_owned()
    }
}

/// A property name as written in an object type: bare if it is an identifier, else quoted.
fn key(name: &str) -> String {
    if is_identifier(name) {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

/// A JavaScript identifier (ASCII only: a name with other letters is quoted, which is
/// always valid).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A property's description as a `/** … */ ` comment: its first sentence, cut to
/// [`COMMENT_MAX_CHARS`]; empty without a description.
fn comment(schema: &Value) -> String {
    let Some(Value::String(d)) = schema.get("description") else {
        return String::new();
    };
    let first = schema::summary(Some(d));
    if first == schema::NO_SUMMARY {
        return String::new();
    }
    let mut text: String = if first.chars().count() > COMMENT_MAX_CHARS {
        let cut: String = first.chars().take(COMMENT_MAX_CHARS - 1).collect();
        // At a word's end when there is one.
        let cut = match cut.rfind(' ') {
            Some(space) if space > COMMENT_MAX_CHARS / 2 => &cut[..space],
            _ => cut.as_str(),
        };
        format!("{}…", cut.trim_end_matches([' ', ',', ';', ':']))
    } else {
        first
    };
    // A description cannot end the comment early.
    while text.contains("*/") {
        text = text.replace("*/", "* /");
    }
    format!("/** {text} */ ")
}

/// `A & B & …` of the types in `parts` (`unknown` for none).
fn intersection(mut parts: Vec<String>) -> String {
    match parts.len() {
        0 => UNKNOWN.into(),
        1 => parts.remove(0),
        _ => parts
            .iter()
            .map(|p| grouped(p))
            .collect::<Vec<_>>()
            .join(" & "),
    }
}

#[cfg(test)]
mod tests;
