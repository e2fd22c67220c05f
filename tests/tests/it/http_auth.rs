//! API tokens and identities on the HTTP endpoint: `evoctl token`, the
//! tokens file, refusals, roles, and sessions and approvals scoped to their
//! identity. (OAuth access tokens, minted with a real JOSE library, are in
//! the interop suite: `tests/interop/test_http_oauth.py`.)

use std::time::Duration;

use evo_tests::harness::{
    daemon::Daemon,
    http::{ACCEPT, Conn, HttpMcp, JSON, http_daemon, request, result_text},
    mcp::NATIVE_TOOLS,
    servers::{HttpChild, fixture_server},
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

/// A token made with `evoctl token create` (stdout holds it alone).
fn create_token(d: &Daemon, args: &[&str]) -> String {
    let mut a = vec!["token", "create"];
    a.extend_from_slice(args);
    let (code, out, err) = d.ctl(&a);
    assert_eq!(code, 0, "token create {args:?}: {err}");
    let token = out.trim().to_string();
    assert!(token.starts_with("evo_"), "{out}");
    assert!(err.contains("shown this once"), "{err}");
    token
}

fn authed(http: Value) -> Value {
    let mut http = http;
    http["auth"] = json!({});
    http
}

#[test]
fn tokens_are_created_listed_revoked_and_only_their_hash_is_kept() {
    let (d, port) = http_daemon(
        json!({"mcpServers": {"fx": fixture_server(&[])}}),
        authed(json!({})),
        &["--mode", "legacy"],
    );
    d.wait_ready(&["fx"]);
    // Without a credential: 401 and the challenge, which names the
    // protected resource metadata and (tokens only, no OAuth to discover)
    // says in RFC 6750's terms what is wanted, so a client shows evo's
    // message rather than its own OAuth hint.
    let r = HttpMcp::modern(port, None).call_method("tools/list", json!({}));
    assert_eq!(r.status, 401, "{}", r.text());
    let challenge = r.header("www-authenticate").unwrap_or_default();
    let metadata = "/.well-known/oauth-protected-resource/mcp";
    assert!(
        challenge.starts_with(&format!(
            "Bearer realm=\"evo\", resource_metadata=\"http://127.0.0.1:{port}{metadata}\""
        )),
        "{challenge}"
    );
    assert!(
        challenge.contains("error=\"invalid_request\"")
            && challenge.contains("error_description=\"")
            && challenge.contains("evoctl token create"),
        "{challenge}"
    );
    // The metadata (RFC 9728), without auth: the resource, how a token is
    // sent, and no authorization server (there is none to log in at).
    let doc = request(port, "GET", metadata, &[], b"");
    assert_eq!(doc.status, 200, "{}", doc.text());
    let doc = doc.json();
    assert_eq!(
        doc["resource"],
        format!("http://127.0.0.1:{port}/mcp"),
        "{doc}"
    );
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]), "{doc}");
    assert!(doc.get("authorization_servers").is_none(), "{doc}");

    let token = create_token(&d, &["ci"]);
    let file = d.dir.path().join("tokens.json");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains(&token[4..]),
        "the file holds no token: {text}"
    );
    assert!(text.contains("\"sha256\""), "{text}");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let list = d.ctl_json(&["token", "list"]);
    assert_eq!(list["tokens"][0]["name"], "ci", "{list:#}");
    assert!(
        !list.to_string().contains(&token[4..]),
        "list never shows a token"
    );
    let (code, _, err) = d.ctl(&["token", "create", "ci"]);
    assert_eq!(code, 1, "a second token of the same name is refused");
    assert!(err.contains("exists"), "{err}");

    // Valid on the next request, no restart.
    let mut c = HttpMcp::initialize(port, Some(&token));
    assert_eq!(result_text(&c.call("fx_echo", json!({"text": "t"}))), "t");
    let mut stateless = HttpMcp::modern(port, Some(&token));
    assert!(stateless.tools().contains(&"fx_echo".to_string()));
    let s = d.ctl_json(&["sessions"]);
    let ids: Vec<&Value> = s["sessions"].as_array().unwrap().iter().collect();
    assert!(
        ids.iter().filter(|s| s["identity"] == "token:ci").count() == 2,
        "both of its sessions carry its identity: {s:#}"
    );
    assert!(!s.to_string().contains(&token[4..]));
    let status = d.ctl_json(&["status"]);
    assert!(
        !status.to_string().contains(&token[4..]),
        "status never shows a token"
    );
    assert_eq!(status["http"]["auth"], json!(["tokens"]), "{status:#}");

    // Revoked: refused from the next request on, its sessions end.
    let (code, out, err) = d.ctl(&["token", "revoke", "ci"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("revoked"), "{out}");
    let r = c.call_method("tools/list", json!({}));
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("invalid_token"),
        "{:?}",
        r.headers
    );
    eventually(
        with_log("the revoked token's sessions to end", &d.log),
        Duration::from_secs(10),
        || {
            let s = d.ctl_json(&["sessions"]);
            !s["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["identity"] == "token:ci")
        },
    );
    assert!(
        !d.log_text().contains(&token[4..]),
        "the log never has a token"
    );
    let (code, _, err) = d.ctl(&["token", "revoke", "ci"]);
    assert_eq!(code, 1);
    assert!(err.contains("no token named 'ci'"), "{err}");
}

/// An endpoint without auth checks no token: `token create` says so, and a
/// reload that adds `serve.http.auth` says it needs a restart (exit 1)
/// rather than "no server changed" while the endpoint stays open.
#[test]
fn auth_added_by_reload_needs_a_restart_and_tokens_say_when_unchecked() {
    let (d, port) = http_daemon(
        json!({"mcpServers": {"fx": fixture_server(&[])}}),
        json!({}),
        &[],
    );
    d.wait_ready(&["fx"]);
    let (code, out, err) = d.ctl(&["token", "create", "early"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.trim().starts_with("evo_"), "{out}");
    assert!(
        err.contains("not checked") && err.contains("serve.http.auth"),
        "{err}"
    );
    let j = d.ctl_json(&["token", "create", "early2"]);
    assert!(
        j["unchecked"]
            .as_str()
            .is_some_and(|w| w.contains("serve.http.auth")),
        "{j}"
    );
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&d.config).unwrap()).unwrap();
    cfg["serve"]["http"]["auth"] = json!({});
    std::fs::write(&d.config, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(
        code, 1,
        "a change that is not applied is not a success: {out}{err}"
    );
    assert!(
        out.contains("serve.http") && out.contains("restart"),
        "{out}"
    );
    // A later reload (the watcher's, or another) still says so: the
    // endpoint still runs without auth.
    let (code, out, _) = d.ctl(&["reload", "--json"]);
    assert_eq!(code, 1, "{out}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert!(
        j["restart_needed"]
            .as_array()
            .is_some_and(|r| !r.is_empty()),
        "{j}"
    );
    let r = HttpMcp::modern(port, None).call_method("tools/list", json!({}));
    assert_eq!(r.status, 200, "no auth until evod restarts: {}", r.text());
}

#[test]
fn ten_thousand_bad_tokens_are_each_refused_and_never_logged() {
    let (d, port) = http_daemon(json!({}), authed(json!({})), &[]);
    let good = create_token(&d, &["good"]);
    let mut conn = Conn::open(port);
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let mut seen = std::collections::HashSet::new();
    for i in 0..10_000u32 {
        // Each connection serves many requests; one whose body was not read
        // is closed by evod after its answer, and the client reconnects.
        let bad = format!("evo_{i:064x}");
        let auth = format!("Bearer {bad}");
        conn.send(
            "POST",
            "/mcp",
            &[ACCEPT, JSON, ("Authorization", &auth)],
            body,
        );
        let r = conn.read();
        assert_eq!(r.status, 401, "request {i}: {}", r.text());
        assert!(r.header("www-authenticate").is_some());
        seen.insert(r.status);
        if r.header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
        {
            conn = Conn::open(port);
        }
        if i % 1000 == 999 {
            // JWT-shaped and garbage credentials too.
            for junk in [
                "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln",
                "Basic dXNlcjpwdw==",
                "Bearer",
            ] {
                let r = request(
                    port,
                    "POST",
                    "/mcp",
                    &[ACCEPT, JSON, ("Authorization", junk)],
                    body,
                );
                assert_eq!(r.status, 401, "{junk}: {}", r.text());
            }
        }
    }
    assert_eq!(seen.len(), 1);
    let log = d.log_text();
    assert!(
        !log.contains("evo_0000000000"),
        "a bad token's value reached the log"
    );
    assert!(
        log.contains("unknown or revoked API token"),
        "refusals are logged (without the value)"
    );
    assert!(
        !log.contains("eyJhbGciOiJSUzI1NiJ9"),
        "a JWT reached the log"
    );
    // Nothing else broke: the good token works.
    let mut c = HttpMcp::modern(port, Some(&good));
    assert_eq!(c.tools().len(), NATIVE_TOOLS.len());
}

#[test]
fn identities_have_their_roles_sessions_and_approvals() {
    let dir_cfg = json!({
        "mcpServers": {"fx": fixture_server(&[])},
        "profiles": {"coding": ["fx_echo"]}
    });
    let (d, port) = http_daemon(dir_cfg, authed(json!({})), &["--mode", "legacy"]);
    std::fs::write(
        d.dir.path().join("permissions.yml"),
        "roles:\n  readonly: { default_permission: deny, overrides: { fx_echo: allow } }\n  dev: { default_permission: allow }\nrules:\n  fx_cwd: require_approval\n",
    )
    .unwrap();
    let (code, _, err) = d.ctl(&["reload"]);
    assert_eq!(code, 0, "{err}");
    d.wait_ready(&["fx"]);
    let (code, _, err) = d.ctl(&["token", "create", "x", "--role", "nope"]);
    assert_eq!(code, 1, "an undefined role is refused");
    assert!(err.contains("readonly") && err.contains("dev"), "{err}");
    let (code, _, err) = d.ctl(&["token", "create", "x", "--profile", "nope"]);
    assert_eq!(code, 1, "an undefined profile is refused");
    assert!(err.contains("known profiles: coding"), "{err}");
    let alice = create_token(&d, &["alice", "--role", "dev", "--profile", "coding"]);
    let bob = create_token(&d, &["bob", "--role", "readonly"]);

    // The role decides what each identity's sessions see and may call.
    let mut a = HttpMcp::initialize(port, Some(&alice));
    let mut b = HttpMcp::initialize(port, Some(&bob));
    let a_tools = a.tools();
    let b_tools = b.tools();
    assert!(a_tools.contains(&"fx_add".to_string()), "{a_tools:?}");
    assert!(b_tools.contains(&"fx_echo".to_string()), "{b_tools:?}");
    assert!(
        !b_tools.contains(&"fx_add".to_string()),
        "readonly denies fx_add: {b_tools:?}"
    );
    let refused = b.call("fx_add", json!({"a": 1, "b": 2}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(result_text(&refused).contains("denied"), "{refused}");
    let mut b_modern = HttpMcp::modern(port, Some(&bob));
    assert!(!b_modern.tools().contains(&"fx_add".to_string()));

    // Another identity cannot use a session: 404, as if it did not exist.
    let stolen = HttpMcp {
        session: a.session.clone(),
        ..HttpMcp::modern(port, Some(&bob))
    }
    .call_method("tools/list", json!({}));
    assert_eq!(stolen.status, 404, "{}", stolen.text());
    let sid = a.session.clone().unwrap();
    let bob_auth = format!("Bearer {bob}");
    let r = request(
        port,
        "DELETE",
        "/mcp",
        &[("Mcp-Session-Id", &sid), ("Authorization", &bob_auth)],
        b"",
    );
    assert_eq!(r.status, 404, "bob cannot end alice's session");
    assert!(
        a.tools().contains(&"fx_add".to_string()),
        "alice's session lives on"
    );

    let sessions = d.ctl_json(&["sessions"]);
    let alices: Vec<&Value> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["identity"] == "token:alice")
        .collect();
    assert_eq!(alices.len(), 1, "{sessions:#}");
    assert_eq!(
        alices[0]["profile"], "coding",
        "the token's profile is carried: {sessions:#}"
    );
    assert_eq!(alices[0]["role"], "dev");

    // A held call is alice's: an approval never lets bob's identical call
    // through (bob's own dev token, so fx_cwd is visible to both).
    let bob_dev = create_token(&d, &["bob2", "--role", "dev"]);
    let mut b2 = HttpMcp::initialize(port, Some(&bob_dev));
    let held = a.call("fx_cwd", json!({}));
    assert_eq!(held["isError"], true);
    let id = result_text(&held)
        .split("evoctl approve ")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .unwrap_or_else(|| panic!("{held}"))
        .to_string();
    let pending = d.ctl_json(&["approvals"]);
    assert_eq!(
        pending["approvals"][0]["identity"], "token:alice",
        "{pending:#}"
    );
    let (code, _, err) = d.ctl(&["approve", &id]);
    assert_eq!(code, 0, "{err}");
    let other = b2.call("fx_cwd", json!({}));
    assert_eq!(other["isError"], true, "bob2's call is held anew: {other}");
    assert!(!result_text(&other).contains(&id), "{other}");
    let passed = a.call("fx_cwd", json!({}));
    assert_eq!(
        passed["isError"], false,
        "alice's approved call passes: {passed}"
    );
}

#[test]
fn metrics_count_calls_sessions_children_and_answers() {
    let (d, port) = http_daemon(
        json!({"mcpServers": {"fx": fixture_server(&[])}}),
        authed(json!({})),
        &["--mode", "legacy"],
    );
    d.wait_ready(&["fx"]);
    let token = create_token(&d, &["scraper"]);
    let r = request(port, "GET", "/metrics", &[], b"");
    assert_eq!(r.status, 401, "behind the credential: {}", r.text());
    let mut c = HttpMcp::initialize(port, Some(&token));
    c.call("fx_echo", json!({"text": "a"}));
    c.call("fx_fail", json!({"message": "no"}));
    c.call("fx_nope", json!({}));
    let auth = format!("Bearer {token}");
    let r = request(port, "GET", "/metrics", &[("Authorization", &auth)], b"");
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = r.text();
    for line in [
        r#"evo_tool_calls_total{server="fx",outcome="ok"} 1"#,
        r#"evo_tool_calls_total{server="fx",outcome="tool_error"} 1"#,
        r#"evo_tool_calls_total{server="",outcome="refused"} 1"#,
        r#"evo_tool_call_duration_seconds_count{server="fx"} 2"#,
        r#"evo_sessions{transport="http",era="initialize"} 1"#,
        r#"evo_children{state="ready"} 1"#,
        r#"evo_child_restarts{server="fx"} 0"#,
        r#"evo_http_requests_total{status="401"} 1"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
    assert!(text.contains("# TYPE evo_search_duration_seconds histogram"));
}

/// No passthrough: the credential a client presents to evod never reaches
/// a child; a remote child gets only the headers its config entry names.
#[test]
fn a_clients_token_is_never_passed_to_a_child() {
    let child = HttpChild::start("127.0.0.1:0", &[]);
    let url = child.url.clone();
    let (d, port) = http_daemon(
        json!({"mcpServers": {"web": {"type": "http", "url": url,
                                      "headers": {"Authorization": "Bearer child-secret"}}}}),
        authed(json!({})),
        &["--mode", "legacy"],
    );
    d.wait_ready(&["web"]);
    let token = create_token(&d, &["client"]);
    for mut c in [
        HttpMcp::initialize(port, Some(&token)),
        HttpMcp::modern(port, Some(&token)),
    ] {
        let r = c.call("web_echo", json!({"text": "through"}));
        assert_eq!(result_text(&r), "through", "{r}");
    }
    let seen: Vec<String> = child
        .stderr()
        .into_iter()
        .filter(|l| l.contains("Authorization"))
        .collect();
    assert!(
        seen.iter().any(|l| l.ends_with("Bearer child-secret")),
        "the child gets its own configured credential: {seen:?}"
    );
    assert!(
        seen.iter().all(|l| !l.contains(&token[4..])),
        "the client's token reached the child: {seen:?}"
    );
}
