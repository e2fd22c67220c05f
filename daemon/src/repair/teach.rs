//! Teaching: validation errors in plain words, and the closest valid names.
//!
//! A teaching error names every sent name the schema does not declare (at any depth), also where
//! the schema allows extra names: the call fails anyway, and an unmentioned `tz` is the likeliest
//! cause. Its corrected example reuses the caller's values (`corrected_arguments`): a value under a
//! declared name where its type fits, and a value under an unknown name moved to the parameter it
//! most plausibly meant, the nearest free name first, else the first unset required parameter in
//! schema order, preferring one whose type the value has over one repair would convert it to; such
//! a move is also listed under the closest names (`'tz': did you mean timezone?`). Each reused
//! value is checked against the schema where it stands and dropped (the made-up value back) if
//! refused; an example that then still fails where the schema's own passes is replaced by the
//! schema's own. Top level only: nested objects keep the generated values.

use super::*;

/// The validation errors of `instance`, in plain words, and every name in `unknown` (sent
/// names the schema does not declare, dotted below the top level) even where the schema lets
/// it pass: a call that fails anyway must not leave `tz` unmentioned because extra names are
/// allowed. Missing parameters first, unknown ones last, duplicates dropped, at most
/// [`MAX_PROBLEMS`] plus a line counting the rest.
pub(super) fn problems(
    schema: &CompiledSchema,
    instance: &Value,
    unknown: &[String],
) -> Vec<String> {
    let doc = schema.doc();
    let mut ranked: Vec<(u8, String)> = Vec::new();
    let mut more = 0usize;
    let mut read_all = true;
    let mut add = |problem: (u8, String), ranked: &mut Vec<(u8, String)>| {
        if ranked.iter().any(|(_, known)| *known == problem.1) {
            return;
        }
        if ranked.len() < MAX_PROBLEMS {
            ranked.push(problem);
        } else {
            more += 1;
        }
    };
    for (read, error) in schema.validator.iter_errors(instance).enumerate() {
        if read == MAX_ERRORS_READ {
            read_all = false;
            break;
        }
        for problem in describe(doc, &error) {
            add(problem, &mut ranked);
        }
    }
    for name in unknown {
        add((RANK_UNKNOWN, unknown_parameter(name)), &mut ranked);
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
pub(super) const RANK_MISSING: u8 = 0;
pub(super) const RANK_VALUE: u8 = 1;
pub(super) const RANK_UNKNOWN: u8 = 2;

/// One validation error as (rank, plain words); `additionalProperties` yields one per name.
pub(super) fn describe(doc: SchemaDoc<'_>, error: &ValidationError<'_>) -> Vec<(u8, String)> {
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
            .map(|name| (RANK_UNKNOWN, unknown_parameter(&join(&path, name))))
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

/// The problem line for a sent name the schema does not declare (`options.colr`).
fn unknown_parameter(path: &str) -> String {
    format!("unknown parameter '{path}'")
}

pub(super) fn plural(count: u64, noun: &str) -> String {
    match (count, noun) {
        (1, _) => noun.to_string(),
        (_, "property") => "properties".to_string(),
        _ => format!("{noun}s"),
    }
}

/// An instance location as a caller would write it: `options.mode`, `items[2].name`.
pub(super) fn display_path(location: &Location) -> String {
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
pub(super) fn show(value: &Value) -> String {
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

/// Adds to `unknown` the names in `object` (at `path`) that `schema` does not declare, and to
/// `closest` each of them with the declared names nearest to it, then does the same inside
/// declared members.
pub(super) fn suggest_object<'s>(
    doc: SchemaDoc<'s>,
    object: &JsonObject,
    schema: &'s Value,
    path: &str,
    aliases: Option<&BTreeMap<String, String>>,
    closest: &mut Vec<(String, String)>,
    unknown: &mut Vec<String>,
) {
    let declared = doc.properties(schema);
    for name in object.keys() {
        if declared.iter().any(|(known, _)| known == name) {
            continue;
        }
        unknown.push(join(path, name));
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
            suggest_value(doc, value, property, &join(path, name), closest, unknown);
        }
    }
}

pub(super) fn suggest_value<'s>(
    doc: SchemaDoc<'s>,
    value: &Value,
    schema: &'s Value,
    path: &str,
    closest: &mut Vec<(String, String)>,
    unknown: &mut Vec<String>,
) {
    match value {
        Value::Object(object) => suggest_object(doc, object, schema, path, None, closest, unknown),
        Value::Array(items) => {
            if let Some(item_schema) = doc.items(schema) {
                for (index, item) in items.iter().enumerate() {
                    let at = format!("{path}[{index}]");
                    suggest_value(doc, item, item_schema, &at, closest, unknown);
                }
            }
        }
        _ => {}
    }
}

/// The candidates plausibly meant by `name`, nearest first: equal after normalising, within
/// 40% edits of the longer name (or 2 for names of 5 or more), or one containing the other.
pub(super) fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
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

/// The caller's values worth keeping in a corrected example.
pub(super) struct Reuse {
    /// By the top-level parameter each fits.
    pub(super) values: Vec<(String, Value)>,
    /// The unknown names moved to a parameter on the way: (sent name, parameter).
    pub(super) moved: Vec<(String, String)>,
}

/// The caller's values worth keeping in a corrected example.
///
/// `fixed` is the call as repair left it (renamed and converted where it could be). A value
/// under a declared name is kept where its type fits. A value under a name still unknown goes
/// to the free declared parameter it most plausibly meant: the nearest names (as the closest
/// names are chosen), then the required parameters still unset, in schema order; the first
/// whose type the value has, else the first repair would convert it to. So
/// `{"tz": "Europe/Paris"}` fills a lone required `timezone` string, three unknown names fill
/// three unset required parameters in order, and `5` goes to an unset integer before a string.
/// Nothing here is forwarded: it only shapes the example, which is checked against the schema
/// before it is shown.
pub(super) fn reusable_values(doc: SchemaDoc<'_>, fixed: &JsonObject) -> Reuse {
    let declared = doc.properties(doc.root);
    let required: Vec<&str> = doc
        .root
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let schema_of = |name: &str| {
        declared
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, property)| *property)
    };
    // The value as it fits `name`: as sent, or (when `convert`) as repair converts it.
    let fitted = |value: &Value, name: &str, convert: bool| -> Option<Value> {
        match doc.types(schema_of(name)?) {
            None => Some(value.clone()),
            Some(types) if types.admits(value) => Some(value.clone()),
            Some(types) if convert => coerce(value, types, 2).map(|(coerced, _)| coerced),
            Some(_) => None,
        }
    };
    let mut reusable: Vec<(String, Value)> = Vec::new();
    let mut moved = Vec::new();
    for (name, value) in fixed {
        if let Some(value) = fitted(value, name, true) {
            reusable.push((name.clone(), value));
        }
    }
    for (name, value) in fixed {
        if schema_of(name).is_some() {
            continue;
        }
        let free: Vec<&str> = declared
            .iter()
            .map(|(known, _)| *known)
            .filter(|known| {
                !fixed.contains_key(*known) && !reusable.iter().any(|(r, _)| r == known)
            })
            .collect();
        let mut candidates = nearest(name, free.iter().copied());
        candidates.extend(free.iter().filter(|known| required.contains(known)));
        let found = [false, true].into_iter().find_map(|convert| {
            candidates
                .iter()
                .find_map(|target| Some((*target, fitted(value, target, convert)?)))
        });
        if let Some((target, value)) = found {
            reusable.push((target.to_string(), value));
            moved.push((name.clone(), target.to_string()));
        }
    }
    Reuse {
        values: reusable,
        moved,
    }
}
