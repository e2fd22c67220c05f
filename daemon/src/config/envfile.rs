//! The env file (`env_file` in the config; default `env` beside it): the
//! variables evod adds to its environment, whoever started it. A pure parser;
//! `config::load` reads the file.
//!
//! An autostarted evod inherits the environment of the client that started
//! it first, which may be a bare `HOME`/`PATH`; the env file makes every
//! start see the same variables. evod never changes its own process
//! environment (that is unsound with threads running): the variables are an
//! overlay that `${VAR}` expansion reads before the process environment, and
//! that every stdio child gets on top of evod's environment, under its own
//! `env`.
//!
//! The format, one variable a line:
//!
//! - `KEY=VALUE`; `KEY` is a letter or `_`, then letters, digits, `_`.
//!   Whitespace around the line and around `=` is ignored. An optional
//!   `export ` in front is ignored (so the file can be `source`d by a shell).
//! - Blank lines and lines starting with `#` are skipped.
//! - `VALUE` unquoted: the rest of the line, trimmed; a `#` after whitespace
//!   starts a comment (`KEY=a#b` keeps the `#`). `KEY=` sets an empty value.
//! - `'VALUE'`: taken literally. `"VALUE"`: `\"`, `\\`, `\n` and `\t` are
//!   escapes, any other backslash is kept. After the closing quote only
//!   whitespace or a `# comment` may follow. A value is one line.
//! - No `${VAR}` expansion inside the file: values are literal.
//! - A variable set twice: the last line wins.
//! - A malformed line is skipped with a problem naming its line; its text
//!   is never quoted (it may hold a secret).
//!
//! Because `${VAR}` looks in the overlay first, the file wins over whatever the first client
//! passed, an edit plus a reload takes effect, and a variable removed from the file falls back to
//! the inherited one. For stdio servers the overlay is merged into the spec's `env` under the
//! server's own entries, so it is in the config hash (an env file change restarts them on reload),
//! in the values masked in stderr tails, and never in capabilities. The file is watched with the
//! config. Values are never logged. A file others can read is a warning. evod's own `EVO_*`
//! settings are not read from it.

use std::collections::BTreeMap;

/// What an env file holds: its variables, and the lines that were skipped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EnvFile {
    pub vars: BTreeMap<String, String>,
    /// (1-based line number, what is wrong with it), in file order.
    pub problems: Vec<(usize, String)>,
}

/// Parses env file text. Never fails: bad lines become [`EnvFile::problems`].
pub fn parse(text: &str) -> EnvFile {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut file = EnvFile::default();
    for (index, line) in text.split('\n').enumerate() {
        match parse_line(line) {
            Ok(Some((key, value))) => {
                file.vars.insert(key.to_owned(), value);
            }
            Ok(None) => {}
            Err(message) => file.problems.push((index + 1, message)),
        }
    }
    file
}

/// One line: `Ok(None)` for a blank or comment line.
fn parse_line(line: &str) -> Result<Option<(&str, String)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = match line.strip_prefix("export") {
        Some(rest) if rest.starts_with([' ', '\t']) => rest.trim_start(),
        _ => line,
    };
    let Some((key, raw)) = line.split_once('=') else {
        return Err("expected KEY=VALUE (no '=' found); line skipped".to_owned());
    };
    let key = key.trim_end();
    if !is_var_name(key) {
        return Err(
            "the name before '=' is not a variable name (a letter or _, then letters, digits \
             or _); line skipped"
                .to_owned(),
        );
    }
    let value = value(raw).map_err(|why| format!("{key}: {why}; line skipped"))?;
    Ok(Some((key, value)))
}

/// The value from the text after `=` (untrimmed, so ` # comment` right after `=` is seen).
fn value(raw: &str) -> Result<String, &'static str> {
    let trimmed = raw.trim_start();
    let (value, rest) = if let Some(body) = trimmed.strip_prefix('\'') {
        let end = body
            .find('\'')
            .ok_or("no closing single quote (a value is one line)")?;
        (body[..end].to_owned(), &body[end + 1..])
    } else if let Some(body) = trimmed.strip_prefix('"') {
        double_quoted(body)?
    } else {
        let end = raw
            .char_indices()
            .find(|&(i, c)| c == '#' && raw[..i].ends_with([' ', '\t']))
            .map_or(raw.len(), |(i, _)| i);
        return Ok(raw[..end].trim().to_owned());
    };
    let rest = rest.trim_start();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(value)
    } else {
        Err("text after the closing quote (quote the whole value)")
    }
}

/// The value of a `"…"` body (after the opening quote) and the text after
/// its closing quote.
fn double_quoted(body: &str) -> Result<(String, &str), &'static str> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &body[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, other)) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    Err("no closing double quote (a value is one line)")
}

/// A variable name `${VAR}` can refer to.
pub fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(text: &str) -> Vec<(String, String)> {
        let file = parse(text);
        assert!(file.problems.is_empty(), "{text:?}: {:?}", file.problems);
        file.vars.into_iter().collect()
    }

    #[test]
    fn lines_and_values() {
        // (line, key, value)
        #[rustfmt::skip]
        let cases = [
            ("A=1", "A", "1"),
            ("  A = 1  ", "A", "1"),
            ("export A=1", "A", "1"),
            ("export\tA=1", "A", "1"),
            ("A=", "A", ""),
            ("A=a=b=c", "A", "a=b=c"),
            ("A=a#b", "A", "a#b"),
            ("A=a b # comment", "A", "a b"),
            ("A=a\t# comment", "A", "a"),
            ("A=#not a comment", "A", "#not a comment"),
            ("A= # only a comment", "A", ""),
            ("A='single # \"quoted\" \\n $X'", "A", "single # \"quoted\" \\n $X"),
            ("A='x'  # after", "A", "x"),
            ("A=\"a \\\"b\\\" c\\\\d\\ne\\tf \\x\"", "A", "a \"b\" c\\d\ne\tf \\x"),
            ("A=\"x\" # after", "A", "x"),
            ("A=\"\"", "A", ""),
            ("A=${HOME}/x", "A", "${HOME}/x"),
            ("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
            ("_x9=é", "_x9", "é"),
            ("exporter=1", "exporter", "1"),
            ("A=1\r", "A", "1"),
        ];
        for (line, key, value) in cases {
            assert_eq!(vars(line), [(key.to_owned(), value.to_owned())], "{line:?}");
        }
    }

    #[test]
    fn blank_lines_comments_bom_and_last_wins() {
        let text = "\u{feff}# evo's env\n\n   \nA=1\r\n  # indented comment\nB=2\nA=3\n";
        assert_eq!(
            vars(text),
            [("A".into(), "3".into()), ("B".into(), "2".into())]
        );
    }

    #[test]
    fn malformed_lines_are_skipped_with_their_number_and_never_quoted() {
        let text =
            "A=1\nsk-live-SECRET\n1A=x\nexport =2\nB='open\nC=\"open\nD=\"x\" y\nE-F=SECRET\nG=2\n";
        let file = parse(text);
        assert_eq!(
            file.vars.into_iter().collect::<Vec<_>>(),
            [("A".to_owned(), "1".to_owned()), ("G".into(), "2".into())]
        );
        let lines: Vec<usize> = file.problems.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7, 8]);
        for (_, message) in &file.problems {
            assert!(!message.contains("SECRET"), "{message}");
            assert!(!message.contains("open"), "{message}");
            assert!(message.ends_with("line skipped"), "{message}");
        }
        assert!(file.problems[0].1.contains("no '='"));
        assert!(file.problems[1].1.contains("not a variable name"));
        assert!(file.problems[3].1.starts_with("B: no closing single quote"));
        assert!(file.problems[4].1.starts_with("C: no closing double quote"));
        assert!(
            file.problems[5]
                .1
                .starts_with("D: text after the closing quote")
        );
    }

    #[test]
    fn variable_names() {
        for good in ["A", "_", "a_B9", "_1"] {
            assert!(is_var_name(good), "{good}");
        }
        for bad in ["", "1A", "A-B", "A B", "é", "A.B"] {
            assert!(!is_var_name(bad), "{bad}");
        }
    }
}
