//! Errors as a person reads them. rmcp's and reqwest's errors print wrapper
//! type names and hide the cause that says what to do ("Connection refused");
//! every message that shows a child's or a remote server's error to a person
//! or an agent goes through [`readable_error`].

/// An error as a person reads it: the type names some wrappers print
/// (`Transport [rmcp::transport::…<reqwest::…>]`) removed, and the innermost
/// cause (e.g. "Connection refused (os error 111)") added when the message
/// does not already say it.
pub fn readable_error(e: &(dyn std::error::Error + 'static)) -> String {
    let text = without_type_names(&e.to_string());
    let mut innermost = e;
    while let Some(next) = innermost.source() {
        innermost = next;
    }
    let cause = without_type_names(&innermost.to_string());
    if cause.is_empty() || text.contains(&cause) {
        text
    } else {
        format!("{text} ({cause})")
    }
}

/// `text` without any `[...]` that holds a Rust path, whitespace collapsed.
fn without_type_names(text: &str) -> String {
    let mut text = text.to_string();
    let mut from = 0;
    while let Some(open) = text[from..].find('[').map(|o| from + o) {
        let Some(close) = text[open..].find(']').map(|c| open + c) else {
            break;
        };
        if text[open..close].contains("::") {
            text.replace_range(open..=close, "");
            from = open;
        } else {
            from = close + 1;
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(&'static str, Option<Box<Wrapped>>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|w| w as _)
        }
    }

    #[test]
    fn errors_read_without_type_names_and_with_their_cause() {
        let e = Wrapped(
            "Transport [rmcp::transport::Worker<reqwest::Client>] error: sending to http://x/mcp [id 3]",
            Some(Box::new(Wrapped(
                "io",
                Some(Box::new(Wrapped("Connection refused (os error 111)", None))),
            ))),
        );
        assert_eq!(
            readable_error(&e),
            "Transport error: sending to http://x/mcp [id 3] (Connection refused (os error 111))"
        );
        let plain = Wrapped("child exited with status 1", None);
        assert_eq!(readable_error(&plain), "child exited with status 1");
    }
}
