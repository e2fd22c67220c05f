//! Newline-delimited framing with a size limit, for handshake and ctl lines.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// Default limit of one line: the same 16 MiB evo applies to MCP messages.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("message exceeds the limit of {limit} bytes")]
    TooLong { limit: usize },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one line (without its `\n` or `\r\n`) of at most `limit` bytes.
///
/// Returns `Ok(None)` at a clean end of stream. A line over the limit is an
/// error and the reader is left mid-line, so callers close the connection.
/// A final line without a newline is returned as a line.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> Result<Option<Vec<u8>>, FrameError> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() { None } else { Some(line) });
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > limit {
            return Err(FrameError::TooLong { limit });
        }
        line.extend_from_slice(chunk);
        let used = done.unwrap_or(chunk.len());
        reader.consume(used);
        if done.is_some() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Some(line));
        }
    }
}

/// Writes `value` as one JSON line and flushes.
pub async fn write_json<W: AsyncWrite + Unpin, T: serde::Serialize>(
    writer: &mut W,
    value: &T,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(value)?;
    bytes.push(b'\n');
    writer.write_all(&bytes).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn lines(input: &[u8], limit: usize) -> Vec<Result<Option<Vec<u8>>, String>> {
        let mut r = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            match read_line(&mut r, limit).await {
                Ok(None) => {
                    out.push(Ok(None));
                    return out;
                }
                Ok(Some(l)) => out.push(Ok(Some(l))),
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            }
        }
    }

    #[tokio::test]
    async fn splits_lines_across_small_buffers() {
        let got = lines(b"abc\r\nhello world\nlast", 100).await;
        assert_eq!(
            got,
            vec![
                Ok(Some(b"abc".to_vec())),
                Ok(Some(b"hello world".to_vec())),
                Ok(Some(b"last".to_vec())),
                Ok(None)
            ]
        );
    }

    #[tokio::test]
    async fn enforces_the_limit() {
        let got = lines(b"0123456789\n", 10).await;
        assert_eq!(got, vec![Ok(Some(b"0123456789".to_vec())), Ok(None)]);
        let got = lines(b"01234567890\n", 10).await;
        assert_eq!(
            got,
            vec![Err("message exceeds the limit of 10 bytes".into())]
        );
    }
}
