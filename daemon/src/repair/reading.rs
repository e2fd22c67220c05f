//! Reading schemas: local `$ref`s, unions, the types and properties a schema expects.

use super::*;
use crate::schema;
use crate::schema::RefTarget;

/// A schema document, for questions asked of its subschemas.
#[derive(Debug, Clone, Copy)]
pub(super) struct SchemaDoc<'s> {
    pub(super) root: &'s Value,
}

impl<'s> SchemaDoc<'s> {
    /// Follows local `$ref`s (`#/$defs/x`, `#`); any other reference is left as it is.
    pub(super) fn resolve(self, mut schema: &'s Value) -> &'s Value {
        for _ in 0..SCHEMA_VISITS {
            let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
                break;
            };
            let root = self.root.as_object();
            schema = match root.and_then(|r| schema::resolve_ref(r, reference)) {
                Some(RefTarget::Root) => self.root,
                Some(RefTarget::Node(target)) => target,
                None => break,
            };
        }
        schema
    }

    /// The properties `schema` declares: its own, its `allOf` parts', and failing those, the
    /// ones of the single `anyOf`/`oneOf` branch declaring any (an optional object).
    pub(super) fn properties(self, schema: &'s Value) -> Vec<(&'s str, &'s Value)> {
        let mut found = Vec::new();
        self.collect_properties(schema, &mut found, &mut { SCHEMA_VISITS });
        found
    }

    pub(super) fn collect_properties(
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
    pub(super) fn items(self, schema: &'s Value) -> Option<&'s Value> {
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
    pub(super) fn single_branch(self, schema: &'s Value, keyword: &str) -> Option<&'s Value> {
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
    pub(super) fn types(self, schema: &'s Value) -> Option<Types> {
        self.types_within(schema, &mut { SCHEMA_VISITS })
    }

    pub(super) fn types_within(self, schema: &'s Value, visits: &mut usize) -> Option<Types> {
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
    pub(super) fn label(self, schema: &'s Value) -> Option<String> {
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
    pub(super) fn at(self, location: &Location) -> Option<&'s Value> {
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
pub(super) fn branches<'s>(schema: &'s Value, keyword: &str) -> impl Iterator<Item = &'s Value> {
    schema
        .get(keyword)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A set of JSON Schema types. An integral number is both an integer and a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Types(u8);

impl Types {
    pub(super) const NONE: Types = Types(0);
    pub(super) const NULL: Types = Types(1);
    pub(super) const BOOLEAN: Types = Types(1 << 1);
    pub(super) const INTEGER: Types = Types(1 << 2);
    pub(super) const NUMBER: Types = Types(1 << 3);
    pub(super) const STRING: Types = Types(1 << 4);
    pub(super) const ARRAY: Types = Types(1 << 5);
    pub(super) const OBJECT: Types = Types(1 << 6);

    /// Named in the order messages list them, `null` last ("a string or null").
    pub(super) const NAMED: [(Types, &'static str, &'static str); 7] = [
        (Types::BOOLEAN, "boolean", "a boolean"),
        (Types::INTEGER, "integer", "an integer"),
        (Types::NUMBER, "number", "a number"),
        (Types::STRING, "string", "a string"),
        (Types::ARRAY, "array", "an array"),
        (Types::OBJECT, "object", "an object"),
        (Types::NULL, "null", "null"),
    ];

    pub(super) fn named(name: &str) -> Option<Types> {
        Self::NAMED
            .iter()
            .find(|(_, known, _)| *known == name)
            .map(|(types, _, _)| *types)
    }

    /// The value of a `type` keyword: a name or an array of names.
    pub(super) fn from_keyword(keyword: &Value) -> Option<Types> {
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

    pub(super) fn from_kind(kind: &TypeKind) -> Types {
        match kind {
            TypeKind::Single(single) => Types::named(single.as_str()).unwrap_or(Types::NONE),
            TypeKind::Multiple(set) => set.iter().fold(Types::NONE, |all, single| {
                all | Types::named(single.as_str()).unwrap_or(Types::NONE)
            }),
        }
    }

    pub(super) fn of(value: &Value) -> Types {
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

    pub(super) fn has(self, other: Types) -> bool {
        self.0 & other.0 != 0
    }

    pub(super) fn admits(self, value: &Value) -> bool {
        self.has(Types::of(value))
    }

    /// Bare names ("integer"), an integer's "number" dropped when both are present.
    pub(super) fn names(self) -> Vec<&'static str> {
        self.listed().map(|(_, name, _)| name).collect()
    }

    /// Names with articles for "must be …": "a string, an integer or null".
    pub(super) fn phrase(self) -> String {
        let words: Vec<&str> = self.listed().map(|(_, _, words)| words).collect();
        match words.split_last() {
            None => "something else".into(),
            Some((last, [])) => (*last).into(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }

    pub(super) fn listed(self) -> impl Iterator<Item = (Types, &'static str, &'static str)> {
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

pub(super) fn is_integral(number: &Number) -> bool {
    number.is_i64() || number.is_u64() || number.as_f64().is_some_and(|f| f.fract() == 0.0)
}
