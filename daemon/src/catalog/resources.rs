//! What children offer besides tools: resources, resource templates and
//! prompts. [`Offered`] is one server's lists as it gave them (kept in the
//! catalog cache); [`Offers`] is every server's merged into one view, built
//! with each catalog snapshot, so sessions route a read, a get or a
//! completion without a round trip.
//!
//! The rules (docs/operating.md, "Resources and prompts"): prompts are exposed as
//! `${prefix}_${name}` with the tools' sanitising and collision policy;
//! resources keep their URIs, the first server in config order owning a URI
//! two list; a URI no server lists goes to the first server (config order)
//! with a template that matches it; a template two servers list is listed
//! once.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{Prompt, Resource, ResourceTemplate, ServerCapabilities};
use serde::{Deserialize, Serialize};

use crate::child::link::ServerLink;
use crate::config::ServerSpec;
use crate::names;
use crate::policy::permissions::Permission;
use crate::policy::permissions::Permissions;

/// What a server says it supports besides tools (its `initialize` or
/// `server/discover` capabilities).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferCaps {
    #[serde(default)]
    pub resources: bool,
    #[serde(default)]
    pub subscribe: bool,
    #[serde(default)]
    pub resources_changed: bool,
    #[serde(default)]
    pub prompts: bool,
    #[serde(default)]
    pub prompts_changed: bool,
    #[serde(default)]
    pub completions: bool,
}

impl OfferCaps {
    pub fn of(caps: &ServerCapabilities) -> OfferCaps {
        let resources = caps.resources.as_ref();
        let prompts = caps.prompts.as_ref();
        OfferCaps {
            resources: resources.is_some(),
            subscribe: resources.and_then(|r| r.subscribe).unwrap_or(false),
            resources_changed: resources.and_then(|r| r.list_changed).unwrap_or(false),
            prompts: prompts.is_some(),
            prompts_changed: prompts.and_then(|p| p.list_changed).unwrap_or(false),
            completions: caps.completions.is_some(),
        }
    }

    /// Either side has it.
    fn or(self, other: OfferCaps) -> OfferCaps {
        OfferCaps {
            resources: self.resources || other.resources,
            subscribe: self.subscribe || other.subscribe,
            resources_changed: self.resources_changed || other.resources_changed,
            prompts: self.prompts || other.prompts,
            prompts_changed: self.prompts_changed || other.prompts_changed,
            completions: self.completions || other.completions,
        }
    }
}

/// What a pinned offer is. Its pin's key is the kind and the offer's own
/// identity (a prompt's upstream name, a resource's URI, a template), so
/// kinds never collide and tool names stay a namespace of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferKind {
    Prompt,
    Resource,
    Template,
}

impl OfferKind {
    const ALL: [OfferKind; 3] = [OfferKind::Prompt, OfferKind::Resource, OfferKind::Template];

    fn prefix(self) -> &'static str {
        match self {
            OfferKind::Prompt => "prompt:",
            OfferKind::Resource => "resource:",
            OfferKind::Template => "template:",
        }
    }

    /// What messages call it.
    pub fn noun(self) -> &'static str {
        match self {
            OfferKind::Prompt => "prompt",
            OfferKind::Resource => "resource",
            OfferKind::Template => "resource template",
        }
    }

    /// The pin key of the offer `id` of this kind: `prompt:greet`,
    /// `resource:fx://readme`, `template:fx://echo/{text}`.
    pub fn key(self, id: &str) -> String {
        format!("{}{id}", self.prefix())
    }

    /// The kind and the id a pin key names.
    pub fn of_key(key: &str) -> Option<(OfferKind, &str)> {
        OfferKind::ALL
            .into_iter()
            .find_map(|k| key.strip_prefix(k.prefix()).map(|id| (k, id)))
    }
}

/// One server's resources, templates and prompts, every page of each.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    #[serde(default)]
    pub caps: OfferCaps,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<ResourceTemplate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<Prompt>,
}

/// A prompt as sessions see it: its exposed name, and where it goes.
pub struct PromptEntry {
    /// The exposed name: `${prefix}_${name}`, sanitised.
    pub name: String,
    /// The child's own name for it.
    pub upstream: String,
    pub server: Arc<ServerLink>,
    /// As listed to clients (under the exposed name).
    pub prompt: Prompt,
}

/// A resource and the server that owns its URI.
pub struct ResourceEntry {
    pub server: Arc<ServerLink>,
    pub resource: Resource,
}

/// A resource template and the server it routes to.
pub struct TemplateEntry {
    pub server: Arc<ServerLink>,
    pub template: ResourceTemplate,
}

/// Every server's offers, merged. See the module docs.
#[derive(Default)]
pub struct Offers {
    pub prompts: Vec<PromptEntry>,
    prompt_index: HashMap<String, usize>,
    pub resources: Vec<ResourceEntry>,
    resource_index: HashMap<String, usize>,
    pub templates: Vec<TemplateEntry>,
    /// Prompt names and resource URIs two servers list: the first in config
    /// order is kept.
    pub duplicates: Vec<evo_proto::ctl::Duplicate>,
    /// Denied prompts (exposed name → the rule), hidden and refused.
    pub denied: HashMap<String, String>,
    /// Quarantined prompts (by exposed name), resources (by URI) and
    /// templates: their definition changed since evo pinned it. Hidden, and
    /// refused with the answer held here.
    pub quarantined: HashMap<String, String>,
    /// Quarantined templates in config order: a URI only they match is
    /// refused, not routed to a later server.
    held_templates: Vec<String>,
    /// What at least one server supports.
    pub caps: OfferCaps,
    /// What each server supports, by id.
    per_server: HashMap<String, OfferCaps>,
    /// Hashes of the listed resources (with templates) and prompts, so a
    /// session can tell whether a new snapshot changed what it lists.
    pub fingerprints: (u64, u64),
}

impl Offers {
    /// Merges each server's offers, in config order.
    /// `held` is each server's quarantined offers (pin key → the fields
    /// that changed).
    pub fn build<'a>(
        servers: impl Iterator<
            Item = (
                &'a ServerSpec,
                &'a Arc<ServerLink>,
                &'a Offered,
                &'a QuarantinedOffers,
            ),
        >,
        permissions: &Permissions,
    ) -> Offers {
        let mut offers = Offers::default();
        let mut template_seen = std::collections::HashSet::new();
        for (spec, link, offered, held) in servers {
            offers.caps = offers.caps.or(offered.caps);
            offers.per_server.insert(spec.id.clone(), offered.caps);
            let quarantine = |offers: &mut Offers, kind: OfferKind, id: &str, shown: &str| {
                let key = kind.key(id);
                let Some(fields) = held.get(&key) else {
                    return false;
                };
                let why = refusal(shown, &spec.id, kind, id, &key, fields);
                offers.quarantined.entry(shown.to_owned()).or_insert(why);
                true
            };
            for p in &offered.prompts {
                let name = names::exposed_name(&spec.prefix, &p.name);
                let origin = format!("{}:{}", spec.id, p.name);
                if let Some(&i) = offers.prompt_index.get(&name) {
                    let kept = offers.prompts[i].server.id.clone();
                    let kept = format!("{kept}:{}", offers.prompts[i].upstream);
                    offers.duplicate(&name, kept, origin);
                    continue;
                }
                if offers.quarantined.contains_key(&name)
                    || quarantine(&mut offers, OfferKind::Prompt, &p.name, &name)
                {
                    continue;
                }
                let decision = permissions.decide(&name);
                if decision.permission == Permission::Deny {
                    offers.denied.insert(name, decision.source);
                    continue;
                }
                let mut prompt = p.clone();
                prompt.name = name.clone();
                offers
                    .prompt_index
                    .insert(name.clone(), offers.prompts.len());
                offers.prompts.push(PromptEntry {
                    name,
                    upstream: p.name.clone(),
                    server: link.clone(),
                    prompt,
                });
            }
            for r in &offered.resources {
                if let Some(&i) = offers.resource_index.get(&r.uri) {
                    let kept = offers.resources[i].server.id.clone();
                    offers.duplicate(&r.uri, kept, spec.id.clone());
                    continue;
                }
                if offers.quarantined.contains_key(&r.uri)
                    || quarantine(&mut offers, OfferKind::Resource, &r.uri, &r.uri)
                {
                    continue;
                }
                offers
                    .resource_index
                    .insert(r.uri.clone(), offers.resources.len());
                offers.resources.push(ResourceEntry {
                    server: link.clone(),
                    resource: r.clone(),
                });
            }
            for t in &offered.templates {
                let tpl = &t.uri_template;
                if !template_seen.contains(tpl)
                    && quarantine(&mut offers, OfferKind::Template, tpl, tpl)
                {
                    template_seen.insert(tpl.clone());
                    offers.held_templates.push(tpl.clone());
                    continue;
                }
                if template_seen.insert(t.uri_template.clone()) {
                    offers.templates.push(TemplateEntry {
                        server: link.clone(),
                        template: t.clone(),
                    });
                }
            }
        }
        offers.fingerprints = (
            fingerprint(&(
                offers
                    .resources
                    .iter()
                    .map(|r| &r.resource)
                    .collect::<Vec<_>>(),
                offers
                    .templates
                    .iter()
                    .map(|t| &t.template)
                    .collect::<Vec<_>>(),
            )),
            fingerprint(&offers.prompts.iter().map(|p| &p.prompt).collect::<Vec<_>>()),
        );
        offers
    }

    fn duplicate(&mut self, name: &str, kept: String, skipped: String) {
        match self.duplicates.iter_mut().find(|d| d.name == name) {
            Some(d) => d.skipped.push(skipped),
            None => self.duplicates.push(evo_proto::ctl::Duplicate {
                name: name.to_string(),
                kept,
                skipped: vec![skipped],
            }),
        }
    }

    /// What server `id` supports besides tools.
    pub fn caps_of(&self, id: &str) -> Option<OfferCaps> {
        self.per_server.get(id).copied()
    }

    /// The prompt exposed as `name`.
    pub fn prompt(&self, name: &str) -> Option<&PromptEntry> {
        self.prompt_index.get(name).map(|&i| &self.prompts[i])
    }

    /// The server that answers a read of `uri`: the one listing it, else
    /// the first (config order) whose template matches it. A quarantined
    /// URI has none ([`Offers::refusal_for_uri`] says why).
    pub fn owner_of(&self, uri: &str) -> Option<&Arc<ServerLink>> {
        if let Some(&i) = self.resource_index.get(uri) {
            return Some(&self.resources[i].server);
        }
        if self.quarantined.contains_key(uri) {
            return None;
        }
        self.templates
            .iter()
            .find(|t| template_matches(&t.template.uri_template, uri))
            .map(|t| &t.server)
    }

    /// Why a read of `uri` is refused: it is a quarantined resource, or only
    /// quarantined templates match it.
    pub fn refusal_for_uri(&self, uri: &str) -> Option<&str> {
        if let Some(why) = self.quarantined.get(uri) {
            return Some(why);
        }
        self.held_templates
            .iter()
            .find(|t| template_matches(t, uri))
            .and_then(|t| self.quarantined.get(t))
            .map(String::as_str)
    }

    /// The server a completion of a `ref/resource` goes to: the one whose
    /// template it names, else the owner of the URI.
    pub fn owner_of_template(&self, uri_or_template: &str) -> Option<&Arc<ServerLink>> {
        self.templates
            .iter()
            .find(|t| t.template.uri_template == uri_or_template)
            .map(|t| &t.server)
            .or_else(|| self.owner_of(uri_or_template))
    }
}

/// A server's quarantined offers: pin key → the fields that changed.
pub type QuarantinedOffers = std::collections::BTreeMap<String, Vec<String>>;

/// The answer to a get or read of a quarantined offer: names the server,
/// the offer and the fields that changed, never their new text (it is
/// untrusted), and what a person can do.
fn refusal(
    shown: &str,
    server: &str,
    kind: OfferKind,
    id: &str,
    key: &str,
    fields: &[String],
) -> String {
    let noun = kind.noun();
    format!(
        "'{shown}' is quarantined: server '{server}' changed the definition of its {noun} '{id}' \
         ({} changed) after evo pinned it, so evo hides it and refuses it until a person reviews \
         the change. A person can see it with `evoctl diff {server} {key}` and accept it with \
         `evoctl trust {server} {key}`.",
        fields.join(", ")
    )
}

fn fingerprint(value: &impl Serialize) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(value).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// Whether `uri` is an expansion of the RFC 6570 `template`: literal parts
/// match exactly; `{var}` stands for one or more characters other than `/`,
/// `?` and `#`; `{+var}`, `{#var}` and exploded `{var*}` for any characters;
/// `{/var}` for `/` and a segment; `{?a,b}` and `{&a}` for the rest of a
/// query.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let parts = parse_template(template);
    matches_from(&parts, uri)
}

#[derive(Debug, PartialEq)]
enum Part<'a> {
    Literal(&'a str),
    /// A variable: whether it may contain `/` (reserved, fragment, exploded).
    Var {
        slashes: bool,
        prefix: &'static str,
    },
    /// `{?…}` / `{&…}`: an optional query (the rest of the URI).
    Query,
}

fn parse_template(template: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            parts.push(Part::Literal(&rest[open..]));
            return parts;
        };
        let expr = &rest[open + 1..close];
        let exploded = expr.ends_with('*');
        parts.push(match expr.chars().next() {
            Some('?') | Some('&') => Part::Query,
            Some('+') | Some('#') => Part::Var {
                slashes: true,
                prefix: if expr.starts_with('#') { "#" } else { "" },
            },
            Some('/') => Part::Var {
                slashes: exploded,
                prefix: "/",
            },
            _ => Part::Var {
                slashes: exploded,
                prefix: "",
            },
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    parts
}

fn matches_from(parts: &[Part<'_>], uri: &str) -> bool {
    let Some((first, more)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(lit) => uri
            .strip_prefix(lit)
            .is_some_and(|rest| matches_from(more, rest)),
        Part::Query => uri.is_empty() || (uri.starts_with(['?', '&']) && more.is_empty()),
        Part::Var { slashes, prefix } => {
            let Some(uri) = uri.strip_prefix(prefix) else {
                return false;
            };
            // One or more characters, then the rest must match.
            for (i, c) in uri.char_indices() {
                if !slashes && matches!(c, '/' | '?' | '#') {
                    break;
                }
                if matches_from(more, &uri[i + c.len_utf8()..]) {
                    return true;
                }
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_their_expansions() {
        assert!(template_matches(
            "test://static/resource/{id}",
            "test://static/resource/7"
        ));
        assert!(!template_matches(
            "test://static/resource/{id}",
            "test://static/resource/"
        ));
        assert!(!template_matches(
            "test://static/resource/{id}",
            "test://static/resource/7/more"
        ));
        assert!(template_matches("file:///{+path}", "file:///home/u/a.txt"));
        assert!(template_matches("repo://{owner}/{name}", "repo://a/b"));
        assert!(!template_matches("repo://{owner}/{name}", "repo://a"));
        assert!(template_matches("db://tables{/table}", "db://tables/users"));
        assert!(template_matches(
            "search://q{?term,limit}",
            "search://q?term=x"
        ));
        assert!(template_matches("search://q{?term,limit}", "search://q"));
        assert!(!template_matches("a://{x}", "b://y"));
        assert!(template_matches("plain://fixed", "plain://fixed"));
    }
}
