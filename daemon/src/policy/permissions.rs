//! The one place that reads `permissions.yml` and decides a tool's [`Permission`].
//!
//! A pure module: [`Permissions::parse`] takes the file's text and the environment
//! ([`PermissionEnv`]) and returns values; only [`Permissions::load`] touches the file system.
//! The catalog asks [`Permissions::decide`] once per tool per snapshot and keeps the answers in
//! its visibility table.
//!
//! The format is EVOKORE-MCP's, so existing files keep working; evo adds glob patterns
//! (docs/policy.md, "Permissions", is the contract):
//!
//! ```yaml
//! active_role: developer            # EVO_ROLE overrides
//! roles:
//!   developer: { default_permission: allow, overrides: { fs_write_file: require_approval } }
//!   readonly:  { default_permission: deny,  overrides: { "fs_read_*": allow } }
//! rules:
//!   github_delete_repo: deny
//! ```
//!
//! - Resolution: the active role's `overrides`, then `rules`, then the role's
//!   `default_permission` (allow when unset, deny when unset and `EVO_DEFAULT_DENY`). With no
//!   role: `rules`, then allow (deny with `EVO_DEFAULT_DENY`). A missing file allows everything
//!   (still deny with `EVO_DEFAULT_DENY`).
//! - Patterns are exposed tool names, optionally with `*` (any run, possibly empty) and `?`
//!   (one character). Within one map the most specific pattern wins: an exact name beats any
//!   glob; among globs, more literal characters win; a tie goes to the one written first.
//! - Annotation keys `@destructive`, `@read_only`, `@idempotent` and `@open_world` match tools
//!   by what their annotations claim ([`Hints`]), below exact names and globs in specificity;
//!   among them the first written wins. Annotations are the server's own, untrusted word.
//! - Permissions are `allow`, `deny` or `require_approval`, in any letter case.
//! - Fatal ([`PermissionsError`]): unreadable file, invalid YAML (with line and column), an
//!   invalid pattern, an unknown permission, or an active role (`active_role` or `EVO_ROLE`) that
//!   `roles` does not define. On reload the caller keeps the running permissions in force.
//! - Unknown keys (top level or inside a role) are reported in [`Permissions::warnings`], never
//!   fatal. A role's `description` (EVOKORE-MCP has one) is accepted and unused. Patterns naming
//!   tools that do not exist are fine: they apply when such tools appear.
//!
//! A read-only tool is never destructive and always idempotent (the MCP hints mean something only
//! for tools that are not read-only). A hint of the wrong type (`"yes"`) is dropped with a warning
//! before rmcp reads the list (stdio children), so the MCP default applies. An unknown `@key` is a
//! file error naming the four.
//!
//! A permissions file that cannot be loaded when evod starts denies every tool (fail closed), with
//! the error in the log, `evoctl status` and each refusal; fixing the file applies it.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_saphyr::{MessageFormatter, Spanned, UserMessageFormatter};

/// What may happen when a client calls a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Listed and callable.
    Allow,
    /// Absent from lists, search and `describe_*`; calls are refused naming the rule.
    Deny,
    /// Listed; each call waits for a human (elicitation or `evoctl approve ID`).
    RequireApproval,
}

impl Permission {
    /// The spelling used in `permissions.yml` and in `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Deny => "deny",
            Permission::RequireApproval => "require_approval",
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A permission value that is none of `allow`, `deny`, `require_approval`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission '{0}'; expected allow, deny or require_approval")]
pub struct UnknownPermission(pub String);

impl FromStr for Permission {
    type Err = UnknownPermission;

    /// Parses `allow`, `deny` or `require_approval`, in any letter case.
    fn from_str(text: &str) -> Result<Permission, UnknownPermission> {
        [
            Permission::Allow,
            Permission::Deny,
            Permission::RequireApproval,
        ]
        .into_iter()
        .find(|permission| text.eq_ignore_ascii_case(permission.as_str()))
        .ok_or_else(|| UnknownPermission(text.to_owned()))
    }
}

impl<'de> Deserialize<'de> for Permission {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Permission, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(de::Error::custom)
    }
}

/// A tool's permission and the rule that gave it, for refusals, logs and `evoctl`.
///
/// `source` reads like "rule 'github_*'", "role 'readonly' override 'fs_read_*'",
/// "role 'readonly' default", "default (no permissions file)", "default (no matching rule)" or
/// "EVO_DEFAULT_DENY".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub permission: Permission,
    pub source: String,
    /// The annotation rule that decided it (`@read_only`), if one did: the
    /// server's own claim was relied on.
    pub annotation: Option<Annotation>,
}

/// What a tool's annotations claim about it, with the MCP defaults for
/// absent hints: not read-only, destructive, not idempotent, open world.
/// `destructiveHint` and `idempotentHint` mean something only for a tool
/// that is not read-only: a read-only tool is neither destructive nor
/// anything but idempotent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

impl Default for Hints {
    /// A tool that says nothing about itself.
    fn default() -> Self {
        Hints::of(None, None, None, None)
    }
}

impl Hints {
    /// From the four hints as a tool gives them.
    pub fn of(
        read_only: Option<bool>,
        destructive: Option<bool>,
        idempotent: Option<bool>,
        open_world: Option<bool>,
    ) -> Hints {
        let read_only = read_only.unwrap_or(false);
        Hints {
            read_only,
            destructive: !read_only && destructive.unwrap_or(true),
            idempotent: read_only || idempotent.unwrap_or(false),
            open_world: open_world.unwrap_or(true),
        }
    }

    /// From an rmcp tool's annotations.
    pub fn of_tool(tool: &rmcp::model::Tool) -> Hints {
        match &tool.annotations {
            None => Hints::default(),
            Some(a) => Hints::of(
                a.read_only_hint,
                a.destructive_hint,
                a.idempotent_hint,
                a.open_world_hint,
            ),
        }
    }

    fn claims(self, annotation: Annotation) -> bool {
        match annotation {
            Annotation::Destructive => self.destructive,
            Annotation::ReadOnly => self.read_only,
            Annotation::Idempotent => self.idempotent,
            Annotation::OpenWorld => self.open_world,
        }
    }
}

/// A rule key that matches by annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Annotation {
    Destructive,
    ReadOnly,
    Idempotent,
    OpenWorld,
}

impl Annotation {
    const ALL: [Annotation; 4] = [
        Annotation::Destructive,
        Annotation::ReadOnly,
        Annotation::Idempotent,
        Annotation::OpenWorld,
    ];

    /// Its key in `permissions.yml`.
    pub fn key(self) -> &'static str {
        match self {
            Annotation::Destructive => "@destructive",
            Annotation::ReadOnly => "@read_only",
            Annotation::Idempotent => "@idempotent",
            Annotation::OpenWorld => "@open_world",
        }
    }

    fn parse(key: &str) -> Option<Annotation> {
        Annotation::ALL.into_iter().find(|a| a.key() == key)
    }
}

/// The permission settings that come from the environment rather than the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PermissionEnv {
    /// `EVO_ROLE`: the active role, overriding the file's `active_role`. Empty means unset.
    pub role: Option<String>,
    /// `EVO_DEFAULT_DENY=true|1|yes` (any case): deny what no rule or role decides.
    pub default_deny: bool,
}

impl PermissionEnv {
    /// Reads `EVO_ROLE` and `EVO_DEFAULT_DENY` from the process environment.
    pub fn from_process() -> PermissionEnv {
        PermissionEnv::from_lookup(&|name: &str| std::env::var(name).ok())
    }

    /// Reads `EVO_ROLE` and `EVO_DEFAULT_DENY` through `env` (tests pass a map).
    pub fn from_lookup(env: &dyn Fn(&str) -> Option<String>) -> PermissionEnv {
        let role = env("EVO_ROLE")
            .map(|role| role.trim().to_owned())
            .filter(|role| !role.is_empty());
        let default_deny = env("EVO_DEFAULT_DENY").is_some_and(|value| {
            let value = value.trim();
            ["true", "1", "yes"]
                .iter()
                .any(|yes| value.eq_ignore_ascii_case(yes))
        });
        PermissionEnv { role, default_deny }
    }
}

/// Why a permissions file could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum PermissionsError {
    #[error("cannot read permissions file {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{}: {message}", position(path, *line, *column))]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// `path:line:column`, leaving out what is unknown.
fn position(path: &Path, line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!("{}:{line}:{column}", path.display()),
        (Some(line), None) => format!("{}:{line}", path.display()),
        _ => path.display().to_string(),
    }
}

/// A loaded permissions file together with the environment it was loaded under: everything
/// [`Permissions::decide`] needs. Owned by whoever loads it (the supervisor on start and
/// reload) and handed to the catalog by value.
///
/// `Permissions::default()` is a missing file without `EVO_DEFAULT_DENY`: everything allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    /// False for a missing file; only changes the wording of [`Decision::source`].
    from_file: bool,
    /// The active role after `EVO_ROLE` and `active_role`, if any.
    role: Option<ActiveRole>,
    /// The file's other roles, which an HTTP identity may carry instead
    /// ([`Permissions::with_role`]).
    others: Vec<ActiveRole>,
    rules: PatternMap,
    default_deny: bool,
    warnings: Vec<String>,
    /// Set when evod started with a file it could not load: every tool is
    /// denied, with this reason, until the file is fixed (fail closed).
    unusable: Option<String>,
}

/// The one role whose overrides and default apply.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ActiveRole {
    name: String,
    /// `None` when the role sets no `default_permission`.
    default: Option<Permission>,
    overrides: PatternMap,
}

impl Permissions {
    /// Reads and parses the permissions file.
    ///
    /// A missing file is not an error: it allows everything, or denies everything under
    /// `EVO_DEFAULT_DENY`. An `EVO_ROLE` without a file is ignored with a warning.
    pub fn load(path: &Path, env: &PermissionEnv) -> Result<Permissions, PermissionsError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Permissions::parse(&text, path, env),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let mut permissions = Permissions {
                    default_deny: env.default_deny,
                    ..Permissions::default()
                };
                if let Some(role) = &env.role {
                    permissions.warnings.push(format!(
                        "EVO_ROLE={role} is set but there is no permissions file at {}; \
                         the role is ignored",
                        path.display()
                    ));
                }
                Ok(permissions)
            }
            Err(source) => Err(PermissionsError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses permissions text. `path` only labels errors and warnings.
    pub fn parse(
        text: &str,
        path: &Path,
        env: &PermissionEnv,
    ) -> Result<Permissions, PermissionsError> {
        let document: Document =
            serde_saphyr::from_str(text).map_err(|err| parse_error(path, &err))?;
        let invalid = |message: String| PermissionsError::Invalid {
            path: path.to_owned(),
            message,
        };

        let mut warnings = Vec::new();
        for key in &document.unknown {
            warnings.push(format!(
                "unknown key '{}' at line {} ignored",
                key.value,
                key.referenced.line()
            ));
        }

        let rules = PatternMap::build(&document.rules, "rules").map_err(invalid)?;

        // Every role is checked, active or not, so switching roles cannot surface old errors.
        let mut roles = Vec::with_capacity(document.roles.len());
        for (name, role) in &document.roles {
            let context = format!("role '{}'", name.value);
            for key in &role.unknown {
                warnings.push(format!(
                    "{context}: unknown key '{}' at line {} ignored",
                    key.value,
                    key.referenced.line()
                ));
            }
            let default = match &role.default_permission {
                Some(value) => Some(
                    parse_permission(&format!("{context}: default_permission"), value)
                        .map_err(invalid)?,
                ),
                None => None,
            };
            let overrides = PatternMap::build(&role.overrides, &format!("{context} overrides"))
                .map_err(invalid)?;
            roles.push(ActiveRole {
                name: name.value.clone(),
                default,
                overrides,
            });
        }

        let file_role = document
            .active_role
            .as_ref()
            .filter(|role| !role.value.trim().is_empty());
        let find = |name: &str| roles.iter().position(|role| role.name == name);
        let chosen = match (&env.role, file_role) {
            (Some(env_role), file_role) => {
                let index = find(env_role).ok_or_else(|| {
                    invalid(format!(
                        "EVO_ROLE={env_role} names no role in 'roles' ({})",
                        role_list(&roles)
                    ))
                })?;
                if let Some(file_role) = file_role.filter(|role| find(&role.value).is_none()) {
                    warnings.push(format!(
                        "active_role '{}' at line {} names no role in 'roles'; \
                         EVO_ROLE={env_role} is used instead",
                        file_role.value,
                        file_role.referenced.line()
                    ));
                }
                Some(index)
            }
            (None, Some(file_role)) => Some(find(&file_role.value).ok_or_else(|| {
                invalid(format!(
                    "active_role '{}' at line {} names no role in 'roles' ({})",
                    file_role.value,
                    file_role.referenced.line(),
                    role_list(&roles)
                ))
            })?),
            (None, None) => None,
        };

        let role = chosen.map(|index| roles.remove(index));
        Ok(Permissions {
            from_file: true,
            role,
            others: roles,
            rules,
            default_deny: env.default_deny,
            warnings,
            unusable: None,
        })
    }

    /// What is in force when evod starts with a permissions file it cannot
    /// load: nothing was in force before, and allowing everything would
    /// ignore the file's own denials, so every tool is denied until the file
    /// is fixed (a reload applies it).
    pub fn unusable(error: &str) -> Permissions {
        Permissions {
            from_file: true,
            unusable: Some(format!(
                "permissions file unusable at start: {error}; fix it and every rule applies at once"
            )),
            ..Permissions::default()
        }
    }

    /// The decision for a tool that also answers to a former name (`also`):
    /// the stricter of the two (deny over approval over allow), so a rule
    /// written for either name holds; `tool`'s decides a tie.
    pub fn decide_either(&self, tool: &str, also: Option<&str>, hints: Hints) -> Decision {
        let strictness = |p: Permission| match p {
            Permission::Allow => 0,
            Permission::RequireApproval => 1,
            Permission::Deny => 2,
        };
        let decision = self.decide_with(tool, hints);
        match also.map(|name| self.decide_with(name, hints)) {
            Some(other) if strictness(other.permission) > strictness(decision.permission) => other,
            _ => decision,
        }
    }

    /// Decides the permission of the tool exposed as `tool`, for a tool
    /// that says nothing about itself (see [`Permissions::decide_with`]).
    pub fn decide(&self, tool: &str) -> Decision {
        self.decide_with(tool, Hints::default())
    }

    /// Decides the permission of the tool exposed as `tool` whose
    /// annotations claim `hints`.
    pub fn decide_with(&self, tool: &str, hints: Hints) -> Decision {
        if let Some(reason) = &self.unusable {
            return Decision {
                permission: Permission::Deny,
                source: reason.clone(),
                annotation: None,
            };
        }
        if let Some(role) = &self.role
            && let Some(found) = role.overrides.lookup(tool, hints)
        {
            return Decision {
                permission: found.permission,
                source: format!("role '{}' override '{}'", role.name, found.pattern),
                annotation: found.annotation,
            };
        }
        if let Some(found) = self.rules.lookup(tool, hints) {
            return Decision {
                permission: found.permission,
                source: format!("rule '{}'", found.pattern),
                annotation: found.annotation,
            };
        }
        let (permission, source) = self.default_decision();
        Decision {
            permission,
            source,
            annotation: None,
        }
    }

    /// What no pattern decided: the role's default, or the file's.
    fn default_decision(&self) -> (Permission, String) {
        match &self.role {
            Some(ActiveRole {
                name,
                default: Some(permission),
                ..
            }) => (*permission, format!("role '{name}' default")),
            Some(ActiveRole { name, .. }) if self.default_deny => (
                Permission::Deny,
                format!("role '{name}' has no default_permission; EVO_DEFAULT_DENY"),
            ),
            Some(ActiveRole { name, .. }) => (
                Permission::Allow,
                format!("role '{name}' default (unset: allow)"),
            ),
            None if self.default_deny => (Permission::Deny, "EVO_DEFAULT_DENY".to_owned()),
            None if self.from_file => (Permission::Allow, "default (no matching rule)".to_owned()),
            None => (
                Permission::Allow,
                "default (no permissions file)".to_owned(),
            ),
        }
    }

    /// The role in force (after `EVO_ROLE`), if any.
    pub fn active_role(&self) -> Option<&str> {
        self.role.as_ref().map(|role| role.name.as_str())
    }

    /// The roles the file defines besides the one in force, in file order.
    pub fn other_roles(&self) -> impl Iterator<Item = &str> {
        self.others.iter().map(|role| role.name.as_str())
    }

    /// Whether the file defines `role` (the one in force included).
    pub fn defines_role(&self, role: &str) -> bool {
        self.active_role() == Some(role) || self.other_roles().any(|r| r == role)
    }

    /// These permissions with `role` in force instead of `active_role`: what
    /// an HTTP identity carrying that role is decided by. `None` when the
    /// file defines no such role.
    pub fn with_role(&self, role: &str) -> Option<Permissions> {
        if self.active_role() == Some(role) {
            return Some(self.clone());
        }
        let chosen = self.others.iter().find(|r| r.name == role)?.clone();
        Some(Permissions {
            role: Some(chosen),
            others: Vec::new(),
            ..self.clone()
        })
    }

    /// Things worth telling the user that did not stop the file from loading.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// "defined: a, b" or "the file defines none", for unknown-role errors.
fn role_list(roles: &[ActiveRole]) -> String {
    if roles.is_empty() {
        "the file defines none".to_owned()
    } else {
        let names: Vec<&str> = roles.iter().map(|role| role.name.as_str()).collect();
        format!("defined: {}", names.join(", "))
    }
}

fn parse_permission(context: &str, value: &Spanned<String>) -> Result<Permission, String> {
    value
        .value
        .trim()
        .parse()
        .map_err(|err: UnknownPermission| {
            format!("{context} at line {}: {err}", value.referenced.line())
        })
}

fn parse_error(path: &Path, err: &serde_saphyr::Error) -> PermissionsError {
    let location = err.location();
    let to_usize = |n: u64| usize::try_from(n).ok();
    PermissionsError::Parse {
        path: path.to_owned(),
        line: location.and_then(|at| to_usize(at.line())),
        column: location.and_then(|at| to_usize(at.column())),
        // The user-facing wording, without serde-saphyr's own location suffix and snippet.
        message: one_line(&UserMessageFormatter.format_message(err.without_snippet())),
    }
}

/// `text` with control characters escaped, so a message stays on one line of a log.
fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            line.extend(c.escape_debug());
        } else {
            line.push(c);
        }
    }
    line
}

/// One map of patterns to permissions (`rules`, or a role's `overrides`), ready for lookups:
/// exact names hashed, globs in the order they are tried, then annotation keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PatternMap {
    exact: HashMap<String, Permission>,
    /// Most literal characters first; ties keep file order (the sort is stable).
    globs: Vec<Glob>,
    /// `@read_only` and the like, in file order.
    annotations: Vec<(Annotation, Permission)>,
}

/// The pattern that decided, and how.
struct Found<'a> {
    pattern: &'a str,
    permission: Permission,
    annotation: Option<Annotation>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Glob {
    pattern: String,
    literals: usize,
    permission: Permission,
}

impl PatternMap {
    /// Validates and indexes `entries`; `context` ("rules", "role 'x' overrides") starts errors.
    fn build(
        entries: &[(Spanned<String>, Spanned<String>)],
        context: &str,
    ) -> Result<PatternMap, String> {
        let mut map = PatternMap::default();
        for (pattern, value) in entries {
            let line = pattern.referenced.line();
            let pattern = pattern.value.as_str();
            if let Some(key) = pattern.strip_prefix('@') {
                let Some(annotation) = Annotation::parse(pattern) else {
                    let known: Vec<&str> = Annotation::ALL.iter().map(|a| a.key()).collect();
                    return Err(format!(
                        "{context}: unknown annotation key '@{key}' at line {line}; the annotation keys are {}",
                        known.join(", ")
                    ));
                };
                let permission = parse_permission(&format!("{context}: '{pattern}'"), value)?;
                if !map.annotations.iter().any(|(a, _)| *a == annotation) {
                    map.annotations.push((annotation, permission));
                }
                continue;
            }
            if let Err(problem) = check_pattern(pattern) {
                return Err(format!(
                    "{context}: invalid pattern '{pattern}' at line {line}: {problem}"
                ));
            }
            let permission = parse_permission(&format!("{context}: '{pattern}'"), value)?;
            if pattern.contains(['*', '?']) {
                map.globs.push(Glob {
                    pattern: pattern.to_owned(),
                    literals: pattern.chars().filter(|c| !matches!(c, '*' | '?')).count(),
                    permission,
                });
            } else if let Entry::Vacant(slot) = map.exact.entry(pattern.to_owned()) {
                // YAML rejects duplicate keys already; first wins should that ever change.
                slot.insert(permission);
            }
        }
        map.globs.sort_by_key(|glob| Reverse(glob.literals));
        Ok(map)
    }

    /// The winning pattern for `tool` (whose annotations claim `hints`).
    fn lookup<'a>(&'a self, tool: &'a str, hints: Hints) -> Option<Found<'a>> {
        if let Some(&permission) = self.exact.get(tool) {
            return Some(Found {
                pattern: tool,
                permission,
                annotation: None,
            });
        }
        if let Some(glob) = self
            .globs
            .iter()
            .find(|glob| glob_matches(&glob.pattern, tool))
        {
            return Some(Found {
                pattern: &glob.pattern,
                permission: glob.permission,
                annotation: None,
            });
        }
        self.annotations
            .iter()
            .find(|(a, _)| hints.claims(*a))
            .map(|&(annotation, permission)| Found {
                pattern: annotation.key(),
                permission,
                annotation: Some(annotation),
            })
    }
}

/// Patterns use the characters of exposed names plus the two wildcards.
fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("a pattern cannot be empty".to_owned());
    }
    match pattern
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '?')))
    {
        Some(bad) => Err(format!(
            "{bad:?} is not allowed; use letters, digits, '_', '-', and the wildcards '*' and '?'"
        )),
        None => Ok(()),
    }
}

/// Whether `name` matches the glob `pattern` (`*`: any run, possibly empty; `?`: one char).
///
/// Greedy with one backtrack point, the last `*` seen: linear for the usual patterns,
/// O(pattern × name) at worst. Patterns are ASCII (see [`check_pattern`]); `name` may not be,
/// so `?` and `*` step over whole UTF-8 characters.
pub(crate) fn glob_matches(pattern: &str, name: &str) -> bool {
    let (pattern, name) = (pattern.as_bytes(), name.as_bytes());
    let (mut p, mut n) = (0, 0);
    // After the last `*`: the pattern index past it, and where in `name` its run ends so far.
    let mut backtrack: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                p += 1;
                backtrack = Some((p, n));
                continue;
            }
            Some(b'?') => {
                p += 1;
                n += utf8_len(name[n]);
                continue;
            }
            Some(&literal) if literal == name[n] => {
                p += 1;
                n += 1;
                continue;
            }
            _ => {}
        }
        // Mismatch: let the last `*` swallow one more character, or fail.
        let Some((star_p, star_n)) = backtrack else {
            return false;
        };
        let star_n = star_n + utf8_len(name[star_n]);
        backtrack = Some((star_p, star_n));
        p = star_p;
        n = star_n;
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// Length of the UTF-8 character whose first byte is `first`.
fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// The file as written, before validation. Keys keep their positions for error messages and
/// maps keep file order (ties between equally specific globs go to the first).
#[derive(Default)]
struct Document {
    active_role: Option<Spanned<String>>,
    roles: Vec<(Spanned<String>, RoleDocument)>,
    rules: Vec<(Spanned<String>, Spanned<String>)>,
    unknown: Vec<Spanned<String>>,
}

/// One entry under `roles`, before validation.
#[derive(Default)]
struct RoleDocument {
    default_permission: Option<Spanned<String>>,
    overrides: Vec<(Spanned<String>, Spanned<String>)>,
    unknown: Vec<Spanned<String>>,
}

/// A YAML mapping read in file order; `null` reads as empty.
struct Entries<V>(Vec<(Spanned<String>, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<V>(std::marker::PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for EntriesVisitor<V> {
            type Value = Entries<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Entries<V>, E> {
                Ok(Entries(Vec::new()))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<V>, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key()? {
                    entries.push((key, map.next_value()?));
                }
                Ok(Entries(entries))
            }
        }

        deserializer.deserialize_map(EntriesVisitor(std::marker::PhantomData))
    }
}

/// Reads an optional mapping; YAML `null` (e.g. `rules:` with nothing under it) is empty.
fn next_entries<'de, A: MapAccess<'de>, V: Deserialize<'de>>(
    map: &mut A,
) -> Result<Vec<(Spanned<String>, V)>, A::Error> {
    Ok(map
        .next_value::<Option<Entries<V>>>()?
        .map_or_else(Vec::new, |entries| entries.0))
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DocumentVisitor;

        impl<'de> Visitor<'de> for DocumentVisitor {
            type Value = Document;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping with active_role, roles and rules")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Document, E> {
                Ok(Document::default())
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
                let mut document = Document::default();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    match key.value.as_str() {
                        "active_role" => document.active_role = map.next_value()?,
                        "roles" => document.roles = next_entries(&mut map)?,
                        "rules" => document.rules = next_entries(&mut map)?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            document.unknown.push(key);
                        }
                    }
                }
                Ok(document)
            }
        }

        deserializer.deserialize_map(DocumentVisitor)
    }
}

impl<'de> Deserialize<'de> for RoleDocument {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RoleVisitor;

        impl<'de> Visitor<'de> for RoleVisitor {
            type Value = RoleDocument;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a role: a mapping with default_permission and overrides")
            }

            fn visit_unit<E: de::Error>(self) -> Result<RoleDocument, E> {
                Ok(RoleDocument::default())
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RoleDocument, A::Error> {
                let mut role = RoleDocument::default();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    match key.value.as_str() {
                        "default_permission" => role.default_permission = map.next_value()?,
                        "overrides" => role.overrides = next_entries(&mut map)?,
                        "description" => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            role.unknown.push(key);
                        }
                    }
                }
                Ok(role)
            }
        }

        deserializer.deserialize_map(RoleVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "/etc/evo/permissions.yml";

    fn env(role: Option<&str>, default_deny: bool) -> PermissionEnv {
        PermissionEnv {
            role: role.map(str::to_owned),
            default_deny,
        }
    }

    #[test]
    fn a_former_name_never_loosens_a_rule() {
        let p = parse(
            "rules:\n  git_git_push: deny\n  git_git_log: require_approval\n  git_status: require_approval\n",
            &PermissionEnv::default(),
        )
        .unwrap();
        let either = |tool, also| {
            p.decide_either(tool, Some(also), Hints::default())
                .permission
        };
        assert_eq!(either("git_push", "git_git_push"), Permission::Deny);
        assert_eq!(
            either("git_log", "git_git_log"),
            Permission::RequireApproval
        );
        // The current name's stricter rule stands too.
        assert_eq!(
            either("git_status", "git_git_status"),
            Permission::RequireApproval
        );
        assert_eq!(either("git_diff", "git_git_diff"), Permission::Allow);
        assert_eq!(
            p.decide_either("git_push", None, Hints::default())
                .permission,
            Permission::Allow
        );
    }

    fn parse(text: &str, env: &PermissionEnv) -> Result<Permissions, PermissionsError> {
        Permissions::parse(text, Path::new(PATH), env)
    }

    fn decision(permission: Permission, source: &str) -> Decision {
        Decision {
            permission,
            source: source.to_owned(),
            annotation: None,
        }
    }

    #[test]
    fn absent_hints_take_the_mcp_defaults() {
        let silent = Hints::default();
        assert!(!silent.read_only && silent.destructive && !silent.idempotent && silent.open_world);
        // A read-only tool is neither destructive nor anything but idempotent,
        // whatever its other hints say.
        let reader = Hints::of(Some(true), Some(true), Some(false), Some(false));
        assert!(reader.read_only && !reader.destructive && reader.idempotent && !reader.open_world);
        let careful = Hints::of(Some(false), Some(false), Some(true), None);
        assert!(!careful.destructive && careful.idempotent && careful.open_world);
    }

    #[test]
    fn annotation_rules_rank_below_names_and_globs() {
        let p = parse(
            "roles:\n  agent:\n    default_permission: deny\n    overrides:\n      \"@read_only\": allow\n      fs_read_secret: deny\nactive_role: agent\nrules:\n  \"@destructive\": require_approval\n  \"@open_world\": deny\n  \"fs_*\": allow\n",
            &PermissionEnv::default(),
        )
        .unwrap();
        let reader = Hints::of(Some(true), None, None, Some(false));
        let writer = Hints::of(Some(false), Some(true), None, Some(false));
        let silent = Hints::default();
        let d = p.decide_with("web_fetch", reader);
        assert_eq!(
            (d.permission, d.source.as_str(), d.annotation),
            (
                Allow,
                "role 'agent' override '@read_only'",
                Some(Annotation::ReadOnly)
            )
        );
        // An exact name beats the annotation, in the same map.
        assert_eq!(p.decide_with("fs_read_secret", reader).permission, Deny);
        // The role's overrides come first, then rules: a glob beats an
        // annotation there too.
        let d = p.decide_with("fs_write", writer);
        assert_eq!((d.permission, d.annotation), (Allow, None), "{d:?}");
        let d = p.decide_with("db_drop", writer);
        assert_eq!(
            (d.permission, d.source.as_str()),
            (RequireApproval, "rule '@destructive'")
        );
        // A tool that says nothing is treated as destructive; the first
        // matching annotation key in file order decides.
        assert_eq!(p.decide_with("x_run", silent).permission, RequireApproval);
        let open = Hints::of(Some(false), Some(false), None, Some(true));
        assert_eq!(p.decide_with("x_search", open).permission, Deny);
    }

    #[test]
    fn unknown_annotation_keys_are_refused_naming_the_known_ones() {
        let err = parse(
            "rules:\n  \"@dangerous\": deny\n",
            &PermissionEnv::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("unknown annotation key '@dangerous' at line 2")
                && err.contains("@destructive, @read_only, @idempotent, @open_world"),
            "{err}"
        );
    }

    use Permission::{Allow, Deny, RequireApproval};

    const EXAMPLE: &str = "\
active_role: developer            # EVO_ROLE overrides
roles:
  developer: { default_permission: allow, overrides: { fs_write_file: require_approval } }
  readonly:  { default_permission: deny,  overrides: { \"fs_read_*\": allow } }
rules:
  github_delete_repo: deny
  \"github_*\": require_approval
";

    #[test]
    fn resolution_paths() {
        // (text, EVO_ROLE, EVO_DEFAULT_DENY, tool, permission, source)
        #[rustfmt::skip]
        let cases = [
            // Role override, exact.
            (EXAMPLE, None, false, "fs_write_file", RequireApproval, "role 'developer' override 'fs_write_file'"),
            // Role override, glob (EVO_ROLE overrides active_role).
            (EXAMPLE, Some("readonly"), false, "fs_read_file", Allow, "role 'readonly' override 'fs_read_*'"),
            // Rules after overrides, exact and glob.
            (EXAMPLE, None, false, "github_delete_repo", Deny, "rule 'github_delete_repo'"),
            (EXAMPLE, None, false, "github_create_issue", RequireApproval, "rule 'github_*'"),
            (EXAMPLE, Some("readonly"), false, "github_delete_repo", Deny, "rule 'github_delete_repo'"),
            // Role default.
            (EXAMPLE, None, false, "slack_post", Allow, "role 'developer' default"),
            (EXAMPLE, Some("readonly"), false, "fs_write_file", Deny, "role 'readonly' default"),
            // A role's default wins over EVO_DEFAULT_DENY.
            (EXAMPLE, None, true, "slack_post", Allow, "role 'developer' default"),
            // No role: rules, then allow or EVO_DEFAULT_DENY.
            ("rules: { \"fs_*\": deny }", None, false, "fs_write_file", Deny, "rule 'fs_*'"),
            ("rules: { \"fs_*\": deny }", None, false, "slack_post", Allow, "default (no matching rule)"),
            ("rules: { \"fs_*\": deny }", None, true, "slack_post", Deny, "EVO_DEFAULT_DENY"),
            ("rules: { \"fs_*\": allow }", None, true, "fs_read", Allow, "rule 'fs_*'"),
            // A role without default_permission.
            ("active_role: r\nroles: { r: {} }", None, false, "x", Allow, "role 'r' default (unset: allow)"),
            ("active_role: r\nroles: { r: {} }", None, true, "x", Deny, "role 'r' has no default_permission; EVO_DEFAULT_DENY"),
            // Roles defined but none active: rules only.
            ("roles: { r: { default_permission: deny } }", None, false, "x", Allow, "default (no matching rule)"),
            // Empty and comment-only files.
            ("", None, false, "x", Allow, "default (no matching rule)"),
            ("# nothing yet\n", None, true, "x", Deny, "EVO_DEFAULT_DENY"),
            ("rules:\nactive_role:\n", None, false, "x", Allow, "default (no matching rule)"),
            // Permission spelling is case-insensitive.
            ("rules: { a: DENY, b: Require_Approval, c: \"Allow\" }", None, false, "b", RequireApproval, "rule 'b'"),
        ];
        for (text, role, default_deny, tool, permission, source) in cases {
            let permissions = parse(text, &env(role, default_deny))
                .unwrap_or_else(|err| panic!("{text:?}: {err}"));
            assert_eq!(
                permissions.decide(tool),
                decision(permission, source),
                "{text:?} role={role:?} deny={default_deny} tool={tool}"
            );
        }
    }

    #[test]
    fn active_role_follows_evo_role() {
        #[rustfmt::skip]
        let cases = [
            (None, Some("developer")),
            (Some("readonly"), Some("readonly")),
        ];
        for (role, expected) in cases {
            let permissions = parse(EXAMPLE, &env(role, false)).unwrap();
            assert_eq!(permissions.active_role(), expected);
        }
        assert_eq!(
            parse("rules: {}", &env(None, false)).unwrap().active_role(),
            None
        );
    }

    #[test]
    fn missing_file() {
        let path = Path::new("/nonexistent/evo/permissions.yml");
        #[rustfmt::skip]
        let cases = [
            (env(None, false), decision(Allow, "default (no permissions file)"), 0),
            (env(None, true), decision(Deny, "EVO_DEFAULT_DENY"), 0),
            (env(Some("readonly"), false), decision(Allow, "default (no permissions file)"), 1),
        ];
        for (env, expected, warnings) in cases {
            let permissions = Permissions::load(path, &env).unwrap();
            assert_eq!(permissions.decide("anything"), expected, "{env:?}");
            assert_eq!(permissions.warnings().len(), warnings, "{env:?}");
            assert_eq!(permissions.active_role(), None);
        }
        assert_eq!(
            Permissions::default().decide("x"),
            decision(Allow, "default (no permissions file)")
        );
    }

    #[test]
    fn load_reads_the_file() {
        let dir = std::env::temp_dir().join(format!("evo-permissions-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("permissions.yml");
        std::fs::write(&path, EXAMPLE).unwrap();
        let loaded = Permissions::load(&path, &env(None, false));
        let unreadable = Permissions::load(&dir, &env(None, false)); // a directory
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            loaded.unwrap().decide("github_delete_repo").permission,
            Deny
        );
        let err = unreadable.unwrap_err();
        assert!(matches!(err, PermissionsError::Read { .. }), "{err}");
    }

    #[test]
    fn most_specific_pattern_wins() {
        let text = "\
rules:
  \"*\": deny
  \"fs_*\": require_approval
  \"fs_read_*\": allow
  fs_read_secrets: deny
  \"*_file\": deny
  \"fs_?rite_*\": deny
  \"fs_w*\": allow
  \"a*\": allow
  \"*b\": deny
";
        // (tool, winning permission, winning pattern)
        #[rustfmt::skip]
        let cases = [
            ("fs_read_file", Allow, "fs_read_*"),    // 8 literals beat "fs_*" (3) and "*_file" (5)
            ("fs_read_secrets", Deny, "fs_read_secrets"), // exact beats every glob
            ("fs_write_file", Deny, "fs_?rite_*"), // 8 literals beat "*_file" and "fs_w*" (4)
            ("fs_list", RequireApproval, "fs_*"),
            ("slack_file", Deny, "*_file"),
            ("ab", Allow, "a*"),                    // tie on 1 literal: first in file wins
            ("zb", Deny, "*b"),
            ("other", Deny, "*"),
            ("", Deny, "*"),
        ];
        let permissions = parse(text, &env(None, false)).unwrap();
        for (tool, permission, pattern) in cases {
            assert_eq!(
                permissions.decide(tool),
                decision(permission, &format!("rule '{pattern}'")),
                "{tool}"
            );
        }
    }

    #[test]
    fn glob_matching() {
        #[rustfmt::skip]
        let cases = [
            ("*", "", true),
            ("*", "anything", true),
            ("a*", "a", true),
            ("a*", "ba", false),
            ("*a", "ba", true),
            ("*a", "ab", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a?c", "abbc", false),
            ("a*b*c", "a_b_c", true),
            ("a*b*c", "abcbc", true),
            ("a*b*c", "acb", false),
            ("*_*_*", "x_y", false),
            ("*_*_*", "x_y_", true),
            ("fs_*_file", "fs_read_file", true),
            ("fs_*_file", "fs_file", false),
            ("??", "é", false),
            ("?", "é", true),
            ("a*?", "aé", true),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("**a**", "bab", true),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(glob_matches(pattern, name), expected, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn invalid_yaml_has_line_and_column() {
        #[rustfmt::skip]
        let cases = [
            // (text, line, column, message fragment)
            ("rules:\n  a: deny\n  a: allow\n", 3, 3, "duplicate"),
            ("rules:\n  a: deny\n    b: allow\n", 3, 6, "mapping values are not allowed"),
            ("rules:\n  a: [deny]\n", 2, 6, ""),
            ("rules:\n  a:\n", 2, 4, "null"),
            ("- rules\n", 1, 1, ""),
        ];
        for (text, line, column, fragment) in cases {
            match parse(text, &env(None, false)) {
                Err(
                    err @ PermissionsError::Parse {
                        line: Some(l),
                        column: Some(c),
                        ..
                    },
                ) => {
                    assert_eq!((l, c), (line, column), "{text:?}: {err}");
                    let shown = err.to_string();
                    assert!(
                        shown.starts_with(&format!("{PATH}:{line}:{column}: ")),
                        "{shown}"
                    );
                    assert!(shown.contains(fragment), "{shown}");
                    assert!(!shown.contains('\n'), "{shown}");
                }
                other => panic!("{text:?}: expected a parse error with a position, got {other:?}"),
            }
        }
    }

    #[test]
    fn invalid_contents_are_named() {
        #[rustfmt::skip]
        let cases = [
            ("rules:\n  a: maybe\n", None, "rules: 'a' at line 2: unknown permission 'maybe'"),
            ("rules:\n  a: true\n", None, "rules: 'a' at line 2: unknown permission 'true'"),
            ("rules:\n  a: require-approval\n", None, "unknown permission 'require-approval'"),
            (
                "roles:\n  dev:\n    default_permission: approve\n",
                None,
                "role 'dev': default_permission at line 3: unknown permission 'approve'",
            ),
            (
                "roles:\n  dev:\n    overrides: { x: nope }\n",
                None,
                "role 'dev' overrides: 'x' at line 3: unknown permission 'nope'",
            ),
            ("rules:\n  \"fs/*\": deny\n", None, "rules: invalid pattern 'fs/*' at line 2: '/' is not allowed"),
            ("rules:\n  \"\": deny\n", None, "rules: invalid pattern '' at line 2: a pattern cannot be empty"),
            ("rules:\n  \"fs *\": deny\n", None, "invalid pattern 'fs *'"),
            (
                "roles:\n  ro:\n    overrides:\n      \"fs.read\": allow\n",
                None,
                "role 'ro' overrides: invalid pattern 'fs.read' at line 4",
            ),
            (
                "active_role: dev\nroles:\n  readonly: {}\n  admin: {}\n",
                None,
                "active_role 'dev' at line 1 names no role in 'roles' (defined: readonly, admin)",
            ),
            ("active_role: dev\n", None, "active_role 'dev' at line 1 names no role in 'roles' (the file defines none)"),
            (EXAMPLE, Some("admin"), "EVO_ROLE=admin names no role in 'roles' (defined: developer, readonly)"),
        ];
        for (text, role, expected) in cases {
            match parse(text, &env(role, false)) {
                Err(err @ PermissionsError::Invalid { .. }) => {
                    let shown = err.to_string();
                    assert!(shown.starts_with(&format!("{PATH}: ")), "{shown}");
                    assert!(shown.contains(expected), "{shown}\n  lacks {expected}");
                }
                other => panic!("{text:?}: expected an Invalid error, got {other:?}"),
            }
        }
    }

    #[test]
    fn unknown_keys_warn() {
        let text = "\
version: 2
active_role: dev
roles:
  dev:
    description: Standard development access
    default_permission: allow
    inherits: readonly
rules: {}
";
        let permissions = parse(text, &env(None, false)).unwrap();
        assert_eq!(
            permissions.warnings(),
            [
                "unknown key 'version' at line 1 ignored",
                "role 'dev': unknown key 'inherits' at line 7 ignored",
            ]
        );
        // A stale active_role overridden by EVO_ROLE is only a warning.
        let permissions = parse(
            "active_role: gone\nroles: { dev: {} }",
            &env(Some("dev"), false),
        )
        .unwrap();
        assert_eq!(permissions.active_role(), Some("dev"));
        assert_eq!(
            permissions.warnings().len(),
            1,
            "{:?}",
            permissions.warnings()
        );
    }

    #[test]
    fn env_flags() {
        #[rustfmt::skip]
        let cases: &[(&[(&str, &str)], PermissionEnv)] = &[
            (&[], env(None, false)),
            (&[("EVO_ROLE", "readonly"), ("EVO_DEFAULT_DENY", "true")], env(Some("readonly"), true)),
            (&[("EVO_ROLE", "  "), ("EVO_DEFAULT_DENY", "YES")], env(None, true)),
            (&[("EVO_DEFAULT_DENY", "1")], env(None, true)),
            (&[("EVO_DEFAULT_DENY", "0")], env(None, false)),
            (&[("EVO_DEFAULT_DENY", "false")], env(None, false)),
        ];
        for (vars, expected) in cases {
            let lookup = |name: &str| {
                vars.iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            };
            assert_eq!(&PermissionEnv::from_lookup(&lookup), expected, "{vars:?}");
        }
    }

    #[test]
    fn permission_spellings() {
        #[rustfmt::skip]
        let cases = [
            ("allow", Ok(Allow)),
            ("DENY", Ok(Deny)),
            ("Require_Approval", Ok(RequireApproval)),
            ("require-approval", Err(())),
            ("approve", Err(())),
            ("", Err(())),
        ];
        for (text, expected) in cases {
            assert_eq!(
                text.parse::<Permission>().map_err(|_| ()),
                expected,
                "{text}"
            );
        }
        assert_eq!(
            serde_json::to_string(&RequireApproval).unwrap(),
            "\"require_approval\""
        );
        assert_eq!(RequireApproval.to_string(), "require_approval");
        let parsed: Permission = serde_saphyr::from_str("Deny").unwrap();
        assert_eq!(parsed, Deny);
    }

    /// A file in the style of EVOKORE-MCP's own, plus evo's globs.
    const EVOKORE_STYLE: &str = r#"# EVOKORE-MCP Permissions Configuration
#   "allow": the AI can execute this tool without confirmation.
#   "require_approval": the AI must ask the user before running this tool.
#   "deny": the AI is blocked from running this tool.
active_role: developer

roles:
  admin:
    description: Full access to all tools
    default_permission: allow

  developer:
    description: Standard development access
    default_permission: require_approval
    overrides:
      github_list_commits: allow
      github_search_repositories: allow
      fs_read_file: allow
      fs_list_directory: allow
      supabase_list_projects: allow
      supabase_list_tables: allow
      supabase_create_project: deny
      supabase_delete_branch: deny

  readonly:
    description: Read-only access
    default_permission: deny
    overrides:
      "github_search_*": allow
      github_list_commits: allow
      "fs_read_*": allow
      "fs_list_*": allow
      "supabase_list_*": allow
      "supabase_get_*": allow

rules:
  fs_read_file: "allow"
  fs_write_file: "require_approval"
  github_search_repositories: "allow"
  github_push_files: "require_approval"
  github_delete_repo: "deny"
  "supabase_delete_*": "deny"
"#;

    #[test]
    fn evokore_style_file() {
        // (EVO_ROLE, tool, permission, source)
        #[rustfmt::skip]
        let cases = [
            (None, "github_list_commits", Allow, "role 'developer' override 'github_list_commits'"),
            (None, "supabase_create_project", Deny, "role 'developer' override 'supabase_create_project'"),
            (None, "github_delete_repo", Deny, "rule 'github_delete_repo'"),
            (None, "supabase_delete_project", Deny, "rule 'supabase_delete_*'"),
            (None, "supabase_delete_branch", Deny, "role 'developer' override 'supabase_delete_branch'"),
            (None, "slack_post_message", RequireApproval, "role 'developer' default"),
            (Some("readonly"), "fs_read_multiple_files", Allow, "role 'readonly' override 'fs_read_*'"),
            (Some("readonly"), "fs_write_file", RequireApproval, "rule 'fs_write_file'"),
            (Some("readonly"), "supabase_execute_sql", Deny, "role 'readonly' default"),
            (Some("readonly"), "github_search_code", Allow, "role 'readonly' override 'github_search_*'"),
            (Some("admin"), "github_delete_repo", Deny, "rule 'github_delete_repo'"),
            (Some("admin"), "supabase_execute_sql", Allow, "role 'admin' default"),
        ];
        for (role, tool, permission, source) in cases {
            let permissions = parse(EVOKORE_STYLE, &env(role, false)).unwrap();
            assert!(
                permissions.warnings().is_empty(),
                "{:?}",
                permissions.warnings()
            );
            assert_eq!(
                permissions.decide(tool),
                decision(permission, source),
                "{role:?} {tool}"
            );
        }
    }
}
