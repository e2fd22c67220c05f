//! Reading values of the expected type out of a config's JSON: a wrong type is a
//! [`TypeError`] saying what was expected and what was found (never the value of a string, which
//! may be a misplaced secret).

use std::collections::BTreeMap;
use std::time::Duration;

use evo_proto::json_kind;
use serde_json::{Map, Value};

/// The value under `key`, treating JSON `null` as absent.
pub(super) fn present<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

/// A value of the wrong shape; `path` locates it below the key being read (`[2]`, `.LOG`).
#[derive(Debug)]
pub(super) struct TypeError {
    pub(super) path: String,
    pub(super) message: String,
}

impl TypeError {
    pub(super) fn new(message: String) -> TypeError {
        TypeError {
            path: String::new(),
            message,
        }
    }

    pub(super) fn expected(what: &str, found: &Value) -> TypeError {
        TypeError::new(format!("expected {what}, found {}", describe(found)))
    }

    pub(super) fn at(self, path: String) -> TypeError {
        TypeError { path, ..self }
    }
}

pub(super) fn string(value: &Value) -> Result<&str, TypeError> {
    value
        .as_str()
        .ok_or_else(|| TypeError::expected("a string", value))
}

pub(super) fn boolean(value: &Value) -> Result<bool, TypeError> {
    value
        .as_bool()
        .ok_or_else(|| TypeError::expected("true or false", value))
}

pub(super) fn string_list(value: &Value) -> Result<Vec<String>, TypeError> {
    let Value::Array(items) = value else {
        return Err(TypeError::expected("an array of strings", value));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            string(item)
                .map(str::to_owned)
                .map_err(|err| err.at(format!("[{index}]")))
        })
        .collect()
}

pub(super) fn string_map(value: &Value) -> Result<BTreeMap<String, String>, TypeError> {
    let Value::Object(entries) = value else {
        return Err(TypeError::expected("an object of strings", value));
    };
    entries
        .iter()
        .map(|(key, item)| match string(item) {
            Ok(text) => Ok((key.clone(), text.to_owned())),
            Err(err) => Err(err.at(format!(".{key}"))),
        })
        .collect()
}

pub(super) fn count(value: &Value) -> Result<usize, TypeError> {
    value
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| TypeError::expected("a whole number (0 or more)", value))
}

pub(super) fn positive(n: usize) -> Result<usize, TypeError> {
    if n == 0 {
        Err(TypeError::new("must be at least 1".to_owned()))
    } else {
        Ok(n)
    }
}

pub(super) fn seconds(value: &Value) -> Result<Duration, TypeError> {
    value
        .as_f64()
        .filter(|secs| *secs > 0.0)
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| TypeError::expected("a positive number of seconds", value))
}

/// A value for error messages: booleans and numbers verbatim, anything else by kind only, so
/// a misplaced secret (`"env": "TOKEN=..."`) never reaches a log.
pub(super) fn describe(value: &Value) -> String {
    match value {
        Value::Bool(_) | Value::Number(_) => value.to_string(),
        _ => json_kind(value).to_owned(),
    }
}
