//! The harness the integration tests and the benches share: it runs real
//! `evod`, `evoctl` and fixture processes in private temp directories and
//! speaks to them by hand (MCP JSON-RPC lines through `evoctl shim` or the
//! control socket, HTTP/1.1 on a loopback port), and starts the Redis and
//! certificates scale-out needs and the OTLP receiver traces need.

pub mod certs;
pub mod daemon;
pub mod http;
pub mod instances;
pub mod locations;
pub mod mcp;
pub mod otlp;
pub mod ports;
pub mod process;
pub mod redis;
pub mod registry;
pub mod servers;
pub mod wait;

use std::io::Write;
use std::thread;

/// Says, in one line that cargo's output capture does not swallow, that the
/// running test was not run and why.
pub fn skipped(why: &str) {
    let thread = thread::current();
    let test = thread.name().filter(|n| *n != "main").unwrap_or("a test");
    let _ = writeln!(std::io::stderr(), "{test} skipped: {why}");
}
