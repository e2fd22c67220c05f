//! `evoctl status` as a person reads it, line for line, and the refresh
//! progress read from it.

use evo_proto::ctl::{
    AnnotationReliance, DaemonInfo, Duplicate, FileWarning, HttpStatus, IntegrityMode,
    QuarantinedTool, SandboxStatus, ServerStatus, SessionInfo, Shortened, ToolSource,
};

use super::*;

fn report_with(states: &[(&str, ServerState)]) -> StatusReport {
    StatusReport {
        servers: states
            .iter()
            .map(|&(id, state)| ServerStatus {
                id: id.to_string(),
                state,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn file_health_says_ok_only_without_warnings() {
    let mut f = FileStatus {
        path: "/c/mcp.config.json".into(),
        ok: true,
        ..Default::default()
    };
    assert_eq!(
        file_health("config", &f, true),
        ["config /c/mcp.config.json: ok"]
    );
    assert!(file_health("permissions", &f, false).is_empty());
    f.warnings = vec![
        FileWarning {
            file: "/c/mcp.config.json".into(),
            line: Some(5),
            message: "server 'fs': unknown key 'timeout' ignored".into(),
        },
        FileWarning {
            file: "/c/env".into(),
            line: None,
            message: "m".into(),
        },
    ];
    assert_eq!(
        file_health("config", &f, true),
        [
            "config /c/mcp.config.json: ok, 2 warnings",
            "  /c/mcp.config.json:5: server 'fs': unknown key 'timeout' ignored",
            "  /c/env: m",
        ]
    );
    f.warnings.truncate(1);
    assert_eq!(
        file_health("permissions", &f, false)[0],
        "permissions /c/mcp.config.json: ok, 1 warning"
    );
    f.ok = false;
    f.warnings.clear();
    f.error = Some("bad".into());
    assert_eq!(
        file_health("config", &f, true),
        ["config /c/mcp.config.json: ERROR: bad"]
    );
}

#[test]
fn refresh_progress_counts_targeted_servers_only() {
    let s = report_with(&[
        ("a", ServerState::Ready),
        ("b", ServerState::Starting),
        ("c", ServerState::Starting),
    ]);
    let p = refresh_progress(&s, &ids(&["a", "b"]));
    assert_eq!(p.line, "re-discovering: 1/2 ready");
    assert!(!p.done);
}

#[test]
fn refresh_progress_is_done_when_ready_or_failed() {
    let s = report_with(&[("a", ServerState::Ready), ("b", ServerState::Failed)]);
    let p = refresh_progress(&s, &ids(&["a", "b"]));
    assert!(p.done);
    assert_eq!(
        p.line,
        "re-discovered: 1/2 ready, failed: b (`evoctl status` has the error)"
    );
}

#[test]
fn refresh_progress_settles_servers_removed_meanwhile() {
    let p = refresh_progress(&report_with(&[]), &ids(&["gone"]));
    assert!(p.done);
}

/// A status with something in every section, as `evoctl status` prints it.
fn busy_report() -> StatusReport {
    let mut s = report_with(&[]);
    s.daemon = DaemonInfo {
        version: "1.2.3".into(),
        pid: 42,
        socket: "/run/evo/evod.sock".into(),
        uptime_s: 125,
        tools: 14,
        guard_error: Some("no guard".into()),
    };
    s.http = Some(HttpStatus {
        listen: "127.0.0.1:8787".into(),
        path: "/mcp".into(),
        auth: vec!["tokens".into()],
        ..Default::default()
    });
    s.config = FileStatus {
        path: "/c/mcp.config.json".into(),
        ok: true,
        ..Default::default()
    };
    s.permissions = FileStatus {
        path: "/c/permissions.json".into(),
        ok: true,
        ..Default::default()
    };
    s.search.state = "embedding".into();
    s.search.model = Some("m".into());
    s.search.embedded = 1200;
    s.search.tools = 3400;
    s.servers = vec![
        ServerStatus {
            id: "fx".into(),
            state: ServerState::Ready,
            tools: 12,
            source: ToolSource::Live,
            cached_tools: Some(12),
            live_tools: Some(12),
            config_hash: "0123456789ab".into(),
            last_refresh_age_s: Some(7200),
            resources: 1,
            ..Default::default()
        },
        ServerStatus {
            id: "slow".into(),
            state: ServerState::Queued,
            queue_position: Some(1),
            ..Default::default()
        },
        ServerStatus {
            id: "dies".into(),
            state: ServerState::Failed,
            restarts: 5,
            error: Some("exited 1".into()),
            stderr_tail: vec!["boom".into()],
            ..Default::default()
        },
    ];
    s.shortened = vec![Shortened {
        name: "git_log".into(),
        also: "git_git_log".into(),
    }];
    s.annotations_relied_on = vec![AnnotationReliance {
        server: "fx".into(),
        rule: "@read_only".into(),
        tools: 3,
    }];
    s.integrity = IntegrityMode::Pin;
    s.quarantined = vec![QuarantinedTool {
        server: "fx".into(),
        tool: "echo".into(),
        name: "fx_echo".into(),
        changed: vec!["description".into()],
        drift: 1,
    }];
    s.hot = vec!["fx_time".into()];
    s.sessions = vec![SessionInfo::default()];
    s.duplicates = vec![Duplicate {
        name: "echo".into(),
        kept: "fx".into(),
        skipped: vec!["gx".into()],
    }];
    s
}

#[test]
fn status_prints_every_section_in_order() {
    let expected = "\
evod 1.2.3 (pid 42) on /run/evo/evod.sock, up 2m, 14 tools
WARNING: no guard
http: http://127.0.0.1:8787/mcp (auth: tokens)
config /c/mcp.config.json: ok
search: lexical + semantic (1,200/3,400 embedded; lexical alone until all are; model m)

SERVER  STATE      TOOLS  SOURCE  CACHED/LIVE  REFRESHED  RESTARTS  HASH          ERROR
fx      ready      12     live    12/12        2h         0         0123456789ab
slow    queued #1  0      none    -/-          -          0
dies    failed     0      none    -/-          -          5                       exited 1

0 starting, 1 queued for a start slot (limits.max_concurrent_starts)

names already carrying their prefix, exposed once (the doubled form also routes): git_log

permissions rely on these servers' own annotations (their claims, unchecked): fx (@read_only: 3 tools)

dies (failed), last lines of its stderr:
  boom

quarantined tools (definition changed since pinned; hidden, calls refused):
  fx echo (fx_echo): changed description; drift 1
`evoctl diff SERVER TOOL` shows a change; `evoctl trust SERVER TOOL` accepts it

resources and prompts: fx (1 resources, 0 templates, 0 prompts)

hot (listed in every session): fx_time

1 session(s)

duplicate tool names (first in config order wins):
  echo: kept fx, skipped gx
";
    let printout = status(&busy_report());
    assert_eq!(printout.stdout(), expected);
    assert_eq!(printout.stderr(), "");
}

#[test]
fn status_without_servers_says_so() {
    let text = status(&report_with(&[])).stdout();
    assert!(
        text.contains("\n\nno servers configured\n\n0 session(s)\n"),
        "{text}"
    );
}

#[test]
fn sandboxes_are_listed_and_an_unenforced_one_says_so() {
    let mut s = report_with(&[
        ("fs", ServerState::Ready),
        ("free", ServerState::Ready),
        ("mac", ServerState::Ready),
    ]);
    s.servers[0].sandbox = Some(SandboxStatus {
        read: vec![],
        write: vec!["/home/me/notes".into()],
        network: false,
        enforced: true,
    });
    s.servers[2].sandbox = Some(SandboxStatus {
        read: vec!["/a".into(), "/b".into()],
        write: vec![],
        network: true,
        enforced: false,
    });
    assert_eq!(
        sandbox_lines(&s),
        [
            "\nsandboxes:",
            "  fs: read nothing else; write /home/me/notes; network off",
            "  mac: read /a, /b; write nothing else; network on (NOT CONFINED: evod enforces \
             sandboxes only on Linux)",
        ]
    );
    assert!(sandbox_lines(&report_with(&[("x", ServerState::Ready)])).is_empty());
}
