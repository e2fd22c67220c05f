//! Normalising what children send: input schemas clients would reject, and the
//! one-line summaries that instructions and search results show.

use std::sync::Arc;

use rmcp::model::JsonObject;
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
