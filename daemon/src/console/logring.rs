//! evod's recent log, for the console's Log page: a tracing layer that
//! keeps the last [`CAPACITY`] events (at the levels the log filter lets
//! through) in a bounded ring and hands each to open consoles.
//!
//! evod never logs secrets on purpose; the ring also masks what would be
//! one if it slipped through: fields named like credentials, API tokens
//! (`evo_` and 64 hex digits) and `Bearer …` values.
//!
//! Each event is kept as a JSON line (time, level, target, `server` field, message and fields), cut
//! at 2 KiB.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

use super::events::{Event, EventBus};
use crate::runtime::log_tag;

/// Lines kept.
pub const CAPACITY: usize = 1000;
/// Longest message kept (longer ones are cut, marked with `…`).
const MAX_LINE: usize = 2048;

fn ring() -> &'static Mutex<VecDeque<Arc<str>>> {
    static RING: OnceLock<Mutex<VecDeque<Arc<str>>>> = OnceLock::new();
    RING.get_or_init(|| Mutex::new(VecDeque::with_capacity(64)))
}

/// The lines kept, oldest first (each a JSON object: `t` ms since the
/// epoch, `level`, `target`, `server`, `msg`).
pub fn recent() -> Vec<Arc<str>> {
    ring()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect()
}

/// The tracing layer; add it beside the formatter. Open consoles hear its
/// lines on `events`.
pub struct LogRing {
    pub events: EventBus,
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for LogRing {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        // A log line runs inside whatever task logged it: a bug here must
        // cost that line, never the task (a session, a child's service).
        let kept =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| keep(event, &self.events)));
        if kept.is_err() {
            eprintln!(
                "evod: the console's log ring could not keep a log line (a bug); the line is in the log above"
            );
        }
    }
}

/// Puts `event` in the ring and tells open consoles.
fn keep(event: &tracing::Event<'_>, events: &EventBus) {
    let mut v = Fields::default();
    event.record(&mut v);
    let meta = event.metadata();
    let mut msg = mask(&v.message);
    if !v.rest.is_empty() {
        if !msg.is_empty() {
            msg.push(' ');
        }
        msg.push_str(&mask(&v.rest));
    }
    if msg.len() > MAX_LINE {
        let mut cut = MAX_LINE;
        while !msg.is_char_boundary(cut) {
            cut -= 1;
        }
        msg.truncate(cut);
        msg.push('…');
    }
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let line: Arc<str> = json!({
        "t": t,
        "level": meta.level().as_str(),
        "target": meta.target(),
        "server": v.server.or_else(|| log_tag::untagged_rmcp_event(event).map(|s| s.to_string())),
        "msg": msg,
    })
    .to_string()
    .into();
    {
        let mut ring = ring().lock().unwrap_or_else(|e| e.into_inner());
        if ring.len() == CAPACITY {
            ring.pop_front();
        }
        ring.push_back(line.clone());
    }
    if events.listening() {
        events.publish(Event::Log(line));
    }
}

/// An event's fields: the message, the `server` it is about, the rest as
/// `key=value`.
#[derive(Default)]
struct Fields {
    message: String,
    server: Option<String>,
    rest: String,
}

/// Field names whose values are never kept.
fn secret_field(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["token", "authorization", "cookie", "secret", "password", "bearer", "credential"]
        .iter()
        .any(|s| n.contains(s))
        // The names of tokens are not secrets (`token = %name` in the log of
        // `evoctl token create`).
        && n != "token"
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field, &format!("{value:?}"));
    }
}

impl Fields {
    fn record(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "server" => self.server = Some(value.trim_matches('"').to_string()),
            name => {
                if !self.rest.is_empty() {
                    self.rest.push(' ');
                }
                let shown = if secret_field(name) {
                    "[redacted]"
                } else {
                    value
                };
                let _ = write!(self.rest, "{name}={shown}");
            }
        }
    }
}

/// `text` with API tokens and bearer credentials replaced.
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if rest.starts_with("evo_")
            && rest.len() >= 68
            && rest.as_bytes()[4..68].iter().all(u8::is_ascii_hexdigit)
        {
            out.push_str("evo_[redacted]");
            i += 68;
            continue;
        }
        // Bytes, not a `str` slice: the text may hold multi-byte characters
        // within the first seven (a match is ASCII, so slicing after it is safe).
        if rest.len() > 7 && rest.as_bytes()[..7].eq_ignore_ascii_case(b"bearer ") {
            out.push_str(&rest[..7]);
            out.push_str("[redacted]");
            i += 7;
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'"' {
                i += 1;
            }
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_with_multi_byte_characters_is_masked_whole() {
        // A slice at a byte offset inside "é" or "…" used to panic (and the
        // panic in a log layer took the logging task down with it).
        for text in [
            "déjà vu",
            "a…b bearer tok",
            "ééééééééé",
            "“quoted” Bearer x y",
        ] {
            let masked = mask(text);
            assert!(!masked.contains("tok"), "{masked}");
            assert!(
                masked.chars().count() <= text.chars().count() + 10,
                "{masked}"
            );
        }
        assert_eq!(mask("“quoted” Bearer x y"), "“quoted” Bearer [redacted] y");
        assert_eq!(mask("déjà vu"), "déjà vu");
    }

    #[test]
    fn secrets_are_masked() {
        let token = format!("evo_{}", "ab".repeat(32));
        assert_eq!(
            mask(&format!("got {token} and more")),
            "got evo_[redacted] and more"
        );
        assert_eq!(
            mask("Authorization: Bearer eyJhbGc.x.y, next"),
            "Authorization: Bearer [redacted] next"
        );
        assert_eq!(mask("évo_ short evo_12"), "évo_ short evo_12");
        assert!(secret_field("client_secret") && secret_field("Authorization"));
        assert!(!secret_field("token") && !secret_field("server"));
    }
}
