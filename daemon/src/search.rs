//! Tool search: a BM25F-style lexical ranking over names, descriptions,
//! parameters, domains and server capabilities, plus fuzzy name matching
//! (nucleo-matcher) for queries that look like tool names. The [`Index`] is
//! built once per catalog snapshot; a query only reads it.

use std::collections::HashMap;
use std::sync::Arc;

use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::catalog::{Snapshot, ToolEntry};

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most results one search returns.
pub const MAX_LIMIT: usize = 50;

// Field weights: a query word in the tool's name says more than one in its
// description.
const W_NAME: f32 = 3.0;
const W_DOMAIN: f32 = 2.0;
const W_PARAM_NAME: f32 = 1.0;
const W_DESC: f32 = 1.0;
const W_PARAM_DESC: f32 = 0.4;
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// Words that carry no meaning for tool search.
const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "and",
    "or",
    "of",
    "to",
    "in",
    "on",
    "for",
    "with",
    "by",
    "at",
    "from",
    "is",
    "are",
    "be",
    "it",
    "this",
    "that",
    "my",
    "me",
    "i",
    "you",
    "your",
    "all",
    "some",
    "any",
    "can",
    "could",
    "would",
    "should",
    "please",
    "want",
    "need",
    "like",
    "into",
    "as",
    "its",
    "what",
    "which",
    "do",
    "does",
    "how",
    "there",
    "them",
    "their",
    "our",
    "we",
    "so",
    "up",
    "about",
    "via",
    "using",
    "use",
    "will",
    "just",
    "also",
    "if",
    "than",
    "then",
    "given",
    "specified",
    "provided",
];

/// Verbs and nouns users say for the same action: each maps to a group of
/// words searched at reduced weight alongside the word itself.
const SYNONYMS: &[&[&str]] = &[
    &[
        "delete", "remove", "erase", "drop", "destroy", "trash", "rid",
    ],
    &[
        "create", "make", "new", "add", "open", "start", "insert", "write",
    ],
    &[
        "get", "fetch", "read", "retrieve", "show", "view", "look", "obtain", "load", "see",
    ],
    &["list", "enumerate", "all", "browse", "index"],
    &["search", "find", "query", "lookup", "locate", "seek"],
    &[
        "update", "edit", "modify", "change", "set", "rename", "patch", "alter", "switch",
    ],
    &["send", "post", "message", "notify", "publish", "dm"],
    &["run", "execute", "exec", "invoke", "launch", "trigger"],
    &["download", "save", "export"],
    &["upload", "import", "attach"],
    &["pr", "pull", "merge", "request"],
    &["issue", "ticket", "bug"],
    &["repo", "repository", "project"],
    &["file", "document", "doc"],
    &["folder", "directory", "dir"],
    &["time", "clock", "date", "timezone", "tz"],
    &["convert", "translate", "transform"],
    &[
        "web", "internet", "online", "site", "website", "url", "page",
    ],
    &["screenshot", "capture", "snapshot"],
    &["email", "mail", "inbox", "gmail"],
    &["calendar", "event", "meeting", "schedule", "appointment"],
    &["user", "member", "person", "people", "account"],
    &["picture", "image", "photo", "img"],
    &["table", "database", "db", "sql"],
    &["stop", "cancel", "kill", "terminate", "halt"],
    &["commit", "checkin"],
    &["branch", "checkout"],
    &["comment", "reply", "note"],
    &["weather", "forecast"],
    &["price", "cost", "quote"],
];

/// One searchable document: a tool's weighted term frequencies.
struct Doc {
    terms: Vec<(u32, f32)>,
    len: f32,
}

/// The search index of one snapshot.
#[derive(Default)]
pub struct Index {
    vocab: HashMap<String, u32>,
    /// Per term: (document, weighted term frequency).
    postings: Vec<Vec<(u32, f32)>>,
    docs_len: Vec<f32>,
    avg_len: f32,
    synonyms: HashMap<&'static str, usize>,
}

/// Splits text into lowercase search terms: on non-alphanumerics and on
/// snake_case and camelCase boundaries, with stopwords dropped and a light
/// suffix stemming so "files", "filed" and "file" meet.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev: Option<char> = None;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let w = word.to_lowercase();
            if !STOPWORDS.contains(&w.as_str()) {
                out.push(stem(&w));
            }
            word.clear();
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            let boundary = match prev {
                Some(p) => {
                    (p.is_lowercase() && c.is_uppercase())
                        || (p.is_alphabetic() && c.is_numeric())
                        || (p.is_numeric() && c.is_alphabetic())
                }
                None => false,
            };
            if boundary {
                flush(&mut word, &mut out);
            }
            word.push(c);
        } else {
            flush(&mut word, &mut out);
        }
        prev = Some(c);
    }
    flush(&mut word, &mut out);
    out
}

fn stem(w: &str) -> String {
    let n = w.len();
    if n > 5 && w.ends_with("ing") {
        return w[..n - 3].to_string();
    }
    if n > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..n - 3]);
    }
    if n > 4 && (w.ends_with("ed")) && !w.ends_with("eed") {
        return w[..n - 2].to_string();
    }
    if n > 4
        && (w.ends_with("ses") || w.ends_with("xes") || w.ends_with("ches") || w.ends_with("shes"))
    {
        return w[..n - 2].to_string();
    }
    if n > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") {
        return w[..n - 1].to_string();
    }
    w.to_string()
}

/// Parameter names and descriptions of a schema's top-level properties.
fn param_texts(schema: &JsonObject) -> (Vec<String>, Vec<String>) {
    let mut names = Vec::new();
    let mut descs = Vec::new();
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (k, v) in props {
            names.push(k.clone());
            if let Some(d) = v.get("description").and_then(Value::as_str) {
                // Long parameter docs dilute the signal; their start is enough.
                descs.push(d.chars().take(200).collect());
            }
        }
    }
    (names, descs)
}

impl Index {
    /// Builds the index of `tools`, with each server's capabilities.
    pub fn build(tools: &[Arc<ToolEntry>], capabilities: &HashMap<String, Vec<String>>) -> Index {
        let mut index = Index::default();
        for (g, group) in SYNONYMS.iter().enumerate() {
            for w in *group {
                index.synonyms.entry(w).or_insert(g);
            }
        }
        let mut docs = Vec::with_capacity(tools.len());
        for entry in tools {
            let mut tf: HashMap<u32, f32> = HashMap::new();
            let mut len = 0.0;
            let mut add = |index: &mut Index, text: &str, weight: f32, len: &mut f32| {
                for t in tokenize(text) {
                    let next = index.vocab.len() as u32;
                    let id = *index.vocab.entry(t).or_insert(next);
                    *tf.entry(id).or_default() += weight;
                    *len += weight;
                }
            };
            add(&mut index, &entry.name, W_NAME, &mut len);
            if entry.upstream != entry.name {
                add(&mut index, &entry.upstream, W_NAME * 0.5, &mut len);
            }
            add(&mut index, &entry.domain, W_DOMAIN, &mut len);
            if let Some(caps) = capabilities.get(&entry.server.id) {
                for c in caps {
                    add(&mut index, c, W_DOMAIN, &mut len);
                }
            }
            let description = entry.tool.description.as_deref().unwrap_or("");
            // The first part of a description carries its meaning; a 34 KB
            // manual would otherwise drown every other tool.
            let head: String = description.chars().take(600).collect();
            add(&mut index, &head, W_DESC, &mut len);
            if let Some(title) = &entry.tool.title {
                add(&mut index, title, W_DESC, &mut len);
            }
            let (pnames, pdescs) = param_texts(&entry.tool.input_schema);
            for p in &pnames {
                add(&mut index, p, W_PARAM_NAME, &mut len);
            }
            for d in &pdescs {
                add(&mut index, d, W_PARAM_DESC, &mut len);
            }
            docs.push(Doc {
                terms: tf.into_iter().collect(),
                len,
            });
        }
        index.postings = vec![Vec::new(); index.vocab.len()];
        let mut total = 0.0;
        for (d, doc) in docs.iter().enumerate() {
            total += doc.len;
            for &(t, f) in &doc.terms {
                index.postings[t as usize].push((d as u32, f));
            }
        }
        index.docs_len = docs.iter().map(|d| d.len).collect();
        index.avg_len = if docs.is_empty() {
            1.0
        } else {
            total / docs.len() as f32
        };
        index
    }

    fn idf(&self, term: u32) -> f32 {
        let n = self.docs_len.len() as f32;
        let df = self.postings[term as usize].len() as f32;
        ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
    }

    /// Adds the BM25 contribution of `term` (query weight `qw`) to `scores`.
    fn accumulate(&self, term: &str, qw: f32, scores: &mut HashMap<u32, f32>) {
        let Some(&t) = self.vocab.get(term) else {
            return;
        };
        let idf = self.idf(t);
        for &(d, f) in &self.postings[t as usize] {
            let dl = self.docs_len[d as usize];
            let s = idf * (f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * dl / self.avg_len));
            *scores.entry(d).or_default() += qw * s;
        }
    }
}

/// One search hit.
pub struct Hit {
    pub entry: Arc<ToolEntry>,
    pub score: f32,
}

/// The result of a search, with a reason when it is empty.
pub struct Outcome {
    pub query: String,
    pub hits: Vec<Hit>,
    pub reason: Option<String>,
}

/// Arguments of `discover_tools`.
pub struct DiscoverParams {
    pub query: String,
    pub limit: usize,
    pub domain: Option<String>,
    pub activate: bool,
}

impl DiscoverParams {
    pub fn parse(
        args: Option<&JsonObject>,
        default_limit: usize,
    ) -> Result<DiscoverParams, String> {
        let usage = "discover_tools needs {\"query\": \"what you want to do\"}, optionally \"limit\", \"domain\", \"activate\"";
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
        let activate = match args.get("activate") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
            Some(_) => return Err("discover_tools \"activate\" must be true or false".into()),
        };
        Ok(DiscoverParams {
            query,
            limit,
            domain,
            activate,
        })
    }
}

/// Does the query look like (part of) a tool name rather than a sentence?
fn name_like(query: &str) -> bool {
    !query.contains(char::is_whitespace) && query.len() <= 80
}

/// Ranks the snapshot's tools for `query`.
pub fn search(snapshot: &Snapshot, query: &str, limit: usize, domain: Option<&str>) -> Outcome {
    let outcome = |hits, reason: Option<String>| Outcome {
        query: query.to_string(),
        hits,
        reason,
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
    let index = &snapshot.search;
    let mut scores: HashMap<u32, f32> = HashMap::new();
    let terms = tokenize(query);
    for t in &terms {
        index.accumulate(t, 1.0, &mut scores);
        if let Some(&g) = index.synonyms.get(t.as_str()) {
            for syn in SYNONYMS[g] {
                let s = stem(syn);
                if s != *t && !terms.contains(&s) {
                    index.accumulate(&s, 0.35, &mut scores);
                }
            }
        }
    }
    // Exact, prefix and fuzzy name matches.
    let lower = query.to_lowercase();
    let name_query = name_like(query);
    let mut matcher = name_query.then(|| Matcher::new(Config::DEFAULT));
    let pattern = Pattern::parse(&lower, CaseMatching::Ignore, Normalization::Smart);
    let mut buf = Vec::new();
    for (i, e) in snapshot.tools.iter().enumerate() {
        let name = e.name.to_lowercase();
        let upstream = e.upstream.to_lowercase();
        let mut bonus = 0.0;
        if name == lower || upstream == lower {
            bonus += 100.0;
        } else if name.starts_with(&lower) || upstream.starts_with(&lower) {
            bonus += 20.0;
        } else if name.contains(&lower) && lower.len() >= 3 {
            bonus += 8.0;
        }
        if let Some(m) = matcher.as_mut()
            && let Some(s) = pattern.score(Utf32Str::new(&e.name, &mut buf), m)
        {
            bonus += (s as f32 / (8.0 * lower.len().max(1) as f32)).min(6.0);
        }
        if bonus > 0.0 {
            *scores.entry(i as u32).or_default() += bonus;
        }
    }
    let mut ranked: Vec<(u32, f32)> = scores
        .into_iter()
        .filter(|(d, _)| {
            domain.is_none_or(|dm| snapshot.tools[*d as usize].domain.eq_ignore_ascii_case(dm))
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(limit);
    let hits: Vec<Hit> = ranked
        .into_iter()
        .map(|(d, s)| Hit {
            entry: snapshot.tools[d as usize].clone(),
            score: s,
        })
        .collect();
    let reason = hits.is_empty().then(|| {
        format!(
            "no tool matches '{query}'; try other words, or describe_capability to browse domains"
        )
    });
    outcome(hits, reason)
}

/// One line a hit: `name — summary (domain) score`.
pub fn render(outcome: &Outcome) -> String {
    if outcome.hits.is_empty() {
        return format!(
            "No matches: {}",
            outcome.reason.as_deref().unwrap_or("nothing matched")
        );
    }
    let mut out = String::new();
    for h in &outcome.hits {
        out.push_str(&format!(
            "{} — {} ({}) score {:.2}\n",
            h.entry.name, h.entry.summary, h.entry.domain, h.score
        ));
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
    use super::*;

    #[test]
    fn tokenizer_splits_cases_and_stems() {
        assert_eq!(tokenize("get_current_time"), vec!["get", "current", "time"]);
        assert_eq!(
            tokenize("listPullRequests"),
            vec!["list", "pull", "request"]
        );
        assert_eq!(
            tokenize("Convert the time between TimeZones!"),
            vec!["convert", "time", "between", "time", "zone"]
        );
        assert_eq!(
            tokenize("files, indexes and running"),
            vec!["file", "index", "runn"]
        );
        assert!(tokenize("  ").is_empty());
    }
}
