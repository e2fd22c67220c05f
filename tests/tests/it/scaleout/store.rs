//! The shared store itself: files without a Redis URL, reaching Redis (late,
//! with a password, over TLS), what it holds and what it never does, and
//! Redis killed under traffic.

use std::time::Duration;

use evo_tests::harness::{
    daemon::server,
    http::{HttpMcp, result_text, wait_http},
    instances::{APPROVE, approval_id, instance, instance_config, instance_of, store_of},
    redis::Redis,
    wait::eventually,
};
use serde_json::json;

use super::sessions::{asked, asking_call};
use super::{readyz, store_status, two_instances};

#[test]
fn without_a_redis_url_the_store_is_files() {
    let i = instance(&json!({}), "", &[]);
    let s = store_status(&i);
    assert_eq!(s["kind"], "file", "{s}");
    assert_eq!(s["ok"], true, "{s}");
    assert_eq!(readyz(i.port).0, 200);
}

#[test]
fn redis_unreachable_at_start_serves_says_so_and_catches_up() {
    // A port nobody listens on yet; Redis comes up there later.
    let Some(mut redis) = Redis::start("redis_unreachable_at_start") else {
        return;
    };
    redis.kill();
    let i = instance(&store_of(&redis), "", &[]);
    // It serves: calls to children work.
    let mut c = HttpMcp::initialize(i.port, None);
    let r = c.call("fx_echo", json!({"text": "hi"}));
    assert_eq!(r["isError"], false, "{r}");
    let (code, body) = readyz(i.port);
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("Redis") && body.contains(&redis.port.to_string()),
        "{body}"
    );
    eventually(
        "status to name the unreachable Redis",
        Duration::from_secs(10),
        || {
            store_status(&i)["error"]
                .as_str()
                .is_some_and(|e| e.contains("unreachable"))
        },
    );
    let s = store_status(&i);
    assert_eq!(
        (s["kind"].as_str(), s["ok"].as_bool()),
        (Some("redis"), Some(false)),
        "{s}"
    );
    assert!(
        i.d.log_text().contains("shared store unavailable"),
        "{}",
        i.d.log_text()
    );
    let (_, human, _) = i.d.ctl(&["status"]);
    assert!(
        human.contains("store: redis") && human.contains("UNAVAILABLE"),
        "{human}"
    );
    redis.restart();
    eventually(
        "readyz to turn 200 once Redis is up",
        Duration::from_secs(15),
        || readyz(i.port).0 == 200,
    );
    assert_eq!(store_status(&i)["ok"], true);
}

#[test]
fn a_wrong_password_is_a_clear_error_and_the_right_one_works() {
    let Some(redis) = Redis::start_with("redis_password", Some("s3cret-pw"), false) else {
        return;
    };
    let wrong = json!({"redis_url": format!("redis://:nope@127.0.0.1:{}", redis.port)});
    let i = instance(&wrong, "", &[]);
    eventually("the refusal to show", Duration::from_secs(10), || {
        store_status(&i)["error"]
            .as_str()
            .is_some_and(|e| e.contains("password"))
    });
    let (code, body) = readyz(i.port);
    assert_eq!(code, 503);
    assert!(body.contains("password"), "{body}");
    assert!(
        !body.contains("nope"),
        "the password is never shown: {body}"
    );
    assert!(!i.d.log_text().contains("nope"), "nor logged");
    let right = instance(&store_of(&redis), "", &[]);
    eventually("the store to be reachable", Duration::from_secs(10), || {
        store_status(&right)["ok"] == true
    });
    assert!(
        store_status(&right)["url"]
            .as_str()
            .is_some_and(|u| u.contains("***") && !u.contains("s3cret"))
    );
}

#[test]
fn rediss_with_a_private_ca_works() {
    let Some(redis) = Redis::start_with("rediss", None, true) else {
        return;
    };
    let i = instance(&store_of(&redis), "", &[]);
    eventually(
        "the TLS store to be reachable",
        Duration::from_secs(10),
        || store_status(&i)["ok"] == true,
    );
    assert_eq!(readyz(i.port).0, 200);
}

#[test]
fn a_later_instance_serves_the_catalog_from_redis_without_starting_children() {
    let Some(redis) = Redis::start("catalog") else {
        return;
    };
    let store = store_of(&redis);
    let a = instance(&store, "", &[]);
    eventually("A's catalog in Redis", Duration::from_secs(20), || {
        redis.cli(&["HLEN", "evo:catalog"]).trim() != "0"
    });
    let b = instance_of(&|port| instance_config(port, &store), "", &[]);
    let s = b.d.ctl_json(&["status"]);
    let fx = server(&s, "fx").unwrap();
    assert_eq!(
        fx["state"], "idle",
        "listed from the store, not started: {fx}"
    );
    assert_eq!(fx["source"], "cache", "{fx}");
    assert!(fx["cached_tools"].as_u64() > Some(5), "{fx}");
    assert!(fx["pid"].is_null(), "no child spawned: {fx}");
    let mut c = HttpMcp::initialize(b.port, None);
    assert_eq!(
        result_text(&c.call("fx_echo", json!({"text": "lazy"}))),
        "lazy"
    );
    assert_eq!(
        server(&b.d.ctl_json(&["status"]), "fx").unwrap()["state"],
        "ready"
    );
    // Another config hash: the stored entry does not apply.
    let other = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["mcpServers"]["fx"]["env"] = json!({"FX_OTHER": "1"});
        cfg
    };
    let changed = instance_of(&other, "", &[]);
    let fx = server(&changed.d.ctl_json(&["status"]), "fx")
        .unwrap()
        .clone();
    assert_ne!(fx["source"], "cache", "{fx}");
    // Older than cache.max_age_hours: listed at once, re-discovered at once.
    let stale = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["cache"] = json!({"max_age_hours": 0});
        cfg
    };
    let s = instance_of(&stale, "", &[]);
    s.d.wait_ready(&["fx"]);
    assert!(
        s.d.log_text().contains("listed from cache") && s.d.log_text().contains("stale"),
        "{}",
        s.d.log_text()
    );
    drop(a);
}

#[test]
fn no_secret_reaches_redis() {
    let Some(redis) = Redis::start("secrets") else {
        return;
    };
    const ENV_SECRET: &str = "env-secret-4f9a1c";
    let store = store_of(&redis);
    let config = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["mcpServers"]["fx"]["env"] = json!({"FX_API_KEY": ENV_SECRET});
        cfg["serve"]["http"]["auth"] = json!({"tokens_file": "tokens.json"});
        cfg
    };
    let i = instance_of(&config, APPROVE, &[]);
    i.d.wait_ready(&["fx"]);
    let (code, out, err) = i.d.ctl(&["token", "create", "alice"]);
    assert_eq!(code, 0, "{err}");
    let token = out.trim().to_string();
    let mut c = HttpMcp::initialize(i.port, Some(&token));
    assert_eq!(c.call("fx_add", json!({"a": 1, "b": 2}))["isError"], false);
    let held = c.call("fx_echo", json!({"text": "x"}));
    let id = approval_id(&result_text(&held));
    assert_eq!(i.d.ctl(&["approve", &id]).0, 0);
    assert_eq!(c.call("fx_echo", json!({"text": "x"}))["isError"], false);
    let mut s = i.d.session(&["--session", "named"]);
    s.initialize();
    let _ = s.call("fx_add", json!({"a": 1, "b": 1}));
    // Retry-loop counts, SSE events (a list_changed on the session's
    // stream), an in-band approval question, the instance's sessions.
    let _ = c.call("fx_fail", json!({"message": "boom"}));
    let id = c.session.clone().unwrap();
    assert_eq!(i.d.ctl(&["activate", "--session", &id, "fx_sleep"]).0, 0);
    let mut modern = HttpMcp::modern(i.port, Some(&token));
    asked(&asking_call(&mut modern, json!({})));
    eventually("the catalog in Redis", Duration::from_secs(20), || {
        redis.cli(&["HLEN", "evo:catalog"]).trim() != "0"
    });
    eventually(
        "the sessions' record in Redis",
        Duration::from_secs(20),
        || redis.dump().contains("evo:inst:"),
    );
    let dump = redis.dump();
    for key in [
        "evo:http:session:",
        "evo:act:",
        "evo:brk:",
        "evo:ev:",
        "evo:ask:",
        "evo:inst:",
    ] {
        assert!(dump.contains(key), "{key} in {dump}");
    }
    assert!(
        dump.contains("token:alice"),
        "the identity's name is kept: {dump}"
    );
    for secret in [ENV_SECRET, token.as_str(), token.trim_start_matches("evo_")] {
        assert!(!dump.contains(secret), "{secret} reached Redis");
    }
}

#[test]
fn redis_killed_mid_traffic_degrades_clearly_and_catches_up() {
    let Some((mut redis, a, b)) = two_instances("redis_killed", APPROVE) else {
        return;
    };
    let mut c = HttpMcp::initialize(a.port, None);
    let id = c.session.clone().unwrap();
    // A decided approval, not yet used: it must survive Redis's restart.
    let held = c.call("fx_echo", json!({"text": "keep"}));
    let ap = approval_id(&result_text(&held));
    assert_eq!(b.d.ctl(&["approve", &ap]).0, 0);
    redis.kill();
    // Calls to children go on.
    for _ in 0..5 {
        let r = c.call("fx_pid", json!({}));
        assert_eq!(r["isError"], false, "{r}");
    }
    // Cross-instance features say why they cannot serve.
    let r = c.call("fx_echo", json!({"text": "other"}));
    let text = result_text(&r);
    assert!(
        r["isError"] == true
            && text.contains("approvals cannot be checked now")
            && text.contains("Redis"),
        "{text}"
    );
    let mut on_b = HttpMcp {
        port: b.port,
        token: None,
        session: Some(id.clone()),
        next: 50,
    };
    let r = on_b.call_method("tools/list", json!({}));
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("unavailable"), "{}", r.text());
    let (code, _, err) = b.d.ctl(&["approve", "ap999"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unavailable"), "{err}");
    eventually("readyz to say so", Duration::from_secs(10), || {
        let (code, body) = readyz(a.port);
        code == 503 && body.contains("Redis")
    });
    assert_eq!(store_status(&a)["ok"], false);
    // A change made meanwhile, on the instance holding the session.
    let (code, out, err) = a.d.ctl(&["activate", "--session", &id, "fx_add"]);
    assert_eq!(code, 0, "{out}{err}");
    redis.restart();
    eventually("readyz to recover", Duration::from_secs(15), || {
        readyz(a.port).0 == 200
    });
    // Caught up: the session continues on B with its activations.
    eventually("B to serve the session", Duration::from_secs(10), || {
        on_b.call_method("tools/list", json!({})).status == 200
    });
    eventually(
        "the activation made during the outage on B",
        Duration::from_secs(10),
        || on_b.tools().contains(&"fx_add".to_string()),
    );
    // The approval decided before the outage passes once.
    let r = on_b.call("fx_echo", json!({"text": "keep"}));
    assert_eq!(r["isError"], false, "{r}");
    let r = c.call("fx_echo", json!({"text": "keep"}));
    assert_eq!(r["isError"], true, "used once: {r}");
}

#[test]
fn api_tokens_work_with_redis_down_at_start_and_catch_up() {
    let Some(mut redis) = Redis::start("tokens_redis_down") else {
        return;
    };
    let store = store_of(&redis);
    let config = |port: u16| {
        let mut cfg = instance_config(port, &store);
        cfg["serve"]["http"]["auth"] = json!({});
        cfg
    };
    let mut a = instance_of(&config, "", &[]);
    let (code, out, err) = a.d.ctl(&["token", "create", "dan"]);
    assert_eq!(code, 0, "{err}");
    let token = out.trim().to_string();
    // This machine keeps a copy of the store's records (hashes only).
    let copy = a.d.dir.path().join("tokens.json");
    eventually(
        "the local copy of the records",
        Duration::from_secs(10),
        || std::fs::read_to_string(&copy).is_ok_and(|t| t.contains("\"dan\"")),
    );
    assert!(!std::fs::read_to_string(&copy).unwrap().contains(&token));
    a.d.stop();
    redis.kill();
    // Started with Redis down: the copy is in force, state features say why.
    a.d.spawn(&[], &[]);
    wait_http(&a.d, a.port);
    let mut c = HttpMcp::initialize(a.port, Some(&token));
    let r = c.call("fx_add", json!({"a": 2, "b": 3}));
    assert_eq!(result_text(&r), "5", "{r}");
    let (code, body) = readyz(a.port);
    assert!(code == 503 && body.contains("Redis"), "{code} {body}");
    let (code, _, err) = a.d.ctl(&["token", "create", "eve"]);
    assert_eq!(code, 1, "no token without the store: {err}");
    assert!(err.contains("Redis") || err.contains("store"), "{err}");
    let wrong = HttpMcp {
        port: a.port,
        token: Some("evo_not-a-token".into()),
        session: None,
        next: 1,
    }
    .post(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "evo-it", "version": "1"}}}),
        &[],
    );
    assert_eq!(wrong.status, 401, "{}", wrong.text());
    // Redis back: caught up; a revocation on another instance is obeyed.
    redis.restart();
    eventually(
        "readyz 200 once Redis is back",
        Duration::from_secs(20),
        || readyz(a.port).0 == 200,
    );
    let b = instance_of(&config, "", &[]);
    let (code, _, err) = b.d.ctl(&["token", "revoke", "dan"]);
    assert_eq!(code, 0, "{err}");
    eventually(
        "A to refuse the revoked token",
        Duration::from_secs(20),
        || c.call_method("tools/list", json!({})).status == 401,
    );
    eventually("A's copy to drop it", Duration::from_secs(10), || {
        std::fs::read_to_string(&copy).is_ok_and(|t| !t.contains("\"dan\""))
    });
}

/// Commands Redis ran since the last `CONFIG RESETSTAT`, by name: health
/// pings, the statistics' own commands and each instance's session list
/// (a `SET` every 3 s, whatever the traffic) left out.
fn commands_since_reset(redis: &Redis) -> std::collections::BTreeMap<String, u64> {
    redis
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .filter(|(name, _)| {
            !(matches!(name.as_str(), "ping" | "info" | "set") || name.starts_with("config"))
        })
        .collect()
}

#[test]
fn a_plain_call_reads_nothing_from_redis_on_any_instance() {
    let Some((redis, a, b)) = two_instances("plain_call_commands", "") else {
        return;
    };
    // Each instance serves the session once, then 10 calls alternate
    // between them: the commands Redis ran for those 10.
    let ten_calls = |c: &mut HttpMcp| {
        for n in 0..12 {
            if n == 2 {
                redis.cli(&["CONFIG", "RESETSTAT"]);
            }
            c.port = [a.port, b.port][n % 2];
            assert_eq!(c.call("fx_echo", json!({"text": "x"}))["isError"], false);
        }
        commands_since_reset(&redis)
    };
    // An initialize-era session opened on A. Each response is stored for
    // resumption (one pipeline); nothing is read for the retry-loop count,
    // on the opener or the other.
    let mut c = HttpMcp::initialize(a.port, None);
    let only: std::collections::BTreeMap<String, u64> =
        [("xadd".to_string(), 10), ("expire".to_string(), 10)].into();
    assert_eq!(ten_calls(&mut c), only, "initialize era");
    // 2026-07-28: the identity's count is read once per instance, then
    // nothing at all (a response answered as JSON is not an SSE event).
    let seen = ten_calls(&mut HttpMcp::modern(a.port, None));
    assert!(
        seen.keys().all(|k| k == "xadd" || k == "expire"),
        "2026-07-28 calls read nothing: {seen:?}"
    );
    // A failure is written, announced, and seen by the other instance
    // without a read there. (A first failure with other arguments
    // activates the tool in the session, which is shared and announced
    // too: done before counting.)
    c.port = a.port;
    assert_eq!(
        c.call("fx_fail", json!({"message": "warm"}))["isError"],
        true
    );
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let fail = json!({"message": "boom"});
    assert_eq!(c.call("fx_fail", fail.clone())["isError"], true);
    std::thread::sleep(Duration::from_millis(300));
    c.port = b.port;
    let r = c.call("fx_fail", fail.clone());
    assert!(r["content"].to_string().contains("failure 2"), "{r}");
    let seen = commands_since_reset(&redis);
    assert_eq!(
        seen.get("hget"),
        Some(&2),
        "only the failure scripts read the hash: {seen:?}"
    );
    assert!(!seen.contains_key("hgetall"), "{seen:?}");
    assert_eq!(
        seen.get("publish"),
        Some(&2),
        "each failure announced: {seen:?}"
    );
}
