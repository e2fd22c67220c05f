//! Tool search: a BM25F ranking over each tool's name, server, summary,
//! description and parameters, widened by a small lexicon of the words people
//! use for the same action or thing, with typo tolerance, a bonus for
//! documents that cover more of the query and for tools whose name does what
//! the query asks, and fuzzy name matching (nucleo-matcher) for queries that
//! look like tool names. The [`Index`] is built once per catalog snapshot; a
//! query only reads it.

pub mod embedder;
mod index;
pub mod learned;
mod lexicon;
pub mod model;
mod porter;
mod rank;
pub mod semantic;
mod text;

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::Value;

use crate::catalog::snapshot::{Snapshot, ToolEntry};

use crate::child::link::ServerState;
use crate::code_mode::typescript;
pub use index::{Index, LexicalIndexes, VersionedIndex};
use rank::add_name_bonuses;
pub use semantic::{Semantic, StageScores, Stages};

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most results one search returns.
pub const MAX_LIMIT: usize = 50;

/// The parts of a tool a query is matched against.
#[derive(Clone, Copy)]
enum Field {
    /// The child's own tool name.
    Name,
    /// Server id, domain and capabilities: queries often name the product.
    Server,
    /// Title and first sentence of the description.
    Summary,
    /// The start of the description.
    Description,
    /// Parameter names.
    ParamName,
    /// Parameter enum values: "manage" tools list their actions there.
    ParamValue,
    /// The start of each parameter's description.
    ParamDescription,
}

const FIELD_COUNT: usize = 7;

/// Per field: weight, and how much a long field dampens a match (BM25F's
/// b). A word in the name says more than one in a parameter's description;
/// a description's length says little about how much it is about a word.
const FIELDS: [(f32, f32); FIELD_COUNT] = [
    (3.0, 0.5),  // Name
    (2.0, 0.0),  // Server
    (1.5, 0.5),  // Summary
    (1.0, 0.75), // Description
    (0.8, 0.5),  // ParamName
    (0.5, 0.5),  // ParamValue
    (0.3, 0.75), // ParamDescription
];
const K1: f32 = 1.2;

/// How much of a description is indexed: its start carries its meaning, and
/// a 34 KB manual would otherwise drown every other tool.
const DESCRIPTION_CHARS: usize = 600;
/// How much of each parameter's description is indexed.
const PARAM_DESCRIPTION_CHARS: usize = 200;

/// Query weight of a lexicon alias ("repo" for "repository").
const W_ALIAS: f32 = 0.9;
/// Query weight of a related word from the lexicon.
const W_RELATED: f32 = 0.35;
/// Related words stand in for a query word the catalog never uses ("nuke"),
/// so they count for more.
const ABSENT_BOOST: f32 = 2.0;
/// Query weight of a typo correction ("calender" → "calendar").
const W_TYPO: f32 = 0.8;
/// Shortest word worth correcting: short words have too many neighbours.
const TYPO_MIN_LEN: usize = 5;
/// Query weight of a word that gives a value or says what not to do: the
/// `'k8s cheatsheet'` to look for, the "deleted" of "don't want them deleted".
const W_VALUE: f32 = 0.35;
/// Words after which the rest of a clause says what not to do.
const NEGATIONS: &[&str] = &[
    "not", "never", "without", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "wont",
    "shouldnt",
];
/// Words that end a negated clause early: "don't delete them, just archive".
const CLAUSE_ENDS: &[&str] = &["but", "just", "only", "instead", "so", "then", "and"];
/// A negated clause covers at most this many words.
const NEGATED_WORDS: usize = 5;
/// Bonus, as a fraction of the score, for covering every query word.
const COVERAGE: f32 = 1.5;
/// Bonus, as a fraction of the score, for a query that covers all the words
/// of a tool's name.
const NAME_COVERAGE: f32 = 0.5;
/// Bonus, as a fraction of the score, when a tool's name starts with the
/// action the query asks for ("delete" → `delete_message`).
const ACTION_MATCH: f32 = 0.3;
/// Bonus, as a fraction of the score, for a tool of a server the query
/// names ("in Jira", "my Notion"): its own tools beat another product's.
const SERVER_NAMED: f32 = 0.3;
/// A word names a server only if at most this many servers share it: "aws"
/// narrows the catalog down, a word in every other server id does not.
const SERVER_NAMED_MAX: usize = 4;

/// One search hit.
pub struct Hit {
    pub entry: Arc<ToolEntry>,
    pub score: f32,
    /// Each stage's score, for `--explain`.
    pub stages: StageScores,
}

/// The result of a search, with a reason when it is empty.
pub struct Outcome {
    pub query: String,
    pub hits: Vec<Hit>,
    pub reason: Option<String>,
    /// Servers the query names by id or capability that have listed no
    /// tools (down, failed, still starting): a sentence each.
    pub unavailable: Vec<String>,
}

/// Arguments of `discover_tools`.
pub struct DiscoverParams {
    pub query: String,
    pub limit: usize,
    pub domain: Option<String>,
    /// `activate` as given; unset means true before 2026-07-28.
    pub activate: Option<bool>,
    /// Each match carries its input schema in compact form (a tool card).
    pub schemas: bool,
}

impl DiscoverParams {
    pub fn parse(
        args: Option<&JsonObject>,
        default_limit: usize,
    ) -> Result<DiscoverParams, String> {
        let usage = "discover_tools needs {\"query\": \"what you want to do\"}, optionally \"limit\", \"domain\", \"activate\", \"schemas\"";
        let args = args.ok_or(usage)?;
        let query = match args.get("query") {
            Some(Value::String(q)) => q.trim().to_string(),
            _ => return Err(usage.into()),
        };
        let limit = match args.get("limit") {
            None | Some(Value::Null) => default_limit,
            Some(v) => match v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            {
                Some(n) if n >= 1 => (n as usize).min(MAX_LIMIT),
                _ => {
                    return Err(format!(
                        "discover_tools \"limit\" must be a whole number from 1 to {MAX_LIMIT}"
                    ));
                }
            },
        };
        let domain = match args.get("domain") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) if d.trim().is_empty() => None,
            Some(Value::String(d)) => Some(d.trim().to_string()),
            Some(_) => return Err("discover_tools \"domain\" must be a string".into()),
        };
        Ok(DiscoverParams {
            query,
            limit,
            domain,
            activate: flag(args, "activate")?,
            schemas: flag(args, "schemas")?.unwrap_or(false),
        })
    }
}

/// An optional boolean argument of `discover_tools` (`"true"` accepted).
fn flag(args: &JsonObject, key: &str) -> Result<Option<bool>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(_) => Err(format!("discover_tools \"{key}\" must be true or false")),
    }
}

/// Servers without listed tools that the query names by id or by one of
/// their capabilities: their capabilities stay searchable while they cannot
/// be reached, so the agent learns they exist and why nothing of theirs is
/// callable yet.
fn unavailable(snapshot: &Snapshot, query: &str) -> Vec<String> {
    if snapshot.unlisted.is_empty() {
        return Vec::new();
    }
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let named = |name: &str| {
        let name = name.to_lowercase();
        words
            .iter()
            .any(|w| *w == name || porter::stem(w) == porter::stem(&name))
    };
    // A server the query names gets a sentence of its own; others still
    // starting are named together: their tools are missing from any answer
    // until they have listed them.
    let mut notes = Vec::new();
    let mut starting = Vec::new();
    for link in &snapshot.unlisted {
        // A server waiting for a login is named whatever was asked: nothing
        // of it is searchable until a person logs in.
        if link.state() == ServerState::LoginRequired {
            notes.push(login_note(&link.id));
            continue;
        }
        let capabilities = snapshot
            .capabilities
            .iter()
            .find(|(id, _)| *id == link.id)
            .map(|(_, c)| c.as_slice())
            .unwrap_or_default();
        if named(&link.id) || capabilities.iter().any(|c| named(c)) {
            let having = if capabilities.is_empty() {
                String::new()
            } else {
                format!(" (capabilities: {})", capabilities.join(", "))
            };
            notes.push(format!(
                "Server '{}'{having} has no tools listed: it is {}. Its tools become searchable once it runs; a person can check `evoctl status` and run `evoctl refresh {}`.",
                link.id,
                link.state().as_str(),
                link.id
            ));
        } else if link.state().is_starting() {
            starting.push(link.id.as_str());
        }
    }
    if !starting.is_empty() {
        let (count, verb) = match starting.len() {
            1 => ("1 server is".to_string(), "its tools are"),
            n => (format!("{n} servers are"), "their tools are"),
        };
        notes.push(format!(
            "{count} still starting: {}; {verb} not searchable until listed, so search again shortly.",
            starting.join(", ")
        ));
    }
    notes
}

/// What an answer says of a server that needs `evoctl login` and has no
/// tools listed.
pub fn login_note(id: &str) -> String {
    format!(
        "Server '{id}' needs a login before its tools can be listed: a person must run `evoctl login {id}`."
    )
}

/// Does the query look like (part of) a tool name rather than a sentence?
fn name_like(query: &str) -> bool {
    !query.contains(char::is_whitespace) && query.len() <= 80
}

/// The lowest score kept, as a fraction of the best match's. On the tuned
/// query sets every expected tool in a top 5 scores at least 0.26 of the
/// best; a tenth of all fifth places score under 0.28, down to 0.03.
const MIN_RELATIVE_SCORE: f32 = 0.15;

/// Ranks the snapshot's tools for `query`, with `index` built from it.
pub fn search(
    index: &Index,
    snapshot: &Snapshot,
    query: &str,
    limit: usize,
    domain: Option<&str>,
) -> Outcome {
    search_with(index, snapshot, query, limit, domain, &Stages::LEXICAL)
}

/// Ranks the snapshot's tools for `query` with the given stages: the lexical
/// stage alone, or fused with the semantic one, and near-duplicates pulled
/// together (see [`semantic`]).
pub fn search_with(
    index: &Index,
    snapshot: &Snapshot,
    query: &str,
    limit: usize,
    domain: Option<&str>,
    stages: &Stages<'_>,
) -> Outcome {
    let outcome = |hits, reason: Option<String>| Outcome {
        query: query.to_string(),
        hits,
        reason,
        unavailable: unavailable(snapshot, query),
    };
    let query = query.trim();
    if query.is_empty() {
        return outcome(Vec::new(), Some("the query is empty: say what you want to do, e.g. \"convert a time between timezones\"".into()));
    }
    if query.len() > MAX_QUERY_BYTES {
        return outcome(
            Vec::new(),
            Some(format!(
                "the query is {} bytes; keep it under {MAX_QUERY_BYTES}: a few words about the task",
                query.len()
            )),
        );
    }
    if let Some(d) = domain
        && !snapshot
            .tools
            .iter()
            .any(|e| e.domain.eq_ignore_ascii_case(d))
    {
        let mut domains: Vec<&str> = snapshot.tools.iter().map(|e| e.domain.as_str()).collect();
        domains.sort_unstable();
        domains.dedup();
        return outcome(
            Vec::new(),
            Some(format!(
                "no domain '{d}'; domains are: {}",
                domains.join(", ")
            )),
        );
    }
    let mut scores = if stages.lexical {
        lexical_scores(index, snapshot, query)
    } else {
        vec![0.0; snapshot.tools.len()]
    };
    let learned_parts = if stages.lexical {
        let vector = stages.semantic.map(|s| s.query);
        learned::learned().boost(snapshot, query, vector, &mut scores)
    } else {
        Vec::new()
    };
    let allowed =
        |d: usize| domain.is_none_or(|dm| snapshot.tools[d].domain.eq_ignore_ascii_case(dm));
    let mut hits: Vec<Hit> = match stages.semantic.filter(|s| s.docs.fits(snapshot)) {
        Some(sem) => semantic::rank(index, snapshot, &scores, &allowed, sem, stages, limit)
            .into_iter()
            .map(|(d, score, stages)| Hit {
                entry: snapshot.tools[d as usize].clone(),
                score,
                stages,
            })
            .collect(),
        None => lexical_hits(snapshot, std::mem::take(&mut scores), &allowed, limit),
    };
    if learned_parts.iter().any(|&p| p > 0.0) {
        for h in &mut hits {
            h.stages.learned = snapshot
                .position(&h.entry.name)
                .map(|d| learned_parts[d])
                .filter(|&p| p > 0.0);
        }
    }
    let reason = hits.is_empty().then(|| {
        format!(
            "no tool matches '{query}'; try other words, or describe_capability to browse domains"
        )
    });
    outcome(hits, reason)
}

/// Every tool's lexical score for `query` (0 where no word matched): what
/// the lexical stage ranks by and the fusion reads. Public for
/// `evo-bench --search --model`, which studies other fusions offline.
#[doc(hidden)]
pub fn lexical_scores(index: &Index, snapshot: &Snapshot, query: &str) -> Vec<f32> {
    let query = query.trim();
    let mut scores = index.score_words(query);
    add_name_bonuses(index, snapshot, query, &mut scores);
    scores
}

/// The action bits of each tool's name (see `lexicon::ACTIONS`), in the
/// snapshot's order; for `evo-bench`, as [`lexical_scores`].
#[doc(hidden)]
pub fn name_actions(index: &Index) -> &[u64] {
    &index.doc_actions
}

/// The lexical stage's top `limit`, without the matches far below the best.
fn lexical_hits(
    snapshot: &Snapshot,
    scores: Vec<f32>,
    allowed: &dyn Fn(usize) -> bool,
    limit: usize,
) -> Vec<Hit> {
    let mut ranked: Vec<(u32, f32)> = scores
        .into_iter()
        .enumerate()
        .filter(|&(d, s)| s > 0.0 && allowed(d))
        .map(|(d, s)| (d as u32, s))
        .collect();
    let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if ranked.len() > limit {
        ranked.select_nth_unstable_by(limit, by_score);
        ranked.truncate(limit);
    }
    ranked.sort_by(by_score);
    // Matches far below the best are noise, and discover_tools would
    // activate them: keep those within a fraction of the top score.
    let floor = ranked
        .first()
        .map_or(0.0, |&(_, top)| top * MIN_RELATIVE_SCORE);
    ranked.retain(|&(_, s)| s >= floor);
    ranked
        .into_iter()
        .map(|(d, s)| Hit {
            entry: snapshot.tools[d as usize].clone(),
            score: s,
            stages: StageScores {
                lexical: s,
                ..Default::default()
            },
        })
        .collect()
}

/// How a card's schema line starts, under its match's line: lines that
/// start so are never a match.
pub const CARD_INDENT: &str = "  ";

/// What `render` shows of each match besides its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CardParts {
    /// The compact input schema (`input: {…}`).
    pub schema: bool,
    /// The TypeScript signature a code-mode script calls it by (`signature: tools.…`).
    pub signature: bool,
}

/// The matches of `outcome`, one line each (`name — summary (domain) score`),
/// each with the `parts` of its card under it.
pub fn render(outcome: &Outcome, parts: CardParts) -> String {
    let mut out = String::new();
    if outcome.hits.is_empty() {
        out = format!(
            "No matches: {}\n",
            outcome.reason.as_deref().unwrap_or("nothing matched")
        );
    }
    for h in &outcome.hits {
        out.push_str(&card(&h.entry, h.score, parts));
    }
    for note in &outcome.unavailable {
        out.push_str(note);
        out.push('\n');
    }
    out
}

/// One match as `discover_tools` shows it. The signature is given at most
/// half the room of the rest of the card (see `typescript::card_signature`).
pub fn card(entry: &ToolEntry, score: f32, parts: CardParts) -> String {
    let mut out = format!(
        "{} — {} ({}) score {:.2}\n",
        entry.name, entry.summary, entry.domain, score
    );
    if parts.schema {
        let card = entry.card_schema();
        out.push_str(CARD_INDENT);
        out.push_str("input: ");
        out.push_str(&card.json);
        if card.abridged {
            out.push_str(&format!(
                " (abridged: describe_tool {} shows all of it)",
                entry.name
            ));
        }
        out.push('\n');
    }
    if parts.signature {
        let line = |sig: &str| format!("{CARD_INDENT}signature: {sig}\n");
        // Less than half of what the card says without it.
        let room = (out.len() / 2).saturating_sub(line("").len() + 1);
        let sig = typescript::card_signature(
            &entry.name,
            &entry.tool.input_schema,
            entry.tool.output_schema.as_deref(),
            room,
        );
        out.push_str(&line(&sig));
    }
    out
}

/// Tool names closest to `name` (typos, missing prefix), best first.
pub fn closest_names(snapshot: &Snapshot, name: &str, k: usize) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(f64, &str)> = snapshot
        .tools
        .iter()
        .map(|e| {
            let n = e.name.to_lowercase();
            let mut s = strsim::jaro_winkler(&lower, &n);
            if e.base_name.eq_ignore_ascii_case(name) || n.ends_with(&lower) {
                s += 1.0;
            }
            (s, e.name.as_str())
        })
        .filter(|(s, _)| *s > 0.75)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored
        .into_iter()
        .take(k)
        .map(|(_, n)| n.to_string())
        .collect()
}

#[cfg(test)]
mod tests;
