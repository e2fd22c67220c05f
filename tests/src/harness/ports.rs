//! Loopback ports for the servers the tests start (evod's HTTP endpoint,
//! Redis, fixtures serving HTTP).

use std::net::TcpListener;
use std::sync::Mutex;

/// A free loopback port (bound, then released for evod to take), and never
/// one this process handed out before: the kernel may give the same free
/// port to two `bind(0)` calls in a row, and tests run in parallel threads,
/// so two evods (or an evod and a Redis) could be given one port. The list
/// lives here, in the one copy of the harness every caller shares.
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut handed = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if !handed.contains(&port) {
            handed.push(port);
            return port;
        }
    }
}
