//! The soak's raced approvals: a call held for approval, approved with
//! `evoctl approve` on one instance, then sent by two contenders at once to
//! two instances. Each approval must pass exactly one call.

use std::path::PathBuf;
use std::sync::Barrier;
use std::time::Duration;

use serde_json::json;

use super::wire::{Era, Session, first_text};
use evo_tests::harness::{daemon::ctl_at, instances::approval_id};

/// The tool every call of which is held for approval.
pub const HELD_TOOL: &str = "gate_echo";
/// The permissions file that holds it.
pub const PERMISSIONS: &str = "rules:\n  gate_echo: require_approval\n";

/// What became of one approval.
pub enum Race {
    /// Calls it let through (1 is right; 2 is a double consumption; 0 an
    /// approval that let nothing through).
    Passed(usize),
    /// The round could not be run to its end (what stopped it).
    Broken(String),
}

/// Where the contenders go: the instances' ports, their control sockets,
/// the load balancer's port.
pub struct Targets<'a> {
    pub ports: &'a [u16],
    pub sockets: &'a [PathBuf],
    pub front: u16,
}

/// Approval round `k` in `session` (initialize era).
pub fn race(k: usize, session: &mut Session, to: &Targets) -> Race {
    debug_assert!(session.era == Era::Initialize);
    let text = format!("approve-{k}-{}", std::process::id());
    let args = json!({ "text": text });
    let id = match held(session, &args) {
        Ok(id) => id,
        Err(e) => return Race::Broken(format!("held call: {e}")),
    };
    // Approved on instance 0 or 1 (never the one the soak kills).
    let socket = &to.sockets[k % 2];
    let mut approved = false;
    for _ in 0..100 {
        let (code, _, err) = ctl_at(socket, &["approve", &id]);
        if code == 0 {
            approved = true;
            break;
        }
        if !err.contains("unavailable") {
            return Race::Broken(format!("evoctl approve {id}: {err}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if !approved {
        return Race::Broken(format!("evoctl approve {id}: Redis unavailable for 20 s"));
    }
    // The contenders: two instances in turn (the killed one among them at
    // times; a contender that cannot reach its instance goes through the
    // load balancer instead).
    let pair = [k % to.ports.len(), (k + 1) % to.ports.len()];
    let mut passed = 0;
    for _ in 0..100 {
        let barrier = Barrier::new(2);
        let answers: Vec<Option<(bool, String)>> = std::thread::scope(|s| {
            let handles: Vec<_> = pair
                .iter()
                .enumerate()
                .map(|(n, &i)| {
                    let (barrier, session, args) = (&barrier, &*session, &args);
                    s.spawn(move || {
                        barrier.wait();
                        let n = n as u64;
                        session
                            .contend(n, to.ports[i], HELD_TOOL, args)
                            .or_else(|| session.contend(n, to.front, HELD_TOOL, args))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        });
        let mut settled = false;
        for (failed, answer) in answers.iter().flatten() {
            if !failed && *answer == text {
                passed += 1;
                settled = true;
            } else if answer.contains("evoctl approve ") {
                // Held anew: the approval was found used.
                settled = true;
            }
        }
        if settled {
            return Race::Passed(passed);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Race::Broken(format!("{id}: no contender got an answer for 20 s"))
}

/// Sends the call until it is held: its approval id.
fn held(session: &mut Session, args: &serde_json::Value) -> Result<String, String> {
    let mut last = String::new();
    for _ in 0..100 {
        match session.send_call(HELD_TOOL, args) {
            Ok(a) if a.status == 200 => {
                let t = a.rpc().map(|r| first_text(&r)).unwrap_or_default();
                if t.contains("evoctl approve ") {
                    return Ok(approval_id(&t));
                }
                // "cannot be checked now" while Redis is away, or a crash.
                last = t;
            }
            Ok(a) if a.status == 404 => session.initialize()?,
            Ok(a) => last = format!("{} {}", a.status, a.body),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(last)
}
