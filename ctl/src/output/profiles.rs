//! `evoctl profiles`, and what `activate|deactivate --profile` changed.

use evo_proto::ctl::{ProfileChangeReport, ProfilesReport};

use super::text::Printout;

/// `evoctl profiles`: each profile, its patterns and run-time changes,
/// then its tools, the ones denied and the patterns matching nothing.
pub fn profiles(r: &ProfilesReport) -> Printout {
    let mut p = Printout::default();
    if r.profiles.is_empty() {
        p.line(
            "no profiles: define them in the config, e.g. \"profiles\": {\"coding\": [\"github_*\"]}",
        );
        return p;
    }
    for (i, profile) in r.profiles.iter().enumerate() {
        if i > 0 {
            p.line("");
        }
        p.line(format!(
            "{}: {} tool(s), {} session(s); patterns: {}",
            profile.name,
            profile.count,
            profile.sessions,
            if profile.patterns.is_empty() {
                "(none)".to_string()
            } else {
                profile.patterns.join(", ")
            }
        ));
        if !profile.added.is_empty() {
            p.line(format!("  added at run time: {}", profile.added.join(", ")));
        }
        if !profile.removed.is_empty() {
            p.line(format!(
                "  taken out at run time: {}",
                profile.removed.join(", ")
            ));
        }
        p.lines(profile.tools.iter().map(|t| format!("  {t}")));
        p.lines(
            profile
                .denied
                .iter()
                .map(|t| format!("  {t} [denied by permissions: never listed]")),
        );
        p.lines(
            profile
                .unmatched
                .iter()
                .map(|u| format!("  warning: '{u}' matches no tool")),
        );
    }
    p
}

/// `evoctl activate --profile` (`adding`) or `deactivate --profile`.
pub fn profile_change(r: &ProfileChangeReport, adding: bool) -> Printout {
    let verb = if adding { "added to" } else { "taken out of" };
    let mut p = Printout::default();
    if r.changed.is_empty() {
        p.line(format!(
            "profile {}: nothing {verb} it (already so)",
            r.profile
        ));
    } else {
        p.line(format!(
            "profile {}: {} {verb} it; {} tool(s) now, {} session(s) told",
            r.profile,
            r.changed.join(", "),
            r.tools.len(),
            r.sessions
        ));
    }
    p
}

#[cfg(test)]
mod tests {
    use evo_proto::ctl::ProfileInfo;

    use super::*;

    #[test]
    fn profiles_list_tools_then_what_is_wrong() {
        let coding = ProfileInfo {
            name: "coding".into(),
            patterns: vec!["fx_*".into(), "gh_x".into()],
            added: vec!["fx_time".into()],
            tools: vec!["fx_echo".into(), "fx_time".into()],
            count: 2,
            denied: vec!["fx_rm".into()],
            unmatched: vec!["gh_x".into()],
            sessions: 1,
            ..Default::default()
        };
        let empty = ProfileInfo {
            name: "none".into(),
            ..Default::default()
        };
        let r = ProfilesReport {
            profiles: vec![coding, empty],
        };
        assert_eq!(
            profiles(&r).stdout(),
            "coding: 2 tool(s), 1 session(s); patterns: fx_*, gh_x\n  added at run time: fx_time\n  fx_echo\n  fx_time\n  fx_rm [denied by permissions: never listed]\n  warning: 'gh_x' matches no tool\n\nnone: 0 tool(s), 0 session(s); patterns: (none)\n"
        );
    }

    #[test]
    fn profile_change_says_which_way() {
        let r = ProfileChangeReport {
            profile: "coding".into(),
            changed: vec!["fx_echo".into()],
            tools: vec!["fx_echo".into()],
            sessions: 2,
        };
        assert_eq!(
            profile_change(&r, true).stdout(),
            "profile coding: fx_echo added to it; 1 tool(s) now, 2 session(s) told\n"
        );
        assert_eq!(
            profile_change(&ProfileChangeReport::default(), false).stdout(),
            "profile : nothing taken out of it (already so)\n"
        );
    }
}
