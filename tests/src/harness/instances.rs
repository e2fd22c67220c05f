//! Groups of evod instances sharing one store (scale-out): each its own
//! socket, cache and HTTP port, all on one Redis.

use serde_json::{Value, json};

use super::daemon::{Daemon, server};
use super::http::wait_http;
use super::ports::free_port;
use super::process::TempDir;
use super::redis::Redis;
use super::servers::fixture_server;

/// One evod instance of a group: its own socket, cache and HTTP port.
pub struct Instance {
    pub d: Daemon,
    pub port: u16,
}

/// The config every instance runs: the fixture server, HTTP on `port`,
/// the shared store.
pub fn instance_config(port: u16, store: &Value) -> Value {
    json!({
        "mcpServers": {"fx": fixture_server(&[])},
        "serve": {"http": {"listen": format!("127.0.0.1:{port}")}},
        "store": store,
    })
}

/// Starts an instance on `store` (with `perms` as its permissions file),
/// its fixture server's tools listed (live, or from the shared cache).
pub fn instance(store: &Value, perms: &str, env: &[(&str, &str)]) -> Instance {
    let i = instance_of(&|port| instance_config(port, store), perms, env);
    listed(&i);
    i
}

/// Waits until the instance's fixture server has tools listed.
fn listed(i: &Instance) {
    i.d.wait_status("fx listed", |s| {
        server(s, "fx").is_some_and(|v| v["tools"].as_u64() > Some(0))
    });
}

/// Starts an instance of the config `config(port)` makes.
pub fn instance_of(config: &dyn Fn(u16) -> Value, perms: &str, env: &[(&str, &str)]) -> Instance {
    let port = free_port();
    let dir = TempDir::new("inst");
    let cfg = dir.path().join("mcp.config.json");
    std::fs::write(&cfg, serde_json::to_vec_pretty(&config(port)).unwrap()).unwrap();
    if !perms.is_empty() {
        std::fs::write(dir.path().join("permissions.yml"), perms).unwrap();
    }
    let d = Daemon::start_raw(dir, cfg, &[], env);
    wait_http(&d, port);
    Instance { d, port }
}

/// The `store` config entry for `r` (its URL, and its CA with TLS).
pub fn store_of(r: &Redis) -> Value {
    let mut s = json!({"redis_url": r.url(), "prefix": "evo:"});
    if let Some(ca) = &r.tls_ca {
        s["tls_ca"] = json!(ca.display().to_string());
    }
    s
}

/// The id in "run `evoctl approve ID`".
pub fn approval_id(text: &str) -> String {
    let rest = text
        .split("evoctl approve ")
        .nth(1)
        .unwrap_or_else(|| panic!("an approval id in {text}"));
    rest.split('`').next().unwrap_or_default().to_string()
}

/// A permissions file holding every `fx_echo` call for approval.
pub const APPROVE: &str = "rules:\n  fx_echo: require_approval\n";
