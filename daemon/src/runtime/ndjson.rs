//! Newline-delimited JSON framing shared by the session and child
//! transports: a cancellation-safe line reader with a size limit that can
//! still name an oversized request's id, and a line writer for a writer that
//! may have closed.
//!
//! `limits.max_message_bytes` (default 16 MiB) bounds one MCP message; an oversized line is
//! discarded with a `-32600` error naming the limit.

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

/// Newline-delimited reading with a size limit, cancellation-safe: rmcp
/// polls `receive` inside a `select!` and may drop it mid-line, so the line
/// being read lives here, and bytes are consumed only once stored.
pub struct LineReader<R> {
    reader: R,
    line: Vec<u8>,
    oversized: bool,
    /// The start of the last oversized line, to tell whom it answers.
    head: Vec<u8>,
    pub max_line: usize,
}

/// Bytes of an oversized line kept to find its JSON-RPC `id`.
const HEAD: usize = 512;

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub fn new(reader: R, max_line: usize) -> Self {
        LineReader {
            reader,
            line: Vec::new(),
            oversized: false,
            head: Vec::new(),
            max_line,
        }
    }

    /// The `id` of the last line reported too long, when its start shows
    /// one at the top level (senders put it first), so that request can
    /// still get its one answer.
    pub fn oversized_id(&self) -> Option<Value> {
        top_level_id(&self.head)
    }

    /// The whole line read by the last successful `next_line`.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.line)
    }

    /// Reads until a whole line is held (see [`Self::take`]). Returns false at end of
    /// stream. A line over the limit is consumed up to its newline and
    /// reported. Cancellation-safe: bytes are consumed only once stored.
    pub async fn next_line(&mut self) -> Result<bool, LineError> {
        loop {
            let buf = match self.reader.fill_buf().await {
                Ok(b) => b,
                Err(e) => return Err(LineError::Io(e)),
            };
            if buf.is_empty() {
                return if self.oversized {
                    self.oversized = false;
                    Err(LineError::TooLong)
                } else {
                    Ok(!self.line.is_empty())
                };
            }
            let newline = memchr::memchr(b'\n', buf);
            let take = newline.map_or(buf.len(), |i| i + 1);
            if !self.oversized {
                let chunk = &buf[..newline.unwrap_or(buf.len())];
                if self.line.len() + chunk.len() > self.max_line {
                    self.oversized = true;
                    let mut head = std::mem::take(&mut self.line);
                    head.extend_from_slice(&chunk[..chunk.len().min(HEAD)]);
                    head.truncate(HEAD);
                    self.head = head;
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            self.reader.consume(take);
            if newline.is_some() {
                if self.oversized {
                    self.oversized = false;
                    return Err(LineError::TooLong);
                }
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                return Ok(true);
            }
        }
    }
}

/// Writes `value` as one JSON line to a writer that may have been closed
/// (`None`), and flushes. Shared by the session and child transports.
pub async fn write_line<W, T>(
    writer: &Mutex<Option<W>>,
    value: &T,
    closed: &'static str,
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
    T: serde::Serialize,
{
    let mut bytes = serde_json::to_vec(value)?;
    bytes.push(b'\n');
    let mut guard = writer.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            closed,
        ));
    };
    w.write_all(&bytes).await?;
    w.flush().await
}

/// The value of the top-level `"id"` member in the start of a JSON object,
/// if it is a number or a string and appears there whole. Strings are
/// skipped properly, so an `"id"` nested in params is never taken.
fn top_level_id(head: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' => {
                let start = i;
                i += 1;
                while i < head.len() && head[i] != b'"' {
                    i += if head[i] == b'\\' { 2 } else { 1 };
                }
                let key = head.get(start..=i)?;
                let rest = head.get(i + 1..)?;
                let after = rest.iter().position(|b| !b.is_ascii_whitespace())?;
                if depth == 1 && key == b"\"id\"" && rest[after] == b':' {
                    let value = &rest[after + 1..];
                    let mut values =
                        serde_json::Deserializer::from_slice(value).into_iter::<Value>();
                    return match values.next()? {
                        Ok(id @ (Value::Number(_) | Value::String(_))) => Some(id),
                        _ => None,
                    };
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

pub enum LineError {
    TooLong,
    Io(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_top_level_id_is_read_from_the_start_of_a_line() {
        let cases: [(&[u8], Option<Value>); 8] = [
            (
                br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"a":"xxxx"#,
                Some(json!(5)),
            ),
            (
                br#"{"id": "evo-7" , "result": {"content": [{"text": "xx"#,
                Some(json!("evo-7")),
            ),
            // An "id" inside params is not the request's.
            (
                br#"{"jsonrpc":"2.0","method":"tools/call","params":{"id":3,"text":"xx"#,
                None,
            ),
            // A string that mentions "id": is skipped whole.
            (br#"{"note":"\"id\":9","id":4,"#, Some(json!(4))),
            (br#"{"method":"x","id":null,"#, None),
            (br#"{"id":{"nested":1},"#, None),
            // Cut before the id's value is whole.
            (br#"{"id":"evo-12"#, None),
            (b"not json at all", None),
        ];
        for (head, want) in cases {
            assert_eq!(
                top_level_id(head),
                want,
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }
}
