//! The events one instance publishes for the others on the channel
//! `<prefix>events` ([`super::Shared::publish`]), and the envelope that says
//! which instance sent one (its own are not delivered back to it).

/// One remembered pair as the store holds it ([`super::learned`]), and as
/// [`Event::Learned`] tells the other instances of a change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SharedPair {
    pub tool: String,
    pub query: String,
    pub count: u32,
    pub last: u64,
}

/// An event one instance publishes for the others (channel
/// `<prefix>events`). Never carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A session's activations changed (its store name).
    Activations { name: String },
    /// A profile's run-time changes changed.
    Profiles,
    /// An approval was decided.
    Approval { id: String },
    /// API tokens were created or revoked.
    Tokens,
    /// `evoctl activate|deactivate` for session `id` (`sN@TAG`), which the
    /// instance tagged TAG holds: it changes the session and writes its
    /// answer under `ticket` ([`super::Shared::answer_put`]).
    SetActive {
        id: String,
        tools: Vec<String>,
        active: bool,
        ticket: String,
    },
    /// A server's integrity pins changed (a change seen, a trust): read
    /// them again ([`super::pins`]).
    Pins { server: String },
    /// Search learned from use: the pair of `query` and `tool` now counts
    /// `count` sessions' evidence (0: dropped) ([`super::learned`]).
    Learned(SharedPair),
    /// What search learned was forgotten, for `tool` or (`None`) all.
    LearnedForgotten { tool: Option<String> },
    /// An HTTP session was ended (DELETE) on some instance.
    SessionEnded { id: String },
    /// A session's retry-loop count of a tool changed: `n` identical
    /// failures of the arguments `key` (hex), or none (`n` 0). Published
    /// by the script that counts a failure, so its shape is written there
    /// too ([`super::breaker`]).
    Breaker {
        name: String,
        tool: String,
        key: String,
        n: u32,
    },
}

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Envelope {
    pub(super) from: String,
    #[serde(flatten)]
    pub(super) event: Event,
}

#[cfg(test)]
mod tests {
    use super::{Event, SharedPair};

    #[test]
    fn a_learned_pair_goes_out_flat_beside_its_kind() {
        let event = Event::Learned(SharedPair {
            tool: "gh_create_issue".into(),
            query: "file a bug".into(),
            count: 2,
            last: 1_765_000_000,
        });
        let text = serde_json::to_value(&event).expect("serialises");
        assert_eq!(
            text,
            serde_json::json!({"kind": "learned", "tool": "gh_create_issue",
                "query": "file a bug", "count": 2, "last": 1_765_000_000u64})
        );
        assert_eq!(serde_json::from_value::<Event>(text).ok(), Some(event));
    }
}
