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
        p.decide_either("git_push", None::<&str>, Hints::default())
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
        let permissions =
            parse(text, &env(role, default_deny)).unwrap_or_else(|err| panic!("{text:?}: {err}"));
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
