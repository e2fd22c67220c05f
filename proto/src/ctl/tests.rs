//! The wire shapes the daemon and scripts rely on: request tags, reply keys
//! and their order, enum names.

use serde::Serialize;

use super::*;

#[test]
fn requests_round_trip_with_cmd_tag() {
    let cases = [
        (CtlRequest::Status, r#"{"cmd":"status"}"#),
        (
            CtlRequest::List {
                session: None,
                all: true,
            },
            r#"{"cmd":"list","session":null,"all":true}"#,
        ),
        (
            CtlRequest::Search {
                query: "time".into(),
                limit: Some(3),
                explain: false,
            },
            r#"{"cmd":"search","query":"time","limit":3}"#,
        ),
    ];
    for (req, json) in cases {
        assert_eq!(serde_json::to_string(&req).unwrap(), json);
        assert_eq!(CtlRequest::parse(json.as_bytes()).unwrap(), req);
    }
    assert_eq!(
        CtlRequest::parse(br#"{"cmd":"list"}"#).unwrap(),
        CtlRequest::List {
            session: None,
            all: false
        }
    );
}

#[test]
fn ui_asks_for_the_console_and_reads_its_address() {
    assert_eq!(
        CtlRequest::parse(br#"{"cmd":"ui"}"#).unwrap(),
        CtlRequest::Ui
    );
    let data = serde_json::json!({"url": "http://127.0.0.1:1/ui/login?token=t", "console": "http://127.0.0.1:1/ui/", "served": "loopback", "expires_s": 600});
    let Reply::Ui(u) = Reply::decode(&CtlRequest::Ui, data.clone()).unwrap() else {
        panic!("not a ui reply");
    };
    assert_eq!(u.served, "loopback");
    assert_eq!(serde_json::to_value(Reply::Ui(u)).unwrap(), data);
}

#[test]
fn approvals_keep_their_keys_and_order() {
    let report = ApprovalsReport {
        approvals: vec![PendingApproval {
            id: "ap1".into(),
            tool: "fx_echo".into(),
            arguments: r#"{"text":"hi"}"#.into(),
            age_s: 3,
            identity: Some(LOCAL_IDENTITY.into()),
        }],
    };
    assert_eq!(
        serde_json::to_string(&report).unwrap(),
        r#"{"approvals":[{"id":"ap1","tool":"fx_echo","arguments":"{\"text\":\"hi\"}","age_s":3,"identity":"local"}]}"#
    );
}

/// Each state's wire name is its `as_str`, and the one `--json` has
/// always printed.
#[test]
fn enums_keep_their_wire_names() {
    fn wire<T: Serialize>(v: T) -> String {
        serde_json::to_value(v)
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }
    let states = [
        (ServerState::Idle, "idle"),
        (ServerState::Queued, "queued"),
        (ServerState::Starting, "starting"),
        (ServerState::Ready, "ready"),
        (ServerState::Restarting, "restarting"),
        (ServerState::Failed, "failed"),
        (ServerState::Stopped, "stopped"),
        (ServerState::Disabled, "disabled"),
    ];
    for (state, name) in states {
        assert_eq!((wire(state), state.as_str()), (name.into(), name));
        assert_eq!(
            serde_json::from_value::<ServerState>(name.into()).unwrap(),
            state
        );
    }
    let sources = [
        (ToolSource::None, "none"),
        (ToolSource::Cache, "cache"),
        (ToolSource::Live, "live"),
    ];
    for (source, name) in sources {
        assert_eq!((wire(source), source.as_str()), (name.into(), name));
    }
    for (mode, name) in [
        (DiscoveryMode::Legacy, "legacy"),
        (DiscoveryMode::Dynamic, "dynamic"),
    ] {
        assert_eq!((wire(mode), mode.as_str()), (name.into(), name));
    }
    for (io, name) in [
        (SessionIo::Stdio, "stdio"),
        (SessionIo::Socket, "socket"),
        (SessionIo::Http, "http"),
    ] {
        assert_eq!((wire(io), io.as_str()), (name.into(), name));
    }
}

#[test]
fn discovery_mode_from_str() {
    #[rustfmt::skip]
    let cases = [
        ("legacy", Some(DiscoveryMode::Legacy)),
        ("Dynamic", Some(DiscoveryMode::Dynamic)),
        (" LEGACY ", Some(DiscoveryMode::Legacy)),
        ("", None),
        ("static", None),
    ];
    for (input, expected) in cases {
        assert_eq!(input.parse::<DiscoveryMode>().ok(), expected, "{input:?}");
    }
    let err = "static".parse::<DiscoveryMode>().err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("unknown discovery mode 'static'; expected 'legacy' or 'dynamic'")
    );
    assert_eq!(DiscoveryMode::default(), DiscoveryMode::Dynamic);
    assert_eq!(DiscoveryMode::Legacy.to_string(), "legacy");
    let json = serde_json::to_string(&DiscoveryMode::Legacy).ok();
    assert_eq!(json.as_deref(), Some("\"legacy\""));
    assert_eq!(
        DiscoveryMode::parse_from("x", "--mode").unwrap_err(),
        "--mode: unknown discovery mode 'x'; expected 'legacy' or 'dynamic'"
    );
}

/// A reply's data is its payload alone, no variant tag, and reads back
/// as the shape its request asks for.
#[test]
fn replies_are_their_payload_and_decode_by_request() {
    let session = SessionInfo {
        id: "s1".into(),
        name: None,
        mode: DiscoveryMode::Legacy,
        io: SessionIo::Stdio,
        activated: vec!["fx_echo".into()],
        last_active: 2,
        era: SessionEra::Modern,
        identity: Some("token:ci".into()),
        profile: None,
        role: None,
        instance: None,
    };
    let reply = Reply::Sessions(SessionsReport {
        sessions: vec![session],
        unavailable: None,
    });
    let line = serde_json::to_string(&CtlReply::data(reply.clone())).unwrap();
    assert_eq!(
        line,
        r#"{"ok":true,"data":{"sessions":[{"id":"s1","name":null,"mode":"legacy","io":"stdio","activated":["fx_echo"],"last_active":2,"era":"2026-07-28","identity":"token:ci","profile":null,"role":null,"instance":null}]}}"#
    );
    let back: CtlReply = serde_json::from_str(&line).unwrap();
    assert_eq!(
        Reply::decode(&CtlRequest::Sessions, back.data.unwrap()).unwrap(),
        reply
    );

    let action = Reply::Action(ActionReport {
        message: "evod is shutting down".into(),
        ..Default::default()
    });
    let data = serde_json::to_value(&action).unwrap();
    assert_eq!(
        data,
        serde_json::json!({"message": "evod is shutting down"})
    );
    assert_eq!(
        Reply::decode(&CtlRequest::Stop, data.clone()).unwrap(),
        action
    );
    // The request decides the shape: an action report is no status.
    assert!(Reply::decode(&CtlRequest::Status, data).is_err());
    let docs = Reply::decode(&CtlRequest::Docs, "# evo\n".into()).unwrap();
    assert_eq!(docs, Reply::Docs("# evo\n".into()));
}

/// `describe --json` keeps the keys and order it had as a `json!` object.
#[test]
fn tool_description_keeps_its_keys_and_order() {
    let tool = ToolDescription {
        name: "fx_echo".into(),
        summary: "Echoes.".into(),
        domain: "fx".into(),
        server: "fx".into(),
        upstream: "echo".into(),
        hot: false,
        description: None,
        input_schema: serde_json::json!({"type": "object"})
            .as_object()
            .cloned()
            .unwrap(),
        example: ExampleCall {
            name: "fx_echo".into(),
            arguments: serde_json::json!({}),
        },
        text: "fx_echo\n".into(),
    };
    assert_eq!(
        serde_json::to_string(&Reply::Tool(tool.clone())).unwrap(),
        r#"{"name":"fx_echo","summary":"Echoes.","domain":"fx","server":"fx","upstream":"echo","hot":false,"description":null,"input_schema":{"type":"object"},"example":{"name":"fx_echo","arguments":{}},"text":"fx_echo\n"}"#
    );
    let data = serde_json::to_value(&tool).unwrap();
    let request = CtlRequest::Describe {
        name: "fx_echo".into(),
    };
    assert_eq!(Reply::decode(&request, data).unwrap(), Reply::Tool(tool));
}

/// The keys docs/operating.md ("`--json` output") promises for `status --json`.
#[test]
fn server_status_keeps_its_keys() {
    let server = ServerStatus {
        id: "fx".into(),
        state: ServerState::Ready,
        tools: 3,
        source: ToolSource::Live,
        cached_tools: Some(3),
        live_tools: Some(3),
        config_hash: "0123456789ab".into(),
        restarts: 0,
        error: None,
        transport: "stdio".into(),
        pid: Some(7),
        last_refresh_age_s: None,
        stderr_tail: vec!["boom".into()],
        starting_s: Some(12),
        queue_position: None,
        resources: 2,
        templates: 0,
        prompts: 1,
        auth: AuthStatus {
            state: AuthWireState::Ok,
            expires_at: Some(1_800_000_000),
            error: None,
        },
        sandbox: Some(SandboxStatus {
            read: vec!["/srv/in".into()],
            write: vec![],
            network: false,
            enforced: true,
        }),
    };
    assert_eq!(
        serde_json::to_string(&server).unwrap(),
        r#"{"id":"fx","state":"ready","tools":3,"source":"live","cached_tools":3,"live_tools":3,"config_hash":"0123456789ab","restarts":0,"error":null,"transport":"stdio","pid":7,"last_refresh_age_s":null,"stderr_tail":["boom"],"starting_s":12,"queue_position":null,"resources":2,"prompts":1,"auth":{"state":"ok","expires_at":1800000000},"sandbox":{"read":["/srv/in"],"write":[],"network":false,"enforced":true}}"#
    );
    // Unconfined: `sandbox` is null; a daemon from before sandboxes still reads.
    let plain = ServerStatus::default();
    let mut value = serde_json::to_value(&plain).unwrap();
    assert_eq!(value["sandbox"], serde_json::Value::Null);
    if let Some(o) = value.as_object_mut() {
        o.remove("sandbox");
    }
    assert_eq!(
        serde_json::from_value::<ServerStatus>(value).unwrap(),
        plain
    );
}

/// `status --json`'s integrity keys (docs/policy.md, "Tool integrity"), and the
/// requests and reply of `diff`/`trust`.
#[test]
fn integrity_keeps_its_keys() {
    let held = QuarantinedTool {
        server: "fx".into(),
        tool: "echo".into(),
        name: "fx_echo".into(),
        changed: vec!["description".into()],
        drift: 2,
    };
    assert_eq!(
        serde_json::to_string(&held).unwrap(),
        r#"{"server":"fx","tool":"echo","name":"fx_echo","changed":["description"],"drift":2}"#
    );
    let status = serde_json::to_value(StatusReport::default()).unwrap();
    assert_eq!(status["integrity"], "pin");
    assert_eq!(status["quarantined"], serde_json::json!([]));
    // A daemon from before integrity still reads.
    let mut old = status.clone();
    if let Some(o) = old.as_object_mut() {
        o.remove("integrity");
        o.remove("quarantined");
    }
    assert_eq!(
        serde_json::from_value::<StatusReport>(old)
            .unwrap()
            .integrity,
        IntegrityMode::Pin
    );
    for (mode, name) in [
        (IntegrityMode::Pin, "pin"),
        (IntegrityMode::Warn, "warn"),
        (IntegrityMode::Off, "off"),
    ] {
        assert_eq!(serde_json::to_value(mode).unwrap(), name);
        assert_eq!(IntegrityMode::parse(&name.to_uppercase()), Some(mode));
    }
    assert_eq!(IntegrityMode::parse("pinned"), None);
    let diff = CtlRequest::Diff {
        server: "fx".into(),
        tool: Some("echo".into()),
    };
    let line = serde_json::to_string(&diff).unwrap();
    assert_eq!(line, r#"{"cmd":"diff","server":"fx","tool":"echo"}"#);
    assert_eq!(CtlRequest::parse(line.as_bytes()).unwrap(), diff);
    assert_eq!(
        CtlRequest::parse(br#"{"cmd":"trust","server":"fx"}"#).unwrap(),
        CtlRequest::Trust {
            server: "fx".into(),
            tool: None
        }
    );
    let report = DiffReport {
        server: "fx".into(),
        tools: vec![ToolDiff {
            tool: "echo".into(),
            name: "fx_echo".into(),
            changed: vec!["description".into()],
            drift: 1,
            old: serde_json::json!({"description": "a"}),
            new: serde_json::json!({"description": "b"}),
            diff: "--- a\n+++ b\n".into(),
        }],
        message: "m".into(),
    };
    let data = serde_json::to_value(Reply::Diff(report.clone())).unwrap();
    assert_eq!(
        data["tools"][0]
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(
            ["tool", "name", "changed", "drift", "old", "new", "diff"]
                .map(String::from)
                .to_vec()
        )
    );
    assert_eq!(Reply::decode(&diff, data).unwrap(), Reply::Diff(report));
}

#[test]
fn file_status_keeps_its_keys_and_reads_without_warnings() {
    let f = FileStatus {
        path: "/c/mcp.config.json".into(),
        ok: true,
        error: None,
        warnings: vec![FileWarning {
            file: "/c/mcp.config.json".into(),
            line: Some(5),
            message: "m".into(),
        }],
        missing: false,
    };
    assert_eq!(
        serde_json::to_string(&f).unwrap_or_default(),
        r#"{"path":"/c/mcp.config.json","ok":true,"error":null,"warnings":[{"file":"/c/mcp.config.json","line":5,"message":"m"}]}"#
    );
    // A file that is not there says so; one that is leaves the key out.
    let gone = FileStatus {
        missing: true,
        ..f.clone()
    };
    assert!(
        serde_json::to_string(&gone)
            .unwrap_or_default()
            .ends_with(r#","missing":true}"#)
    );
    // A daemon from before `warnings` existed still reads.
    let old: Result<FileStatus, _> = serde_json::from_str(r#"{"path":"p","ok":false,"error":"e"}"#);
    assert_eq!(old.ok().map(|f| f.warnings.len()), Some(0));
}

#[test]
fn bad_requests_are_errors() {
    for bad in [
        &b""[..],
        b"{}",
        br#"{"cmd":"explode"}"#,
        br#"{"cmd":"search"}"#,
        br#"{"cmd":"search","query":"x","bogus":1}"#,
        b"[1,2]",
    ] {
        assert!(CtlRequest::parse(bad).is_err());
    }
}
