//! Tiered disclosure: what a session is told about tools it does not list in
//! full. Hot tools carry full schemas in `tools/list`; every other permitted
//! tool is one line (`name — summary (domain)`) in the initialize
//! `instructions`, grouped by domain within a byte budget; `describe_tool`
//! gives the full schema and a worked example on demand. `evoctl docs` renders
//! the same registry as Markdown, so docs and runtime cannot drift.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::catalog::{Snapshot, ToolEntry};
use crate::example;

/// Tools of `snapshot` grouped by domain, domains in name order, tools in
/// catalog order.
fn by_domain<'a>(
    tools: impl Iterator<Item = &'a Arc<ToolEntry>>,
) -> BTreeMap<&'a str, Vec<&'a Arc<ToolEntry>>> {
    let mut groups: BTreeMap<&str, Vec<&Arc<ToolEntry>>> = BTreeMap::new();
    for t in tools {
        groups.entry(t.domain.as_str()).or_default().push(t);
    }
    groups
}

const INSTRUCTIONS_HEAD: &str = "evo connects you to many tools. Tools listed in full are ready to call. \
The others below are one line each: call one by its exact name (or through call_tool), \
use describe_tool NAME for its schema and an example, or discover_tools to search.";

/// The initialize `instructions` for a session that lists `listed` tools in
/// full: every other tool of the snapshot, one line each, grouped by domain,
/// within `budget` bytes. Domains that do not fit are named with their tool
/// counts and a pointer to `describe_capability`.
pub fn instructions(
    snapshot: &Snapshot,
    listed: &dyn Fn(&ToolEntry) -> bool,
    budget: usize,
) -> String {
    let mut out = String::from(INSTRUCTIONS_HEAD);
    let groups = by_domain(snapshot.tools.iter().filter(|t| !listed(t)));
    if groups.is_empty() {
        return out;
    }
    let mut sections: Vec<String> = Vec::new();
    let mut overflow: Vec<(&str, usize)> = Vec::new();
    // Reserve room for the overflow note so the whole text stays in budget.
    let reserve = 160
        + groups
            .keys()
            .map(|d| d.len() + 12)
            .sum::<usize>()
            .min(budget / 4);
    let mut used = out.len();
    for (domain, tools) in &groups {
        let mut section = format!("\n\n## {domain}\n");
        for t in tools {
            let _ = writeln!(section, "{} — {} ({})", t.name, t.summary, t.domain);
        }
        if overflow.is_empty() && used + section.len() + reserve <= budget {
            used += section.len();
            sections.push(section);
        } else {
            overflow.push((domain, tools.len()));
        }
    }
    for s in &sections {
        out.push_str(s);
    }
    if !overflow.is_empty() {
        let mut note =
            String::from("\n\nMore tools, by domain (describe_capability DOMAIN lists them): ");
        let parts: Vec<String> = overflow.iter().map(|(d, n)| format!("{d} ({n})")).collect();
        note.push_str(&parts.join(", "));
        note.push('.');
        if out.len() + note.len() > budget {
            // Even the domain list does not fit: count them instead.
            let total: usize = overflow.iter().map(|(_, n)| n).sum();
            note = format!(
                "\n\n{total} more tools in {} domains: describe_capability lists them.",
                overflow.len()
            );
        }
        out.push_str(&note);
    }
    out
}

/// `describe_capability`: every domain with its tool count, or the tools of
/// one domain, one line each. An unknown domain names the known ones.
pub fn describe_capability(
    snapshot: &Snapshot,
    domain: Option<&str>,
    capabilities: &[(String, Vec<String>)],
) -> Result<String, String> {
    let groups = by_domain(snapshot.tools.iter());
    match domain {
        None => {
            let mut out =
                String::from("Domains (describe_capability DOMAIN lists a domain's tools):\n");
            for (d, tools) in &groups {
                let _ = writeln!(out, "{d} — {} tools", tools.len());
            }
            let caps: Vec<String> = capabilities
                .iter()
                .filter(|(_, c)| !c.is_empty())
                .map(|(s, c)| format!("{s}: {}", c.join(", ")))
                .collect();
            if !caps.is_empty() {
                let _ = write!(out, "\nServer capabilities: {}\n", caps.join("; "));
            }
            Ok(out)
        }
        Some(d) => {
            let Some((name, tools)) = groups.iter().find(|(k, _)| k.eq_ignore_ascii_case(d)) else {
                let known: Vec<&str> = groups.keys().copied().collect();
                return Err(format!("No domain '{d}'. Domains: {}.", known.join(", ")));
            };
            let mut out = format!("{name} — {} tools:\n", tools.len());
            for t in tools {
                let hot = if t.hot { " [hot]" } else { "" };
                let _ = writeln!(out, "{} — {}{hot}", t.name, t.summary);
            }
            Ok(out)
        }
    }
}

/// `describe_tool`: the full description, input schema and a worked example.
pub fn describe_tool(entry: &ToolEntry) -> String {
    let schema = serde_json::to_string_pretty(&*entry.tool.input_schema).unwrap_or_default();
    let mut out = format!("{}{}\n", entry.name, if entry.hot { " [hot]" } else { "" });
    let _ = writeln!(
        out,
        "domain: {} · server: {} (upstream name: {})",
        entry.domain, entry.server.id, entry.upstream
    );
    if let Some(d) = entry.tool.description.as_deref().filter(|d| !d.is_empty()) {
        let _ = write!(out, "\n{d}\n");
    }
    let _ = write!(out, "\nInput schema:\n{schema}\n");
    let _ = write!(
        out,
        "\nExample call (through call_tool, or call {} directly with the arguments):\n{}\n",
        entry.name,
        example::example_call(&entry.name, &entry.tool.input_schema)
    );
    out
}

/// `evoctl docs`: a Markdown reference of every tool, from the same registry.
pub fn docs(snapshot: &Snapshot) -> String {
    let mut out = String::from("# evo tool reference\n\n");
    let groups = by_domain(snapshot.tools.iter());
    let _ = writeln!(
        out,
        "{} tools in {} domains. Hot tools (listed in full from a session's start) are marked **hot**.\n",
        snapshot.tools.len(),
        groups.len()
    );
    for (d, tools) in &groups {
        let _ = writeln!(out, "- [{d}](#{}) ({})", anchor(d), tools.len());
    }
    for (d, tools) in &groups {
        let _ = write!(out, "\n## {d}\n");
        for t in tools {
            let hot = if t.hot { " **hot**" } else { "" };
            let _ = write!(out, "\n### `{}`{hot}\n\n", t.name);
            let _ = writeln!(
                out,
                "Server `{}`, upstream `{}`.\n",
                t.server.id, t.upstream
            );
            if let Some(desc) = t.tool.description.as_deref().filter(|d| !d.is_empty()) {
                let _ = writeln!(out, "{}\n", desc.trim());
            }
            let schema = serde_json::to_string_pretty(&*t.tool.input_schema).unwrap_or_default();
            let _ = writeln!(out, "Input schema:\n\n```json\n{schema}\n```\n");
            let _ = writeln!(
                out,
                "Example:\n\n```json\n{}\n```",
                example::example_call(&t.name, &t.tool.input_schema)
            );
        }
    }
    out
}

fn anchor(s: &str) -> String {
    s.chars()
        .filter_map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => Some(c),
            'A'..='Z' => Some(c.to_ascii_lowercase()),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}
