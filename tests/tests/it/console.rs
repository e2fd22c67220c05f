//! The web console's door through real processes, without a browser
//! (`tests/interop/test_console.py` drives headless Chromium): `evoctl ui`,
//! the one-time link, the cookie, CSRF, the allow-list, a restart.

use evo_tests::harness::{
    daemon::Daemon,
    http::{Reply, request},
    servers::fixture_server,
    wait::eventually,
};
use serde_json::{Value, json};

/// `evoctl ui --json`: (port, the link's path).
fn ui(d: &Daemon) -> (u16, String, Value) {
    let v = d.ctl_json(&["ui", "--no-browser"]);
    let url = v["url"].as_str().unwrap_or_default().to_string();
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("not a loopback console: {v}"));
    let (port, path) = rest.split_once('/').unwrap();
    (port.parse().unwrap(), format!("/{path}"), v)
}

fn cookie_of(r: &Reply) -> String {
    let set = r.header("set-cookie").unwrap_or_default();
    set.split(';')
        .next()
        .and_then(|kv| kv.strip_prefix("evo_console="))
        .unwrap_or_else(|| panic!("no console cookie: {set:?}"))
        .to_string()
}

fn csrf_of(page: &Reply) -> String {
    let text = page.text();
    let at = text
        .find("name=\"csrf\" content=\"")
        .unwrap_or_else(|| panic!("no csrf meta in {text}"));
    text[at + 21..].split('"').next().unwrap().to_string()
}

fn post(port: u16, cookie: &str, csrf: Option<&str>, body: &Value) -> Reply {
    let c = format!("evo_console={cookie}");
    let mut headers = vec![("Cookie", c.as_str()), ("Content-Type", "application/json")];
    if let Some(t) = csrf {
        headers.push(("X-CSRF-Token", t));
    }
    request(
        port,
        "POST",
        "/ui/api/ctl",
        &headers,
        body.to_string().as_bytes(),
    )
}

#[test]
fn a_one_time_link_signs_in_once_and_every_post_needs_its_csrf_token() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    d.wait_ready(&["fx"]);
    let (port, link, v) = ui(&d);
    assert_eq!(v["served"], "loopback");
    assert_eq!(v["expires_s"], 600);
    let signed = request(port, "GET", &link, &[], b"");
    assert_eq!(signed.status, 200, "{}", signed.text());
    let set = signed.header("set-cookie").unwrap_or_default().to_string();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(set.contains(part), "{set}");
    }
    let cookie = cookie_of(&signed);
    let again = request(port, "GET", &link, &[], b"");
    assert_eq!(again.status, 401);
    assert!(again.text().contains("already used"), "{}", again.text());

    let with = format!("evo_console={cookie}");
    let page = request(port, "GET", "/ui/", &[("Cookie", &with)], b"");
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-security-policy")
            .is_some_and(|c| c.contains("default-src 'self'"))
    );
    let csrf = csrf_of(&page);
    let status = post(port, &cookie, Some(&csrf), &json!({"cmd": "status"}));
    assert_eq!(status.status, 200);
    let v: Value = serde_json::from_slice(&status.body).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["data"]["servers"][0]["state"], "ready");

    // The same request evoctl sends gets the same answer.
    let through_console = post(port, &cookie, Some(&csrf), &json!({"cmd": "approvals"}));
    let v: Value = serde_json::from_slice(&through_console.body).unwrap();
    assert_eq!(v["data"], d.ctl_json(&["approvals"]));

    assert_eq!(
        post(port, &cookie, None, &json!({"cmd": "reload"})).status,
        403
    );
    assert_eq!(
        post(port, &cookie, Some("nope"), &json!({"cmd": "reload"})).status,
        403
    );
    assert_eq!(
        post(
            port,
            &"0".repeat(64),
            Some(&csrf),
            &json!({"cmd": "reload"})
        )
        .status,
        401
    );
    assert_eq!(
        post(port, &cookie, Some(&csrf), &json!({"cmd": "stop"})).status,
        403
    );
    assert_eq!(
        post(port, &cookie, Some(&csrf), &json!({"cmd": "token_list"})).status,
        403
    );
    // DNS rebinding and other sites.
    let evil_host = request(
        port,
        "GET",
        "/ui/",
        &[("Host", "evil.example"), ("Cookie", &with)],
        b"",
    );
    assert_eq!(evil_host.status, 403);
    let evil_origin = request(
        port,
        "POST",
        "/ui/api/ctl",
        &[
            ("Cookie", &with),
            ("X-CSRF-Token", &csrf),
            ("Origin", "https://evil.example"),
        ],
        br#"{"cmd":"reload"}"#,
    );
    assert_eq!(evil_origin.status, 403);
    // The pages are small and all evod's own.
    let weight: usize = ["/ui/", "/ui/console.css", "/ui/console.js"]
        .iter()
        .map(|p| {
            request(port, "GET", p, &[("Cookie", &with)], b"")
                .body
                .len()
        })
        .sum();
    assert!(weight < 200_000, "{weight} bytes");
    // Another `evoctl ui`: the same console, a new link.
    let (port2, link2, _) = ui(&d);
    assert_eq!(port2, port);
    assert_ne!(link2, link);
}

#[test]
fn a_signed_in_browser_stays_signed_in_across_a_restart() {
    let mut d = Daemon::start(&json!({"mcpServers": {}}));
    let (port, link, _) = ui(&d);
    let cookie = cookie_of(&request(port, "GET", &link, &[], b""));
    let saved = d.cache.join("console.json");
    let text = std::fs::read_to_string(&saved).unwrap();
    assert!(
        !text.contains(&cookie),
        "the cookie itself is never written"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    d.stop();
    d.spawn(&[], &[]);
    // The console listens again at once, where the page knows it.
    let with = format!("evo_console={cookie}");
    let mut page = None;
    eventually(
        "the console back on its port",
        std::time::Duration::from_secs(10),
        || {
            page = std::net::TcpStream::connect(("127.0.0.1", port))
                .is_ok()
                .then(|| request(port, "GET", "/ui/", &[("Cookie", &with)], b""));
            page.is_some()
        },
    );
    assert_eq!(page.map(|p| p.status), Some(200));
}

/// Config and permissions health as the console reads it (`status`
/// through its API): a permissions file that does not exist is said to be
/// missing (its defaults apply), not shown as a file that loaded; once
/// written and reloaded, it is a file again.
#[test]
fn a_missing_permissions_file_is_shown_missing() {
    let d = Daemon::start(&json!({"mcpServers": {}}));
    let (port, link, _) = ui(&d);
    let cookie = cookie_of(&request(port, "GET", &link, &[], b""));
    let with = format!("evo_console={cookie}");
    let csrf = csrf_of(&request(port, "GET", "/ui/", &[("Cookie", &with)], b""));
    let health = || {
        let r = post(port, &cookie, Some(&csrf), &json!({"cmd": "status"}));
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        v["data"]["permissions"].clone()
    };
    let p = health();
    assert_eq!(
        (p["ok"].clone(), p["missing"].clone()),
        (json!(true), json!(true)),
        "{p:#}"
    );
    std::fs::write(d.config.with_file_name("permissions.yml"), "rules: {}\n").unwrap();
    d.ctl_json(&["reload"]);
    let p = health();
    assert!(p.get("missing").is_none_or(|m| m == false), "{p:#}");
}
