//! One proxied tool as the catalog exposes it ([`ToolEntry`]), made from the child's
//! definition and its server entry ([`entries_for`]), per-tool overrides applied.
//!
//! Overrides (a server's `tools`, read in `config/overrides.rs`) shape only what is exposed: the
//! exposed name, the description every list, search index, card and `describe_tool` reads, and
//! an input schema without the fixed arguments. The child's own definition is kept in the
//! catalog's slot and is what integrity pins hash, so an override never hides a rug pull.
//!
//! - `hidden`: no entry at all; a call by name is answered as for a tool evo does not know.
//! - `args`: each fixed parameter must be declared in the tool's `properties`, and its value
//!   must satisfy that parameter's schema; one that does not (a typo, a wrong type, or the server
//!   changed) withholds the whole tool, with a warning naming the parameter (never the value):
//!   exposing it without the restriction the person meant would be worse than not exposing it.
//!   Fixed parameters leave `properties` and `required`; a caller that passes one anyway is
//!   refused with an error naming it (the session's call path), rather than having its value
//!   silently replaced.
//! - A renamed tool keeps the names it had without the override in [`ToolEntry::former`]: they
//!   do not route, but a permissions rule written for them still applies (the stricter wins), so
//!   renaming a tool never loosens a permissions file.
//! - An override for a tool the server does not list is a warning when its list arrives.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool};
use serde_json::Value;

use crate::child::link::ServerLink;
use crate::config::{ServerSpec, ToolOverride};
use crate::names;
use crate::repair::CompiledSchema;
use crate::schema;
use crate::session::tool_card;
use crate::session::tool_card::CardSchema;

/// One proxied tool as the catalog exposes it.
pub struct ToolEntry {
    /// Exposed name: `${prefix}_${upstream}` (an override's `name` in place of the upstream
    /// one), sanitised.
    pub name: String,
    /// The child's own name for the tool.
    pub upstream: String,
    /// The name without its prefix, as search reads it: an override's `name`, else `upstream`.
    pub base_name: String,
    /// The doubled form of a name that already carried its prefix
    /// (`git_git_log` for `git_log`), which still routes here.
    pub also: Option<String>,
    /// For a tool an override renamed: the names it had without the override (exposed and
    /// doubled). They do not route; permissions rules written for them still apply.
    pub former: Vec<String>,
    pub server: Arc<ServerLink>,
    pub domain: String,
    /// First sentence of the description, on one line.
    pub summary: String,
    /// Listed with its full schema from a session's start in dynamic mode.
    pub hot: bool,
    /// The tool as listed to clients: exposed name, description (overridden or its own),
    /// normalised schema without the fixed arguments.
    pub tool: Tool,
    /// Configured parameter aliases for this tool: wrong name → right name.
    pub aliases: BTreeMap<String, String>,
    /// Arguments the config fixes (`tools.UPSTREAM.args`): always sent, never the caller's.
    pub fixed: JsonObject,
    /// A hash of `tool` as listed: sessions compare it to tell a changed
    /// definition (a new description) from an unchanged one.
    pub fingerprint: u64,
    /// The input validator, compiled on first use and kept with the entry
    /// (entries outlive snapshots while their tool is unchanged); `None` when
    /// the schema cannot be compiled and calls go unchecked.
    compiled: OnceLock<Option<CompiledSchema>>,
    /// The input schema as a `discover_tools` card shows it, made on first use.
    card: OnceLock<CardSchema>,
}

/// The entries of one server's tools under their exposed names. A tool name
/// the child listed twice keeps its first listing; hidden tools and tools whose fixed
/// arguments do not fit their schema have none.
pub fn entries_for(
    spec: &ServerSpec,
    link: &Arc<ServerLink>,
    tools: &[Tool],
    discovery_hot: &[String],
) -> Vec<Arc<ToolEntry>> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(tools.len());
    for tool in tools {
        if !seen.insert(tool.name.as_ref()) {
            tracing::warn!(server = %spec.id, tool = %tool.name, "child listed the same tool name twice; keeping the first");
            continue;
        }
        let overridden = spec.override_of(&tool.name);
        if overridden.is_some_and(|o| o.hidden) {
            continue;
        }
        match ToolEntry::new(tool, spec, overridden, link.clone(), discovery_hot) {
            Ok(entry) => out.push(Arc::new(entry)),
            Err(why) => tracing::warn!(server = %spec.id, tool = %tool.name, "{why}"),
        }
    }
    if !tools.is_empty() {
        for upstream in spec.tools.keys().filter(|t| !seen.contains(t.as_str())) {
            tracing::warn!(server = %spec.id, tool = %upstream, "tools.{upstream}: server '{}' lists no tool '{upstream}', so this override applies to nothing; check the upstream name (`evoctl list` shows exposed names, `evoctl describe NAME` the upstream one)", spec.id);
        }
    }
    out
}

impl ToolEntry {
    /// The entry for `upstream` as `spec` (and its override) exposes it, or why the override
    /// withholds it.
    fn new(
        upstream: &Tool,
        spec: &ServerSpec,
        overridden: Option<&ToolOverride>,
        link: Arc<ServerLink>,
        discovery_hot: &[String],
    ) -> Result<ToolEntry, String> {
        let name = spec.exposed_name(&upstream.name);
        let meta = upstream.meta.as_ref();
        let meta_str = |key: &str| {
            meta.and_then(|m| m.get(key))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let meta_hot = meta
            .and_then(|m| m.get("hot"))
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
            || meta_str("tier").as_deref() == Some("hot");
        let hot = meta_hot
            || spec.hot.iter().any(|h| h == upstream.name.as_ref())
            || discovery_hot.contains(&name);
        let domain = meta_str("domain").unwrap_or_else(|| spec.domain.clone());
        let (mut input_schema, fixed_type) = schema::normalize_input_schema(&upstream.input_schema);
        if fixed_type {
            tracing::debug!(server = %spec.id, tool = %upstream.name, "input schema had no \"type\": \"object\"; added it");
        }
        let mut tool = upstream.clone();
        let mut fixed = JsonObject::new();
        if let Some(o) = overridden {
            if !o.args.is_empty() {
                input_schema = Arc::new(without_fixed(&input_schema, &o.args, &upstream.name)?);
                fixed = o.args.clone();
            }
            if let Some(description) = &o.description {
                tool.description = Some(description.clone().into());
            }
        }
        tool.name = name.clone().into();
        tool.input_schema = input_schema;
        let fingerprint = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_vec(&tool).unwrap_or_default().hash(&mut h);
            h.finish()
        };
        Ok(ToolEntry {
            fingerprint,
            summary: schema::summary(tool.description.as_deref()),
            also: spec.doubled_name(&upstream.name),
            former: former_names(spec, &upstream.name, &name),
            name,
            upstream: upstream.name.to_string(),
            base_name: overridden
                .and_then(|o| o.name.clone())
                .unwrap_or_else(|| upstream.name.to_string()),
            server: link,
            domain,
            hot,
            aliases: spec
                .aliases
                .get(upstream.name.as_ref())
                .cloned()
                .unwrap_or_default(),
            fixed,
            tool,
            compiled: OnceLock::new(),
            card: OnceLock::new(),
        })
    }

    /// The input schema in a card's compact form (made once, on first use).
    pub fn card_schema(&self) -> &CardSchema {
        self.card
            .get_or_init(|| tool_card::compact(&self.tool.input_schema))
    }

    /// The compiled input schema (compiled once, on first use).
    pub fn compiled(&self) -> Option<&CompiledSchema> {
        self.compiled
            .get_or_init(|| CompiledSchema::compile(&self.name, &self.tool.input_schema))
            .as_ref()
    }

    /// Whether the tool has no description (its summary is a placeholder).
    pub fn summary_missing(&self) -> bool {
        self.summary == schema::NO_SUMMARY
    }

    /// Whether the input schema declares `param` at the top level.
    pub fn declares(&self, param: &str) -> bool {
        self.tool
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
            .is_some_and(|p| p.contains_key(param))
    }

    /// Does the input schema require `param`?
    pub fn requires(&self, param: &str) -> bool {
        self.tool
            .input_schema
            .get("required")
            .and_then(|r| r.as_array())
            .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(param)))
    }

    /// The first fixed parameter among `arguments`: a caller may not set it.
    pub fn fixed_given<'a>(&self, arguments: &'a JsonObject) -> Option<&'a str> {
        arguments
            .keys()
            .find(|k| self.fixed.contains_key(k.as_str()))
            .map(String::as_str)
    }

    /// `arguments` as the child receives them: with the fixed arguments set.
    pub fn with_fixed(&self, arguments: Option<JsonObject>) -> Option<JsonObject> {
        if self.fixed.is_empty() {
            return arguments;
        }
        let mut arguments = arguments.unwrap_or_default();
        for (param, value) in &self.fixed {
            arguments.insert(param.clone(), value.clone());
        }
        Some(arguments)
    }
}

/// The names `upstream` would be exposed under without its override's `name`, where they
/// differ from `name`.
fn former_names(spec: &ServerSpec, upstream: &str, name: &str) -> Vec<String> {
    if spec.override_of(upstream).is_none_or(|o| o.name.is_none()) {
        return Vec::new();
    }
    let plain = names::exposed_name(&spec.prefix, upstream);
    let doubled = names::doubled_name(&spec.prefix, upstream);
    std::iter::once(plain)
        .chain(doubled)
        .filter(|n| n != name)
        .collect()
}

/// `schema` without the `fixed` parameters in `properties` and `required`; an error naming
/// a fixed parameter the schema does not declare.
fn without_fixed(
    schema: &JsonObject,
    fixed: &JsonObject,
    tool: &str,
) -> Result<JsonObject, String> {
    let mut schema = schema.clone();
    let declared: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    if let Some(param) = fixed.keys().find(|p| !declared.contains(p)) {
        let known = if declared.is_empty() {
            "it declares no parameters".to_owned()
        } else {
            format!("its parameters are {}", declared.join(", "))
        };
        return Err(format!(
            "tools.{tool}.args.{param}: tool '{tool}' has no parameter '{param}' ({known}), so \
             evo withholds the tool rather than expose it without the fixed argument; fix or \
             remove args.{param} in the config"
        ));
    }
    if let Some((param, keyword)) = misfit(&schema, fixed) {
        return Err(format!(
            "tools.{tool}.args.{param}: the fixed value does not satisfy the '{keyword}' of \
             tool '{tool}''s parameter '{param}', so evo withholds the tool rather than send \
             calls the server would refuse; fix args.{param} in the config"
        ));
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.retain(|p, _| !fixed.contains_key(p));
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|p| p.as_str().is_none_or(|p| !fixed.contains_key(p)));
    }
    Ok(schema)
}

/// The first fixed argument whose value its parameter's schema refuses, with the keyword that
/// refuses it (never the value: a fixed argument may be a secret, and this goes to the log).
/// A schema that cannot be compiled checks nothing, as calls then go unchecked.
fn misfit(schema: &JsonObject, fixed: &JsonObject) -> Option<(String, String)> {
    let properties = schema.get("properties").and_then(Value::as_object)?;
    let mut probe = JsonObject::new();
    for key in ["$schema", "$defs", "definitions"] {
        if let Some(value) = schema.get(key) {
            probe.insert(key.to_owned(), value.clone());
        }
    }
    let checked: JsonObject = fixed
        .keys()
        .filter_map(|p| Some((p.clone(), properties.get(p)?.clone())))
        .collect();
    probe.insert("type".to_owned(), Value::from("object"));
    probe.insert("properties".to_owned(), Value::Object(checked));
    let validator = jsonschema::options()
        .should_validate_formats(false)
        .build(&Value::Object(probe))
        .ok()?;
    let instance = Value::Object(fixed.clone());
    let error = validator.iter_errors(&instance).next()?;
    let path = error.instance_path().as_str().to_owned();
    let param = path
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    Some((param, error.kind().keyword().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(tools: Value) -> ServerSpec {
        let text = json!({"mcpServers": {"fx": {"command": "x", "tools": tools}}}).to_string();
        let mut parsed = crate::config::parse(&text, std::path::Path::new("t.json"), &|_| None)
            .expect("test config parses");
        assert!(parsed.failed.is_empty(), "{:?}", parsed.failed);
        parsed.servers.remove(0)
    }

    fn record() -> Tool {
        Tool::new(
            "record",
            "Record the arguments.",
            Arc::new(
                json!({"type": "object",
                       "properties": {"count": {"type": "integer"}, "tag": {"type": "string"}},
                       "required": ["count", "tag"]})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ),
        )
    }

    fn entries(tools: Value) -> Vec<Arc<ToolEntry>> {
        let spec = spec(tools);
        let link = Arc::new(ServerLink::new("fx".into(), spec.timeout, None));
        let listed = [
            record(),
            Tool::new("other", "Other.", Arc::new(JsonObject::new())),
        ];
        entries_for(&spec, &link, &listed, &[])
    }

    #[test]
    fn an_override_renames_redescribes_and_fixes() {
        let got = entries(
            json!({"record": {"name": "log", "description": "Write it down. More.",
                                            "args": {"count": 3}}}),
        );
        let e = &got[0];
        assert_eq!((e.name.as_str(), e.upstream.as_str()), ("fx_log", "record"));
        assert_eq!(e.base_name, "log");
        assert_eq!(e.former, ["fx_record"]);
        assert_eq!(e.tool.name, "fx_log");
        assert_eq!(e.tool.description.as_deref(), Some("Write it down. More."));
        assert_eq!(e.summary, "Write it down.");
        assert_eq!(
            Value::Object((*e.tool.input_schema).clone()),
            json!({"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]})
        );
        let sent = e.with_fixed(Some(
            json!({"tag": "a"}).as_object().cloned().unwrap_or_default(),
        ));
        assert_eq!(
            sent.map(Value::Object),
            Some(json!({"tag": "a", "count": 3}))
        );
        let given = json!({"count": 9}).as_object().cloned().unwrap_or_default();
        assert_eq!(e.fixed_given(&given), Some("count"));
        assert_eq!(got[1].name, "fx_other");
    }

    #[test]
    fn search_reads_the_new_name_and_description() {
        let got = entries(json!({"record": {"name": "log", "description": "Write it down."}}));
        let text = crate::search::semantic::tool_text(&got[0]);
        assert_eq!(text, "log: Write it down.");
    }

    #[test]
    fn hidden_and_misfixed_tools_have_no_entry() {
        let names = |tools: Value| -> Vec<String> {
            entries(tools).iter().map(|e| e.name.clone()).collect()
        };
        assert_eq!(names(json!({"record": {"hidden": true}})), ["fx_other"]);
        assert_eq!(
            names(json!({"record": {"args": {"cuont": 1}}})),
            ["fx_other"]
        );
        assert_eq!(
            names(json!({"record": {"args": {"count": "seven"}}})),
            ["fx_other"]
        );
        assert_eq!(
            names(json!({"missing": {"name": "m"}})),
            ["fx_record", "fx_other"]
        );
    }

    #[test]
    fn the_fixed_parameter_error_names_it_and_the_declared_ones() {
        let schema = record().input_schema;
        let fixed = json!({"cuont": 1}).as_object().cloned().unwrap_or_default();
        let why = without_fixed(&schema, &fixed, "record")
            .err()
            .unwrap_or_default();
        assert!(why.contains("tools.record.args.cuont"), "{why}");
        assert!(why.contains("its parameters are count, tag"), "{why}");
        let fixed = json!({"tag": "ok", "count": "s3cret"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let why = without_fixed(&schema, &fixed, "record")
            .err()
            .unwrap_or_default();
        assert!(
            why.starts_with("tools.record.args.count: the fixed value does not satisfy the 'type'"),
            "{why}"
        );
        assert!(!why.contains("s3cret"), "{why}");
    }
}
