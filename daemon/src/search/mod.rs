//! Tool search: a BM25F ranking over each tool's name, server, summary,
//! description and parameters, widened by a small lexicon of the words people
//! use for the same action or thing, with typo tolerance, a bonus for
//! documents that cover more of the query and for tools whose name does what
//! the query asks, and fuzzy name matching (nucleo-matcher) for queries that
//! look like tool names. The [`Index`] is built once per catalog snapshot; a
//! query only reads it.

pub mod embedder;
mod index;
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
        if link.state() == crate::child::link::ServerState::LoginRequired {
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
    let allowed =
        |d: usize| domain.is_none_or(|dm| snapshot.tools[d].domain.eq_ignore_ascii_case(dm));
    let hits: Vec<Hit> = match stages.semantic.filter(|s| s.docs.fits(snapshot)) {
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

/// One line a hit: `name — summary (domain) score`.
/// How a card's schema line starts, under its match's line: lines that
/// start so are never a match.
pub const CARD_INDENT: &str = "  ";

pub fn render(outcome: &Outcome, cards: bool) -> String {
    let mut out = String::new();
    if outcome.hits.is_empty() {
        out = format!(
            "No matches: {}\n",
            outcome.reason.as_deref().unwrap_or("nothing matched")
        );
    }
    for h in &outcome.hits {
        out.push_str(&format!(
            "{} — {} ({}) score {:.2}\n",
            h.entry.name, h.entry.summary, h.entry.domain, h.score
        ));
        if cards {
            let card = h.entry.card_schema();
            out.push_str(CARD_INDENT);
            out.push_str("input: ");
            out.push_str(&card.json);
            if card.abridged {
                out.push_str(&format!(
                    " (abridged: describe_tool {} shows all of it)",
                    h.entry.name
                ));
            }
            out.push('\n');
        }
    }
    for note in &outcome.unavailable {
        out.push_str(note);
        out.push('\n');
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
            if e.upstream.eq_ignore_ascii_case(name) || n.ends_with(&lower) {
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
mod tests {
    use rmcp::model::Tool;
    use serde_json::json;

    use super::index::one_edit;
    use super::text::{rewrite_phrases, shape_words, spans, tokenize};
    use super::*;

    /// A snapshot of servers given as (id, [(tool, description)]).
    fn snapshot(servers: &[(&str, &[(&str, &str)])]) -> Snapshot {
        let servers: Vec<(String, Vec<Tool>)> = servers
            .iter()
            .map(|(id, tools)| {
                let tools = tools
                    .iter()
                    .map(|(name, description)| {
                        let tool = json!({
                            "name": name,
                            "description": description,
                            "inputSchema": {"type": "object"},
                        });
                        serde_json::from_value(tool).unwrap()
                    })
                    .collect();
                (id.to_string(), tools)
            })
            .collect();
        Snapshot::of_tools(&servers)
    }

    /// A word shared with a far better match does not make a hit (and so
    /// is not activated by discover_tools).
    #[test]
    fn matches_far_below_the_best_are_left_out() {
        let snapshot = snapshot(&[
            (
                "time",
                &[("convert_time", "Convert a time between timezones.")],
            ),
            (
                "wiki",
                &[("translate_pages", "Translate wiki pages between languages.")],
            ),
        ]);
        let outcome = search(
            &Index::of(&snapshot),
            &snapshot,
            "convert a time between timezones",
            5,
            None,
        );
        let names: Vec<&str> = outcome.hits.iter().map(|h| h.entry.name.as_str()).collect();
        assert_eq!(names, ["time_convert_time"], "{:?}", scores(&outcome));
    }

    fn scores(outcome: &Outcome) -> Vec<(String, f32)> {
        outcome
            .hits
            .iter()
            .map(|h| (h.entry.name.clone(), h.score))
            .collect()
    }

    fn catalog() -> Snapshot {
        snapshot(&[
            (
                "github",
                &[
                    ("list_issues", "List issues in a GitHub repository."),
                    (
                        "create_pull_request",
                        "Create a new pull request in a GitHub repository.",
                    ),
                    ("add_issue_comment", "Add a comment to an existing issue."),
                ],
            ),
            (
                "gitlab",
                &[(
                    "create_merge_request",
                    "Create a new merge request in a GitLab project.",
                )],
            ),
            (
                "discord",
                &[
                    ("discord_send", "Sends a message to a Discord channel."),
                    (
                        "discord_delete_message",
                        "Deletes a message from a Discord channel.",
                    ),
                ],
            ),
            (
                "calendar",
                &[
                    ("list-events", "List the events of a calendar."),
                    ("create-event", "Create a new calendar event."),
                ],
            ),
            (
                "todoist",
                &[
                    ("close_tasks", "Close tasks in Todoist."),
                    ("reopen_tasks", "Reopen tasks in Todoist."),
                ],
            ),
        ])
    }

    fn top(snapshot: &Snapshot, query: &str) -> String {
        let outcome = search(&Index::of(snapshot), snapshot, query, 5, None);
        outcome
            .hits
            .first()
            .map(|h| h.entry.name.clone())
            .unwrap_or_default()
    }

    /// The top result's doubles on other servers all follow it, one per
    /// server (the closest), and a double on its own server is not one.
    #[test]
    fn near_duplicates_of_several_servers_follow_the_top_result() {
        let snap = snapshot(&[
            (
                "slack",
                &[
                    ("send_message", "Send a message to a channel."),
                    ("send_file", "Send a file."),
                ],
            ),
            (
                "discord",
                &[
                    ("send", "Send a message."),
                    ("send_dm", "Send a direct message."),
                ],
            ),
            ("teams", &[("send_chat", "Send a chat message.")]),
            ("mail", &[("archive_thread", "Archive an email thread.")]),
        ]);
        let v = |a: f32, b: f32| -> [f32; 3] {
            let n = (a * a + b * b).sqrt();
            [a / n, b / n, 0.0]
        };
        // Rows in the snapshot's order; similarity to slack_send_message:
        // slack_send_file 0.95 (same server), discord_send 0.99,
        // discord_send_dm 0.8, teams_send_chat 0.7, mail 0.
        let mut rows: Vec<[f32; 3]> = Vec::new();
        for e in &snap.tools {
            rows.push(match e.name.as_str() {
                "slack_send_message" => v(1.0, 0.0),
                "slack_send_file" => v(0.95, 0.312),
                "discord_send" => v(0.99, 0.141),
                "discord_send_dm" => v(0.8, 0.6),
                "teams_send_chat" => v(0.7, 0.714),
                _ => [0.0, 0.0, 1.0],
            });
        }
        let docs = semantic::DocVectors {
            version: snap.version,
            dim: 3,
            data: rows.concat(),
        };
        let query = [1.0f32, 0.0, 0.0];
        let outcome = search_with(
            &Index::of(&snap),
            &snap,
            "send a message to the channel",
            5,
            None,
            &Stages::all(Semantic {
                docs: &docs,
                query: &query,
            }),
        );
        let got: Vec<(&str, Option<&str>)> = outcome
            .hits
            .iter()
            .map(|h| {
                (
                    h.entry.name.as_str(),
                    h.stages.pulled_by.as_ref().map(|p| p.0.as_str()),
                )
            })
            .collect();
        assert_eq!(got[0].0, "slack_send_message", "{got:?}");
        assert_eq!(
            got[1],
            ("discord_send", Some("slack_send_message")),
            "{got:?}"
        );
        assert_eq!(
            got[2],
            ("teams_send_chat", Some("slack_send_message")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .all(|g| g.1.is_none() || !g.0.starts_with("slack_")),
            "{got:?}"
        );
        assert!(
            !got.contains(&("discord_send_dm", Some("slack_send_message"))),
            "one double per server: {got:?}"
        );
    }

    /// Fusion and near-duplicates on vectors made by hand: a tool no word
    /// matches is found by its vector, and the other server's copy of the
    /// best match comes right after it, whatever its own scores.
    #[test]
    fn semantic_stages_fuse_and_pull_near_duplicates() {
        let snap = snapshot(&[
            (
                "slack",
                &[
                    ("send_message", "Send a message to a channel."),
                    ("list_channels", "List the channels."),
                ],
            ),
            ("chat", &[("post_note", "Post a note to a room.")]),
            ("mail", &[("archive_thread", "Archive an email thread.")]),
        ]);
        let dim = 3;
        // mail_archive_thread shares no word with the query, but its vector
        // is the query's nearest.
        let rows: [[f32; 3]; 4] = [
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.96, 0.28, 0.0],
            [0.95, 0.0, 0.31],
        ];
        let docs = semantic::DocVectors {
            version: snap.version,
            dim,
            data: rows.concat(),
        };
        let query = [1.0f32, 0.0, 0.3];
        let names = |stages: &Stages<'_>| -> Vec<String> {
            search_with(&Index::of(&snap), &snap, "send a message", 5, None, stages)
                .hits
                .iter()
                .map(|h| h.entry.name.clone())
                .collect()
        };
        let sem = Semantic {
            docs: &docs,
            query: &query,
        };
        let archive = "mail_archive_thread".to_string();
        let got = names(&Stages::LEXICAL);
        assert_eq!(got[0], "slack_send_message", "{got:?}");
        assert!(!got.contains(&archive), "{got:?}");
        let mut fused = Stages::all(sem);
        fused.near_duplicates = false;
        let got = names(&fused);
        assert_eq!(got[0], "slack_send_message", "{got:?}");
        assert!(got.contains(&archive), "{got:?}");
        // A tool of another server whose vector is all but the same, and
        // whose name names the same action, is pulled next to the best.
        let snap2 = snapshot(&[
            ("slack", &[("send_message", "Send a message to a channel.")]),
            ("mail", &[("archive_thread", "Archive an email thread.")]),
            ("chat", &[("send_note", "Send a note to a room.")]),
        ]);
        let docs2 = semantic::DocVectors {
            version: snap2.version,
            dim,
            data: [[1.0f32, 0.0, 0.0], [0.0, 0.6, 0.8], [0.96, 0.28, 0.0]].concat(),
        };
        let query2 = [0.6f32, 0.0, 0.8];
        let outcome = search_with(
            &Index::of(&snap2),
            &snap2,
            "send a message",
            5,
            None,
            &Stages::all(Semantic {
                docs: &docs2,
                query: &query2,
            }),
        );
        let got: Vec<(&str, Option<&str>)> = outcome
            .hits
            .iter()
            .map(|h| {
                (
                    h.entry.name.as_str(),
                    h.stages.pulled_by.as_ref().map(|p| p.0.as_str()),
                )
            })
            .collect();
        assert_eq!(got[0], ("slack_send_message", None), "{got:?}");
        assert_eq!(
            got[1],
            ("chat_send_note", Some("slack_send_message")),
            "{got:?}"
        );
        let scores: Vec<f32> = outcome.hits.iter().map(|h| h.score).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    }

    #[test]
    fn token_shapes_say_what_they_are() {
        for (query, want) in [
            ("what happened in #incidents", &["channel"][..]),
            ("Text +1 415 555 0134 that it shipped", &["phone"]),
            ("call 415-555-0134 now", &["phone"]),
            ("list the classes in models.py", &["file"]),
            ("every page on docs.example.com", &["website"]),
            ("17.5% of 2340 + 12 = ?", &["calculate"]),
            ("tag release v2.3.0", &[]),
            ("latest Next.js docs, e.g. routing", &[]),
            ("2 + 2", &["calculate"]),
            ("is https://example.com/a up", &["url", "link"]),
            ("every .env file under ~/code", &["file", "path"]),
            ("react with 🎉 and :thumbsup:", &["emoji"]),
            ("a/b testing and/or 3/4", &[]),
            ("top 10 issues in 2024", &[]),
        ] {
            assert_eq!(shape_words(query), want, "{query}");
        }
    }

    #[test]
    fn quoted_values_and_negated_clauses_are_marked() {
        let marked = |q| -> Vec<(String, bool)> {
            spans(q)
                .into_iter()
                .map(|(s, v)| {
                    (
                        s.trim_matches(|c: char| " '\"`,".contains(c)).to_string(),
                        v,
                    )
                })
                .filter(|(s, _)| !s.is_empty())
                .collect()
        };
        let own = |v: &[(&str, bool)]| -> Vec<(String, bool)> {
            v.iter().map(|(s, b)| (s.to_string(), *b)).collect()
        };
        assert_eq!(
            marked("find my note 'k8s cheatsheet' in the vault"),
            own(&[
                ("find my note", false),
                ("k8s cheatsheet", true),
                ("in the vault", false)
            ])
        );
        assert_eq!(
            marked("I don't want them deleted, just archived"),
            own(&[
                ("I don't", false),
                ("want them deleted", true),
                ("just archived", false)
            ])
        );
        assert_eq!(
            marked("change \"colour\" to `color` without rewriting the file"),
            own(&[
                ("change", false),
                ("colour", true),
                ("to", false),
                ("color", true),
                ("without", false),
                ("rewriting the file", true)
            ])
        );
        // Apostrophes inside words and "never mind" are no quote or negation.
        assert_eq!(
            marked("Marco's job title"),
            own(&[("Marco's job title", false)])
        );
        assert_eq!(
            marked("never mind the email, don't send it"),
            own(&[("never mind the email, don't", false), ("send it", true)])
        );
        // A quoted tool name is what is asked for.
        assert_eq!(
            marked("run `git_status` on 'README draft'"),
            own(&[("run `git_status` on", false), ("README draft", true)])
        );
        // An unclosed quote runs to the end; nothing panics on odd input.
        assert_eq!(
            marked("search 'open"),
            own(&[("search", false), ("open", true)])
        );
        for q in ["'", "\"", "not", "’’", "don't", "🎉'x'", "a'b'c"] {
            assert_eq!(spans(q).iter().map(|s| s.0).collect::<String>(), q);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

        /// Any text, the quoting and punctuation of chat included: spans
        /// cover the query exactly, and search answers without panicking.
        #[test]
        fn any_query_is_cut_and_searched(
            query in "[ a-zA-Z0-9'\"`‘’“”,.;:!?#@~/+%()🎉-]{0,60}|\\PC{0,40}"
        ) {
            let cut: String = spans(&query).iter().map(|s| s.0).collect();
            proptest::prop_assert_eq!(&cut, &query);
            let snapshot = catalog();
            let outcome = search(&Index::of(&snapshot), &snapshot, &query, 5, None);
            proptest::prop_assert!(outcome.hits.len() <= 5);
            proptest::prop_assert!(!outcome.hits.is_empty() || outcome.reason.is_some());
        }
    }

    #[test]
    fn a_value_does_not_decide_the_tool() {
        let snapshot = snapshot(&[
            (
                "notes",
                &[
                    ("search_notes", "Search notes by name."),
                    ("delete_note", "Delete a note."),
                ],
            ),
            ("kube", &[("delete_pod", "Delete a kubernetes pod.")]),
        ]);
        assert_eq!(
            top(&snapshot, "find my note 'delete pod checklist'"),
            "notes_search_notes"
        );
        assert_eq!(
            top(&snapshot, "I don't want the note deleted, search it"),
            "notes_search_notes"
        );
    }

    #[test]
    fn tokenizer_splits_cases_and_stems() {
        assert_eq!(tokenize("get_current_time"), vec!["get", "current", "time"]);
        assert_eq!(
            tokenize("listPullRequests"),
            vec!["list", "pull", "request"]
        );
        assert_eq!(tokenize("getURLInfo"), vec!["get", "url", "info"]);
        // A product name is also kept whole.
        assert_eq!(tokenize("on GitHub"), vec!["git", "hub", "github"]);
        assert_eq!(
            tokenize("s3 bucket, oauth2 v2010"),
            vec!["s3", "bucket", "oauth"]
        );
        assert_eq!(
            tokenize("files, indexes and running"),
            vec!["file", "index", "run"]
        );
        assert!(tokenize("  ").is_empty());
    }

    #[test]
    fn porter_stems_meet() {
        for (words, stem) in [
            (&["delete", "deleted", "deleting", "deletes"][..], "delet"),
            (&["queue", "queued", "queues"], "queu"),
            (&["repository", "repositories"], "repositori"),
            (&["review", "reviews", "reviewer"], "review"),
            (&["pr", "s3"], ""),
        ] {
            for w in words {
                let expected = if stem.is_empty() { w } else { stem };
                assert_eq!(porter::stem(w), expected, "{w}");
            }
        }
    }

    #[test]
    fn phrases_read_as_their_word() {
        assert_eq!(rewrite_phrases("get rid of the junk"), "delete the junk ");
        assert_eq!(rewrite_phrases("bring it back!"), "restore ");
        assert_eq!(rewrite_phrases("bring the car back"), "bring the car back ");
    }

    #[test]
    fn one_edit_covers_typos() {
        for (a, b) in [
            ("calender", "calendar"),
            ("renmae", "rename"),
            ("arows", "arrows"),
        ] {
            assert!(one_edit(a.as_bytes(), b.as_bytes()), "{a} {b}");
        }
        assert!(!one_edit(b"calendar", b"colander"));
    }

    #[test]
    fn ranks_what_the_query_asks_for() {
        let snap = catalog();
        for (query, expected) in [
            ("github_list_issues", "github_list_issues"),
            ("open a PR on GitHub", "github_create_pull_request"),
            (
                "some bot spammed #general on discord, nuke that msg",
                "discord_delete_message",
            ),
            ("put a meeting in my calender", "calendar_create-event"),
            (
                "that todo in todoist: bring it back",
                "todoist_reopen_tasks",
            ),
            (
                "reply on the issue that it's fixed",
                "github_add_issue_comment",
            ),
            // A tool name inside a query, quoted or not, in any case style.
            ("`create_pull_request`", "github_create_pull_request"),
            ("\"list_issues\"", "github_list_issues"),
            (
                "call 'discord_delete_message' please",
                "discord_delete_message",
            ),
            ("‘reopenTasks’", "todoist_reopen_tasks"),
            ("list the fields of `create_event`", "calendar_create-event"),
            ("list what \"createEvent\" takes", "calendar_create-event"),
        ] {
            assert_eq!(top(&snap, query), expected, "{query}");
        }
    }

    #[test]
    fn says_why_nothing_matched() {
        let snap = catalog();
        let long = "word ".repeat(MAX_QUERY_BYTES);
        for (query, domain) in [
            ("  ", None),
            (long.as_str(), None),
            ("issues", Some("nope")),
        ] {
            let outcome = search(&Index::of(&snap), &snap, query, 5, domain);
            assert!(
                outcome.hits.is_empty() && outcome.reason.is_some(),
                "{query:.20}"
            );
        }
        assert!(
            search(&Index::of(&snap), &snap, "zzzz qqqq", 5, None)
                .reason
                .is_some()
        );
        assert_eq!(
            search(&Index::of(&snap), &snap, "issues", 5, Some("github"))
                .hits
                .len(),
            2
        );
    }
}
