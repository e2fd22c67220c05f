//! What search learns from use, shared through the store: a call after a
//! search on one instance teaches every instance, one started later too,
//! and `evoctl search forget` on one forgets on all.

use std::time::Duration;

use evo_tests::harness::{
    instances::{Instance, instance_config, instance_of, store_of},
    redis::Redis,
    servers::replayed,
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

/// A reformulation the plain ranking puts `git_log` far down for, and the
/// same request in slightly other words.
const FEEDBACK: &str = "see who wrote the last few changes";
const TEST: &str = "who wrote the last few changes";

fn git_instance(store: &Value) -> Instance {
    let i = instance_of(
        &|port| {
            let mut c = instance_config(port, store);
            c["mcpServers"]["git"] = replayed("git");
            c
        },
        "",
        &[],
    );
    // Listed: started, or (a later instance) served from the store's catalog.
    i.d.wait_status("git listed", |s| {
        s["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["id"] == "git" && v["tools"].as_u64() > Some(0))
    });
    i
}

fn learned(i: &Instance) -> u64 {
    i.d.ctl_json(&["status"])["search"]["learned"]
        .as_u64()
        .expect("status --json search.learned")
}

fn first(i: &Instance, query: &str) -> String {
    let mut c = i.d.session(&["--mode", "dynamic"]);
    c.initialize();
    let (text, e) = c.call_text("discover_tools", json!({"query": query, "activate": false}));
    assert!(!e, "{text}");
    text.lines().next().unwrap_or_default().to_string()
}

#[test]
fn what_one_instance_learns_every_instance_uses() {
    let Some(redis) = Redis::start("shared_learning") else {
        return;
    };
    let store = store_of(&redis);
    let a = git_instance(&store);
    let b = git_instance(&store);
    assert!(
        !first(&b, TEST).starts_with("git_log — "),
        "the test needs a query that does not find git_log first unlearned"
    );

    let mut c = a.d.session(&["--mode", "dynamic"]);
    c.initialize();
    let (text, e) = c.call_text("discover_tools", json!({"query": FEEDBACK}));
    assert!(!e, "{text}");
    let (text, e) = c.call_text(
        "call_tool",
        json!({"name": "git_log", "arguments": {"repo_path": "."}}),
    );
    assert!(!e, "{text}");
    drop(c);

    // B learns it from the store, without a call of its own.
    eventually(
        with_log("B learned from A", &b.d.log),
        Duration::from_secs(10),
        || learned(&b) == 1,
    );
    let on_b = first(&b, TEST);
    assert!(on_b.starts_with("git_log — "), "B: {on_b}");

    // An instance started now reads what was learned from the store.
    let late = git_instance(&store);
    eventually(
        with_log("a late instance read the store", &late.d.log),
        Duration::from_secs(10),
        || learned(&late) == 1,
    );
    assert!(first(&late, TEST).starts_with("git_log — "));
    // No file of its own under scale-out: the store holds it.
    assert!(!late.d.cache.join("learned-queries.json").exists());

    // Forgotten on B: forgotten on A and the late one too.
    let (code, out, err) = b.d.ctl(&["search", "forget", "git_log"]);
    assert_eq!(code, 0, "{out}{err}");
    for (name, i) in [("A", &a), ("late", &late), ("B", &b)] {
        eventually(
            with_log(&format!("{name} forgot"), &i.d.log),
            Duration::from_secs(10),
            || learned(i) == 0,
        );
    }
    assert!(!first(&a, TEST).starts_with("git_log — "));
}
