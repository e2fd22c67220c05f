//! Human approval of calls to `require_approval` tools, when the client
//! cannot ask the user itself (no elicitation). The daemon holds the call and
//! tells the agent that a person must run `evoctl approve ID`; the identical
//! call (same tool, same arguments) then passes exactly once within the
//! window. Nothing an agent can send approves a call: approvals arrive only
//! over the control socket.
//!
//! A denial stands for the 5-minute window, then the same call is held again as a new request. On
//! 2026-07-28 sessions (no server→client requests) a client that declares elicitation in the
//! request's `_meta` is asked in band: the call answers `input_required` with one elicitation
//! (`evo/approve`) and a `requestState` evo keeps for 5 minutes, bound to the tool and its
//! canonical arguments; the retry carrying that state and an `accept` runs the call, anything else
//! declines it, and a state evo did not issue is asked again. Other clients are held for `evoctl
//! approve`.

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long an approval request, an approval or a denial stands.
pub const WINDOW: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Pending,
    Approved,
    Denied,
}

/// One held call.
#[derive(Debug, Clone)]
pub struct Approval {
    pub id: String,
    pub tool: String,
    /// Canonical hash of the arguments (see [`canonical_key`]).
    pub key: u64,
    /// The arguments as JSON, cut short, for the person deciding.
    pub preview: String,
    /// Whose call it is (an HTTP identity); `None`: the local owner's.
    /// An approval is consumed only by a call of the same identity.
    pub identity: Option<String>,
    pub state: State,
    /// When it was asked for, or last decided.
    pub since: Instant,
}

/// What a call that needs approval may do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Approved: go ahead (the approval is used up).
    Pass,
    Pending(String),
    Denied(String),
    /// The shared store that holds approvals cannot be reached: the call is
    /// refused (never let through undecided), with the reason.
    Unavailable(String),
}

/// The daemon-wide book of held calls. IDs are unique for the daemon's life.
#[derive(Debug, Default)]
pub struct ApprovalBook {
    next: u64,
    entries: Vec<Approval>,
}

impl ApprovalBook {
    fn expire(&mut self, now: Instant) {
        self.entries
            .retain(|a| now.duration_since(a.since) < WINDOW);
    }

    /// Gate for a call of `tool` with arguments `key` by `identity`:
    /// consumes an approval, reports a denial, or holds the call (a new
    /// request, or the one already pending for the identical call). Another
    /// identity's approvals and denials never apply.
    pub fn check(
        &mut self,
        tool: &str,
        key: u64,
        identity: Option<&str>,
        preview: &str,
        now: Instant,
    ) -> Gate {
        self.expire(now);
        if let Some(i) = self
            .entries
            .iter()
            .position(|a| a.tool == tool && a.key == key && a.identity.as_deref() == identity)
        {
            let a = &self.entries[i];
            return match a.state {
                State::Approved => {
                    self.entries.remove(i);
                    Gate::Pass
                }
                State::Denied => Gate::Denied(a.id.clone()),
                State::Pending => Gate::Pending(a.id.clone()),
            };
        }
        self.next += 1;
        let id = format!("ap{}", self.next);
        self.entries.push(Approval {
            id: id.clone(),
            tool: tool.to_string(),
            key,
            preview: preview.chars().take(200).collect(),
            identity: identity.map(str::to_owned),
            state: State::Pending,
            since: now,
        });
        Gate::Pending(id)
    }

    /// A person's decision on a pending call.
    pub fn decide(&mut self, id: &str, approve: bool, now: Instant) -> Result<Approval, String> {
        self.expire(now);
        let Some(a) = self.entries.iter_mut().find(|a| a.id == id) else {
            return Err(format!(
                "no held call '{id}': it expired (approvals last {} minutes) or never existed; `evoctl approvals` lists the pending ones",
                WINDOW.as_secs() / 60
            ));
        };
        if a.state != State::Pending {
            return Err(format!(
                "call '{id}' was already {}",
                if a.state == State::Approved {
                    "approved"
                } else {
                    "denied"
                }
            ));
        }
        a.state = if approve {
            State::Approved
        } else {
            State::Denied
        };
        a.since = now;
        Ok(a.clone())
    }

    /// Calls waiting for a decision.
    pub fn pending(&mut self, now: Instant) -> Vec<Approval> {
        self.expire(now);
        self.entries
            .iter()
            .filter(|a| a.state == State::Pending)
            .cloned()
            .collect()
    }
}

/// A hash of arguments that ignores object key order.
pub fn canonical_key(args: &serde_json::Map<String, Value>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    hash_object(args, &mut h);
    h.finish()
}

fn hash_object(m: &serde_json::Map<String, Value>, h: &mut impl Hasher) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort_unstable();
    h.write_u8(b'{');
    for k in keys {
        k.hash(h);
        hash_value(&m[k.as_str()], h);
    }
}

fn hash_value(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => b.hash(h),
        Value::Number(n) => n.to_string().hash(h),
        Value::String(s) => {
            h.write_u8(b'"');
            s.hash(h)
        }
        Value::Array(a) => {
            h.write_u8(b'[');
            h.write_usize(a.len());
            for x in a {
                hash_value(x, h);
            }
        }
        Value::Object(m) => hash_object(m, h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approve_passes_the_identical_call_once() {
        let mut b = ApprovalBook::default();
        let t0 = Instant::now();
        let Gate::Pending(id) = b.check("fs_write", 1, None, "{}", t0) else {
            panic!()
        };
        assert_eq!(
            b.check("fs_write", 1, None, "{}", t0),
            Gate::Pending(id.clone()),
            "same call, same id"
        );
        let Gate::Pending(other) = b.check("fs_write", 2, None, "{}", t0) else {
            panic!()
        };
        assert_ne!(id, other, "other arguments, other request");
        assert_eq!(b.pending(t0).len(), 2);
        b.decide(&id, true, t0).unwrap();
        assert_eq!(b.check("fs_write", 1, None, "{}", t0), Gate::Pass);
        assert!(
            matches!(b.check("fs_write", 1, None, "{}", t0), Gate::Pending(n) if n != id),
            "only once"
        );
        assert!(b.decide(&id, true, t0).is_err(), "used up");
    }

    #[test]
    fn deny_refuses_until_it_expires_and_unknown_ids_are_errors() {
        let mut b = ApprovalBook::default();
        let t0 = Instant::now();
        let Gate::Pending(id) = b.check("x", 7, None, "{}", t0) else {
            panic!()
        };
        b.decide(&id, false, t0).unwrap();
        assert_eq!(b.check("x", 7, None, "{}", t0), Gate::Denied(id.clone()));
        let later = t0 + WINDOW + Duration::from_secs(1);
        assert!(
            matches!(b.check("x", 7, None, "{}", later), Gate::Pending(n) if n != id),
            "asked again"
        );
        assert!(b.decide("ap999", true, t0).unwrap_err().contains("ap999"));
        let Gate::Pending(old) = b.check("y", 1, None, "{}", t0) else {
            panic!()
        };
        assert!(b.decide(&old, true, later).unwrap_err().contains("expired"));
    }

    #[test]
    fn an_approval_is_consumed_only_by_its_own_identity() {
        let mut b = ApprovalBook::default();
        let t0 = Instant::now();
        let alice = Some("token:alice");
        let Gate::Pending(id) = b.check("fs_write", 1, alice, "{}", t0) else {
            panic!()
        };
        b.decide(&id, true, t0).unwrap();
        assert!(
            matches!(b.check("fs_write", 1, Some("token:bob"), "{}", t0), Gate::Pending(n) if n != id),
            "bob's identical call is held anew"
        );
        assert!(
            matches!(b.check("fs_write", 1, None, "{}", t0), Gate::Pending(n) if n != id),
            "so is the local owner's"
        );
        assert_eq!(b.check("fs_write", 1, alice, "{}", t0), Gate::Pass);
        let pending = b.pending(t0);
        assert_eq!(
            pending
                .iter()
                .map(|a| a.identity.as_deref())
                .collect::<Vec<_>>(),
            [Some("token:bob"), None]
        );
    }
}
