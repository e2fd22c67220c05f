//! The immutable view of the merged catalog that the Catalog publishes and
//! sessions, search and disclosure read: [`Snapshot`] and its [`ToolEntry`]s.
//!
//! A quarantined tool keeps its exposed name: a later server's tool of the same name is still a
//! skipped duplicate, so quarantine never reroutes a name to another server.
//!
//! A child tool exposed under a native tool's name (`prefix: ""` and a tool called `call_tool`) is
//! a collision the native tool wins.
//!
//! A tool whose name already starts with its prefix and `_` (`git_log` of server `git`) is exposed
//! once. The doubled form (`git_git_log`) still routes (calls, `describe`, `evoctl activate`), and
//! a permissions rule written for it still applies: both names are decided and the stricter wins,
//! so the shorter name never loosens a permissions file. `evoctl status` lists these names
//! (`shortened` in `--json`).
//!
//! A role is decided per snapshot: the Catalog builds the snapshot for the role in force and one
//! per other role of the permissions file (`Snapshot::by_role`, entries shared); a session reads
//! its role's with one map lookup. A session whose role disappears on reload sees an empty catalog
//! (fail closed).
//!
//! A snapshot carries no search index, so the catalog does not depend on search: search keeps the
//! lexical index of the latest snapshot searched beside the semantic vectors, keyed by the
//! snapshot's version, and the Embedder builds it ahead, on a blocking thread, once a snapshot has
//! stood for 500 ms, so the first search rarely pays for it and a burst of publishes builds none.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rmcp::model::Tool;

use crate::catalog::resources::OfferCaps;
use crate::catalog::resources::Offered;
use crate::catalog::resources::Offers;
use crate::catalog::resources::QuarantinedOffers;
use crate::child::link::ServerLink;
use crate::child::link::ServerState;
use crate::config;
use crate::config::ServerSpec;
use crate::policy::permissions::Hints;
use crate::policy::permissions::Permission;
use crate::policy::permissions::Permissions;
use crate::policy::profiles::Profile;
use crate::policy::profiles::ProfileBook;
use crate::policy::profiles::Resolved;
use crate::session::native_tools::NAMES;
use crate::session::native_tools::OWNER;

pub use super::entry::{ToolEntry, entries_for};

/// An immutable view of the merged catalog. A new one is published on every
/// change; readers hold an `Arc` to whichever version they loaded.
#[derive(Default)]
pub struct Snapshot {
    pub version: u64,
    /// In config order, then each child's own order.
    pub tools: Vec<Arc<ToolEntry>>,
    index: HashMap<String, usize>,
    /// Doubled names that still route ([`ToolEntry::also`]) → index.
    also: HashMap<String, usize>,
    pub duplicates: Vec<evo_proto::ctl::Duplicate>,
    /// Each server's capabilities (from env flags), in config order.
    pub capabilities: Vec<(String, Vec<String>)>,
    /// Denied tools (absent from `tools`), with the rule that denies them.
    pub denied: HashMap<String, String>,
    /// Each listed tool's permission and the rule that decided it.
    pub decided: HashMap<String, (Permission, String)>,
    /// Rules that decided by a server's annotations (its own, untrusted
    /// claims): per server and rule, how many tools.
    pub relied_on: Vec<evo_proto::ctl::AnnotationReliance>,
    /// Quarantined tools (absent from `tools`): their definition changed
    /// since evo pinned it (`integrity: pin`). By exposed (and doubled) name.
    pub quarantined: HashMap<String, Quarantined>,
    /// The permissions role these decisions are for (the one in force).
    pub role: Option<String>,
    /// Servers that have listed no tools yet: while one is still starting,
    /// a call naming a tool evo does not know waits for it.
    pub unlisted: Vec<Arc<ServerLink>>,
    /// Servers that have not said what they offer (no list of theirs, live
    /// or cached): they may yet bring tools, resources and prompts, so a
    /// session's first answers wait for those still starting, and sessions
    /// advertise resources and prompts for them.
    pub unheard: Vec<Arc<ServerLink>>,
    /// Set when a newer snapshot is published ([`Snapshot::superseded`]).
    replaced: tokio::sync::watch::Sender<bool>,
    /// Indices of the hot tools in `tools`, ascending.
    pub hot: Vec<usize>,
    /// Every profile resolved against `tools` ([`Snapshot::with_profiles`]).
    pub profiles: HashMap<String, Arc<Resolved>>,
    /// Resources, resource templates and prompts of every server.
    pub offers: Offers,
    /// The same catalog decided for each other role of the permissions
    /// file, for HTTP identities that carry one ([`Snapshot::for_role`]).
    pub by_role: HashMap<String, Arc<Snapshot>>,
}

impl Snapshot {
    /// A snapshot of stdio servers with default settings (by id, in order)
    /// and their tools, built the way the Catalog builds one, with no child
    /// behind it: for benchmarks and tests that need a catalog.
    pub fn of_tools(servers: &[(String, Vec<Tool>)]) -> Snapshot {
        let config: serde_json::Map<String, serde_json::Value> = servers
            .iter()
            .map(|(id, _)| (id.clone(), serde_json::json!({"command": "unused"})))
            .collect();
        let text = serde_json::json!({ "mcpServers": config }).to_string();
        let parsed = config::parse(&text, std::path::Path::new("snapshot.json"), &|_| None)
            .map(|c| c.servers)
            .unwrap_or_default();
        let listed = |id: &str| -> &[Tool] {
            servers
                .iter()
                .find(|(s, _)| s == id)
                .map_or(&[], |(_, t)| t.as_slice())
        };
        Snapshot::of_specs(1, &parsed, &listed, &[], &Default::default())
    }

    /// A snapshot of `specs`, each listing `tools(id)`, built the way the
    /// Catalog builds one but with no child behind it.
    pub fn of_specs<'t>(
        version: u64,
        specs: &[ServerSpec],
        tools: &dyn Fn(&str) -> &'t [Tool],
        discovery_hot: &[String],
        permissions: &Permissions,
    ) -> Snapshot {
        let links: Vec<Arc<ServerLink>> = specs
            .iter()
            .map(|spec| Arc::new(ServerLink::new(spec.id.clone(), spec.timeout, None)))
            .collect();
        let held = BTreeMap::new();
        let offered = Offered::default();
        let entries: Vec<Vec<Arc<ToolEntry>>> = specs
            .iter()
            .zip(&links)
            .map(|(spec, link)| entries_for(spec, link, tools(&spec.id), discovery_hot))
            .collect();
        let views: Vec<ServerTools<'_>> = specs
            .iter()
            .zip(&links)
            .zip(&entries)
            .map(|((spec, link), entries)| ServerTools {
                spec,
                link,
                entries,
                held: &held,
                held_offers: &held,
                offered: &offered,
                heard: true,
            })
            .collect();
        Snapshot::build_all(version, &views, permissions, &Default::default())
    }

    /// The catalog as an identity with `role` sees it: `None` (no role of
    /// its own) or the role in force is this snapshot; another role of the
    /// permissions file is its own build. A role the file does not define
    /// sees no tool at all (fail closed; the HTTP front also refuses it).
    pub fn for_role(self: Arc<Self>, role: Option<&str>) -> Arc<Snapshot> {
        let Some(role) = role else { return self };
        if let Some(other) = self.by_role.get(role) {
            return other.clone();
        }
        if self.role.as_deref() == Some(role) {
            return self;
        }
        Arc::new(Snapshot {
            version: self.version,
            ..Snapshot::default()
        })
    }

    /// This snapshot with `book`'s profiles resolved against its tools.
    pub fn with_profiles(mut self, book: &ProfileBook) -> Snapshot {
        self.profiles = book.resolve(&self.tool_names(), &self.index, &self.denied);
        self
    }

    /// One profile resolved against this snapshot now (the published
    /// `profiles` may lag a change that is being republished).
    pub fn resolve(&self, profile: &Profile) -> Resolved {
        Resolved::of(profile, &self.tool_names(), &self.index, &self.denied)
    }

    /// The listed tools' exposed names, in snapshot order.
    fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|e| e.name.as_str()).collect()
    }

    /// The position of a listed tool in `tools`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The tool exposed as `name`, or whose doubled name `name` is.
    pub fn get(&self, name: &str) -> Option<&Arc<ToolEntry>> {
        self.index
            .get(name)
            .or_else(|| self.also.get(name))
            .map(|&i| &self.tools[i])
    }

    /// Whether a server that has listed no tools yet is starting, so a name
    /// this snapshot lacks may yet appear. One waiting out a restart backoff
    /// does not count: a crash loop must not hold up every unknown name.
    pub fn still_listing(&self) -> bool {
        self.unlisted.iter().any(|l| l.state().is_starting())
    }

    /// Servers that have not said what they offer and are starting: a
    /// session's first answers wait for them (`discovery.startup_wait_ms`).
    /// Before the Catalog has its servers (version 0) nothing is known yet,
    /// so that counts as starting too.
    pub fn first_answers_pending(&self) -> bool {
        self.version == 0 || self.starting_unheard().next().is_some()
    }

    /// The servers [`Snapshot::first_answers_pending`] waits for.
    pub fn starting_unheard(&self) -> impl Iterator<Item = &Arc<ServerLink>> {
        self.unheard.iter().filter(|l| l.state().is_starting())
    }

    /// What sessions advertise besides tools: what at least one server
    /// offers, and resources, prompts and completions while a server has
    /// not said whether it offers them (their lists answer what is known so
    /// far, and list_changed follows as more arrives).
    pub fn may_offer(&self) -> OfferCaps {
        let mut caps = self.offers.caps;
        if !self.unheard.is_empty() {
            caps.resources = true;
            caps.prompts = true;
            caps.completions = true;
        }
        caps
    }

    /// Resolves once a newer snapshot than this one is published.
    pub async fn superseded(&self) {
        let mut replaced = self.replaced.subscribe();
        let _ = replaced.wait_for(|r| *r).await;
    }

    /// Marks this snapshot replaced by a newer one (the Catalog, on publish).
    pub fn mark_superseded(&self) {
        self.replaced.send_replace(true);
    }

    /// The rule that makes each call of `name` wait for a person, if one
    /// does.
    pub fn approval_rule(&self, name: &str) -> Option<&str> {
        match self.decided.get(name) {
            Some((Permission::RequireApproval, rule)) => Some(rule),
            _ => None,
        }
    }

    /// The server in `login required` that has listed nothing and whose
    /// id prefixes `name`: the tool may be one of its own.
    pub fn login_required_owner(&self, name: &str) -> Option<&Arc<ServerLink>> {
        self.unlisted.iter().find(|l| {
            l.state() == ServerState::LoginRequired
                && name.len() > l.id.len()
                && name.starts_with(l.id.as_str())
                && name.as_bytes()[l.id.len()] == b'_'
        })
    }

    /// Why `name` may not be called, when permissions deny it or it is
    /// quarantined.
    pub fn refusal(&self, name: &str) -> Option<String> {
        let denied = self.denied.get(name).map(|rule| {
            format!("'{name}' is denied by the permissions ({rule}); ask the person who runs evo to allow it in permissions.yml")
        });
        denied.or_else(|| self.quarantined.get(name).map(Quarantined::refusal))
    }

    /// Merges each server's entries, in config order: the first
    /// registration of a name wins, later ones are recorded as duplicates
    /// (a native tool's name is always taken).
    /// Entries are shared with earlier snapshots, so what they compile lazily
    /// (input validators) is compiled once.
    pub fn build(version: u64, servers: &[ServerTools<'_>], permissions: &Permissions) -> Snapshot {
        use crate::policy::permissions::Permission;
        let mut denied = HashMap::new();
        let mut decided = HashMap::new();
        let mut relied_on: Vec<evo_proto::ctl::AnnotationReliance> = Vec::new();
        let mut tools: Vec<Arc<ToolEntry>> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut also: HashMap<String, usize> = HashMap::new();
        let mut duplicates: Vec<evo_proto::ctl::Duplicate> = Vec::new();
        let mut quarantined: HashMap<String, Quarantined> = HashMap::new();
        for server in servers {
            for entry in server.entries {
                let native = NAMES.contains(&entry.name.as_str());
                // A quarantined tool keeps its name: a later registration
                // never takes over the calls meant for it.
                if native
                    || index.contains_key(&entry.name)
                    || quarantined.contains_key(&entry.name)
                {
                    let kept = match (index.get(&entry.name), quarantined.get(&entry.name)) {
                        _ if native => OWNER.to_string(),
                        (Some(&i), _) => format!("{}:{}", tools[i].server.id, tools[i].upstream),
                        (None, Some(q)) => format!("{}:{}", q.server, q.tool),
                        (None, None) => OWNER.to_string(),
                    };
                    let origin = format!("{}:{}", entry.server.id, entry.upstream);
                    match duplicates.iter_mut().find(|d| d.name == entry.name) {
                        Some(d) => d.skipped.push(origin),
                        None => duplicates.push(evo_proto::ctl::Duplicate {
                            name: entry.name.clone(),
                            kept,
                            skipped: vec![origin],
                        }),
                    }
                    continue;
                }
                if let Some(fields) = server.held.get(&entry.upstream) {
                    let held = Quarantined {
                        name: entry.name.clone(),
                        server: entry.server.id.clone(),
                        tool: entry.upstream.clone(),
                        fields: fields.clone(),
                    };
                    if let Some(doubled) = &entry.also {
                        quarantined.insert(doubled.clone(), held.clone());
                    }
                    quarantined.insert(entry.name.clone(), held);
                    continue;
                }
                // Resolved once per snapshot, never per call. A rule written
                // for the doubled name, or for the name an override replaced,
                // still applies (the stricter wins), so neither a shortened
                // nor a renamed tool loosens a permissions file.
                let hints = Hints::of_tool(&entry.tool);
                let others = entry.also.iter().chain(&entry.former).map(String::as_str);
                let decision = permissions.decide_either(&entry.name, others, hints);
                if let Some(annotation) = decision.annotation {
                    let (server, rule) = (&entry.server.id, annotation.key());
                    match relied_on
                        .iter_mut()
                        .find(|r| &r.server == server && r.rule == rule)
                    {
                        Some(r) => r.tools += 1,
                        None => relied_on.push(evo_proto::ctl::AnnotationReliance {
                            server: server.clone(),
                            rule: rule.to_string(),
                            tools: 1,
                        }),
                    }
                }
                if decision.permission == Permission::Deny {
                    if let Some(doubled) = &entry.also {
                        denied.insert(doubled.clone(), decision.source.clone());
                    }
                    denied.insert(entry.name.clone(), decision.source);
                    continue;
                }
                decided.insert(entry.name.clone(), (decision.permission, decision.source));
                index.insert(entry.name.clone(), tools.len());
                if let Some(doubled) = &entry.also {
                    also.insert(doubled.clone(), tools.len());
                }
                tools.push(entry.clone());
            }
        }
        let capabilities: Vec<(String, Vec<String>)> = servers
            .iter()
            .map(|s| {
                (
                    s.spec.id.clone(),
                    s.spec.capabilities.iter().cloned().collect(),
                )
            })
            .collect();
        let unlisted = servers
            .iter()
            .filter(|s| s.entries.is_empty())
            .map(|s| s.link.clone())
            .collect();
        let unheard = servers
            .iter()
            .filter(|s| !s.heard)
            .map(|s| s.link.clone())
            .collect();
        // A doubled name never shadows another tool's own name.
        also.retain(|name, _| !index.contains_key(name));
        quarantined.retain(|name, q| *name == q.name || !index.contains_key(name));
        let hot = (0..tools.len()).filter(|&i| tools[i].hot).collect();
        let offers = Offers::build(
            servers
                .iter()
                .map(|s| (s.spec, s.link, s.offered, s.held_offers)),
            permissions,
        );
        Snapshot {
            version,
            tools,
            index,
            also,
            duplicates,
            capabilities,
            denied,
            decided,
            relied_on,
            quarantined,
            unlisted,
            unheard,
            replaced: Default::default(),
            hot,
            profiles: HashMap::new(),
            offers,
            role: permissions.active_role().map(str::to_owned),
            by_role: HashMap::new(),
        }
    }

    /// [`Snapshot::build`] for the role in force, with a build for each
    /// other role of the permissions file in [`Snapshot::by_role`].
    pub fn build_all(
        version: u64,
        servers: &[ServerTools<'_>],
        permissions: &Permissions,
        profiles: &ProfileBook,
    ) -> Snapshot {
        let mut snapshot = Snapshot::build(version, servers, permissions).with_profiles(profiles);
        snapshot.by_role = permissions
            .other_roles()
            .filter_map(|role| {
                let decided = permissions.with_role(role)?;
                Some((
                    role.to_owned(),
                    Arc::new(Snapshot::build(version, servers, &decided).with_profiles(profiles)),
                ))
            })
            .collect();
        snapshot
    }
}

/// A tool held back because its definition changed since evo pinned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// The exposed name.
    pub name: String,
    pub server: String,
    /// The tool's name at its server.
    pub tool: String,
    /// The pinned fields that changed ([`crate::policy::integrity::FIELDS`] names).
    pub fields: Vec<String>,
}

impl Quarantined {
    /// The answer to a call or a description of it: names the server, the
    /// tool and the fields that changed, never their new text (it is
    /// untrusted), and what a person can do.
    pub fn refusal(&self) -> String {
        let Quarantined {
            name,
            server,
            tool,
            fields,
        } = self;
        format!(
            "'{name}' is quarantined: server '{server}' changed the definition of its tool '{tool}' \
             ({} changed) after evo pinned it, so evo hides the tool and refuses calls to it until a \
             person reviews the change. A person can see it with `evoctl diff {server} {tool}` and \
             accept it with `evoctl trust {server} {tool}`.",
            fields.join(", ")
        )
    }
}

/// One server's contribution to a snapshot build.
pub struct ServerTools<'a> {
    pub spec: &'a ServerSpec,
    pub link: &'a Arc<ServerLink>,
    pub entries: &'a [Arc<ToolEntry>],
    /// Quarantined tools by upstream name, with the fields that changed.
    pub held: &'a BTreeMap<String, Vec<String>>,
    /// Its resources, templates and prompts.
    pub offered: &'a Offered,
    /// Its quarantined prompts, resources and templates (pin key → the
    /// fields that changed).
    pub held_offers: &'a QuarantinedOffers,
    /// It has said what it offers (a list of its own, live or cached).
    pub heard: bool,
}

/// Where a server's listed tools came from; `evoctl status` reports it as is.
pub use evo_proto::ctl::ToolSource;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, meta_hot: bool) -> Tool {
        let mut t = Tool::new(
            name.to_string(),
            format!("Does {name}. More text."),
            Arc::new(
                json!({"type": "object"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        );
        if meta_hot {
            let mut meta = rmcp::model::MetaObject::default();
            meta.insert("hot".into(), json!(true));
            t.meta = Some(meta);
        }
        t
    }

    /// Builds a snapshot from an `mcpServers` config, each server's tools,
    /// `discovery.hot` and a permissions.yml text.
    fn build(
        config: serde_json::Value,
        tools: &[(&str, Vec<Tool>)],
        discovery_hot: &[&str],
        permissions: &str,
    ) -> Snapshot {
        let text = json!({ "mcpServers": config }).to_string();
        let specs = crate::config::parse(&text, std::path::Path::new("t.json"), &|_| None)
            .expect("test config parses")
            .servers;
        let hot: Vec<String> = discovery_hot.iter().map(|s| s.to_string()).collect();
        let permissions = crate::policy::permissions::Permissions::parse(
            permissions,
            std::path::Path::new("permissions.yml"),
            &Default::default(),
        )
        .expect("test permissions parse");
        let listed = |id: &str| -> &[Tool] {
            tools
                .iter()
                .find(|(s, _)| *s == id)
                .map_or(&[], |(_, t)| t.as_slice())
        };
        Snapshot::of_specs(7, &specs, &listed, &hot, &permissions)
    }

    fn names(s: &Snapshot) -> Vec<&str> {
        s.tools.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn first_in_config_order_wins_a_collision_and_the_rest_are_reported() {
        let s = build(
            json!({"b": {"command": "x", "prefix": "p"}, "a": {"command": "x", "prefix": "p"}}),
            &[
                ("a", vec![tool("read", false)]),
                ("b", vec![tool("read", false), tool("write", false)]),
            ],
            &[],
            "",
        );
        assert_eq!(names(&s), ["p_read", "p_write"]);
        assert_eq!(s.get("p_read").map(|e| e.server.id.as_str()), Some("b"));
        assert_eq!(s.duplicates.len(), 1);
        assert_eq!(s.duplicates[0].name, "p_read");
        assert_eq!(s.duplicates[0].kept, "b:read");
        assert_eq!(s.duplicates[0].skipped, ["a:read"]);
        assert_eq!(s.version, 7);
    }

    #[test]
    fn native_names_are_never_taken_by_a_child() {
        let s = build(
            json!({"x": {"command": "x", "prefix": ""}}),
            &[(
                "x",
                vec![tool("discover_tools", false), tool("other", false)],
            )],
            &[],
            "",
        );
        assert_eq!(names(&s), ["other"]);
        assert_eq!(s.duplicates[0].name, "discover_tools");
        assert_eq!(s.duplicates[0].kept, crate::session::native_tools::OWNER);
    }

    #[test]
    fn permissions_hide_denied_tools_and_mark_approvals() {
        let s = build(
            json!({"fs": {"command": "x"}}),
            &[(
                "fs",
                vec![
                    tool("read", false),
                    tool("write", false),
                    tool("delete", false),
                ],
            )],
            &[],
            "rules:\n  fs_delete: deny\n  \"fs_w*\": require_approval\n",
        );
        assert_eq!(names(&s), ["fs_read", "fs_write"]);
        assert!(s.get("fs_delete").is_none());
        assert!(
            s.refusal("fs_delete")
                .is_some_and(|r| r.contains("fs_delete"))
        );
        assert!(s.refusal("fs_read").is_none());
        assert!(s.approval_rule("fs_write").is_some());
        assert!(s.approval_rule("fs_read").is_none());
    }

    #[test]
    fn each_role_of_the_permissions_file_has_its_own_decisions() {
        let s = Arc::new(build(
            json!({"fs": {"command": "x"}}),
            &[("fs", vec![tool("read", false), tool("write", false)])],
            &[],
            "active_role: dev\nroles:\n  dev: { default_permission: allow }\n  readonly: { default_permission: deny, overrides: { fs_read: allow } }\n  careful: { overrides: { fs_write: require_approval } }\n",
        ));
        assert_eq!(names(&s.clone().for_role(None)), ["fs_read", "fs_write"]);
        assert_eq!(
            names(&s.clone().for_role(Some("dev"))),
            ["fs_read", "fs_write"]
        );
        let readonly = s.clone().for_role(Some("readonly"));
        assert_eq!(names(&readonly), ["fs_read"]);
        assert!(
            readonly
                .refusal("fs_write")
                .is_some_and(|r| r.contains("readonly"))
        );
        let careful = s.clone().for_role(Some("careful"));
        assert!(careful.approval_rule("fs_write").is_some());
        assert!(s.approval_rule("fs_write").is_none());
        // A role the file does not define sees nothing (fail closed), and is
        // still the catalog of this version (calls do not wait for it).
        let unknown = s.clone().for_role(Some("root"));
        assert!(unknown.tools.is_empty());
        assert_eq!(unknown.version, s.version);
    }

    #[test]
    fn hot_comes_from_the_server_the_discovery_list_and_the_child() {
        let s = build(
            json!({"a": {"command": "x", "hot": ["one"]}}),
            &[(
                "a",
                vec![
                    tool("one", false),
                    tool("two", false),
                    tool("three", true),
                    tool("four", false),
                ],
            )],
            &["a_two"],
            "",
        );
        let hot: Vec<&str> = s
            .tools
            .iter()
            .filter(|e| e.hot)
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(hot, ["a_one", "a_two", "a_three"]);
    }

    #[test]
    fn a_new_prefix_renames_every_exposed_name() {
        let before = build(
            json!({"a": {"command": "x"}}),
            &[("a", vec![tool("t", false)])],
            &[],
            "",
        );
        let after = build(
            json!({"a": {"command": "x", "prefix": "b"}}),
            &[("a", vec![tool("t", false)])],
            &[],
            "",
        );
        assert_eq!(names(&before), ["a_t"]);
        assert_eq!(names(&after), ["b_t"]);
        assert_eq!(after.get("b_t").map(|e| e.upstream.as_str()), Some("t"));
    }

    /// The servers of a test config, each with an idle link.
    fn servers_of(config: serde_json::Value) -> (Vec<ServerSpec>, Vec<Arc<ServerLink>>) {
        let text = config.to_string();
        let specs = crate::config::parse(&text, std::path::Path::new("t.json"), &|_| None)
            .expect("test config parses")
            .servers;
        let links = specs
            .iter()
            .map(|s| Arc::new(ServerLink::new(s.id.clone(), s.timeout, None)))
            .collect();
        (specs, links)
    }

    /// QuarantinedOffers offers are absent from the lists and refused by name or URI
    /// (a URI only a held template matches included), and a later server
    /// listing the same URI does not take the reads meant for the first.
    #[test]
    fn quarantined_offers_are_hidden_and_refused() {
        let (specs, links) =
            servers_of(json!({"mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}}));
        let offered = crate::catalog::resources::Offered {
            prompts: vec![rmcp::model::Prompt::new("greet", Some("Hi."), None)],
            resources: vec![
                rmcp::model::Resource::new("fx://readme", "readme"),
                rmcp::model::Resource::new("fx://ok", "ok"),
            ],
            templates: vec![rmcp::model::ResourceTemplate::new("fx://echo/{t}", "echo")],
            ..Default::default()
        };
        let changed = vec!["description".to_string()];
        let held: crate::catalog::resources::QuarantinedOffers = [
            "prompt:greet",
            "resource:fx://readme",
            "template:fx://echo/{t}",
        ]
        .iter()
        .map(|k| (k.to_string(), changed.clone()))
        .collect();
        let (none, no_tools) = (
            crate::catalog::resources::QuarantinedOffers::new(),
            BTreeMap::new(),
        );
        let servers: Vec<ServerTools<'_>> = [(0, &held), (1, &none)]
            .into_iter()
            .map(|(i, held_offers)| ServerTools {
                spec: &specs[i],
                link: &links[i],
                entries: &[],
                held: &no_tools,
                offered: &offered,
                held_offers,
                heard: true,
            })
            .collect();
        let s = Snapshot::build(1, &servers, &Default::default());
        let offers = &s.offers;
        let prompts: Vec<&str> = offers.prompts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(prompts, ["b_greet"]);
        let uris: Vec<&str> = offers
            .resources
            .iter()
            .map(|r| r.resource.uri.as_str())
            .collect();
        assert_eq!(uris, ["fx://ok"]);
        assert!(offers.templates.is_empty(), "b's copy is not listed either");
        assert!(offers.prompt("a_greet").is_none());
        assert!(offers.quarantined["a_greet"].contains("prompt 'greet'"));
        for uri in ["fx://readme", "fx://echo/7"] {
            assert!(offers.owner_of(uri).is_none(), "{uri} was routed");
            let why = offers.refusal_for_uri(uri).unwrap_or_default();
            assert!(
                why.contains("quarantined") && why.contains("server 'a'"),
                "{why}"
            );
        }
        assert!(offers.refusal_for_uri("fx://ok").is_none());
        assert_eq!(offers.owner_of("fx://ok").map(|l| l.id.as_str()), Some("a"));
    }

    /// A held tool is absent from the list and its name refuses calls,
    /// naming the fields, and a later server's tool of the same name does
    /// not take the calls meant for it.
    #[test]
    fn quarantined_tools_are_hidden_refused_and_keep_their_name() {
        let (specs, links) = servers_of(json!({"mcpServers": {
            "a": {"command": "x", "prefix": "p"},
            "b": {"command": "x", "prefix": "p"}}}));
        let a = entries_for(
            &specs[0],
            &links[0],
            &[tool("read", false), tool("ok", false)],
            &[],
        );
        let b = entries_for(&specs[1], &links[1], &[tool("read", false)], &[]);
        let held: BTreeMap<String, Vec<String>> =
            [("read".to_string(), vec!["description".to_string()])].into();
        let none = BTreeMap::new();
        let offered = crate::catalog::resources::Offered::default();
        let servers = [
            ServerTools {
                spec: &specs[0],
                link: &links[0],
                entries: &a,
                held: &held,
                held_offers: &none,
                offered: &offered,
                heard: true,
            },
            ServerTools {
                spec: &specs[1],
                link: &links[1],
                entries: &b,
                held: &none,
                held_offers: &none,
                offered: &offered,
                heard: true,
            },
        ];
        let s = Snapshot::build(1, &servers, &Default::default());
        assert_eq!(names(&s), ["p_ok"]);
        assert!(s.get("p_read").is_none());
        let refusal = s.refusal("p_read").unwrap_or_default();
        for part in [
            "quarantined",
            "server 'a'",
            "tool 'read'",
            "(description changed)",
            "evoctl diff a read",
            "evoctl trust a read",
        ] {
            assert!(refusal.contains(part), "{part}: {refusal}");
        }
        assert!(
            !refusal.contains("Does read"),
            "never the new text: {refusal}"
        );
        assert_eq!(s.duplicates.len(), 1);
        assert_eq!(
            (
                s.duplicates[0].kept.as_str(),
                s.duplicates[0].skipped.as_slice()
            ),
            ("a:read", &["b:read".to_string()][..])
        );
    }

    #[test]
    fn servers_with_no_tools_yet_are_unlisted() {
        let s = build(
            json!({"a": {"command": "x"}, "b": {"command": "x"}}),
            &[("a", vec![tool("t", false)])],
            &[],
            "",
        );
        let unlisted: Vec<&str> = s.unlisted.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(unlisted, ["b"]);
    }
}
