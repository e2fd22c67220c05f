//! Where the object keys of a JSON text are: the line of each key, by its
//! path of keys (`["mcpServers", "fs", "timeout"]`), so config warnings can
//! say `file:line`. `serde_json::Value` keeps no positions, and a JSON
//! parser with spans would be a dependency for one use; this is one pass
//! over text serde_json has already accepted.
//!
//! Only keys reached through objects alone are recorded (a key inside an
//! array element has no path of keys). A key given twice keeps its first
//! line. On text that is not valid JSON the pass stops and keeps what it
//! found so far.
//!
//! With these lines an unknown key is reported where it stands, and names the known one it is near
//! (case, `-`/`_`, a unit suffix such as `_s`, an edit or two, a few synonyms like `cmd`). `status
//! --json` has the warnings as `config.warnings` (`{file, line, message}`, `line` null when
//! unknown); `config.ok` still means "loaded and in force". A file that failed to load shows its
//! error and no warnings (they would be about text no longer there). Permissions warnings ride the
//! same field, their line in the message.

use std::collections::HashMap;

/// Lines of the object keys of one JSON text.
#[derive(Debug, Default, Clone)]
pub struct KeyLines(HashMap<Vec<String>, usize>);

impl KeyLines {
    /// Scans `text` (normally valid JSON).
    pub fn of(text: &str) -> KeyLines {
        let mut scan = Scan {
            text,
            pos: 0,
            line: 1,
            found: HashMap::new(),
        };
        let mut path = Vec::new();
        let _ = scan.value(Some(&mut path));
        KeyLines(scan.found)
    }

    /// The 1-based line of the key at `path`, if the text has it.
    pub fn line(&self, path: &[&str]) -> Option<usize> {
        let path: Vec<String> = path.iter().map(|&s| s.to_owned()).collect();
        self.0.get(&path).copied()
    }
}

struct Scan<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
    found: HashMap<Vec<String>, usize>,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => return,
            }
            self.pos += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    /// One value; `path` is `None` below an array (keys there are not
    /// recorded). serde_json bounds the nesting of text it accepts (128), so
    /// the recursion is bounded too.
    fn value(&mut self, path: Option<&mut Vec<String>>) -> Option<()> {
        self.skip_ws();
        match self.peek()? {
            b'{' => self.object(path),
            b'[' => self.array(),
            b'"' => self.string().map(drop),
            _ => {
                // A number, true, false or null: up to the next delimiter.
                let rest = &self.text.as_bytes()[self.pos..];
                let len = rest
                    .iter()
                    .position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\r' | b'\n'))
                    .unwrap_or(rest.len());
                (len > 0).then(|| self.pos += len)
            }
        }
    }

    fn object(&mut self, mut path: Option<&mut Vec<String>>) -> Option<()> {
        self.pos += 1;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.skip_ws();
            let line = self.line;
            let key = self.string()?;
            self.eat(b':')?;
            match path.as_deref_mut() {
                Some(path) => {
                    path.push(key);
                    self.found.entry(path.clone()).or_insert(line);
                    let inner = self.value(Some(path));
                    path.pop();
                    inner?;
                }
                None => self.value(None)?,
            }
            if self.eat(b',').is_none() {
                return self.eat(b'}');
            }
        }
    }

    fn array(&mut self) -> Option<()> {
        self.pos += 1;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            self.value(None)?;
            if self.eat(b',').is_none() {
                return self.eat(b']');
            }
        }
    }

    /// A string at the cursor, decoded (escapes and all) by serde_json.
    fn string(&mut self) -> Option<String> {
        let bytes = self.text.as_bytes();
        if bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let start = self.pos;
        let mut i = start + 1;
        loop {
            match bytes.get(i)? {
                b'\\' => i += 2,
                b'"' => break,
                _ => i += 1,
            }
        }
        self.pos = i + 1;
        serde_json::from_str(self.text.get(start..self.pos)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_by_path() {
        let text = r#"{
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", {"inner": 1}],
           "timeout": 5},
    "we\"ird\u00e9": {
      "env": {"A": "}{][,:\"\\"}
    }
  },
  "discovery": {"mode": "dynamic"},
  "n": -1.5e3, "t": true, "z": null, "e": {}, "a": []
}"#;
        let lines = KeyLines::of(text);
        #[rustfmt::skip]
        let cases: &[(&[&str], Option<usize>)] = &[
            (&["mcpServers"], Some(2)),
            (&["mcpServers", "fs"], Some(3)),
            (&["mcpServers", "fs", "command"], Some(3)),
            (&["mcpServers", "fs", "timeout"], Some(4)),
            (&["mcpServers", "we\"irdé"], Some(5)),
            (&["mcpServers", "we\"irdé", "env", "A"], Some(6)),
            (&["discovery", "mode"], Some(9)),
            (&["n"], Some(10)),
            (&["a"], Some(10)),
            // Below an array there is no path of keys.
            (&["mcpServers", "fs", "args", "inner"], None),
            (&["inner"], None),
            (&["timeout"], None),
            (&["mcpServers", "fs", "nope"], None),
        ];
        for (path, expected) in cases {
            assert_eq!(lines.line(path), *expected, "{path:?}");
        }
    }

    #[test]
    fn first_of_a_repeated_key_and_crlf() {
        let lines = KeyLines::of("{\r\n\"a\": 1,\r\n\"a\": 2\r\n}");
        assert_eq!(lines.line(&["a"]), Some(2));
    }

    #[test]
    fn broken_text_keeps_what_was_found() {
        let lines = KeyLines::of("{\n\"a\": 1,\n\"b\": {\n\"c\": ");
        assert_eq!(lines.line(&["a"]), Some(2));
        assert_eq!(lines.line(&["b", "c"]), Some(4));
        for text in ["", "[", "\"", "{\"a", "{\"a\\", "nul", "{,}"] {
            let _ = KeyLines::of(text);
        }
    }

    #[test]
    fn agrees_with_serde_json_on_every_key_of_the_example_config() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/mcp.config.json"
        ))
        .unwrap_or_default();
        let Ok(serde_json::Value::Object(root)) = serde_json::from_str(&text) else {
            panic!("examples/mcp.config.json is not a JSON object");
        };
        let lines = KeyLines::of(&text);
        let text_lines: Vec<&str> = text.lines().collect();
        fn walk(
            object: &serde_json::Map<String, serde_json::Value>,
            path: &mut Vec<String>,
            check: &mut dyn FnMut(&[String]),
        ) {
            for (key, value) in object {
                path.push(key.clone());
                check(path);
                if let serde_json::Value::Object(inner) = value {
                    walk(inner, path, check);
                }
                path.pop();
            }
        }
        let mut checked = 0;
        walk(&root, &mut Vec::new(), &mut |path| {
            let refs: Vec<&str> = path.iter().map(String::as_str).collect();
            let line = lines.line(&refs).unwrap_or(0);
            let Some(key) = path.last() else { return };
            let quoted = serde_json::to_string(key).unwrap_or_default();
            assert!(
                line > 0 && text_lines[line - 1].contains(&quoted),
                "{path:?} at line {line}"
            );
            checked += 1;
        });
        assert!(checked > 5, "only {checked} keys checked");
    }
}
