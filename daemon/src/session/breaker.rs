//! The retry-loop breaker: a session's memory of identical failing calls.
//! Keyed by tool and canonical arguments; the second identical failure
//! escalates the guidance, and from the third on the call is refused before
//! it reaches the child. A success, or other arguments, resets the count.

use std::collections::HashMap;

/// Prior identical failures after which a call is refused.
pub const REFUSE_AFTER: u32 = 2;

/// Per-session failure counts, one entry per tool (its last arguments).
#[derive(Debug, Default)]
pub struct RetryBreaker {
    last: HashMap<String, (u64, u32)>,
}

impl RetryBreaker {
    /// Identical failures so far of `tool` with arguments `key`. Arguments
    /// different from the tool's last failing ones reset its count.
    pub fn prior_failures(&mut self, tool: &str, key: u64) -> u32 {
        match self.last.get(tool) {
            Some((k, n)) if *k == key => *n,
            Some(_) => {
                self.last.remove(tool);
                0
            }
            None => 0,
        }
    }

    /// Records a failure; returns how many identical failures there now are.
    pub fn failed(&mut self, tool: &str, key: u64) -> u32 {
        let e = self.last.entry(tool.to_string()).or_insert((key, 0));
        if e.0 != key {
            *e = (key, 0);
        }
        e.1 += 1;
        e.1
    }

    pub fn succeeded(&mut self, tool: &str) {
        self.last.remove(tool);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::approvals::canonical_key;
    use serde_json::Value;
    use serde_json::json;

    fn key(v: Value) -> u64 {
        canonical_key(v.as_object().unwrap())
    }

    #[test]
    fn key_ignores_order_but_not_values() {
        assert_eq!(
            key(json!({"a": 1, "b": [1, {"x": 2, "y": 3}]})),
            key(json!({"b": [1, {"y": 3, "x": 2}], "a": 1}))
        );
        assert_ne!(key(json!({"a": 1})), key(json!({"a": "1"})));
        assert_ne!(key(json!({"a": [1, 2]})), key(json!({"a": [2, 1]})));
    }

    #[test]
    fn counts_reset_on_success_or_other_arguments() {
        let mut b = RetryBreaker::default();
        assert_eq!(b.prior_failures("t", 1), 0);
        assert_eq!(b.failed("t", 1), 1);
        assert_eq!(b.prior_failures("t", 1), 1);
        assert_eq!(b.failed("t", 1), 2);
        assert_eq!(b.prior_failures("t", 1), REFUSE_AFTER);
        // Other arguments reset.
        assert_eq!(b.prior_failures("t", 2), 0);
        assert_eq!(b.prior_failures("t", 1), 0);
        assert_eq!(b.failed("t", 1), 1);
        b.succeeded("t");
        assert_eq!(b.prior_failures("t", 1), 0);
        // Tools are independent.
        b.failed("u", 1);
        assert_eq!(b.prior_failures("t", 1), 0);
        assert_eq!(b.prior_failures("u", 1), 1);
    }
}
