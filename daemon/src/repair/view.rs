//! The hot path of a check: guards and a copy-free view of the arguments.

use super::*;

/// Why arguments were refused (too deep) or are not repaired (too large).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Excess {
    Depth,
    Size,
}

impl fmt::Display for Excess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Excess::Depth => write!(
                f,
                "the arguments are nested deeper than {MAX_DEPTH} levels of objects and arrays"
            ),
            Excess::Size => write!(
                f,
                "the arguments are larger than 1 MiB ({MAX_BYTES} bytes) as compact JSON; they are validated, not repaired"
            ),
        }
    }
}

/// Adds the compact-JSON size of `object` (at nesting level `depth`) to `size`, stopping at the
/// first limit crossed. Allocation-free, and its recursion is bounded by [`MAX_DEPTH`].
pub(super) fn measure_object(
    object: &JsonObject,
    depth: usize,
    size: &mut usize,
) -> Result<(), Excess> {
    if depth > MAX_DEPTH {
        return Err(Excess::Depth);
    }
    // Braces, and per member a colon plus a comma (one too many, which the braces' count absorbs).
    *size += 2 + 2 * object.len().saturating_sub(1) + usize::from(!object.is_empty());
    for (name, value) in object {
        *size += string_json_len(name);
        measure_value(value, depth, size)?;
    }
    if *size > MAX_BYTES {
        return Err(Excess::Size);
    }
    Ok(())
}

pub(super) fn measure_value(value: &Value, depth: usize, size: &mut usize) -> Result<(), Excess> {
    match value {
        Value::Null | Value::Bool(true) => *size += 4,
        Value::Bool(false) => *size += 5,
        Value::Number(number) => *size += number_json_len(number),
        Value::String(text) => *size += string_json_len(text),
        Value::Array(items) => {
            if depth + 1 > MAX_DEPTH {
                return Err(Excess::Depth);
            }
            *size += 2 + items.len().saturating_sub(1);
            for item in items {
                measure_value(item, depth + 1, size)?;
            }
        }
        Value::Object(object) => measure_object(object, depth + 1, size)?,
    }
    if *size > MAX_BYTES {
        return Err(Excess::Size);
    }
    Ok(())
}

/// Bytes of `text` as a JSON string, escapes and quotes included (serde_json's escaping).
pub(super) fn string_json_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

pub(super) fn number_json_len(number: &Number) -> usize {
    struct Count(usize);
    impl fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = write!(count, "{number}");
    count.0
}
