//! Edits a JSON file that belongs to someone else, keeping it as they wrote
//! it: `evoctl setup` and `evoctl import` set (and `setup --move` removes)
//! entries in an object of objects (`mcpServers.evo`), and every other byte of the text stays as it
//! was: key order, indentation, line endings, number spellings, a byte-order
//! mark.
//!
//! A [`Document`] is parsed with serde_json first, so only valid JSON is ever
//! edited (comments, which some clients accept, are refused, not lost). Its
//! edits are spliced into the original text; when the text is laid out in a
//! way the splice does not expect, the whole document is written again in
//! the file's indentation and line endings, and the result is always checked
//! to read back as exactly the edited document.

use evo_proto::json_kind;
use serde::Serialize;
use serde_json::ser::PrettyFormatter;
use serde_json::{Map, Value};

/// Why a text cannot be edited.
#[derive(Debug)]
pub enum ParseError {
    /// The text is not JSON. `on_comment` when the error sits on a `//` or
    /// `/*` comment: VS Code accepts those in its JSON files, JSON does not,
    /// and a rewrite would lose them.
    Invalid {
        error: serde_json::Error,
        on_comment: bool,
    },
    /// JSON whose top level is `found` ([`evo_proto::json_kind`]), not an
    /// object.
    NotAnObject { found: &'static str },
}

/// The top-level key an edit goes under holds `found`
/// ([`evo_proto::json_kind`]), not an object.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAnObject {
    pub found: &'static str,
}

/// A JSON object being edited: the text it was read from, and the object
/// with the edits applied.
pub struct Document {
    /// The text as given, byte-order mark included: what the splice edits.
    text: Vec<u8>,
    root: Map<String, Value>,
    layout: Layout,
    /// The members set or removed since parsing, in order.
    edits: Vec<Edit>,
}

/// One change to a member of a top-level object, replayed on the text.
#[derive(Debug, Clone)]
enum Edit {
    /// `root[key][member]` was set (to its value in `root`).
    Set { key: String, member: String },
    /// `root[key][member]` was removed.
    Remove { key: String, member: String },
}

impl Document {
    /// Reads `text`; an empty or blank text is an empty object.
    pub fn parse(text: &[u8]) -> Result<Document, ParseError> {
        // Editors on Windows like to start files with a byte-order mark.
        let body = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Document {
                text: text.to_vec(),
                root: Map::new(),
                layout: Layout::default(),
                edits: Vec::new(),
            });
        }
        let value: Value = serde_json::from_slice(body).map_err(|error| ParseError::Invalid {
            on_comment: on_comment(body, &error),
            error,
        })?;
        let Value::Object(root) = value else {
            return Err(ParseError::NotAnObject {
                found: json_kind(&value),
            });
        };
        Ok(Document {
            text: text.to_vec(),
            root,
            layout: Layout::of(body),
            edits: Vec::new(),
        })
    }

    /// The object under the top-level `key`, if there is one. Refuses a
    /// `key` that holds something else: replacing it would lose data.
    pub fn object(&self, key: &str) -> Result<Option<&Map<String, Value>>, NotAnObject> {
        match self.root.get(key) {
            None => Ok(None),
            Some(Value::Object(object)) => Ok(Some(object)),
            Some(other) => Err(NotAnObject {
                found: json_kind(other),
            }),
        }
    }

    /// Sets `member` of the object under the top-level `key` (added last if
    /// missing) to `value`. An existing member is replaced where it stands.
    pub fn set(&mut self, key: &str, member: &str, value: Value) -> Result<(), NotAnObject> {
        self.object(key)?;
        if let Value::Object(object) = self
            .root
            .entry(key)
            .or_insert_with(|| Value::Object(Map::new()))
        {
            object.insert(member.to_string(), value);
        }
        self.edits.push(Edit::Set {
            key: key.to_string(),
            member: member.to_string(),
        });
        Ok(())
    }

    /// Removes `member` from the object under the top-level `key`; the
    /// members around it keep their order. Returns whether it was there.
    pub fn remove(&mut self, key: &str, member: &str) -> Result<bool, NotAnObject> {
        self.object(key)?;
        let Some(Value::Object(object)) = self.root.get_mut(key) else {
            return Ok(false);
        };
        if object.shift_remove(member).is_none() {
            return Ok(false);
        }
        self.edits.push(Edit::Remove {
            key: key.to_string(),
            member: member.to_string(),
        });
        Ok(true)
    }

    /// The edited text: the original with only the edited members spliced
    /// in, else the whole document in the original's layout.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.splice()
            .unwrap_or_else(|| self.layout.render(&self.root))
    }

    fn splice(&self) -> Option<Vec<u8>> {
        let unit = self.layout.indent.as_deref()?;
        let nl = if self.layout.crlf { "\r\n" } else { "\n" };
        let bom = self.text.starts_with(b"\xEF\xBB\xBF");
        let mut text = std::str::from_utf8(&self.text[if bom { 3 } else { 0 }..])
            .ok()?
            .to_string();
        for edit in &self.edits {
            text = match edit {
                Edit::Set { key, member } => {
                    let value = self.root.get(key)?.get(member)?;
                    splice::set_member(&text, key, member, value, unit, nl)?
                }
                Edit::Remove { key, member } => splice::remove_member(&text, key, member)?,
            };
        }
        // Trusted only if it reads back as exactly the edited document, in
        // the same order.
        let reread: Value = serde_json::from_str(&text).ok()?;
        if serde_json::to_string(&reread).ok()? != serde_json::to_string(&self.root).ok()? {
            return None;
        }
        let mut out = Vec::with_capacity(text.len() + 3);
        if bom {
            out.extend_from_slice(b"\xEF\xBB\xBF");
        }
        out.extend_from_slice(text.as_bytes());
        Some(out)
    }
}

/// Does the parse error sit on a comment?
fn on_comment(text: &[u8], e: &serde_json::Error) -> bool {
    let line = String::from_utf8_lossy(text)
        .lines()
        .nth(e.line().saturating_sub(1))
        .map(str::to_string)
        .unwrap_or_default();
    let at = line.get(e.column().saturating_sub(1)..).unwrap_or("");
    at.starts_with("//") || at.starts_with("/*")
}

/// How a text was laid out, so a rewrite differs from it only where evoctl
/// changed something: same indentation, line endings and final newline.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    /// `None`: everything on one line.
    indent: Option<String>,
    crlf: bool,
    final_newline: bool,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            indent: Some("  ".into()),
            crlf: false,
            final_newline: true,
        }
    }
}

impl Layout {
    fn of(text: &[u8]) -> Layout {
        let text = String::from_utf8_lossy(text);
        let body = text.trim();
        if !body.contains('\n') {
            return Layout {
                indent: None,
                crlf: false,
                final_newline: text.ends_with('\n'),
            };
        }
        let indent = body
            .lines()
            .skip(1)
            .map(|l| {
                let width = l.len() - l.trim_start_matches([' ', '\t']).len();
                &l[..width]
            })
            .find(|ws| !ws.is_empty())
            .unwrap_or("  ");
        Layout {
            indent: Some(indent.to_string()),
            crlf: body.contains("\r\n"),
            final_newline: text.ends_with('\n'),
        }
    }

    fn render(&self, doc: &Map<String, Value>) -> Vec<u8> {
        let mut out = Vec::new();
        // Serialising a Value into memory cannot fail: its keys are strings.
        let _ = match &self.indent {
            None => serde_json::to_writer(&mut out, doc),
            Some(indent) => {
                let formatter = PrettyFormatter::with_indent(indent.as_bytes());
                let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
                doc.serialize(&mut ser)
            }
        };
        let newline: &[u8] = if self.crlf { b"\r\n" } else { b"\n" };
        if self.crlf {
            // Raw newlines only occur between tokens: strings escape theirs.
            let mut with_cr = Vec::with_capacity(out.len() + out.len() / 16);
            for b in out {
                if b == b'\n' {
                    with_cr.push(b'\r');
                }
                with_cr.push(b);
            }
            out = with_cr;
        }
        if self.final_newline {
            out.extend_from_slice(newline);
        }
        out
    }
}

/// Edits a JSON text in place: finds where members start and end with a
/// scanner over text serde_json already accepted, and gives up (`None`) on
/// anything it does not expect, leaving the caller to re-serialise instead.
mod splice {
    use serde::Serialize;
    use serde_json::ser::PrettyFormatter;
    use serde_json::{Serializer, Value, json};

    /// Where one member of an object sits in the text (byte offsets).
    struct Member {
        key: String,
        key_start: usize,
        value_start: usize,
        value_end: usize,
    }

    /// Where an object's braces and members sit in the text.
    struct Object {
        open: usize,
        close: usize,
        members: Vec<Member>,
    }

    impl Object {
        /// The member JSON keeps when a key is repeated: the last.
        fn member(&self, key: &str) -> Option<&Member> {
            self.members.iter().rev().find(|m| m.key == key)
        }
    }

    /// Sets `top[key][id] = entry` in `text`, indenting new lines like
    /// their neighbours with one `unit` per level.
    pub fn set_member(
        text: &str,
        key: &str,
        id: &str,
        entry: &Value,
        unit: &str,
        nl: &str,
    ) -> Option<String> {
        let b = text.as_bytes();
        let top = object(b, skip_ws(b, 0))?;
        let Some(servers) = top.member(key) else {
            return insert(text, &top, key, &json!({ id: entry }), unit, nl);
        };
        let servers = object(b, servers.value_start)?;
        match servers.member(id) {
            Some(old) => {
                let indent = own_line_indent(text, old.key_start)?;
                let value = render(entry, indent, unit, nl)?;
                Some(replace(text, old.value_start, old.value_end, &value))
            }
            None => insert(text, &servers, id, entry, unit, nl),
        }
    }

    /// Removes `top[key][id]` from `text` with the separator that went with
    /// it: the comma and line before it, or for the first member the line
    /// and comma after it, so its neighbours stay as they were.
    pub fn remove_member(text: &str, key: &str, id: &str) -> Option<String> {
        let b = text.as_bytes();
        let top = object(b, skip_ws(b, 0))?;
        let servers = object(b, top.member(key)?.value_start)?;
        let at = servers.members.iter().rposition(|m| m.key == id)?;
        let this = &servers.members[at];
        let (start, end) = match (at.checked_sub(1), servers.members.get(at + 1)) {
            (Some(before), _) => (servers.members[before].value_end, this.value_end),
            (None, Some(next)) => (this.key_start, next.key_start),
            // The only member: the object becomes `{}`.
            (None, None) => (servers.open + 1, servers.close),
        };
        Some(replace(text, start, end, ""))
    }

    /// Adds `"key": value` as the object's last member.
    fn insert(
        text: &str,
        obj: &Object,
        key: &str,
        value: &Value,
        unit: &str,
        nl: &str,
    ) -> Option<String> {
        let key = serde_json::to_string(key).ok()?;
        match obj.members.last() {
            // Members one per line: the new one goes on its own line, after
            // the last, at the same indentation.
            Some(last) => {
                let indent = own_line_indent(text, last.key_start)?;
                let value = render(value, indent, unit, nl)?;
                let member = format!(",{nl}{indent}{key}: {value}");
                Some(replace(text, last.value_end, last.value_end, &member))
            }
            None => {
                let outer = line_indent(text, obj.open);
                let inner = format!("{outer}{unit}");
                let value = render(value, &inner, unit, nl)?;
                let body = format!("{nl}{inner}{key}: {value}{nl}{outer}");
                Some(replace(text, obj.open + 1, obj.close, &body))
            }
        }
    }

    /// `value` pretty-printed for a spot indented by `indent`.
    fn render(value: &Value, indent: &str, unit: &str, nl: &str) -> Option<String> {
        let mut out = Vec::new();
        let formatter = PrettyFormatter::with_indent(unit.as_bytes());
        let mut ser = Serializer::with_formatter(&mut out, formatter);
        value.serialize(&mut ser).ok()?;
        // Raw newlines only occur between tokens: strings escape theirs.
        Some(
            String::from_utf8(out)
                .ok()?
                .replace('\n', &format!("{nl}{indent}")),
        )
    }

    fn replace(text: &str, start: usize, end: usize, with: &str) -> String {
        let mut out = String::with_capacity(text.len() + with.len());
        out.push_str(&text[..start]);
        out.push_str(with);
        out.push_str(&text[end..]);
        out
    }

    /// The whitespace that starts the line holding byte `at`.
    fn line_indent(text: &str, at: usize) -> &str {
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = &text[start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }

    /// Like [`line_indent`], but only if nothing else precedes `at` on its
    /// line: a member sharing its line with others has no indentation to copy.
    fn own_line_indent(text: &str, at: usize) -> Option<&str> {
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let lead = &text[start..at];
        lead.bytes()
            .all(|c| c == b' ' || c == b'\t')
            .then_some(lead)
    }

    fn skip_ws(b: &[u8], mut i: usize) -> usize {
        while b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    }

    /// The end of the string opening at `i`.
    fn string_end(b: &[u8], i: usize) -> Option<usize> {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let mut j = i + 1;
        loop {
            match b.get(j)? {
                b'\\' => j += 2,
                b'"' => return Some(j + 1),
                _ => j += 1,
            }
        }
    }

    /// The end of the value starting at `i`.
    fn value_end(b: &[u8], i: usize) -> Option<usize> {
        match b.get(i)? {
            b'"' => string_end(b, i),
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut j = i;
                loop {
                    match b.get(j)? {
                        b'"' => {
                            j = string_end(b, j)?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Some(j + 1);
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
            }
            _ => {
                let mut j = i;
                while b
                    .get(j)
                    .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
                {
                    j += 1;
                }
                (j > i).then_some(j)
            }
        }
    }

    /// The object opening at `open`.
    fn object(b: &[u8], open: usize) -> Option<Object> {
        if b.get(open) != Some(&b'{') {
            return None;
        }
        let mut members = Vec::new();
        let mut i = skip_ws(b, open + 1);
        if b.get(i) == Some(&b'}') {
            return Some(Object {
                open,
                close: i,
                members,
            });
        }
        loop {
            let key_start = i;
            let key_end = string_end(b, i)?;
            let key: String = serde_json::from_slice(&b[key_start..key_end]).ok()?;
            i = skip_ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            let value_start = skip_ws(b, i + 1);
            let value_end = value_end(b, value_start)?;
            members.push(Member {
                key,
                key_start,
                value_start,
                value_end,
            });
            i = skip_ws(b, value_end);
            match b.get(i)? {
                b',' => i = skip_ws(b, i + 1),
                b'}' => {
                    return Some(Object {
                        open,
                        close: i,
                        members,
                    });
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn layout_is_kept() {
        let cases: [(&str, Layout); 3] = [
            (
                "{\n    \"a\": 1\n}\n",
                Layout {
                    indent: Some("    ".into()),
                    crlf: false,
                    final_newline: true,
                },
            ),
            (
                "{\r\n\t\"a\": 1\r\n}",
                Layout {
                    indent: Some("\t".into()),
                    crlf: true,
                    final_newline: false,
                },
            ),
            (
                "{\"a\":1}",
                Layout {
                    indent: None,
                    crlf: false,
                    final_newline: false,
                },
            ),
        ];
        for (text, want) in cases {
            let layout = Layout::of(text.as_bytes());
            assert_eq!(layout, want, "{text:?}");
            let doc: Map<String, Value> = serde_json::from_str(text).unwrap();
            assert_eq!(String::from_utf8(layout.render(&doc)).unwrap(), text);
        }
    }

    /// `text` after setting `mcpServers.<id>` to `entry`.
    fn edited(text: &str, id: &str, entry: Value) -> String {
        let mut doc = Document::parse(text.as_bytes()).unwrap();
        doc.set("mcpServers", id, entry).unwrap();
        String::from_utf8(doc.to_bytes()).unwrap()
    }

    #[test]
    fn edits_touch_only_the_entry() {
        let entry = json!({"command": "e", "args": ["shim"]});
        let cases = [
            // A new entry after the others, like them; arrays stay on one line.
            (
                "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"x\"]}\n  },\n  \"theme\": 1e3\n}\n",
                "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"x\"]},\n    \"evo\": {\n      \"command\": \"e\",\n      \"args\": [\n        \"shim\"\n      ]\n    }\n  },\n  \"theme\": 1e3\n}\n",
            ),
            // An existing entry is replaced where it stands.
            (
                "{\n\t\"mcpServers\": {\n\t\t\"evo\": {\"command\": \"old\"},\n\t\t\"b\": {}\n\t}\n}",
                "{\n\t\"mcpServers\": {\n\t\t\"evo\": {\n\t\t\t\"command\": \"e\",\n\t\t\t\"args\": [\n\t\t\t\t\"shim\"\n\t\t\t]\n\t\t},\n\t\t\"b\": {}\n\t}\n}",
            ),
            // No servers yet: the object is added last.
            (
                "{\n  \"theme\": \"dark\"\n}\n",
                "{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"evo\": {\n      \"command\": \"e\",\n      \"args\": [\n        \"shim\"\n      ]\n    }\n  }\n}\n",
            ),
            // An empty object is filled.
            (
                "{\r\n  \"mcpServers\": {}\r\n}\r\n",
                "{\r\n  \"mcpServers\": {\r\n    \"evo\": {\r\n      \"command\": \"e\",\r\n      \"args\": [\r\n        \"shim\"\r\n      ]\r\n    }\r\n  }\r\n}\r\n",
            ),
            // One-line files are rewritten on one line.
            (
                "{\"mcpServers\":{\"a\":{}}}",
                "{\"mcpServers\":{\"a\":{},\"evo\":{\"command\":\"e\",\"args\":[\"shim\"]}}}",
            ),
        ];
        for (before, after) in cases {
            assert_eq!(edited(before, "evo", entry.clone()), after, "{before}");
        }
    }

    #[test]
    fn odd_layouts_fall_back_to_a_full_rewrite() {
        // Two servers on one line: no indentation to copy.
        let before = "{\n  \"mcpServers\": {\"a\": {}, \"b\": {}}\n}\n";
        let after = edited(before, "evo", json!({"command": "e"}));
        let doc: Value = serde_json::from_str(&after).unwrap();
        assert_eq!(
            doc,
            json!({"mcpServers": {"a": {}, "b": {}, "evo": {"command": "e"}}})
        );
    }

    #[test]
    fn an_empty_document_gets_the_object() {
        let entry = json!({"command": "e"});
        let cases = [
            // Nothing to copy a layout from: two spaces, a final newline.
            (
                "",
                "{\n  \"mcpServers\": {\n    \"evo\": {\n      \"command\": \"e\"\n    }\n  }\n}\n",
            ),
            (
                " \n",
                "{\n  \"mcpServers\": {\n    \"evo\": {\n      \"command\": \"e\"\n    }\n  }\n}\n",
            ),
            // `{}` is one line, and stays one.
            ("{}", "{\"mcpServers\":{\"evo\":{\"command\":\"e\"}}}"),
            (
                "{\n}\n",
                "{\n  \"mcpServers\": {\n    \"evo\": {\n      \"command\": \"e\"\n    }\n  }\n}\n",
            ),
        ];
        for (before, after) in cases {
            assert_eq!(edited(before, "evo", entry.clone()), after, "{before:?}");
        }
    }

    /// Inside a nested object, the scanner skips strings (escaped quotes,
    /// braces in them) and deeper objects; the members around the edit, and
    /// everything after it, stay byte for byte and in order.
    #[test]
    fn a_nested_object_is_edited_in_place() {
        let before = concat!(
            "{\n",
            "    \"z\": [1, 2.50, {\"deep\": {}}],\n",
            "    \"mcpServers\": {\n",
            "        \"fs\": {\n",
            "            \"command\": \"npx\",\n",
            "            \"env\": {\"NOTE\": \"a \\\"quoted\\\" } brace [\"}\n",
            "        },\n",
            "        \"old\": {\"command\": \"x\"},\n",
            "        \"time\": {\"command\": \"uvx\"}\n",
            "    },\n",
            "    \"a\": null\n",
            "}"
        );
        let after = edited(before, "old", json!({"url": "u"}));
        let want = concat!(
            "{\n",
            "    \"z\": [1, 2.50, {\"deep\": {}}],\n",
            "    \"mcpServers\": {\n",
            "        \"fs\": {\n",
            "            \"command\": \"npx\",\n",
            "            \"env\": {\"NOTE\": \"a \\\"quoted\\\" } brace [\"}\n",
            "        },\n",
            "        \"old\": {\n",
            "            \"url\": \"u\"\n",
            "        },\n",
            "        \"time\": {\"command\": \"uvx\"}\n",
            "    },\n",
            "    \"a\": null\n",
            "}"
        );
        assert_eq!(after, want);
        let keys: Vec<String> = serde_json::from_str::<Map<String, Value>>(&after)
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys, ["z", "mcpServers", "a"]);
    }

    #[test]
    fn several_edits_and_a_byte_order_mark_are_kept() {
        let before = "\u{feff}{\n  \"mcpServers\": {\n    \"a\": {}\n  }\n}\n";
        let mut doc = Document::parse(before.as_bytes()).unwrap();
        doc.set("mcpServers", "b", json!(1)).unwrap();
        doc.set("mcpServers", "we\"ird", json!(true)).unwrap();
        assert_eq!(
            String::from_utf8(doc.to_bytes()).unwrap(),
            "\u{feff}{\n  \"mcpServers\": {\n    \"a\": {},\n    \"b\": 1,\n    \"we\\\"ird\": true\n  }\n}\n"
        );
    }

    #[test]
    fn invalid_text_is_refused() {
        for bad in [
            &b"{"[..],
            b"not json",
            b"{\"a\": 1,}",
            b"{\"a\" 1}",
            b"\"mcpServers\"",
        ] {
            let refused = Document::parse(bad).err();
            assert!(
                refused.is_some(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
        for (text, found) in [
            (&b"[1]"[..], "an array"),
            (b"\"x\"", "a string"),
            (b"null", "null"),
        ] {
            match Document::parse(text) {
                Err(ParseError::NotAnObject { found: f }) => assert_eq!(f, found),
                other => panic!("{:?}: {:?}", String::from_utf8_lossy(text), other.err()),
            }
        }
    }

    /// Comments are not JSON: refused, saying so, rather than lost.
    #[test]
    fn comments_are_refused_and_named() {
        for text in [
            &b"{\n  // mine\n  \"a\": 1\n}"[..],
            b"{\n  \"a\": 1 /* why */\n}",
        ] {
            match Document::parse(text) {
                Err(ParseError::Invalid { on_comment, .. }) => {
                    assert!(on_comment, "{:?}", String::from_utf8_lossy(text))
                }
                other => panic!("{:?}", other.err()),
            }
        }
        match Document::parse(b"{\"a\": 1,}") {
            Err(ParseError::Invalid { on_comment, .. }) => assert!(!on_comment),
            other => panic!("{:?}", other.err()),
        }
    }

    /// Removing a member takes its separator with it and leaves every
    /// other byte as it was; a missing member changes nothing.
    #[test]
    fn removed_members_leave_their_neighbours_alone() {
        let before = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"},\n    \"b\": 2,\n    \"c\": [3]\n  },\n  \"x\": 1\n}\n";
        let cases = [
            (
                vec!["a"],
                "{\n  \"mcpServers\": {\n    \"b\": 2,\n    \"c\": [3]\n  },\n  \"x\": 1\n}\n",
            ),
            (
                vec!["b"],
                "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"},\n    \"c\": [3]\n  },\n  \"x\": 1\n}\n",
            ),
            (
                vec!["c"],
                "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"},\n    \"b\": 2\n  },\n  \"x\": 1\n}\n",
            ),
            (
                vec!["a", "b", "c"],
                "{\n  \"mcpServers\": {},\n  \"x\": 1\n}\n",
            ),
            (vec!["nope"], before),
        ];
        for (ids, after) in cases {
            let mut doc = Document::parse(before.as_bytes()).unwrap();
            for id in &ids {
                assert_eq!(doc.remove("mcpServers", id).unwrap(), *id != "nope");
            }
            assert_eq!(String::from_utf8(doc.to_bytes()).unwrap(), after, "{ids:?}");
        }
        // A removal and a set in one document, in the order made.
        let mut doc = Document::parse(before.as_bytes()).unwrap();
        doc.remove("mcpServers", "b").unwrap();
        doc.set("mcpServers", "evo", json!({"command": "e"}))
            .unwrap();
        let got: Value = serde_json::from_slice(&doc.to_bytes()).unwrap();
        assert_eq!(
            got,
            json!({"mcpServers": {"a": {"command": "a"}, "c": [3], "evo": {"command": "e"}}, "x": 1})
        );
        let keys: Vec<&String> = got["mcpServers"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["a", "c", "evo"]);
        // No such object: nothing to remove.
        let mut doc = Document::parse(b"{}").unwrap();
        assert_eq!(doc.remove("mcpServers", "a"), Ok(false));
        assert_eq!(doc.to_bytes(), b"{}");
    }

    /// A key that holds something other than an object is never replaced.
    #[test]
    fn a_member_of_a_non_object_is_refused() {
        let before = "{\n  \"mcpServers\": \"none\"\n}\n";
        let mut doc = Document::parse(before.as_bytes()).unwrap();
        let refused = Err(NotAnObject { found: "a string" });
        assert_eq!(doc.set("mcpServers", "evo", json!({})), refused);
        assert_eq!(doc.object("mcpServers").map(|_| ()), refused);
        assert_eq!(String::from_utf8(doc.to_bytes()).unwrap(), before);
    }
}
