//! Profiles: named sets of tools (exposed names or globs) that a session
//! lists in every mode, like hot tools. The config defines them; a person
//! changes them at run time (`evoctl activate --profile`), and those changes
//! are saved in the cache directory, never in the config file.
//!
//! [`ProfileBook`] is the definition (pure data, owned by the Supervisor);
//! [`Resolved`] is one profile resolved against a catalog snapshot (built
//! with the snapshot, so listing a profile's tools is a walk over indices).
//!
//! Run-time changes are kept as `added` (exact names beyond the config's patterns) and `removed`
//! (names taken out although a pattern matches), per profile, so a config edit to the patterns and
//! a person's changes compose. Changes to a profile the config no longer defines stay in
//! `profiles.json` and apply again if it comes back. A reload that renames exposed names (a new
//! prefix or id) renames them in the saved changes too. `activate --profile` accepts names the
//! catalog lists or denies (a denied one shows as denied, never listed); `deactivate --profile`
//! takes any name.
//!
//! A profile change is a Supervisor state change (`ProfileBook`), saved through the Refresher
//! (`PersistProfiles` → `profiles.json`) and sent to the Catalog (`SetProfiles`), which resolves
//! every profile against the snapshot it builds (`Snapshot::profiles`) and republishes; each
//! Session then compares its visible names and fingerprints.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::policy::permissions::glob_matches;

/// The file in the cache directory that holds run-time changes to profiles.
pub const PROFILES_FILE: &str = "profiles.json";

/// A person's run-time changes to one profile: exposed names added beyond
/// its patterns, and names taken out although a pattern matches them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub added: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub removed: BTreeSet<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// The saved file: every profile's run-time changes, by profile name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedProfiles {
    pub profiles: BTreeMap<String, Changes>,
}

impl SavedProfiles {
    /// Records one profile's changes (none: forgets it).
    pub fn set(&mut self, profile: &str, changes: Changes) {
        if changes.is_empty() {
            self.profiles.remove(profile);
        } else {
            self.profiles.insert(profile.to_string(), changes);
        }
    }

    /// Exposed names follow a reload that renamed them (a new prefix or
    /// server id); returns whether anything changed.
    pub fn rename(&mut self, renamed: &std::collections::HashMap<String, String>) -> bool {
        let mut any = false;
        for changes in self.profiles.values_mut() {
            for set in [&mut changes.added, &mut changes.removed] {
                let moved: Vec<String> = set
                    .iter()
                    .filter(|n| renamed.contains_key(*n))
                    .cloned()
                    .collect();
                for old in moved {
                    set.remove(&old);
                    if let Some(new) = renamed.get(&old) {
                        set.insert(new.clone());
                    }
                    any = true;
                }
            }
        }
        any
    }
}

/// One profile: the config's patterns and the run-time changes on top.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    pub patterns: Vec<String>,
    pub changes: Changes,
}

impl Profile {
    fn matched(&self, name: &str) -> bool {
        self.patterns.iter().any(|p| pattern_matches(p, name))
    }

    /// Whether the profile holds the tool `name`, whether or not the
    /// catalog has it now.
    pub fn holds(&self, name: &str) -> bool {
        !self.changes.removed.contains(name)
            && (self.changes.added.contains(name) || self.matched(name))
    }
}

fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

fn pattern_matches(pattern: &str, name: &str) -> bool {
    if is_glob(pattern) {
        glob_matches(pattern, name)
    } else {
        pattern == name
    }
}

/// Every profile by name: the config's definitions with the saved changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileBook {
    profiles: BTreeMap<String, Profile>,
}

impl ProfileBook {
    /// The config's profiles with the saved changes of those that still
    /// exist (a saved change to a profile the config no longer has is
    /// ignored, and dropped at the next save).
    pub fn new(config: &BTreeMap<String, Vec<String>>, saved: &SavedProfiles) -> ProfileBook {
        let profiles = config
            .iter()
            .map(|(name, patterns)| {
                let profile = Profile {
                    patterns: patterns.clone(),
                    changes: saved.profiles.get(name).cloned().unwrap_or_default(),
                };
                (name.clone(), profile)
            })
            .collect();
        ProfileBook { profiles }
    }

    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Profile)> {
        self.profiles.iter()
    }

    /// "unknown profile 'x'; known profiles: a, b" (or how to define one).
    pub fn unknown(&self, name: &str) -> String {
        if self.profiles.is_empty() {
            format!(
                "unknown profile '{name}': the config defines no profiles (add \"profiles\": {{\"{name}\": [\"github_*\"]}} to it)"
            )
        } else {
            let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
            format!(
                "unknown profile '{name}'; known profiles: {}",
                known.join(", ")
            )
        }
    }

    /// Adds (`active`) or takes out tools of a profile; returns the names
    /// whose membership changed. The profile must exist.
    pub fn change(&mut self, name: &str, tools: &[String], active: bool) -> Vec<String> {
        let Some(profile) = self.profiles.get_mut(name) else {
            return Vec::new();
        };
        let mut changed = Vec::new();
        for tool in tools {
            let before = profile.holds(tool);
            let matched = profile.matched(tool);
            if active {
                profile.changes.removed.remove(tool);
                if !matched {
                    profile.changes.added.insert(tool.clone());
                }
            } else {
                profile.changes.added.remove(tool);
                if matched {
                    profile.changes.removed.insert(tool.clone());
                }
            }
            if profile.holds(tool) != before {
                changed.push(tool.clone());
            }
        }
        changed
    }

    /// What is saved: the run-time changes of every profile that has some.
    pub fn saved(&self) -> SavedProfiles {
        SavedProfiles {
            profiles: self
                .profiles
                .iter()
                .filter(|(_, p)| !p.changes.is_empty())
                .map(|(n, p)| (n.clone(), p.changes.clone()))
                .collect(),
        }
    }

    /// Every profile resolved against the names of a snapshot's listed tools
    /// (in snapshot order) and its denied ones.
    pub fn resolve(
        &self,
        tools: &[&str],
        index: &HashMap<String, usize>,
        denied: &HashMap<String, String>,
    ) -> HashMap<String, Arc<Resolved>> {
        self.profiles
            .iter()
            .map(|(name, p)| {
                (
                    name.clone(),
                    Arc::new(Resolved::of(p, tools, index, denied)),
                )
            })
            .collect()
    }
}

/// One profile against one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Indices into the snapshot's tools, ascending (so listed in catalog
    /// order).
    pub members: Vec<usize>,
    /// Tools the profile names that permissions deny: never listed, shown
    /// as denied in `evoctl profiles`.
    pub denied: Vec<String>,
    /// The config's patterns and added names that match no tool, listed
    /// or denied (a typo, or a server that has not listed its tools yet).
    pub unmatched: Vec<String>,
}

impl Resolved {
    /// `profile` against the names of a snapshot's listed tools, their index
    /// by name and the denied names.
    pub fn of(
        profile: &Profile,
        tools: &[&str],
        index: &HashMap<String, usize>,
        denied: &HashMap<String, String>,
    ) -> Resolved {
        let mut members = BTreeSet::new();
        let mut named_denied = BTreeSet::new();
        let mut unmatched = Vec::new();
        let wanted = profile.patterns.iter().chain(profile.changes.added.iter());
        for pattern in wanted {
            let mut hit = false;
            if is_glob(pattern) {
                for (i, name) in tools.iter().enumerate() {
                    if glob_matches(pattern, name) && !profile.changes.removed.contains(*name) {
                        members.insert(i);
                        hit = true;
                    }
                }
                for name in denied.keys() {
                    if glob_matches(pattern, name) {
                        named_denied.insert(name.clone());
                        hit = true;
                    }
                }
            } else if let Some(&i) = index.get(pattern.as_str()) {
                hit = true;
                if !profile.changes.removed.contains(pattern) {
                    members.insert(i);
                }
            } else if denied.contains_key(pattern.as_str()) {
                hit = true;
                named_denied.insert(pattern.clone());
            }
            if !hit {
                unmatched.push(pattern.clone());
            }
        }
        named_denied.retain(|n| !profile.changes.removed.contains(n));
        Resolved {
            members: members.into_iter().collect(),
            denied: named_denied.into_iter().collect(),
            unmatched,
        }
    }

    /// Whether the tool at `index` in the snapshot is in the profile.
    pub fn has(&self, index: usize) -> bool {
        self.members.binary_search(&index).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(patterns: &[&str]) -> ProfileBook {
        let config = BTreeMap::from([(
            "p".to_string(),
            patterns.iter().map(|s| s.to_string()).collect(),
        )]);
        ProfileBook::new(&config, &SavedProfiles::default())
    }

    #[test]
    fn activating_a_matched_tool_changes_nothing_and_deactivating_it_takes_it_out() {
        let mut b = book(&["gh_*"]);
        assert!(b.change("p", &["gh_a".into()], true).is_empty());
        assert_eq!(b.change("p", &["gh_a".into()], false), ["gh_a"]);
        assert!(!b.get("p").unwrap().holds("gh_a"));
        assert!(b.get("p").unwrap().holds("gh_b"));
        assert_eq!(b.change("p", &["gh_a".into()], true), ["gh_a"]);
        assert_eq!(b.saved(), SavedProfiles::default());
    }

    #[test]
    fn an_added_tool_is_saved_and_survives_a_new_book() {
        let mut b = book(&["gh_*"]);
        assert_eq!(b.change("p", &["fs_read".into()], true), ["fs_read"]);
        let saved = b.saved();
        let config = BTreeMap::from([("p".to_string(), vec!["gh_*".to_string()])]);
        let again = ProfileBook::new(&config, &saved);
        assert!(again.get("p").unwrap().holds("fs_read"));
        assert_eq!(again, b);
    }

    #[test]
    fn changes_to_a_profile_the_config_dropped_are_ignored() {
        let saved = SavedProfiles {
            profiles: BTreeMap::from([(
                "gone".to_string(),
                Changes {
                    added: BTreeSet::from(["x".to_string()]),
                    removed: BTreeSet::new(),
                },
            )]),
        };
        let b = ProfileBook::new(&BTreeMap::new(), &saved);
        assert!(b.get("gone").is_none());
        assert_eq!(b.saved(), SavedProfiles::default());
        assert!(b.unknown("gone").contains("defines no profiles"));
    }

    #[test]
    fn unknown_names_the_known_profiles() {
        let b = book(&[]);
        assert_eq!(b.unknown("q"), "unknown profile 'q'; known profiles: p");
    }
}
