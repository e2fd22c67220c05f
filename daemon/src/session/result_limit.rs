//! Result limits: a tool result larger than its server's `max_result_bytes`
//! (else `limits.max_result_bytes`) is cut before it reaches the agent,
//! whose context it would otherwise swamp. Text is shortened at a character
//! boundary, blocks that alone do not fit (images, audio, blobs) and a
//! `structuredContent` larger than half the limit are dropped, and a closing note
//! says what was left out and that a narrower call returns less. The
//! result's `_meta["evo/truncated"]` carries the sizes.
//!
//! Pure: [`limit`] takes a result and returns it, cut or not. The size of
//! what the child sent is passed in when known (the raw line of a direct
//! call), so a result under the limit costs one comparison.
//!
//! rmcp's path, which has no raw line, measures with a counting writer. A cut copies only what is
//! kept. A `structuredContent` of at most half the limit is kept ahead of the text (it is the
//! compact form). Text in embedded resources is cut like text, and dropped blocks are named.
//! Invalid UTF-8 in a child's line is replaced (U+FFFD) instead of failing the message.

use rmcp::model::{
    CallToolResult, ContentBlock, EmbeddedResource, MetaObject, ResourceContents, TextContent,
};
use serde_json::{Value, json};

/// Room kept for the closing note and `_meta` (they are small, and counted
/// again at the end).
const NOTE_ROOM: usize = 600;

/// The serialized size of `value` in bytes, without building the text.
pub fn json_size(value: &impl serde::Serialize) -> usize {
    json_size_within(value, usize::MAX).unwrap_or(usize::MAX)
}

/// The serialized size of `value` if it is at most `cap` bytes; `None`
/// (found out after at most `cap` bytes of work) if it is larger.
pub fn json_size_within(value: &impl serde::Serialize, cap: usize) -> Option<usize> {
    struct Count {
        n: usize,
        cap: usize,
    }
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            if self.n > self.cap {
                return Err(std::io::Error::other("over the cap"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count { n: 0, cap };
    serde_json::to_writer(&mut count, value).ok()?;
    Some(count.n)
}

/// `result` within `limit` bytes. `size` is its size as the child sent it,
/// when known; otherwise it is measured. `server` names the setting in the
/// note.
pub fn limit(
    result: CallToolResult,
    limit: usize,
    size: Option<usize>,
    server: &str,
) -> CallToolResult {
    let size = match size {
        Some(size) if size <= limit => return result,
        Some(size) => size,
        None => match json_size_within(&result, limit) {
            Some(_) => return result,
            None => json_size(&result),
        },
    };
    // Cut with a budget; escapes can make the result larger than the raw
    // bytes kept, so shrink the budget until the whole fits. Only what is
    // kept is copied: a 10 MiB result is not cloned.
    let mut budget = limit.saturating_sub(NOTE_ROOM);
    loop {
        let cut = cut(&result, budget, size, limit, server);
        let cut_size = json_size(&cut);
        if cut_size <= limit || budget == 0 {
            return cut;
        }
        budget = budget.saturating_sub((cut_size - limit).max(budget / 8));
    }
}

/// Whether `block` fits in `left` bytes; a text longer than that cannot,
/// and is not measured.
fn fits(block: &ContentBlock, left: usize) -> Option<usize> {
    let raw = match block {
        ContentBlock::Text(t) => t.text.len(),
        ContentBlock::Image(i) => i.data.len(),
        ContentBlock::Audio(a) => a.data.len(),
        _ => 0,
    };
    if raw > left {
        return None;
    }
    json_size_within(block, left)
}

fn cut(
    result: &CallToolResult,
    budget: usize,
    original: usize,
    limit: usize,
    server: &str,
) -> CallToolResult {
    let mut left = budget;
    let mut text_left_out = 0;
    let mut dropped = Vec::new();
    let mut content = Vec::new();
    // A structuredContent that takes at most half the room is kept, ahead
    // of the text (it is the compact, machine-read form); a larger one is
    // dropped, as the text usually says the same.
    let mut structured_content = None;
    if let Some(structured) = &result.structured_content {
        match json_size_within(structured, budget / 2) {
            Some(size) => {
                left -= size;
                structured_content = Some(structured.clone());
            }
            // Not measured whole: a huge one would cost more than the cut.
            None => dropped.push(format!("structuredContent (over {})", bytes(budget / 2))),
        }
    }
    for block in &result.content {
        if let Some(size) = fits(block, left) {
            left -= size;
            content.push(block.clone());
            continue;
        }
        match block {
            ContentBlock::Text(text) => {
                let (kept, out) = prefix(&text.text, left);
                text_left_out += out;
                left = left.saturating_sub(kept.len());
                if !kept.is_empty() {
                    content.push(ContentBlock::Text(with_text(text, kept)));
                }
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    meta,
                } => {
                    let overhead = uri.len() + 64;
                    let (kept, out) = prefix(text, left.saturating_sub(overhead));
                    text_left_out += out;
                    left = left.saturating_sub(kept.len() + overhead);
                    let resource = ResourceContents::TextResourceContents {
                        uri: uri.clone(),
                        mime_type: mime_type.clone(),
                        text: kept.to_string(),
                        meta: meta.clone(),
                    };
                    content.push(ContentBlock::Resource(with_resource(embedded, resource)));
                }
                ResourceContents::BlobResourceContents { uri, blob, .. } => {
                    dropped.push(format!("a resource blob ({uri}, {})", bytes(blob.len())));
                }
                other => dropped.push(format!("a resource of {}", bytes(json_size(other)))),
            },
            ContentBlock::Image(image) => {
                dropped.push(format!(
                    "an image ({}, {})",
                    image.mime_type,
                    bytes(image.data.len())
                ));
            }
            ContentBlock::Audio(audio) => {
                dropped.push(format!(
                    "an audio clip ({}, {})",
                    audio.mime_type,
                    bytes(audio.data.len())
                ));
            }
            other => dropped.push(format!("a content block of {}", bytes(json_size(other)))),
        }
    }
    let mut note = format!(
        "[evo: this result was cut: the server sent {}, more than the {} this server's results may take (max_result_bytes for '{server}', else limits.max_result_bytes)",
        bytes(original),
        bytes(limit)
    );
    if text_left_out > 0 {
        note.push_str(&format!("; {} of text were left out", bytes(text_left_out)));
    }
    if !dropped.is_empty() {
        note.push_str(&format!("; left out: {}", dropped.join(", ")));
    }
    note.push_str(". A narrower call (a range, a filter, a smaller page) returns less.]");
    content.push(ContentBlock::text(note));
    let mut meta = result
        .meta
        .clone()
        .unwrap_or_else(|| MetaObject(Default::default()));
    meta.0.insert(
        "evo/truncated".into(),
        json!({
            "original_bytes": original,
            "limit_bytes": limit,
            "text_bytes_left_out": text_left_out,
            "dropped": dropped,
        }),
    );
    let mut cut = bare_result(result);
    cut.content = content;
    cut.structured_content = structured_content;
    cut.meta = Some(meta);
    cut
}

/// A copy of `r` without its content, structured content and meta.
fn bare_result(r: &CallToolResult) -> CallToolResult {
    let mut bare = CallToolResult::success(Vec::new());
    bare.result_type = r.result_type.clone();
    bare.is_error = r.is_error;
    bare
}

/// `t` with `text` in place of its text.
fn with_text(t: &TextContent, text: &str) -> TextContent {
    let mut copy = TextContent::new(text);
    copy.meta = t.meta.clone();
    copy.annotations = t.annotations.clone();
    copy
}

/// `e` with `resource` in place of its contents.
fn with_resource(e: &EmbeddedResource, resource: ResourceContents) -> EmbeddedResource {
    let mut copy = EmbeddedResource::new(resource);
    copy.meta = e.meta.clone();
    copy.annotations = e.annotations.clone();
    copy
}

/// The longest prefix of `text` of at most `keep` bytes ending at a
/// character boundary, and how many bytes were left out.
fn prefix(text: &str, keep: usize) -> (&str, usize) {
    if text.len() <= keep {
        return (text, 0);
    }
    let mut at = keep;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    (&text[..at], text.len() - at)
}

/// A size as a person reads it.
fn bytes(n: usize) -> String {
    const KIB: f64 = 1024.0;
    let n_f = n as f64;
    if n_f >= KIB * KIB {
        format!("{:.1} MiB", n_f / (KIB * KIB))
    } else if n_f >= KIB {
        format!("{:.1} KiB", n_f / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// The `_meta["evo/truncated"]` of a result, if it was cut.
pub fn truncation(result: &CallToolResult) -> Option<&Value> {
    result.meta.as_ref()?.0.get("evo/truncated")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(r: &CallToolResult) -> String {
        r.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("|")
    }

    #[test]
    fn a_result_within_the_limit_is_untouched() {
        let r = CallToolResult::success(vec![ContentBlock::text("small")]);
        let same = limit(r.clone(), 1024, None, "fx");
        assert_eq!(same, r);
        assert!(truncation(&same).is_none());
    }

    #[test]
    fn text_is_cut_at_a_character_boundary_with_a_note_and_meta() {
        for size in [2_000, 10_000, 100_000, 3_000_000] {
            // Multi-byte characters, so a byte budget lands inside one.
            let text: String = "añ€😀".repeat(size / 10 + 1);
            let r = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
            let original = json_size(&r);
            let cut = limit(r, 1500, None, "fx");
            assert!(json_size(&cut) <= 1500, "size {size}: {}", json_size(&cut));
            let ContentBlock::Text(first) = &cut.content[0] else {
                panic!("text first")
            };
            assert!(text.starts_with(&first.text), "a prefix of the original");
            assert!(!first.text.is_empty());
            let all = text_of(&cut);
            assert!(all.contains("[evo: this result was cut"), "{all}");
            assert!(all.contains("max_result_bytes for 'fx'"), "{all}");
            assert!(all.contains("A narrower call"), "{all}");
            let meta = truncation(&cut).expect("meta says it was cut");
            assert_eq!(meta["original_bytes"], original);
            assert_eq!(meta["limit_bytes"], 1500);
            assert_eq!(
                meta["text_bytes_left_out"].as_u64(),
                Some((text.len() - first.text.len()) as u64)
            );
        }
    }

    #[test]
    fn text_full_of_escapes_still_fits() {
        let text = "\"\n\u{1}".repeat(5_000);
        let r = CallToolResult::success(vec![ContentBlock::text(text)]);
        let cut = limit(r, 2_000, None, "fx");
        assert!(json_size(&cut) <= 2_000, "{}", json_size(&cut));
    }

    #[test]
    fn structured_content_that_does_not_fit_is_dropped() {
        let big = json!({"rows": (0..5_000).collect::<Vec<_>>()});
        let mut r = CallToolResult::success(vec![ContentBlock::text("summary")]);
        r.structured_content = Some(big);
        let cut = limit(r, 2_000, None, "fx");
        assert!(cut.structured_content.is_none());
        assert!(
            text_of(&cut).starts_with("summary|"),
            "the text that fits stays"
        );
        assert!(
            text_of(&cut).contains("structuredContent ("),
            "{}",
            text_of(&cut)
        );
        // Structured content that fits is kept.
        let mut r = CallToolResult::success(vec![ContentBlock::text("x".repeat(5_000))]);
        r.structured_content = Some(json!({"ok": true}));
        let cut = limit(r, 2_000, None, "fx");
        assert_eq!(cut.structured_content, Some(json!({"ok": true})));
    }

    #[test]
    fn an_image_too_big_alone_is_dropped_and_named() {
        let r = CallToolResult::success(vec![
            ContentBlock::text("caption"),
            ContentBlock::image("A".repeat(50_000), "image/png"),
        ]);
        let cut = limit(r, 4_000, None, "fx");
        assert_eq!(cut.content.len(), 2, "caption and note");
        let all = text_of(&cut);
        assert!(all.contains("an image (image/png, 48.8 KiB)"), "{all}");
        let meta = truncation(&cut).unwrap();
        assert_eq!(meta["dropped"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn a_known_size_under_the_limit_skips_measuring() {
        // A known raw size under the limit is trusted as is.
        let r = CallToolResult::success(vec![ContentBlock::text("x".repeat(10_000))]);
        let same = limit(r.clone(), 1_000, Some(900), "fx");
        assert_eq!(same, r);
    }

    #[test]
    fn the_meta_the_child_sent_is_kept() {
        let mut r = CallToolResult::success(vec![ContentBlock::text("x".repeat(10_000))]);
        let mut meta = MetaObject(Default::default());
        meta.0.insert("child/key".into(), json!(1));
        r.meta = Some(meta);
        let cut = limit(r, 1_000, None, "fx");
        let meta = cut.meta.as_ref().unwrap();
        assert_eq!(meta.0.get("child/key"), Some(&json!(1)));
        assert!(meta.0.contains_key("evo/truncated"));
    }
}
