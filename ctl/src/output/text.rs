//! The pieces every reply's rendering is made of: a [`Printout`] to fill,
//! tables padded to their widest cell, ages in one unit, JSON as printed.

/// What a reply prints, in the order printed. Stdout and stderr parts are
/// kept apart (a script reads stdout alone; tests read each) and in order
/// (a terminal shows both as they come).
#[derive(Debug, Default, PartialEq)]
pub struct Printout {
    parts: Vec<Part>,
}

#[derive(Debug, PartialEq)]
enum Part {
    Stdout(String),
    Stderr(String),
}

impl Printout {
    /// `text` and a newline on stdout.
    pub fn line(&mut self, text: impl Into<String>) {
        let mut text = text.into();
        text.push('\n');
        self.parts.push(Part::Stdout(text));
    }

    /// Each of `lines` on stdout.
    pub fn lines(&mut self, lines: impl IntoIterator<Item = String>) {
        for line in lines {
            self.line(line);
        }
    }

    /// `text` as it is on stdout (a text that brings its own newlines).
    pub fn text(&mut self, text: impl Into<String>) {
        self.parts.push(Part::Stdout(text.into()));
    }

    /// `text` and a newline on stderr: what a person reads beside the
    /// output a script takes.
    pub fn note(&mut self, text: impl Into<String>) {
        let mut text = text.into();
        text.push('\n');
        self.parts.push(Part::Stderr(text));
    }

    /// Writes each part to its stream, in order.
    pub fn print(&self) {
        for part in &self.parts {
            match part {
                Part::Stdout(text) => print!("{text}"),
                Part::Stderr(text) => eprint!("{text}"),
            }
        }
    }

    /// Everything for stdout, as one text.
    #[cfg(test)]
    pub fn stdout(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Stdout(text) => Some(text.as_str()),
                Part::Stderr(_) => None,
            })
            .collect()
    }

    /// Everything for stderr, as one text.
    #[cfg(test)]
    pub fn stderr(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Stderr(text) => Some(text.as_str()),
                Part::Stdout(_) => None,
            })
            .collect()
    }
}

/// A table's lines: columns padded to their widest cell, the last one not
/// padded, trailing spaces cut.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        out.trim_end().to_string()
    };
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut lines = vec![line(&header)];
    lines.extend(rows.iter().map(|r| line(r)));
    lines
}

/// A number of seconds in its largest whole unit: `42s`, `5m`, `3h`, `2d`.
pub fn age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// JSON as evoctl prints it (`--json`, and where a table has no shape).
pub fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_every_column_but_the_last() {
        let rows = vec![
            vec!["a".to_string(), "long cell".into(), "x".into()],
            vec!["bb".to_string(), "c".into(), String::new()],
        ];
        assert_eq!(
            table(&["ID", "NAME", "NOTE"], &rows),
            ["ID  NAME       NOTE", "a   long cell  x", "bb  c"]
        );
    }

    #[test]
    fn age_uses_the_largest_whole_unit() {
        assert_eq!(
            [0, 59, 60, 3599, 3600, 86399, 86400].map(age),
            ["0s", "59s", "1m", "59m", "1h", "23h", "1d"]
        );
    }

    #[test]
    fn printout_keeps_each_stream_apart() {
        let mut p = Printout::default();
        p.line("a");
        p.note("why");
        p.text("b");
        assert_eq!((p.stdout(), p.stderr()), ("a\nb".into(), "why\n".into()));
    }
}
