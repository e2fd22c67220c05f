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

    /// The decision for a tool that also answers to, or once had, other names
    /// (`also`: a doubled form, the name a config override replaced): the
    /// strictest (deny over approval over allow), so a rule written for any of
    /// them holds; `tool`'s decides a tie.
    pub fn decide_either<'a>(
        &self,
        tool: &str,
        also: impl IntoIterator<Item = &'a str>,
        hints: Hints,
    ) -> Decision {
        let strictness = |p: Permission| match p {
            Permission::Allow => 0,
            Permission::RequireApproval => 1,
            Permission::Deny => 2,
        };
        let mut decision = self.decide_with(tool, hints);
        for name in also {
            let other = self.decide_with(name, hints);
            if strictness(other.permission) > strictness(decision.permission) {
                decision = other;
            }
        }
        decision
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
mod tests;
