//! Normalising what children send: input schemas clients would reject, and the
//! one-line summaries that instructions and search results show. [`example`] makes
//! worked example arguments from a schema.

pub mod example;

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::Map;
use serde_json::Value;

/// The input schema to expose for a child's tool: the child's own, with
/// `"type": "object"` added when missing (clients reject such lists otherwise).
/// Returns the schema and whether it had to be changed.
pub fn normalize_input_schema(schema: &Arc<JsonObject>) -> (Arc<JsonObject>, bool) {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => (schema.clone(), false),
        _ => {
            let mut fixed = (**schema).clone();
            fixed.insert("type".into(), Value::String("object".into()));
            (Arc::new(fixed), true)
        }
    }
}

/// What a local `$ref` points to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RefTarget<'s> {
    /// `#`: the root schema itself.
    Root,
    /// A subschema inside the root.
    Node(&'s Value),
}

/// Resolves a local `$ref`: `#` (the root) or a JSON pointer into the root
/// (`#/$defs/x`, `#/definitions/a~1b`, `#/$defs/a%20b`), each segment
/// percent-decoded, then `~1` → `/` and `~0` → `~`. `None` for a remote
/// reference or a pointer to nothing. Repair and example generation both
/// resolve through this, so a reference means the same to both.
pub fn resolve_ref<'s>(root: &'s Map<String, Value>, reference: &str) -> Option<RefTarget<'s>> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(RefTarget::Root);
    }
    let mut segments = pointer
        .strip_prefix('/')?
        .split('/')
        .map(unescape_pointer_segment);
    let mut current = root.get(&segments.next()?)?;
    for segment in segments {
        current = match current {
            Value::Object(map) => map.get(&segment)?,
            Value::Array(list) => list.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(RefTarget::Node(current))
}

/// A JSON-pointer segment as written in a `$ref` fragment: percent-decoded,
/// then `~1` → `/` and `~0` → `~`.
fn unescape_pointer_segment(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                decoded.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded)
        .replace("~1", "/")
        .replace("~0", "~")
}

/// Longest summary kept, in characters; past it the summary ends in `…`.
pub const SUMMARY_MAX_CHARS: usize = 160;

/// What a tool without a description is summed up as.
pub const NO_SUMMARY: &str = "(no description)";

/// The first sentence of a description, on one line, for instructions, search
/// results and listings. Descriptions are passed on whole in `tools/list`.
pub fn summary(description: Option<&str>) -> String {
    let text = description.unwrap_or("").trim();
    if text.is_empty() {
        return NO_SUMMARY.to_string();
    }
    let mut first_line = String::new();
    // Whitespace (newlines included) collapses to single spaces.
    for word in text.split_whitespace() {
        if !first_line.is_empty() {
            first_line.push(' ');
        }
        first_line.push_str(word);
        if first_line.len() > SUMMARY_MAX_CHARS * 4 {
            break;
        }
    }
    let end = sentence_end(&first_line).unwrap_or(first_line.len());
    let sentence = first_line[..end].trim_end();
    if sentence.chars().count() > SUMMARY_MAX_CHARS {
        let cut: String = sentence.chars().take(SUMMARY_MAX_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    } else {
        sentence.to_string()
    }
}

/// Byte index just past the first sentence's terminator: `.`, `!` or `?`
/// followed by a space or the end, not inside a token like `e.g.` or `v1.2`.
fn sentence_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?') {
            let next = bytes.get(i + 1);
            if next.is_none() || next == Some(&b' ') {
                let word_start = text[..i].rfind(' ').map_or(0, |s| s + 1);
                let word = &text[word_start..i];
                // "e.g." / "i.e." / "etc." are not the end of a sentence.
                if *b == b'.'
                    && (word.contains('.') || matches!(word, "e.g" | "i.e" | "etc" | "vs"))
                {
                    continue;
                }
                return Some(i + 1);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn local_refs_resolve_with_one_decoding_rule() {
        let root = json!({
            "$defs": {"a b": {"type": "string"}, "x/y": {"type": "integer"}, "t~": {"type": "null"}},
            "list": [{"type": "boolean"}]
        });
        let root = root.as_object().unwrap();
        let node = |r: &str| match resolve_ref(root, r) {
            Some(RefTarget::Node(v)) => Some(v["type"].clone()),
            _ => None,
        };
        assert_eq!(node("#/$defs/a%20b"), Some(json!("string")));
        assert_eq!(node("#/$defs/x~1y"), Some(json!("integer")));
        assert_eq!(node("#/$defs/t~0"), Some(json!("null")));
        assert_eq!(node("#/list/0"), Some(json!("boolean")));
        assert_eq!(resolve_ref(root, "#"), Some(RefTarget::Root));
        assert_eq!(resolve_ref(root, "#/$defs/missing"), None);
        assert_eq!(resolve_ref(root, "https://example.com/s.json"), None);
        assert_eq!(resolve_ref(root, "#nope"), None);
    }

    #[test]
    fn summaries() {
        let cases = [
            (None, NO_SUMMARY),
            (Some(""), NO_SUMMARY),
            (Some(" \n "), NO_SUMMARY),
            (Some("Get the time."), "Get the time."),
            (Some("Get the time. Also converts."), "Get the time."),
            (
                Some("  Multi\n  line\tdescription here  "),
                "Multi line description here",
            ),
            (Some("Use e.g. a path. Second."), "Use e.g. a path."),
            (Some("Version v1.2 is used! Then"), "Version v1.2 is used!"),
            (Some("No terminator"), "No terminator"),
        ];
        for (input, want) in cases {
            assert_eq!(summary(input), want, "{input:?}");
        }
        let long = "word ".repeat(100);
        let s = summary(Some(&long));
        assert!(
            s.chars().count() <= SUMMARY_MAX_CHARS && s.ends_with('…'),
            "{s}"
        );
    }

    #[test]
    fn schema_gets_type_object() {
        let only_schema: JsonObject =
            serde_json::from_str(r#"{"$schema":"http://json-schema.org/draft-07/schema#"}"#)
                .unwrap();
        let (fixed, changed) = normalize_input_schema(&Arc::new(only_schema));
        assert!(changed);
        assert_eq!(fixed.get("type"), Some(&Value::String("object".into())));
        let good: JsonObject = serde_json::from_str(r#"{"type":"object"}"#).unwrap();
        let good = Arc::new(good);
        let (same, changed) = normalize_input_schema(&good);
        assert!(!changed && Arc::ptr_eq(&same, &good));
    }
}
