//! `${VAR}` expansion in config values: `${VAR}`, `${env:VAR}` (VS Code's spelling) and
//! `${VAR:-default}`; nothing else is special.
//!
//! A server's config keeps the `${VAR}` references whose variable was unset or empty (a
//! `${VAR:-default}` that fell back); every failure of that server (crash, exit at start, start
//! timeout) ends with a note naming them and the env file. An unset `${VAR}` without a default,
//! which fails the entry, names the env file too.

use std::collections::BTreeMap;
use std::path::Path;

use super::envfile::is_var_name;

/// Where variables come from while a config is expanded.
pub(super) struct Env<'a> {
    /// `${VAR}` lookup: the env file, then the process environment.
    pub(super) lookup: &'a dyn Fn(&str) -> Option<String>,
    /// The env file's variables, added to each stdio child's environment.
    pub(super) overlay: &'a BTreeMap<String, String>,
    /// The env file, for messages.
    pub(super) file: Option<&'a Path>,
}

/// Why `${...}` expansion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ExpandError {
    #[error("environment variable {0} is not set; set it or remove the reference")]
    Unset(String),
    #[error("'${{' without a closing '}}'")]
    Unterminated,
    #[error(
        "'${{{0}}}' is not a supported reference; use ${{VAR}}, ${{VAR:-default}} or ${{env:VAR}}"
    )]
    Unsupported(String),
}

/// Expands `${VAR}`, `${env:VAR}` and `${VAR:-default}` (default when unset or empty; the
/// default is literal text). Anything else is copied as written. Each reference whose variable
/// is unset or empty (so its default, or nothing, was used) is added to `missing` as (name,
/// whether it is set but empty).
pub(super) fn expand_vars(
    raw: &str,
    env: &dyn Fn(&str) -> Option<String>,
    missing: &mut Vec<(String, bool)>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(ExpandError::Unterminated)?;
        let reference = &after[..end];
        let (name, default) = match reference.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (reference, None),
        };
        let name = name.strip_prefix("env:").unwrap_or(name);
        if !is_var_name(name) {
            return Err(ExpandError::Unsupported(reference.to_owned()));
        }
        match (env(name), default) {
            (Some(value), default) if value.is_empty() => {
                missing.push((name.to_owned(), true));
                out.push_str(default.unwrap_or_default());
            }
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => {
                missing.push((name.to_owned(), false));
                out.push_str(default);
            }
            (None, None) => return Err(ExpandError::Unset(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::env_of;

    #[test]
    fn variable_expansion() {
        use ExpandError::{Unset, Unsupported, Unterminated};
        let env = env_of(&[("A", "1"), ("EMPTY", ""), ("_B2", "b")]);
        #[rustfmt::skip]
        let cases: &[(&str, Result<&str, ExpandError>)] = &[
            ("plain", Ok("plain")),
            ("", Ok("")),
            ("${A}", Ok("1")),
            ("x${A}y${_B2}z", Ok("x1ybz")),
            ("é${A}é", Ok("é1é")),
            ("$A and $", Ok("$A and $")),
            ("${env:A}", Ok("1")),
            ("${EMPTY}", Ok("")),
            ("${MISSING:-fallback}", Ok("fallback")),
            ("${EMPTY:-fallback}", Ok("fallback")),
            ("${A:-fallback}", Ok("1")),
            ("${MISSING:-}", Ok("")),
            ("${MISSING:-a:-b $x}", Ok("a:-b $x")),
            ("${env:MISSING:-d}", Ok("d")),
            ("${MISSING}", Err(Unset("MISSING".into()))),
            ("ok ${A} ${env:MISSING}", Err(Unset("MISSING".into()))),
            ("${A", Err(Unterminated)),
            ("${}", Err(Unsupported(String::new()))),
            ("${1A}", Err(Unsupported("1A".into()))),
            ("${input:pat}", Err(Unsupported("input:pat".into()))),
            ("${workspace Folder}", Err(Unsupported("workspace Folder".into()))),
        ];
        for (input, expected) in cases {
            let actual = expand_vars(input, &env, &mut Vec::new());
            assert_eq!(actual.as_deref(), expected.as_deref(), "{input:?}");
        }
    }
}
