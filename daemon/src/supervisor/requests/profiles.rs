//! `evoctl profiles` and `evoctl activate|deactivate --profile`: profiles
//! as a person sees and changes them.

use evo_proto::ctl::{self, CtlReply, ErrorKind, Reply};

use crate::console::events::Topic;
use crate::session;
use crate::supervisor::Supervisor;

impl Supervisor {
    /// Every profile as `evoctl profiles` shows it (`with_tools`), or as
    /// `evoctl status` sums it up.
    pub(super) fn profile_infos(&self, with_tools: bool) -> Vec<ctl::ProfileInfo> {
        let snapshot = self.snapshot.load_full();
        self.profiles
            .iter()
            .map(|(name, profile)| {
                let resolved = snapshot.resolve(profile);
                let tools: Vec<String> = resolved
                    .members
                    .iter()
                    .map(|&i| snapshot.tools[i].name.clone())
                    .collect();
                ctl::ProfileInfo {
                    name: name.clone(),
                    patterns: profile.patterns.clone(),
                    added: profile.changes.added.iter().cloned().collect(),
                    removed: profile.changes.removed.iter().cloned().collect(),
                    count: tools.len(),
                    tools: if with_tools { tools } else { Vec::new() },
                    denied: resolved.denied,
                    unmatched: resolved.unmatched,
                    sessions: self.sessions_using(name),
                }
            })
            .collect()
    }

    /// `evoctl activate|deactivate --profile P TOOL…`: every session using
    /// the profile lists (or stops listing) the tools.
    pub(super) fn set_in_profile(
        &mut self,
        profile: &str,
        tools: Vec<String>,
        active: bool,
    ) -> CtlReply {
        if self.profiles.get(profile).is_none() {
            return CtlReply::error(ErrorKind::NotFound, self.profiles.unknown(profile));
        }
        let snapshot = self.snapshot.load_full();
        let mut names = Vec::with_capacity(tools.len());
        for t in tools {
            // A doubled name (`git_git_log`) means the tool it routes to; a
            // denied tool may be named (it shows as denied, never listed).
            match snapshot.get(&t) {
                Some(e) => names.push(e.name.clone()),
                None if !active || snapshot.denied.contains_key(&t) => names.push(t),
                None => {
                    let msg = snapshot.refusal(&t).unwrap_or_else(|| {
                        session::unknown_tool_message(&snapshot, &t, session::Asker::Person)
                    });
                    return CtlReply::error(ErrorKind::UnknownTool, msg);
                }
            }
        }
        let changed = self.change_profile(profile, &names, active);
        self.opts.events.changed(Topic::Profiles);
        tracing::info!(profile, changed = ?changed, active, "profile changed by a person");
        let tools = self
            .profiles
            .get(profile)
            .map(|p| snapshot.resolve(p))
            .unwrap_or_default()
            .members
            .iter()
            .map(|&i| snapshot.tools[i].name.clone())
            .collect();
        CtlReply::data(Reply::ProfileChange(ctl::ProfileChangeReport {
            profile: profile.to_string(),
            changed,
            tools,
            sessions: self.sessions_using(profile),
        }))
    }

    /// `evoctl profiles`.
    pub(super) fn profiles(&self) -> CtlReply {
        CtlReply::data(Reply::Profiles(ctl::ProfilesReport {
            profiles: self.profile_infos(true),
        }))
    }
}
