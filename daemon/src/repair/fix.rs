//! Repair: renaming near-miss parameters and converting values to the types the schema
//! expects, without ever guessing between two candidates.

use super::*;

/// One repair pass over a call's arguments, collecting what it changed.
pub(super) struct Repairer<'s> {
    pub(super) doc: SchemaDoc<'s>,
    pub(super) fixes: Vec<String>,
}

impl<'s> Repairer<'s> {
    /// Renames `object`'s unknown members onto the properties `schema` declares, then repairs
    /// each declared member's value. `aliases` apply at the top level only; `depth` is
    /// `object`'s nesting level (the arguments are level 1).
    pub(super) fn repair_object(
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
    pub(super) fn rename(
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
            RenameRule::OtherNumber,
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
    pub(super) fn repair_value(
        &mut self,
        value: &mut Value,
        schema: &'s Value,
        path: &str,
        depth: usize,
    ) {
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
pub(super) enum RenameRule {
    /// The tool's configured aliases.
    Alias,
    /// Equal without case or separators: `filePath`, `file_path`, `FILE-PATH`.
    SameNormalized,
    /// The same word in the other grammatical number: `entity` for
    /// `entities`, `box` for `boxes` (too far apart for a near miss).
    OtherNumber,
    /// Within [`MAX_EDIT_DISTANCE`] edits of exactly one free declared name.
    NearMiss,
}

/// The name `rule` maps `name` to, if it maps it to exactly one name not in `taken`.
pub(super) fn rename_target<'a>(
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
        // Not fuzzy (a rule of the language), so short words count too.
        RenameRule::OtherNumber => {
            let singular_wanted = singular(&wanted);
            single(declared_names.filter(|known| {
                let known = normalize(known);
                known != wanted && singular(&known) == singular_wanted
            }))
            .filter(free)
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
pub(super) fn alias_for<'a>(aliases: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
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
pub(super) fn single<T>(mut items: impl Iterator<Item = T>) -> Option<T> {
    let first = items.next()?;
    items.next().is_none().then_some(first)
}

/// How a value was coerced, for the fix's wording.
pub(super) enum Coercion {
    Converted,
    Wrapped,
    Parsed,
}

/// A value of one of `types` made from `value`, which has none of them. `depth` is the nesting
/// level a container would have in `value`'s place: a parsed JSON string must fit below it.
pub(super) fn coerce(value: &Value, types: Types, depth: usize) -> Option<(Value, Coercion)> {
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
pub(super) fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// An English word's singular by the regular plural endings (`entities` →
/// `entity`, `boxes` → `box`, `files` → `file`); a general rule of the
/// language, not a list of words. Irregular plurals are left to near misses.
fn singular(word: &str) -> std::borrow::Cow<'_, str> {
    if let Some(stem) = word.strip_suffix("ies").filter(|s| s.len() >= 2) {
        return format!("{stem}y").into();
    }
    for ending in ["sses", "shes", "ches", "xes", "zes"] {
        if word.ends_with(ending) {
            return word[..word.len() - 2].into();
        }
    }
    match word.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.into(),
        _ => word.into(),
    }
}

/// `parent.name`, or `name` at the top level.
pub(super) fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}
