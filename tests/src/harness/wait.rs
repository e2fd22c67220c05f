//! Waiting for something asynchronous to hold, by polling, with a failure
//! message that says what was awaited.

use std::fmt::Display;
use std::path::Path;
use std::time::{Duration, Instant};

/// `what`, followed by the text of the `log` file as it is when shown: a
/// failure message for [`eventually`] that reads the log only on failure.
pub fn with_log<'a>(what: &'a str, log: &'a Path) -> impl Display + 'a {
    struct WithLog<'a>(&'a str, &'a Path);
    impl Display for WithLog<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let log = std::fs::read_to_string(self.1).unwrap_or_default();
            write!(f, "{}\nlog:\n{log}", self.0)
        }
    }
    WithLog(what, log)
}

/// Calls `holds` every 25 ms until it returns true or `timeout` has passed;
/// whether it held.
pub(crate) fn holds_within(timeout: Duration, mut holds: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if holds() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Waits until `holds` returns true, polling; panics naming `what` once
/// `timeout` has passed. The way to wait for something asynchronous, instead
/// of sleeping a guessed while and then asserting.
pub fn eventually(what: impl Display, timeout: Duration, holds: impl FnMut() -> bool) {
    if !holds_within(timeout, holds) {
        panic!("timed out after {timeout:?} waiting for {what}");
    }
}
