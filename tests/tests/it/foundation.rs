//! The foundation, end to end through real processes: evod, evoctl shim and
//! fixture children. Legacy mode lists every tool.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, ctl_at, server},
    locations::{bin, fixture},
    mcp::{McpClient, NATIVE_TOOLS, shim_command},
    process::{TempDir, alive, gone_within},
    servers::{HttpChild, fixture_server, raw_server, replayed},
    wait::eventually,
};
use serde_json::{Value, json};

fn two_fixtures() -> Value {
    json!({"mcpServers": {
        "fx": fixture_server(&["--name", "fx"]),
        "other": {"command": fixture().to_string_lossy(), "args": ["--name", "other"], "prefix": "two"}
    }})
}

#[test]
fn legacy_session_lists_and_calls_tools_of_several_children() {
    let d = Daemon::start(&two_fixtures());
    d.wait_ready(&["fx", "other"]);
    let mut c = d.legacy_session();
    let names = c.tool_names();
    for want in [
        "discover_tools",
        "call_tool",
        "fx_echo",
        "fx_add",
        "two_echo",
        "two_add",
    ] {
        assert!(
            names.contains(&want.to_string()),
            "{want} missing from {names:?}"
        );
    }
    assert_eq!(
        c.call_text("fx_add", json!({"a": 2, "b": 3})),
        ("5".into(), false)
    );
    assert_eq!(
        c.call_text("two_echo", json!({"text": "héllo"})),
        ("héllo".into(), false)
    );
    // Native call_tool routes to any tool by exact name.
    assert_eq!(
        c.call_text(
            "call_tool",
            json!({"name": "fx_echo", "arguments": {"text": "via call_tool"}})
        ),
        ("via call_tool".into(), false)
    );
    // A child's own tool error stays a tool error.
    assert_eq!(
        c.call_text("fx_fail", json!({"message": "boom"})),
        ("boom".into(), true)
    );
    // An unknown tool is an isError result naming close names; the session goes on.
    let (text, is_error) = c.call_text("fx_ech", json!({}));
    assert!(is_error && text.contains("fx_echo"), "{text}");
    assert_eq!(
        c.call_text("fx_echo", json!({"text": "still here"})).0,
        "still here"
    );
}

/// The shim hands stdio that is a pipe or a socket to the daemon and copies
/// bytes otherwise; the client sees the same session either way, and a
/// handed-over session ends with whichever side leaves.
#[test]
fn shim_hands_its_stdio_to_the_daemon_or_copies_bytes() {
    let d = Daemon::start(&two_fixtures());
    d.wait_ready(&["fx", "other"]);
    let shim = |copy: bool| {
        let mut cmd = shim_command(&d.socket, &["--mode", "legacy"]);
        if copy {
            cmd.env("EVO_SHIM_COPY", "1");
        }
        cmd
    };
    let mut piped = McpClient::spawn_cmd(&mut shim(false));
    let mut copied = McpClient::spawn_cmd(&mut shim(true));
    let mut paired = McpClient::spawn_socketpair(&mut shim(false));
    let mut names = Vec::new();
    for (i, c) in [&mut piped, &mut copied, &mut paired]
        .into_iter()
        .enumerate()
    {
        c.initialize();
        names.push(c.tool_names());
        let text = format!("hello {i}");
        assert_eq!(c.call_text("fx_echo", json!({"text": text})), (text, false));
        assert_eq!(
            c.call_text("two_add", json!({"a": 2, "b": i})),
            ((2 + i).to_string(), false)
        );
    }
    assert!(names[0].len() > 10 && names.iter().all(|n| *n == names[0]));
    let io = |d: &Daemon| {
        let mut io: Vec<String> = d.ctl_json(&["sessions"])["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["io"].as_str().unwrap_or("?").to_string())
            .collect();
        io.sort();
        io
    };
    assert_eq!(io(&d), ["socket", "stdio", "stdio"]);

    // The shim is killed: the daemon ends its session and lets go of the
    // client's stdout, so the client reads EOF.
    // SAFETY: plain signal to our own child.
    unsafe { libc::kill(piped.child.id() as i32, libc::SIGKILL) };
    assert!(
        piped.eof_within(Duration::from_secs(5)),
        "no EOF after the shim died"
    );
    // The client closes its side of a socket pair: the session ends and the
    // shim exits cleanly.
    let status = paired.close().expect("the shim did not exit");
    assert!(status.success(), "{status}");
    eventually(
        "only the copied session to be left",
        Duration::from_secs(5),
        || io(&d) == ["socket"],
    );
    let (got, _) = copied.call_text("fx_echo", json!({"text": "still here"}));
    assert_eq!(got, "still here");
}

#[test]
fn env_cwd_and_pagination_reach_the_child() {
    let dir = TempDir::new("cwd");
    let cwd = dir.path().to_string_lossy().into_owned();
    let cfg = json!({"mcpServers": {
        "fx": {"command": fixture().to_string_lossy(), "args": ["--page-size", "2"],
               "env": {"GREETING": "hello ${EVO_TEST_WHO}"}, "cwd": cwd}
    }});
    let d = Daemon::start_with(&cfg, &[], &[("EVO_TEST_WHO", "world")]);
    d.wait_ready(&["fx"]);
    let mut c = d.legacy_session();
    // All pages were listed: the fixture has 14 built-in tools.
    let fx_tools = c
        .tool_names()
        .into_iter()
        .filter(|n| n.starts_with("fx_"))
        .count();
    assert_eq!(fx_tools, 14);
    assert_eq!(
        c.call_text("fx_env", json!({"name": "GREETING"})).0,
        "hello world"
    );
    // The daemon's environment is inherited too.
    assert_eq!(
        c.call_text("fx_env", json!({"name": "EVO_TEST_WHO"})).0,
        "world"
    );
    let got = c.call_text("fx_cwd", json!({})).0;
    assert_eq!(
        std::fs::canonicalize(got).unwrap(),
        std::fs::canonicalize(&cwd).unwrap()
    );
}

#[test]
fn bad_servers_fail_alone_with_errors_naming_them() {
    let cfg = json!({"mcpServers": {
        "good": fixture_server(&[]),
        "novar": {"command": fixture().to_string_lossy(), "env": {"TOKEN": "${EVO_TEST_SURELY_UNSET_VAR}"}},
        "dies": fixture_server(&["--exit-at-start"]),
        "missing": {"command": "/nonexistent/evo-no-such-binary"},
        "off": {"command": "whatever", "disabled": true}
    }});
    let d = Daemon::start(&cfg);
    let s = d.wait_status("bad servers failed", |s| {
        ["dies", "missing"]
            .iter()
            .all(|id| server(s, id).is_some_and(|v| v["state"] == "failed"))
            && server(s, "good").is_some_and(|v| v["state"] == "ready")
    });
    let novar = server(&s, "novar").unwrap();
    let err = novar["error"].as_str().unwrap();
    assert!(
        err.contains("novar") && err.contains("EVO_TEST_SURELY_UNSET_VAR") && err.contains("TOKEN"),
        "{err}"
    );
    assert!(
        server(&s, "missing").unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("not found")
    );
    let dies = server(&s, "dies").unwrap()["error"].as_str().unwrap();
    assert!(dies.contains("exited with status 1"), "{dies}");
    assert_eq!(server(&s, "off").unwrap()["state"], "disabled");
    // The good server works.
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("good_echo", json!({"text": "ok"})).0, "ok");
    // Calls to a failed server are isError results naming it and its state.
    let (text, is_error) = c.call_text("call_tool", json!({"name": "dies_echo"}));
    assert!(is_error, "{text}");
    // The human status table names the failing servers too.
    let (code, out, _) = d.ctl(&["status"]);
    assert_eq!(code, 0);
    assert!(out.contains("missing") && out.contains("failed"), "{out}");
}

/// A tool list with what published servers send: schemas that are not
/// objects, fields of the wrong type, a tool without a name, a non-tool.
fn bad_tools() -> Value {
    json!([
        {"name": "good", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
        {"name": "stringly", "inputSchema": "string"},
        {"name": "nothing"},
        {"name": "nulled", "inputSchema": null, "annotations": 7, "description": ["x"]},
        {"inputSchema": {"type": "object"}},
        "not a tool"
    ])
}

/// Published servers list tools whose schema is not an object: each such
/// tool gets `{"type": "object"}` (or loses the bad field) with a warning
/// naming server and tool; the rest of the list stands.
#[test]
fn tools_with_bad_schemas_are_fixed_not_fatal() {
    let dir = TempDir::new("raw");
    let raw = raw_server(&dir, &bad_tools());
    bad_schemas_fixed(&json!({"mcpServers": {"raw": raw}}));
}

/// The same list from a Streamable HTTP child (which rmcp reads before evo
/// sees it): asked again raw and fixed alike.
#[test]
fn a_remote_childs_bad_schemas_are_fixed_too() {
    let dir = TempDir::new("raw-http");
    let child = HttpChild::raw(&dir, &bad_tools());
    bad_schemas_fixed(&json!({"mcpServers": {"raw": child.entry()}}));
}

/// An evod with `config` (a server `raw` listing [`bad_tools`]) serves the
/// four tools with a name, each with an object schema, and says what it
/// fixed.
fn bad_schemas_fixed(config: &Value) {
    let d = Daemon::start(config);
    let s = d.wait_ready(&["raw"]);
    assert_eq!(server(&s, "raw").unwrap()["tools"], 4, "{s}");
    let mut c = d.legacy_session();
    let r = c.request("tools/list", json!({}));
    let listed = r["result"]["tools"].as_array().unwrap();
    for name in ["raw_good", "raw_stringly", "raw_nothing", "raw_nulled"] {
        let tool = listed
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {r}"));
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }
    assert_eq!(c.call_text("raw_stringly", json!({})).0, "stringly");
    // A tool without a description is summed up as such, not as nothing.
    let l = d.ctl_json(&["list", "--all"]);
    let nothing = l["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "raw_nothing")
        .unwrap()
        .clone();
    assert_eq!(nothing["summary"], "(no description)", "{nothing}");
    let log = d.log_text();
    assert!(
        log.contains("stringly") && log.contains("inputSchema is not a JSON object"),
        "{log}"
    );
}

#[test]
fn malformed_config_is_reported_and_a_missing_one_means_no_children() {
    let dir = TempDir::new("cfg");
    let cfg = dir.path().join("mcp.config.json");
    std::fs::write(
        &cfg,
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": }\n  }\n}\n",
    )
    .unwrap();
    let d = Daemon::start_raw(dir, cfg, &[], &[]);
    let s = d.ctl_json(&["status"]);
    assert_eq!(s["config"]["ok"], false);
    let err = s["config"]["error"].as_str().unwrap();
    assert!(
        err.contains("mcp.config.json:3:"),
        "error should carry file and line: {err}"
    );
    drop(d);

    let dir = TempDir::new("nocfg");
    let cfg = dir.path().join("absent.json");
    let d = Daemon::start_raw(dir, cfg, &[], &[]);
    let s = d.ctl_json(&["status"]);
    assert_eq!(s["config"]["ok"], true);
    assert_eq!(s["servers"].as_array().unwrap().len(), 0);
    let mut c = d.legacy_session();
    assert_eq!(c.tool_names(), NATIVE_TOOLS.to_vec());
}

#[test]
fn collisions_keep_the_first_in_config_order_and_long_names_are_hashed() {
    // Both servers expose unprefixed names: every name collides.
    let cfg = json!({
        "mcpServers": {"first": {"command": fixture().to_string_lossy(), "prefix": ""}},
        "servers": {
            "second": {"command": fixture().to_string_lossy(), "prefix": ""},
            "twilio": replayed("twilio")
        }
    });
    let d = Daemon::start(&cfg);
    let s = d.wait_ready(&["first", "second", "twilio"]);
    let dups = s["duplicates"].as_array().unwrap();
    let echo = dups
        .iter()
        .find(|d| d["name"] == "echo")
        .expect("echo duplicate reported");
    assert_eq!(echo["kept"], "first:echo");
    assert_eq!(echo["skipped"], json!(["second:echo"]));
    assert!(
        d.log_text().contains("collision"),
        "collision warning logged"
    );
    let mut c = d.legacy_session();
    let pid_first = c.call_text("pid", json!({})).0;
    let st = d.ctl_json(&["status"]);
    assert_eq!(server(&st, "first").unwrap()["pid"].to_string(), pid_first);
    let names = c.tool_names();
    let re_ok = |n: &str| {
        n.len() <= 64
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    assert!(names.iter().all(|n| re_ok(n)), "invalid names: {names:?}");
    let hashed: Vec<&String> = names
        .iter()
        .filter(|n| n.len() == 64 && n.starts_with("twilio_"))
        .collect();
    assert!(
        hashed.len() >= 10,
        "long twilio names are cut with a hash: {hashed:?}"
    );
    // A hashed name still routes (with valid arguments: the example evo
    // generates for it).
    let described = d.ctl_json(&["describe", hashed[0]]);
    let (text, is_error) = c.call_text(hashed[0], described["example"]["arguments"].clone());
    assert!(!is_error && text.contains("\"tool\""), "{text}");

    // An unprefixed child tool named like a native tool: the native one is
    // kept, listed once, and the collision is reported.
    assert_eq!(
        c.call_text("add_tool", json!({"name": "call_tool"})).0,
        "added"
    );
    let s = d.wait_status("native collision", |s| {
        s["duplicates"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["name"] == "call_tool"))
    });
    let dup = s["duplicates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "call_tool")
        .unwrap()
        .clone();
    assert_eq!(dup["kept"], "evo:native");
    assert_eq!(dup["skipped"], json!(["first:call_tool"]));
    let names = c.tool_names();
    assert_eq!(names.iter().filter(|n| *n == "call_tool").count(), 1);
    let (text, is_error) = c.call_text(
        "call_tool",
        json!({"name": "echo", "arguments": {"text": "native"}}),
    );
    assert!(!is_error && text == "native", "{text}");
}

#[test]
fn socket_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = Daemon::start(&json!({}));
    let dir_mode = std::fs::metadata(d.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    let sock_mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    assert_eq!(sock_mode, 0o600);

    // An existing directory keeps its mode (a socket in a shared directory
    // must not lock others out of it), and a file that is not a socket is
    // never replaced.
    let shared = TempDir::new("shared");
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let precious = shared.path().join("notes.json");
    std::fs::write(&precious, "keep me").unwrap();
    let out = Command::new(bin("evod"))
        .args(["--config", "/nonexistent/mcp.config.json", "--socket"])
        .arg(&precious)
        .arg("--cache-dir")
        .arg(shared.path().join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("notes.json") && err.contains("not a socket"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
    // evod listening in that directory, started the way every test starts it.
    let mut d = Daemon {
        socket: shared.path().join("evod.sock"),
        config: PathBuf::from("/nonexistent/mcp.config.json"),
        cache: shared.path().join("cache"),
        log: shared.path().join("evod.log"),
        child: None,
        dir: shared,
    };
    d.spawn(&[], &[]);
    let mode = std::fs::metadata(d.dir.path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o755, "an existing directory keeps its mode");
}

#[test]
fn no_daemon_exits_3_naming_the_socket() {
    let dir = TempDir::new("nod");
    let sock = dir.path().join("nothing.sock");
    let (code, _, err) = ctl_at(&sock, &["status"]);
    assert_eq!(code, 3);
    assert!(err.contains(&sock.display().to_string()), "{err}");
    let (code, out, _) = ctl_at(&sock, &["list", "--all", "--json"]);
    assert_eq!(code, 3);
    let out: Value = serde_json::from_str(&out).expect("--json: a JSON error");
    assert_eq!(out["ok"], false);
    assert_eq!(out["kind"], "no_daemon");
    assert!(
        out["error"].as_str().unwrap().contains("nothing.sock"),
        "{out}"
    );
    let mut shim = McpClient::spawn(&sock, &["--no-autostart"]);
    let status = shim.child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    assert!(shim.stderr.all().contains("nothing.sock"));
    // Usage errors are 2 (a search needs words).
    let (code, _, _) = ctl_at(&sock, &["frobnicate"]);
    assert_eq!(code, 2);
    let (code, _, _) = ctl_at(&sock, &["search"]);
    assert_eq!(code, 2);
}

#[test]
fn shim_autostarts_the_daemon_with_the_same_config() {
    let dir = TempDir::new("auto");
    let cfg = dir.path().join("mcp.config.json");
    std::fs::write(
        &cfg,
        serde_json::to_vec(&json!({"mcpServers": {
            "fx": fixture_server(&["--delay-start-ms", "700"]),
            "broken": fixture_server(&["--exit-at-start"]),
        }}))
        .unwrap(),
    )
    .unwrap();
    let sock = dir.path().join("run").join("evod.sock");
    let mut cmd = shim_command(&sock, &["--mode", "legacy"]);
    cmd.env("EVO_CONFIG", &cfg)
        .env("EVO_CACHE_DIR", dir.path().join("cache"))
        .env("XDG_STATE_HOME", dir.path().join("state"));
    let mut c = McpClient::spawn_cmd(&mut cmd);
    c.initialize();
    // The first call, made before the (slow) child has listed its tools,
    // waits for it instead of failing as unknown.
    assert_eq!(
        c.call_text("fx_echo", json!({"text": "auto"})),
        ("auto".to_string(), false)
    );
    // A name no server has is still unknown (the broken server failing does
    // not hold it up for long).
    let (text, is_error) = c.call_text("fx_nonexistent", json!({}));
    assert!(is_error && text.contains("No tool named"), "{text}");
    assert!(c.tool_names().contains(&"fx_echo".to_string()));
    drop(c);
    let (code, out, err) = ctl_at(&sock, &["stop"]);
    assert_eq!(code, 0, "{out}{err}");
    eventually(
        "the socket to be removed after stop",
        Duration::from_secs(10),
        || !sock.exists(),
    );
}

fn child_pid(c: &mut McpClient, tool: &str) -> u32 {
    c.call_text(tool, json!({})).0.parse().expect("pid")
}

#[test]
fn children_die_with_the_daemon_even_on_sigkill() {
    let d = Daemon::start(&two_fixtures());
    d.wait_ready(&["fx", "other"]);
    let mut c = d.legacy_session();
    let pids = [child_pid(&mut c, "fx_pid"), child_pid(&mut c, "two_pid")];
    // Each child leads its own process group.
    for pid in pids {
        let pgid = unsafe { libc::getpgid(pid as i32) };
        assert_eq!(pgid, pid as i32, "child {pid} is not its own group leader");
    }
    unsafe {
        libc::kill(d.pid() as i32, libc::SIGKILL);
    }
    for pid in pids {
        assert!(
            gone_within(pid, Duration::from_secs(2)),
            "child {pid} outlived a SIGKILLed evod"
        );
    }
    // The shim tells its client the daemon vanished: exit 3 and a message,
    // not the 0 of a session evod closed itself.
    let stderr = c.stderr.clone();
    let shim = c.close();
    assert_eq!(shim.and_then(|s| s.code()), Some(3), "{shim:?}");
    let err = stderr.all();
    assert!(err.contains("crashed or was killed"), "{err}");
}

#[test]
fn sigterm_and_stop_shut_down_cleanly() {
    for how in ["sigterm", "stop"] {
        let mut d = Daemon::start(&two_fixtures());
        d.wait_ready(&["fx", "other"]);
        let mut c = d.legacy_session();
        let pids = [child_pid(&mut c, "fx_pid"), child_pid(&mut c, "two_pid")];
        let status = if how == "stop" {
            let (code, out, _) = d.ctl(&["stop"]);
            assert_eq!(code, 0);
            assert!(out.contains("shutting down"));
            // `evoctl stop` returns once evod is gone: the socket is free.
            assert!(!d.socket.exists(), "socket still there after evoctl stop");
            let mut child = d.child.take().unwrap();
            child.wait().unwrap()
        } else {
            d.stop().unwrap()
        };
        assert!(
            status.success(),
            "{how}: evod exited with {status}\n{}",
            d.log_text()
        );
        for pid in pids {
            assert!(!alive(pid), "{how}: child {pid} left behind");
        }
        assert!(!d.socket.exists(), "{how}: socket file left behind");
        // The session ended with the daemon: the shim exits, successfully
        // (evod closed the session itself).
        let shim = c.close();
        assert!(
            shim.is_some_and(|s| s.success()),
            "{how}: shim did not exit cleanly: {shim:?}"
        );
    }
}

#[test]
fn status_and_list_json_have_stable_keys() {
    let d = Daemon::start(&two_fixtures());
    let s = d.wait_ready(&["fx", "other"]);
    for key in ["servers", "sessions", "duplicates", "config", "permissions"] {
        assert!(s.get(key).is_some(), "status lacks {key}");
    }
    let fx = server(&s, "fx").unwrap();
    for key in [
        "id",
        "state",
        "tools",
        "source",
        "cached_tools",
        "live_tools",
        "config_hash",
        "restarts",
        "error",
        "sandbox",
    ] {
        assert!(fx.get(key).is_some(), "server status lacks {key}: {fx}");
    }
    assert_eq!(fx["sandbox"], Value::Null, "not confined: {fx}");
    assert_eq!(fx["tools"], 14);
    assert_eq!(fx["source"], "live");
    let l = d.ctl_json(&["list", "--all"]);
    let tools = l["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 28);
    let echo = tools.iter().find(|t| t["name"] == "fx_echo").unwrap();
    assert_eq!(echo["summary"], "Return the given text unchanged.");
    assert_eq!(echo["domain"], "text", "a child's _meta.domain is honoured");
    let (code, out, _) = d.ctl(&["list", "--all"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("fx_echo — Return the given text unchanged. (text)"),
        "{out}"
    );
    // A reader that has gone (`evoctl list | head -1`) ends evoctl quietly,
    // by SIGPIPE as Unix tools do: no panic, no message.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let piped = Command::new(bin("evoctl"))
        .arg("--socket")
        .arg(&d.socket)
        .args(["list", "--all"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&piped.stderr);
    use std::os::unix::process::ExitStatusExt;
    const SIGPIPE: i32 = 13; // on every Unix evo builds for
    assert_eq!(piped.status.signal(), Some(SIGPIPE), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// A command that does not exist cannot start however often it is tried: it
/// is `failed` at once with the reason, not restarted and logged as crashes.
#[test]
fn a_missing_command_fails_at_once() {
    let d = Daemon::start(&json!({"mcpServers": {
        "missing": {"command": "/nonexistent/evo-no-such-binary"},
        "good": fixture_server(&[]),
    }}));
    let s = d.wait_status("missing failed, good ready", |s| {
        server(s, "missing").is_some_and(|v| v["state"] == "failed")
            && server(s, "good").is_some_and(|v| v["state"] == "ready")
    });
    let missing = server(&s, "missing").unwrap();
    assert_eq!(missing["restarts"], 0, "{missing}");
    let error = missing["error"].as_str().unwrap();
    assert!(
        error.contains("not found") && error.contains("evo-no-such-binary"),
        "{error}"
    );
    let log = d.log_text();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("server=missing") || l.contains("server=\"missing\""))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one line about it, not a crash loop: {lines:#?}"
    );
    assert!(lines[0].contains("cannot start"), "{}", lines[0]);
    // A refresh tries again, and fails the same way at once: it says so
    // and exits 1.
    let (code, out, err) = d.ctl(&["refresh", "missing"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("missing: failed: "), "{out}");
    let s = d.wait_status("still failed", |s| {
        server(s, "missing").is_some_and(|v| v["state"] == "failed")
    });
    assert_eq!(server(&s, "missing").unwrap()["restarts"], 0);
}

/// The README's run command: the example config, started from another
/// directory, finds the fixture through `EVO_FIXTURE` (as `examples/run`
/// sets it) and serves both example servers.
#[test]
fn the_example_config_runs_from_any_directory() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let config = repo.join("examples/mcp.config.json");
    let dir = TempDir::new("example");
    let mut d = Daemon::start_raw(
        dir,
        config,
        &[],
        &[("EVO_FIXTURE", fixture().to_str().unwrap())],
    );
    let s = d.wait_ready(&["fx", "math"]);
    assert_eq!(server(&s, "time").unwrap()["state"], "disabled");
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("fx_echo", json!({"text": "hi"})).0, "hi");
    drop(c);
    d.stop();
}

/// A failed server's status carries the last lines its child wrote to
/// stderr, where the real cause usually is.
#[test]
fn status_shows_a_failed_servers_stderr() {
    let d = Daemon::start(&json!({"mcpServers": {
        "keyless": {"command": "sh", "args": ["-c", "echo 'starting up' >&2; echo 'error: missing API key (set FOO_API_KEY)' >&2; echo \"rejected $BAR_TOKEN\" >&2; exit 1"],
                    "env": {"BAR_TOKEN": "sk-secret-998877"}},
        "good": fixture_server(&[]),
    }}));
    let s = d.wait_status("keyless failed", |s| {
        server(s, "keyless").is_some_and(|v| v["state"] == "failed")
            && server(s, "good").is_some_and(|v| v["state"] == "ready")
    });
    let tail = &server(&s, "keyless").unwrap()["stderr_tail"];
    // A configured secret the child echoes is masked.
    assert_eq!(
        tail,
        &json!([
            "starting up",
            "error: missing API key (set FOO_API_KEY)",
            "rejected ***"
        ]),
        "{s}"
    );
    assert!(!s.to_string().contains("sk-secret-998877"), "{s}");
    assert_eq!(server(&s, "good").unwrap()["stderr_tail"], json!([]));
    let (code, out, _) = d.ctl(&["status"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("keyless (failed), last lines of its stderr:")
            && out.contains("  error: missing API key (set FOO_API_KEY)"),
        "{out}"
    );
}
