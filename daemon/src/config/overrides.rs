//! A server entry's per-tool overrides (`tools`): `{"UPSTREAM": {"name", "description",
//! "hidden", "args"}}`, keyed by the tool's upstream name like `hot` and `aliases`.
//!
//! - `name` replaces the upstream name *before* prefixing: `{"tools": {"read_text_file":
//!   {"name": "read"}}}` on server `fs` exposes `fs_read`, and `prefix: ""` exposes `read`. So
//!   the prefix keeps saying which server a tool is from, a changed prefix renames overridden
//!   tools like the others, and permissions and profiles written as `fs_*` keep covering them.
//!   The name must already be a valid name (`[a-zA-Z0-9_-]`) and `{prefix}_{name}` must fit in
//!   64 characters: a name a person chose is never silently rewritten. Renamed tools collide
//!   like any other (first in config order wins, duplicates reported).
//! - `args` are fixed arguments, checked against the tool's schema when its list arrives (the
//!   catalog's to do; a parameter the tool does not declare withholds the tool, see
//!   `catalog/entry.rs`).
//! - Wrong types, an invalid `name`, an empty `description` fail the server entry, as any other
//!   wrong key does; unknown keys inside an override are warnings. An override naming a tool
//!   the server does not list is only known when the list arrives: a warning in the log then.
//!
//! Overrides are not part of the [`super::ConfigHash`]: changing them re-derives the exposed
//! tools on reload without restarting the child, and integrity pins keep covering the
//! upstream definitions.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::diagnostics::{Warnings, warn_unknown_keys};
use super::keys::TOOL_OVERRIDE_KEYS;
use super::readers::{TypeError, boolean, present, string};
use crate::names;

/// What a server entry changes about one of its tools.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOverride {
    /// Takes the upstream name's place in the exposed name (`{prefix}_{name}`).
    pub name: Option<String>,
    /// Replaces the tool's description everywhere evo shows or searches it.
    pub description: Option<String>,
    /// Not listed, searched or callable.
    pub hidden: bool,
    /// Parameters removed from the schema agents see, always sent with these values.
    pub args: Map<String, Value>,
}

/// Reads `tools` of server `at` (`[section, id]`): each override's keys, its unknown keys
/// warned about. Errors carry their path below `tools` (`.read.name`).
pub(super) fn parse_tools(
    value: &Value,
    prefix: &str,
    at: &[&str],
    label: &str,
    warnings: &mut Warnings<'_>,
) -> Result<BTreeMap<String, ToolOverride>, TypeError> {
    let Value::Object(tools) = value else {
        return Err(TypeError::expected(
            "an object of upstream tool names",
            value,
        ));
    };
    let mut overrides = BTreeMap::new();
    for (tool, body) in tools {
        let Value::Object(object) = body else {
            return Err(TypeError::expected(
                "an object with 'name', 'description', 'hidden' or 'args'",
                body,
            )
            .at(format!(".{tool}")));
        };
        let mut path = at.to_vec();
        path.extend(["tools", tool.as_str()]);
        warn_unknown_keys(
            object,
            TOOL_OVERRIDE_KEYS,
            &path,
            &format!("{label}: tools.{tool}"),
            warnings,
        );
        let parsed = parse_one(object, prefix).map_err(|err| {
            let below = err.path.clone();
            err.at(format!(".{tool}{below}"))
        })?;
        overrides.insert(tool.clone(), parsed);
    }
    Ok(overrides)
}

fn parse_one(object: &Map<String, Value>, prefix: &str) -> Result<ToolOverride, TypeError> {
    let field = |key: &str| present(object, key);
    fn at(key: &'static str) -> impl Fn(TypeError) -> TypeError {
        move |err| err.at(format!(".{key}"))
    }
    let name = field("name")
        .map(|v| string(v).map_err(at("name")))
        .transpose()?
        .map(|name| check_name(name, prefix).map_err(at("name")))
        .transpose()?;
    let description = field("description")
        .map(|v| string(v).map_err(at("description")))
        .transpose()?
        .map(|text| {
            if text.trim().is_empty() {
                Err(TypeError::new(
                    "must not be empty; leave 'description' out to keep the server's own".into(),
                ))
                .map_err(at("description"))
            } else {
                Ok(text.to_owned())
            }
        })
        .transpose()?;
    let hidden = field("hidden")
        .map(|v| boolean(v).map_err(at("hidden")))
        .transpose()?
        .unwrap_or(false);
    let args = match field("args") {
        None => Map::new(),
        Some(Value::Object(args)) => {
            if args.contains_key("") {
                return Err(
                    TypeError::new("a parameter name must not be empty".into()).at(".args".into())
                );
            }
            args.clone()
        }
        Some(other) => {
            return Err(
                TypeError::expected("an object of parameter names and values", other)
                    .at(".args".into()),
            );
        }
    };
    Ok(ToolOverride {
        name,
        description,
        hidden,
        args,
    })
}

/// A name a person chose: valid as written, and whole once prefixed.
fn check_name(name: &str, prefix: &str) -> Result<String, TypeError> {
    if !names::is_valid(name) {
        return Err(TypeError::new(format!(
            "'{name}' is not a valid tool name: use 1 to {} letters, digits, '_' or '-'",
            names::MAX_NAME_LEN
        )));
    }
    let joined = names::joined(prefix, name);
    if joined.chars().count() > names::MAX_NAME_LEN {
        return Err(TypeError::new(format!(
            "the exposed name '{joined}' is longer than {} characters; choose a shorter name \
             (or a shorter 'prefix')",
            names::MAX_NAME_LEN
        )));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{one_server, parse_ok};
    use serde_json::json;

    #[test]
    fn overrides_are_read_and_names_follow_the_prefix() {
        let config = one_server(
            r#"{"command": "c", "tools": {
                "read_text_file": {"name": "read", "description": "Read a file.",
                                   "args": {"encoding": "utf-8", "n": 3}},
                "write_file": {"hidden": true},
                "x_list": {"name": "x_ls"},
                "plain": {}
            }}"#,
        );
        assert!(config.failed.is_empty(), "{:?}", config.failed);
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        let spec = &config.servers[0];
        let read = spec.override_of("read_text_file").expect("read override");
        assert_eq!(read.name.as_deref(), Some("read"));
        assert_eq!(read.description.as_deref(), Some("Read a file."));
        assert_eq!(read.args.get("n"), Some(&json!(3)));
        assert!(spec.override_of("write_file").is_some_and(|o| o.hidden));
        assert_eq!(spec.exposed_name("read_text_file"), "x_read");
        assert_eq!(spec.exposed_name("write_file"), "x_write_file");
        // A new name that carries the prefix is exposed once, like an upstream one.
        assert_eq!(spec.exposed_name("x_list"), "x_ls");
        assert_eq!(spec.doubled_name("x_list").as_deref(), Some("x_x_ls"));
    }

    #[test]
    fn unknown_keys_inside_an_override_are_warnings() {
        let config = one_server(r#"{"command": "c", "tools": {"t": {"hiden": true}}}"#);
        assert!(config.failed.is_empty());
        let warning = config.warnings[0].to_string();
        assert!(
            warning.contains(
                "server 'x': tools.t: unknown key 'hiden' ignored; did you mean 'hidden'?"
            ),
            "{warning}"
        );
    }

    #[test]
    fn a_bad_override_fails_its_server() {
        let long = "n".repeat(63);
        // (tools value, key named in the error, words the message must contain)
        let cases = [
            (
                json!([]),
                "tools",
                "expected an object of upstream tool names",
            ),
            (
                json!({"t": true}),
                "tools.t",
                "expected an object with 'name'",
            ),
            (
                json!({"t": {"name": 3}}),
                "tools.t.name",
                "expected a string",
            ),
            (
                json!({"t": {"name": "a b"}}),
                "tools.t.name",
                "'a b' is not a valid tool name",
            ),
            (
                json!({"t": {"name": ""}}),
                "tools.t.name",
                "not a valid tool name",
            ),
            (
                json!({"t": {"name": long}}),
                "tools.t.name",
                "longer than 64 characters",
            ),
            (
                json!({"t": {"description": " "}}),
                "tools.t.description",
                "must not be empty",
            ),
            (
                json!({"t": {"hidden": "yes"}}),
                "tools.t.hidden",
                "expected true or false",
            ),
            (
                json!({"t": {"args": ["a"]}}),
                "tools.t.args",
                "an object of parameter names",
            ),
            (
                json!({"t": {"args": {"": 1}}}),
                "tools.t.args",
                "must not be empty",
            ),
        ];
        for (tools, key, words) in cases {
            let text = json!({"mcpServers": {
                "bad": {"command": "c", "tools": tools},
                "good": {"command": "ok"}
            }})
            .to_string();
            let config = parse_ok(&text);
            let ids: Vec<&str> = config.servers.iter().map(|s| s.id.as_str()).collect();
            assert_eq!(ids, ["good"], "{tools}");
            let err = &config.failed[0];
            assert_eq!(err.key, key, "{tools}: {err}");
            assert!(err.message.contains(words), "{tools}: {err}");
        }
    }

    #[test]
    fn overrides_leave_the_launch_hash_alone() {
        let plain = one_server(r#"{"command": "c"}"#);
        let overridden =
            one_server(r#"{"command": "c", "tools": {"t": {"name": "u", "args": {"a": 1}}}}"#);
        assert_eq!(plain.servers[0].hash, overridden.servers[0].hash);
        assert_ne!(plain.servers[0], overridden.servers[0]);
    }
}
