//! The persistent catalog cache: atomic persistence without secrets, lazy
//! start from a matching entry, stale-while-revalidate, bad caches, and live
//! re-discovery (child list_changed, evoctl refresh).

use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, server},
    locations::fixture,
    process::{TempDir, gone_within},
    servers::fixture_server,
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

const SECRET: &str = "sk-live-ZXhhbXBsZS1zZWNyZXQtdmFsdWU";

fn config() -> Value {
    json!({"mcpServers": {
        "fx": {"command": fixture().to_string_lossy(),
               "env": {"API_KEY": SECRET, "SEARCHTOOL": "true"}},
        "two": fixture_server(&["--name", "two"])
    }})
}

fn cache_file(d: &Daemon) -> std::path::PathBuf {
    d.cache.join("catalog.json")
}

/// Waits until the cache file lists `n` servers.
fn wait_cache(d: &Daemon, n: usize) -> Value {
    let mut cache = Value::Null;
    eventually(
        with_log(&format!("the cache to list {n} servers"), &d.log),
        Duration::from_secs(10),
        || {
            cache = std::fs::read(cache_file(d))
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or_default();
            cache["servers"].as_array().is_some_and(|s| s.len() == n)
        },
    );
    cache
}

#[test]
fn cache_persists_without_secrets_and_serves_a_lazy_start() {
    let mut d = Daemon::start(&config());
    d.wait_ready(&["fx", "two"]);
    let cache = wait_cache(&d, 2);
    let fx = cache["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "fx")
        .unwrap();
    assert_eq!(fx["tools"].as_array().unwrap().len(), 14);
    assert_eq!(
        fx["capabilities"],
        json!(["search"]),
        "env flag SEARCHTOOL=true"
    );
    assert_eq!(fx["config_hash"].as_str().unwrap().len(), 64);
    // Drift columns after a first discovery: what is cached is what is live.
    let st = d.ctl_json(&["status"]);
    let live = server(&st, "fx").unwrap();
    assert_eq!(
        (&live["cached_tools"], &live["live_tools"]),
        (&json!(14), &json!(14)),
        "{live}"
    );
    let (_, status_text, _) = d.ctl(&["status", "--json"]);
    for (what, text) in [
        ("cache", std::fs::read_to_string(cache_file(&d)).unwrap()),
        ("log", d.log_text()),
        ("status", status_text),
    ] {
        assert!(!text.contains(SECRET), "the secret leaked into the {what}");
    }
    // Restart: served from cache at once, no child spawned.
    d.stop();
    d.spawn(&[], &[]);
    let s = d.ctl_json(&["status"]);
    for id in ["fx", "two"] {
        let srv = server(&s, id).unwrap();
        assert_eq!(srv["state"], "idle", "{srv}");
        assert_eq!(srv["source"], "cache");
        assert_eq!(srv["cached_tools"], 14);
        assert!(srv["pid"].is_null(), "no child spawned: {srv}");
    }
    let mut c = d.legacy_session();
    assert!(c.tool_names().contains(&"two_echo".to_string()));
    // The first call spawns the child and succeeds.
    assert_eq!(
        c.call_text("two_echo", json!({"text": "lazy"})),
        ("lazy".into(), false)
    );
    let s = d.ctl_json(&["status"]);
    let two = server(&s, "two").unwrap();
    assert_eq!(two["state"], "ready");
    assert_eq!(two["source"], "live");
    assert_eq!(two["live_tools"], 14);
    assert!(two["pid"].is_u64());
    assert_eq!(
        server(&s, "fx").unwrap()["state"],
        "idle",
        "fx is still not started"
    );
    // Capabilities are known without the server running.
    let (text, _) = c.call_text("describe_capability", json!({}));
    assert!(text.contains("fx: search"), "{text}");
}

#[test]
fn a_changed_config_is_not_served_from_cache() {
    let mut d = Daemon::start(&config());
    d.wait_ready(&["fx", "two"]);
    wait_cache(&d, 2);
    d.stop();
    let mut cfg = config();
    cfg["mcpServers"]["two"]["args"] = json!(["--name", "renamed"]);
    std::fs::write(&d.config, serde_json::to_vec(&cfg).unwrap()).unwrap();
    d.spawn(&[], &[]);
    let s = d.wait_ready(&["two"]);
    assert_eq!(server(&s, "fx").unwrap()["state"], "idle");
    assert_eq!(server(&s, "two").unwrap()["source"], "live");
}

#[test]
fn stale_entries_are_served_then_revalidated_in_the_background() {
    let mut cfg = config();
    cfg["cache"] = json!({"max_age_hours": 0.0000001});
    let mut d = Daemon::start(&cfg);
    d.wait_ready(&["fx", "two"]);
    wait_cache(&d, 2);
    d.stop();
    d.spawn(&[], &[]);
    let first = d.ctl_json(&["list", "--all"]);
    assert_eq!(
        first["tools"].as_array().unwrap().len(),
        28,
        "served from cache at once"
    );
    // Re-discovered without any call.
    let s = d.wait_status("background revalidation", |s| {
        ["fx", "two"]
            .iter()
            .all(|id| server(s, id).is_some_and(|v| v["source"] == "live"))
    });
    assert_eq!(server(&s, "fx").unwrap()["state"], "ready");
}

#[test]
fn corrupt_foreign_and_newer_caches_are_discarded() {
    for (what, content) in [
        ("corrupt", "{\"format\": 1, \"servers\": [ {\"id\": "),
        ("newer", "{\"format\": 99, \"servers\": []}"),
        ("garbage", "\u{0}\u{1}binary"),
    ] {
        let dir = TempDir::new("cc");
        let cfg_path = dir.path().join("mcp.config.json");
        std::fs::write(&cfg_path, serde_json::to_vec(&config()).unwrap()).unwrap();
        std::fs::create_dir_all(dir.path().join("cache")).unwrap();
        std::fs::write(dir.path().join("cache/catalog.json"), content).unwrap();
        let d = Daemon::start_raw(dir, cfg_path, &[], &[]);
        let s = d.wait_ready(&["fx", "two"]);
        assert_eq!(server(&s, "fx").unwrap()["source"], "live", "{what}");
        assert!(
            d.log_text().contains("catalog cache"),
            "{what}: a warning is logged"
        );
        // The cache is rewritten whole.
        wait_cache(&d, 2);
    }
}

#[test]
fn a_cache_for_servers_no_longer_configured_is_ignored() {
    let mut d = Daemon::start(&config());
    d.wait_ready(&["fx", "two"]);
    wait_cache(&d, 2);
    d.stop();
    let cfg = json!({"mcpServers": {"two": fixture_server(&["--name", "two"])}});
    std::fs::write(&d.config, serde_json::to_vec(&cfg).unwrap()).unwrap();
    d.spawn(&[], &[]);
    let l = d.ctl_json(&["list", "--all"]);
    assert!(
        l["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["name"].as_str().unwrap().starts_with("two_"))
    );
    let mut c = d.legacy_session();
    c.call_text("two_echo", json!({"text": "x"}));
    // The next write drops the unconfigured server.
    eventually(
        "the cache to drop the unconfigured server",
        Duration::from_secs(10),
        || {
            let v: Value = serde_json::from_slice(&std::fs::read(cache_file(&d)).unwrap()).unwrap();
            v["servers"].as_array().unwrap().len() == 1
        },
    );
}

#[test]
fn child_list_changed_and_evoctl_refresh_rediscover() {
    let d = Daemon::start(&config());
    d.wait_ready(&["fx", "two"]);
    let mut c = d.legacy_session();
    assert_eq!(
        c.call_text("two_add_tool", json!({"name": "fresh"})).0,
        "added"
    );
    // The daemon re-lists the child; the session hears list_changed.
    eventually("two_fresh to be listed", Duration::from_secs(10), || {
        c.tool_names().contains(&"two_fresh".to_string())
    });
    c.await_list_changed(0);
    assert_eq!(c.call_text("two_fresh", json!({"text": "new"})).0, "new");
    // evoctl refresh restarts and re-discovers (the added tool is gone again).
    let before = server(&d.ctl_json(&["status"]), "two").unwrap()["pid"].clone();
    let r = d.ctl_json(&["refresh", "two"]);
    assert_eq!(r["restarted"], json!(["two"]));
    let s = d.wait_status("refreshed", |s| {
        server(s, "two")
            .is_some_and(|v| v["state"] == "ready" && v["pid"] != before && v["tools"] == 14)
    });
    assert_eq!(server(&s, "two").unwrap()["source"], "live");
    let (code, _, err) = d.ctl(&["refresh", "nosuch"]);
    assert_eq!(code, 1);
    assert!(err.contains("nosuch"));
}

#[test]
fn idle_children_stop_and_start_again_on_demand() {
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": {"command": fixture().to_string_lossy(), "idle_timeout_s": 0.4}
    }}));
    d.wait_ready(&["fx"]);
    let mut c = d.legacy_session();
    let first: u32 = c.call_text("fx_pid", json!({})).0.parse().unwrap();
    let s = d.wait_status("idle stop", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "idle")
    });
    assert!(server(&s, "fx").unwrap()["pid"].is_null());
    assert!(
        gone_within(first, Duration::from_secs(5)),
        "the idle child was stopped"
    );
    let second: u32 = c.call_text("fx_pid", json!({})).0.parse().unwrap();
    assert_ne!(first, second, "started again on demand");
}

#[test]
fn failed_or_empty_discovery_keeps_the_last_good_tools() {
    let dir = TempDir::new("lastgood");
    let broken = dir.path().join("broken");
    let empty = dir.path().join("empty");
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": fixture_server(&["--exit-if", &broken.to_string_lossy(), "--empty-if", &empty.to_string_lossy()])
    }}));
    d.wait_ready(&["fx"]);
    // An empty re-listing keeps the last good list.
    std::fs::write(&empty, "").unwrap();
    d.ctl_json(&["refresh", "fx"]);
    let s = d.wait_status("re-listed empty", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready" && v["live_tools"] == 0)
    });
    assert_eq!(
        server(&s, "fx").unwrap()["tools"],
        14,
        "kept the last good tools"
    );
    assert!(d.log_text().contains("keeping the last good list"));
    std::fs::remove_file(&empty).unwrap();
    // A server that fails to start again keeps its tools listed.
    std::fs::write(&broken, "").unwrap();
    d.ctl_json(&["refresh", "fx"]);
    let s = d.wait_status("failing restarts", |s| {
        server(s, "fx").is_some_and(|v| v["state"] != "ready" && v["restarts"].as_u64() >= Some(1))
    });
    assert_eq!(server(&s, "fx").unwrap()["tools"], 14);
    let l = d.ctl_json(&["list", "--all"]);
    assert_eq!(l["tools"].as_array().unwrap().len(), 14);
    // Once it can start again (retried with backoff), it is back.
    std::fs::remove_file(&broken).unwrap();
    d.ctl_json(&["refresh", "fx"]);
    d.wait_ready(&["fx"]);
}
