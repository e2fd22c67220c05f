//! What a server entry of the config may be, as far as its transport goes:
//! evod's loader decides by these rules, and `evoctl import` asks them
//! before it writes an entry evod could not run.

/// The two transports evo serves, as declared by `type`/`transport` or
/// implied by `command`/`url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    Stdio,
    Http,
    /// The legacy HTTP+SSE transport (MCP 2024-11-05).
    Sse,
}

impl TransportKind {
    /// A `type`/`transport` value, in any case, `-` and `_` ignored
    /// (`streamable-http`, `Streamable_HTTP`); `None` for one evo does not
    /// serve.
    pub fn from_declared(name: &str) -> Option<TransportKind> {
        let folded: String = name
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .collect::<String>()
            .to_ascii_lowercase();
        match folded.as_str() {
            "stdio" => Some(TransportKind::Stdio),
            "http" | "streamablehttp" => Some(TransportKind::Http),
            "sse" => Some(TransportKind::Sse),
            _ => None,
        }
    }
}

/// Whether `url` is an `http://` or `https://` address with something
/// after the scheme.
pub fn has_http_scheme(url: &str) -> bool {
    let starts = |scheme: &str| {
        url.get(..scheme.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(scheme))
            && url.len() > scheme.len()
    };
    starts("http://") || starts("https://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_transports_fold_case_and_separators() {
        for (name, kind) in [
            ("stdio", Some(TransportKind::Stdio)),
            ("HTTP", Some(TransportKind::Http)),
            ("streamable-http", Some(TransportKind::Http)),
            ("Streamable_HTTP", Some(TransportKind::Http)),
            ("sse", Some(TransportKind::Sse)),
            ("SSE", Some(TransportKind::Sse)),
            ("websocket", None),
        ] {
            assert_eq!(TransportKind::from_declared(name), kind, "{name}");
        }
    }

    #[test]
    fn http_urls_need_a_scheme_and_more() {
        assert!(has_http_scheme("https://h/mcp"));
        assert!(has_http_scheme("HTTP://h"));
        assert!(!has_http_scheme("http://"));
        assert!(!has_http_scheme("ftp://h"));
        assert!(!has_http_scheme("h/mcp"));
    }
}
