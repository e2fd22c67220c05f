//! Scale-out: several evod instances sharing state through a real
//! `redis-server` (started here on a free loopback port with its own data
//! directory, killed at the end). Without redis-server on PATH each test
//! says "skipped".
//!
//! By topic: `store` (the store itself: reaching it, what it holds, Redis
//! faults), `sessions` (sessions, approvals, activations and streams moving
//! between instances), `integrity` (pins and trust shared), `soak` (many sessions through an instance kill and a
//! Redis restart).

mod integrity;
mod learning;
mod sessions;
mod soak;
mod store;

use evo_tests::harness::{
    http::request,
    instances::{Instance, instance, store_of},
    redis::Redis,
};
use serde_json::Value;

/// A Redis of the test's own and two instances on it, with `perms` as
/// their permissions; `None` (after saying "skipped") without redis-server.
fn two_instances(test: &str, perms: &str) -> Option<(Redis, Instance, Instance)> {
    let redis = Redis::start(test)?;
    let store = store_of(&redis);
    let a = instance(&store, perms, &[]);
    let b = instance(&store, perms, &[]);
    Some((redis, a, b))
}

fn readyz(port: u16) -> (u16, String) {
    let r = request(port, "GET", "/readyz", &[], b"");
    (r.status, r.text())
}

fn store_status(i: &Instance) -> Value {
    i.d.ctl_json(&["status"])["store"].clone()
}
