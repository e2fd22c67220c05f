//! Tiered disclosure: what a session is told about tools it does not list in
//! full. Hot tools carry full schemas in `tools/list`; every other permitted
//! tool is one line (`name — summary (domain)`) in the initialize
//! `instructions`, grouped by domain within a byte budget; `describe_tool`
//! gives the full schema and a worked example on demand. `evoctl docs` renders
//! the same registry as Markdown, so docs and runtime cannot drift.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::catalog::snapshot::{Snapshot, ToolEntry};
use crate::code_mode::typescript;
use crate::schema::example;

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
use crate::catalog::resources::Offers;
use crate::schema;

const MORE_TOOLS: &str = "\n\nMore tools, by domain (describe_capability DOMAIN lists them): ";

/// Least room kept for the closing note on domains that do not fit, even when
/// a quarter of the budget is less: its form with only the totals fits.
const NOTE_FLOOR: usize = 80;

/// The initialize `instructions` for a session that lists `listed` tools in
/// full: every other tool of the snapshot, one line each, grouped by domain,
/// never longer than `budget` bytes. Domains are taken in name order and each
/// one that still fits is listed whole; the others are named with their tool
/// counts and a pointer to `describe_capability`.
pub fn instructions(
    snapshot: &Snapshot,
    listed: &dyn Fn(&ToolEntry) -> bool,
    budget: usize,
) -> String {
    if INSTRUCTIONS_HEAD.len() > budget {
        return truncated(INSTRUCTIONS_HEAD, budget);
    }
    let mut out = String::from(INSTRUCTIONS_HEAD);
    let groups = by_domain(snapshot.tools.iter().filter(|t| !listed(t)));
    let sections: Vec<(&str, usize, String)> = groups
        .iter()
        .map(|(domain, tools)| (*domain, tools.len(), section(domain, tools)))
        .collect();
    if out.len() + sections.iter().map(|s| s.2.len()).sum::<usize>() <= budget {
        for (_, _, s) in &sections {
            out.push_str(s);
        }
        return out;
    }
    // A domain is listed only if the note naming every domain not (yet)
    // listed still fits after it, so a small domain after a big one that did
    // not fit is listed all the same. The reserve is capped: past it the note
    // shortens itself (see `overflow_note`).
    let reserve_cap = (budget / 4).max(NOTE_FLOOR);
    let mention = |domain: &str, count: usize| format!("{domain} ({count})");
    // Bytes of the note's entries (with their ", ") for domains not listed.
    let mut unlisted: usize = sections
        .iter()
        .map(|(d, n, _)| mention(d, *n).len() + 2)
        .sum();
    let mut unlisted_domains = sections.len();
    let mut overflow: Vec<(&str, usize)> = Vec::new();
    for (domain, count, section) in &sections {
        let others = unlisted - (mention(domain, *count).len() + 2);
        let reserve = if unlisted_domains > 1 {
            (MORE_TOOLS.len() + others - 1).min(reserve_cap)
        } else {
            0
        };
        if out.len() + section.len() + reserve <= budget {
            out.push_str(section);
            unlisted = others;
            unlisted_domains -= 1;
        } else {
            overflow.push((domain, *count));
        }
    }
    if !overflow.is_empty() {
        let note = overflow_note(&overflow, budget - out.len());
        out.push_str(&note);
    }
    out
}

/// One domain's block of the instructions: a heading, then a line per tool.
fn section(domain: &str, tools: &[&Arc<ToolEntry>]) -> String {
    let mut out = format!("\n\n## {domain}\n");
    for t in tools {
        let _ = writeln!(out, "{} — {} ({})", t.name, t.summary, t.domain);
    }
    out
}

/// The closing note on domains whose tools are not listed, in the most detail
/// that fits in `room` bytes: every domain with its tool count; the first few
/// then an ellipsis; only the totals; or, at worst, the totals cut short.
fn overflow_note(overflow: &[(&str, usize)], room: usize) -> String {
    let mentions: Vec<String> = overflow.iter().map(|(d, n)| format!("{d} ({n})")).collect();
    let full = format!("{MORE_TOOLS}{}.", mentions.join(", "));
    if full.len() <= room {
        return full;
    }
    let mut shown = 0;
    let mut len = MORE_TOOLS.len();
    for (k, m) in mentions.iter().enumerate().take(mentions.len() - 1) {
        len += m.len() + if k > 0 { 2 } else { 0 };
        let rest = mentions.len() - k - 1;
        if len + format!(", … ({rest} more domains).").len() > room {
            break;
        }
        shown = k + 1;
    }
    if shown > 0 {
        let rest = mentions.len() - shown;
        return format!(
            "{MORE_TOOLS}{}, … ({rest} more domains).",
            mentions[..shown].join(", ")
        );
    }
    let total: usize = overflow.iter().map(|(_, n)| n).sum();
    let counts = format!(
        "\n\n{total} more tools in {} domains: describe_capability lists them.",
        overflow.len()
    );
    if counts.len() <= room {
        return counts;
    }
    truncated(
        &format!("\n\n{total} more tools: describe_capability."),
        room,
    )
}

/// `text` if it fits in `room` bytes, else as much of it as fits with "…".
fn truncated(text: &str, room: usize) -> String {
    if text.len() <= room {
        return text.to_owned();
    }
    let Some(keep) = room.checked_sub('…'.len_utf8()) else {
        return String::new();
    };
    let cut = (0..=keep)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}…", &text[..cut])
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

/// `describe_tool`: the full description, input schema and a worked example;
/// with `code_mode` also the TypeScript signature a script calls it by.
pub fn describe_tool(entry: &ToolEntry, code_mode: bool) -> String {
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
    if code_mode {
        let _ = write!(
            out,
            "\nTypeScript (in run_code; returns {}):\n{}\n",
            if entry.tool.output_schema.is_some() {
                "the result's structuredContent"
            } else {
                "the result's text"
            },
            typescript::signature(
                &entry.name,
                &entry.tool.input_schema,
                entry.tool.output_schema.as_deref()
            )
        );
    }
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
    docs_offers(&snapshot.offers, &mut out);
    out
}

/// The reference's prompts and resource templates sections.
fn docs_offers(offers: &Offers, out: &mut String) {
    if !offers.prompts.is_empty() {
        let _ = write!(out, "\n## Prompts\n");
        for p in &offers.prompts {
            let _ = write!(out, "\n### `{}`\n\n", p.name);
            let _ = writeln!(
                out,
                "Server `{}`, upstream `{}`.\n",
                p.server.id, p.upstream
            );
            if let Some(desc) = p.prompt.description.as_deref().filter(|d| !d.is_empty()) {
                let _ = writeln!(out, "{}\n", desc.trim());
            }
            for a in p.prompt.arguments.iter().flatten() {
                let required = if a.required == Some(true) {
                    " (required)"
                } else {
                    ""
                };
                let desc = a.description.as_deref().unwrap_or("");
                let _ = writeln!(out, "- `{}`{required} {desc}", a.name);
            }
        }
    }
    if !offers.templates.is_empty() {
        let _ = write!(out, "\n## Resource templates\n\n");
        for t in &offers.templates {
            let desc = schema::summary(t.template.description.as_deref());
            let _ = writeln!(
                out,
                "- `{}` (server `{}`): {desc}",
                t.template.uri_template, t.server.id
            );
        }
    }
    if !offers.resources.is_empty() {
        let _ = writeln!(
            out,
            "\n{} resources are listed; `evoctl resources` shows them.",
            offers.resources.len()
        );
    }
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

#[cfg(test)]
mod tests {
    use rmcp::model::Tool;
    use serde_json::json;

    use super::*;

    /// A snapshot of servers given as (id, tool count); each server is its
    /// own domain and each tool has a one-sentence description.
    fn snapshot(servers: &[(&str, usize)]) -> Snapshot {
        let servers: Vec<(String, Vec<Tool>)> = servers
            .iter()
            .map(|(id, count)| {
                let tools = (0..*count)
                    .map(|i| {
                        serde_json::from_value(json!({
                            "name": format!("tool{i}"),
                            "description": "Does one useful thing with the given input.",
                            "inputSchema": {"type": "object"},
                        }))
                        .unwrap()
                    })
                    .collect();
                (id.to_string(), tools)
            })
            .collect();
        Snapshot::of_tools(&servers)
    }

    /// One-tool domains on either side of one too big for the budget.
    fn big_domain_between_small_ones() -> Snapshot {
        snapshot(&[("alpha", 1), ("bulk", 200), ("text", 1), ("weather", 1)])
    }

    fn none_listed(_: &ToolEntry) -> bool {
        false
    }

    #[test]
    fn every_domain_is_listed_when_all_fit() {
        let text = instructions(&big_domain_between_small_ones(), &none_listed, 100_000);
        for heading in ["## alpha", "## bulk", "## text", "## weather"] {
            assert!(text.contains(heading), "{heading}: {text}");
        }
        assert!(!text.contains("More tools"), "{text}");
    }

    #[test]
    fn small_domains_after_one_that_does_not_fit_are_still_listed() {
        let text = instructions(&big_domain_between_small_ones(), &none_listed, 8192);
        assert!(text.len() <= 8192, "{} bytes", text.len());
        for heading in ["## alpha", "## text", "## weather"] {
            assert!(text.contains(heading), "{heading}: {text}");
        }
        assert!(text.contains("text_tool0 — Does one useful thing with the given input. (text)"));
        assert!(!text.contains("## bulk"), "{text}");
        assert!(
            text.ends_with(
                "\n\nMore tools, by domain (describe_capability DOMAIN lists them): bulk (200)."
            ),
            "{text}"
        );
    }

    #[test]
    fn the_budget_caps_the_whole_text() {
        let snapshot = big_domain_between_small_ones();
        for budget in (0..=12_000).step_by(7).chain([300, 8192]) {
            let text = instructions(&snapshot, &none_listed, budget);
            assert!(
                text.len() <= budget,
                "budget {budget}: {} bytes",
                text.len()
            );
            if budget >= INSTRUCTIONS_HEAD.len() + 40 {
                assert!(
                    text.starts_with(INSTRUCTIONS_HEAD) && text.contains("describe_capability"),
                    "budget {budget}: {text}"
                );
            }
        }
    }

    #[test]
    fn a_budget_with_room_for_little_more_than_the_head_still_points_to_describe_capability() {
        let text = instructions(&big_domain_between_small_ones(), &none_listed, 300);
        assert_eq!(
            text.strip_prefix(INSTRUCTIONS_HEAD),
            Some("\n\n203 more tools: describe_capability.")
        );
    }

    #[test]
    fn many_overflowing_domains_are_cut_short_with_an_ellipsis() {
        let names: Vec<String> = (0..60).map(|i| format!("domain{i:02}")).collect();
        let servers: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 5)).collect();
        let snapshot = snapshot(&servers);
        let budget = 2000;
        let text = instructions(&snapshot, &none_listed, budget);
        assert!(text.len() <= budget, "{} bytes", text.len());
        assert!(text.contains("## domain00"), "{text}");
        let note = text.rsplit("\n\n").next().unwrap();
        assert!(
            note.starts_with("More tools, by domain (describe_capability DOMAIN lists them): ")
                && note.contains("(5), … (")
                && note.ends_with(" more domains)."),
            "{note}"
        );
        // Deterministic: the same snapshot and budget give the same text.
        assert_eq!(text, instructions(&snapshot, &none_listed, budget));
    }

    #[test]
    fn a_budget_smaller_than_the_head_cuts_the_head() {
        let text = instructions(&big_domain_between_small_ones(), &none_listed, 100);
        assert!(text.len() <= 100 && text.ends_with('…'), "{text}");
    }
}
