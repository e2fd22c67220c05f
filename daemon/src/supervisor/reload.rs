//! The reload diff as a pure function: what a new config means for the
//! servers that run now. The Supervisor applies the plan (starting,
//! stopping, restarting children and re-prefixing activations); deciding it
//! needs nothing but the two lists of servers.
//!
//! Hot reload treats entries as start does: an entry that cannot be used (an unresolvable `${VAR}`,
//! a bad header) fails that server alone, shown `failed` with its own error and listed under
//! `failed` by `evoctl reload`; the valid servers apply. Only a file that cannot be taken as a
//! whole (unreadable, not valid JSON, an invalid setting outside the server entries) keeps the
//! running config whole.
//!
//! What is not part of a server's launch identity (its prefix, per-tool overrides, timeouts)
//! keeps the child running: the Catalog derives the exposed tools anew and sessions whose tools
//! changed hear list_changed.
//!
//! A renamed server is detected by an identical transport (command, args, env, cwd or url, headers)
//! under a new id whose old id is gone; its child restarts under the new id.

use crate::config::ServerSpec;

/// What happens to one server of the new config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Same id, same config hash: the child runs on untouched. `reprefixed`
    /// when only its prefix changed (its exposed names change).
    Keep { old: usize, reprefixed: bool },
    /// Same id, changed config hash: stop the old child, start a new one.
    Restart { old: usize },
    /// A new id for an old server (same transport, the old id is gone):
    /// start it under the new id, activations follow its tools.
    Rename { old: usize },
    /// A server that was not running.
    Add,
}

/// The reload of a config: one step per new server (in new config order,
/// which decides collisions), and the old servers that go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadPlan {
    pub steps: Vec<Step>,
    /// Indices into the old servers of those that are removed (or disabled).
    pub removed: Vec<usize>,
}

/// Plans the move from the `old` servers to the `new` ones. Each old server
/// is claimed at most once: by its own id first, else (when its id is gone
/// from the new config) by the first new server with its transport.
pub fn plan(old: &[&ServerSpec], new: &[ServerSpec]) -> ReloadPlan {
    let mut claimed = vec![false; old.len()];
    let mut steps = Vec::with_capacity(new.len());
    for spec in new {
        let same_id = old.iter().position(|o| o.id == spec.id);
        let step = match same_id {
            Some(i) if old[i].hash == spec.hash => Step::Keep {
                old: i,
                reprefixed: old[i].prefix != spec.prefix,
            },
            Some(i) => Step::Restart { old: i },
            None => {
                let renamed = (0..old.len()).find(|&i| {
                    !claimed[i]
                        && old[i].transport == spec.transport
                        && !new.iter().any(|n| n.id == old[i].id)
                });
                match renamed {
                    Some(i) => Step::Rename { old: i },
                    None => Step::Add,
                }
            }
        };
        if let Step::Keep { old: i, .. } | Step::Restart { old: i } | Step::Rename { old: i } = step
        {
            claimed[i] = true;
        }
        steps.push(step);
    }
    let removed = (0..old.len()).filter(|&i| !claimed[i]).collect();
    ReloadPlan { steps, removed }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Servers parsed from an `mcpServers` object, as the loader makes them.
    fn servers(config: serde_json::Value) -> Vec<ServerSpec> {
        let text = serde_json::json!({ "mcpServers": config }).to_string();
        let parsed = crate::config::parse(&text, std::path::Path::new("t.json"), &|_| None)
            .expect("test config parses");
        assert!(parsed.failed.is_empty(), "{:?}", parsed.failed);
        parsed.servers
    }

    fn planned(old: serde_json::Value, new: serde_json::Value) -> ReloadPlan {
        let old = servers(old);
        let old: Vec<&ServerSpec> = old.iter().collect();
        plan(&old, &servers(new))
    }

    #[test]
    fn plans_read_as_a_table() {
        use serde_json::json;
        let a = json!({"command": "a"});
        let b = json!({"command": "b"});
        // (what, old servers, new servers, steps, removed)
        type Case = (
            &'static str,
            serde_json::Value,
            serde_json::Value,
            Vec<Step>,
            Vec<usize>,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("same id, same hash",
                json!({"a": a}), json!({"a": a}),
                vec![Step::Keep { old: 0, reprefixed: false }], vec![]),
            ("only the prefix changed",
                json!({"a": a}), json!({"a": {"command": "a", "prefix": "x"}}),
                vec![Step::Keep { old: 0, reprefixed: true }], vec![]),
            ("only the tool overrides changed (the child runs on)",
                json!({"a": a}), json!({"a": {"command": "a", "tools": {"t": {"name": "u", "args": {"p": 1}}}}}),
                vec![Step::Keep { old: 0, reprefixed: false }], vec![]),
            ("changed hash (new args)",
                json!({"a": a}), json!({"a": {"command": "a", "args": ["-v"]}}),
                vec![Step::Restart { old: 0 }], vec![]),
            ("changed hash (new env)",
                json!({"a": a}), json!({"a": {"command": "a", "env": {"K": "v"}}}),
                vec![Step::Restart { old: 0 }], vec![]),
            ("renamed id, same transport",
                json!({"a": a}), json!({"a2": a}),
                vec![Step::Rename { old: 0 }], vec![]),
            ("added",
                json!({"a": a}), json!({"a": a, "b": b}),
                vec![Step::Keep { old: 0, reprefixed: false }, Step::Add], vec![]),
            ("removed",
                json!({"a": a, "b": b}), json!({"b": b}),
                vec![Step::Keep { old: 1, reprefixed: false }], vec![0]),
            ("disabled counts as removed",
                json!({"a": a, "b": b}), json!({"a": a, "b": {"command": "b", "disabled": true}}),
                vec![Step::Keep { old: 0, reprefixed: false }], vec![1]),
            ("a new id beside the old one is an addition, not a rename",
                json!({"a": a}), json!({"a": a, "a2": a}),
                vec![Step::Keep { old: 0, reprefixed: false }, Step::Add], vec![]),
            ("one old server is renamed once",
                json!({"a": a}), json!({"x": a, "y": a}),
                vec![Step::Rename { old: 0 }, Step::Add], vec![]),
            ("order moves (collisions follow the new order)",
                json!({"a": a, "b": b}), json!({"b": b, "a": a}),
                vec![Step::Keep { old: 1, reprefixed: false }, Step::Keep { old: 0, reprefixed: false }], vec![]),
            ("everything replaced",
                json!({"a": a}), json!({"b": b}),
                vec![Step::Add], vec![0]),
        ];
        for (what, old, new, steps, removed) in cases {
            let plan = planned(old, new);
            assert_eq!(plan, ReloadPlan { steps, removed }, "{what}");
        }
    }
}
