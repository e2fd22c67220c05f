//! The semantic stage: what a model reads of each tool, the tools' vectors
//! for one snapshot, how their cosine with the query is fused with the
//! lexical score, and the near-duplicate stage that puts other servers'
//! tools doing the same thing next to a high-ranking one. All pure: the
//! vectors come from `crate::search::embedder`, which runs the model.
//!
//! candle (candle-core/nn/transformers, default features off) and tokenizers (fancy-regex, no
//! onig/http/progress bar) are always compiled in, but nothing is loaded or spawned without
//! `search.model`: no weights in the binary, no thread pool, the lexical path unchanged. Tool texts
//! are the name's words, the title and the description's first 160 characters (no server id: the
//! same tool on two servers reads the same), cut at 40 tokens, batched by length. Fusion is a
//! weighted sum of per-query min-max normalised lexical and cosine scores (the semantic side weighs
//! `SEMANTIC_WEIGHT`); a tool no word matched needs a cosine of at least `MIN_COSINE`, so gibberish
//! finds nothing. Near-duplicates: the top result pulls up to 4 tools of other servers (one per
//! server) whose vectors are at least 0.6 alike and whose names name the same action (0.9 when
//! neither names one) right after it, so its alternatives fill the top 5. Every constant is in
//! `Tuning`, which `EVO_BENCH_TUNING=name=value,…` overrides in `evo-bench` without a rebuild; how
//! each was chosen: docs/search.md and docs/notes/2026-12-05-search-tuning.md.

use super::index::Index;
use super::model;
use super::text::for_each_chunk;
use crate::catalog::snapshot::{Snapshot, ToolEntry};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// Characters of a tool's description a model reads: past the first
/// sentences a description lists parameters and caveats, which blur what the
/// tool does (and cost time). 160 characters and 40 tokens rank as 250/64
/// and 400/96 did on the tuning sets (pooled recall@5 0.830, 0.833, 0.832)
/// and embed the catalog in two thirds and a third of their time.
pub const EMBED_DESCRIPTION_CHARS: usize = 160;
/// Tokens of a tool's text a model reads (its own limit when smaller). The
/// real catalog's texts average 29 at this cut; 817 of 2,518 are cut.
pub const TOOL_TOKENS: usize = 40;
/// Tokens of a query a model reads.
pub const QUERY_TOKENS: usize = 64;

/// Weight of the semantic side in the fused score: fused =
/// (1 - w) · lexical + w · semantic, each min-max normalised per query.
/// 0.4 was best pooled over the three tuning sets (0.3 to 0.7 tried; the
/// semantic stage alone is well below the lexical one on them).
pub const SEMANTIC_WEIGHT: f32 = 0.4;
/// A tool no query word matches is a candidate only when its cosine with
/// the query is at least this: below it a model's nearest neighbours of
/// gibberish are noise, and discover_tools would activate them.
pub const MIN_COSINE: f32 = 0.25;
/// The semantic side of the fusion spans the best cosine down to this
/// rank's; below it a tool's cosine adds nothing (0: down to the lowest).
pub const COSINE_WINDOW: usize = 0;
/// Fused scores under this fraction of the best are left out.
pub const FUSED_FLOOR: f32 = 0.3;
/// Near-duplicates: the first this many results pull their doubles up. One:
/// the top result's alternatives fill the top 5; a second result's doubles
/// pushed correct results down on the tuning sets (pooled recall@5 0.773
/// with 1, 0.769 with 3).
pub const NEAR_ANCHORS: usize = 1;
/// Near-duplicates: doubles are looked for among this many of the query's
/// nearest tools.
pub const NEAR_CANDIDATES: usize = 200;
/// Near-duplicates: at most this many doubles pulled next to one result, one
/// per other server: with the result itself, a top 5 (the same web search of
/// six search engines, create_issue of GitHub, GitLab, Linear and Jira).
pub const NEAR_PER_ANCHOR: usize = 4;
/// Near-duplicates: how similar two tools' texts must be (cosine of their
/// vectors) to be the same thing on two servers, when their names name the
/// same action. 0.6 / 0.7 / 0.8 on the tuning sets (pooled recall@5, four
/// doubles one per server): 0.773 / 0.766 / 0.765; 0.5 and 0.4 lower (0.758,
/// 0.727): the same action on two products reads less alike than the same
/// tool on two servers.
pub const NEAR_SIMILARITY: f32 = 0.6;
/// Near-duplicates: the same, when neither name names an action evo knows.
pub const NEAR_SIMILARITY_NO_ACTION: f32 = 0.9;

/// The text of a tool a model reads: the words of its name, its title and
/// the start of its description.
pub fn tool_text(entry: &ToolEntry) -> String {
    tool_text_cut(entry, EMBED_DESCRIPTION_CHARS)
}

/// [`tool_text`] with the description cut at `chars` characters.
pub fn tool_text_cut(entry: &ToolEntry, chars: usize) -> String {
    tool_text_with(entry, chars, false)
}

/// [`tool_text_cut`], and with `params` the words of its parameters' names
/// after the description (`(query, max results)`).
pub fn tool_text_with(entry: &ToolEntry, chars: usize, params: bool) -> String {
    let mut text = tool_text_base(entry, chars);
    if params {
        let (names, _, _) = super::index::param_texts(&entry.tool.input_schema);
        let mut words: Vec<String> = Vec::new();
        for n in names {
            let mut w = String::new();
            for_each_chunk(n, |_, parts| {
                for p in parts {
                    if !w.is_empty() {
                        w.push(' ');
                    }
                    w.push_str(p);
                }
            });
            if !w.is_empty() && !words.contains(&w) {
                words.push(w);
            }
        }
        if !words.is_empty() {
            text.push_str(" (");
            text.push_str(&words.join(", "));
            text.push(')');
        }
    }
    text
}

fn tool_text_base(entry: &ToolEntry, chars: usize) -> String {
    let mut name = String::new();
    for_each_chunk(&entry.base_name, |_, parts| {
        for p in parts {
            if !name.is_empty() {
                name.push(' ');
            }
            name.push_str(p);
        }
    });
    // No server id or domain: the same tool on two servers reads the same
    // (the near-duplicate stage relies on it), and the lexical stage already
    // weighs a product the query names.
    let mut text = name;
    if let Some(title) = &entry.tool.title {
        text.push_str(": ");
        text.push_str(title);
    }
    let description = entry.tool.description.as_deref().unwrap_or("");
    if !description.trim().is_empty() {
        text.push_str(": ");
        text.extend(description.chars().take(chars));
    }
    text
}

/// The key of a text's vector in the cache: its SHA-256, cut to 16 bytes.
pub type TextKey = [u8; 16];

pub fn text_key(text: &str) -> TextKey {
    let digest = Sha256::digest(text.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// The vectors of one snapshot's tools, in its order (row `i` is
/// `snapshot.tools[i]`).
pub struct DocVectors {
    /// The snapshot these rows belong to.
    pub version: u64,
    pub dim: usize,
    pub data: Vec<f32>,
}

impl DocVectors {
    pub fn rows(&self) -> usize {
        self.data.len() / self.dim.max(1)
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// Each tool's cosine with `query`.
    pub fn cosines(&self, query: &[f32]) -> Vec<f32> {
        self.data
            .chunks_exact(self.dim)
            .map(|r| model::dot(r, query))
            .collect()
    }

    /// Does this fit `snapshot`?
    pub fn fits(&self, snapshot: &Snapshot) -> bool {
        self.version == snapshot.version && self.rows() == snapshot.tools.len()
    }
}

/// The semantic stage's inputs for one query.
#[derive(Clone, Copy)]
pub struct Semantic<'a> {
    pub docs: &'a DocVectors,
    pub query: &'a [f32],
}

/// The semantic stage's numbers: the constants below by default, others
/// only where `evo-bench --search --model` measures them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// The semantic side's weight when fusing.
    pub weight: f32,
    /// The semantic side is normalised between the best cosine and the
    /// `window`-th best (lower ones count 0); 0: the lowest.
    pub window: usize,
    /// How alike two tools' vectors must be to be near-duplicates.
    pub near_similarity: f32,
    /// The first this many results pull their doubles up.
    pub near_anchors: usize,
    /// At most this many doubles pulled next to one result.
    pub near_per_anchor: usize,
    /// At most one double of each other server next to one result.
    pub near_one_per_server: bool,
    /// A double's cosine with the query is at most this much below its
    /// result's (2: any).
    pub near_margin: f32,
}

impl Tuning {
    pub const DEFAULT: Tuning = Tuning {
        weight: SEMANTIC_WEIGHT,
        window: COSINE_WINDOW,
        near_similarity: NEAR_SIMILARITY,
        near_anchors: NEAR_ANCHORS,
        near_per_anchor: NEAR_PER_ANCHOR,
        near_one_per_server: true,
        near_margin: 2.0,
    };

    /// `name=value,…` over the defaults (`evo-bench`'s `EVO_BENCH_TUNING`);
    /// an unknown name or a bad number is an error naming it.
    pub fn parse(spec: &str) -> Result<Tuning, String> {
        let mut t = Tuning::DEFAULT;
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}' is not name=value"))?;
            let num = |v: &str| -> Result<f32, String> {
                v.parse().map_err(|_| format!("{k}: '{v}' is not a number"))
            };
            match k {
                "weight" => t.weight = num(v)?,
                "window" => t.window = num(v)? as usize,
                "near_similarity" => t.near_similarity = num(v)?,
                "near_anchors" => t.near_anchors = num(v)? as usize,
                "near_per_anchor" => t.near_per_anchor = num(v)? as usize,
                "near_one_per_server" => t.near_one_per_server = num(v)? != 0.0,
                "near_margin" => t.near_margin = num(v)?,
                _ => return Err(format!("no tuning constant '{k}'")),
            }
        }
        Ok(t)
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning::DEFAULT
    }
}

/// Which stages rank a query. The daemon runs lexical, or all of them when
/// a model is loaded; `evo-bench --search` measures each on its own.
#[derive(Clone, Copy)]
pub struct Stages<'a> {
    pub semantic: Option<Semantic<'a>>,
    /// Off: the semantic stage alone (a measurement, not a mode).
    pub lexical: bool,
    pub near_duplicates: bool,
    pub tuning: Tuning,
}

impl Stages<'_> {
    pub const LEXICAL: Stages<'static> = Stages {
        semantic: None,
        lexical: true,
        near_duplicates: false,
        tuning: Tuning::DEFAULT,
    };
}

impl<'a> Stages<'a> {
    /// Every stage, as the daemon runs them with a model.
    pub fn all(semantic: Semantic<'a>) -> Stages<'a> {
        Stages {
            semantic: Some(semantic),
            lexical: true,
            near_duplicates: true,
            tuning: Tuning::DEFAULT,
        }
    }
}

/// Each stage's score of one result, for `evoctl search --explain`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageScores {
    pub lexical: f32,
    /// Cosine of the tool's and the query's vectors.
    pub semantic: Option<f32>,
    /// The two, normalised and weighed.
    pub fused: Option<f32>,
    /// The result it was pulled up next to as a near-duplicate, and how
    /// similar the two are.
    pub pulled_by: Option<(String, f32)>,
    /// The part of the lexical score learned from use (see `learned`).
    pub learned: Option<f32>,
}

/// Min-max normalisation of the scores of `docs`.
fn normalise(scores: &[f32], docs: &[u32]) -> (f32, f32) {
    let (mut lo, mut hi) = (f32::MAX, f32::MIN);
    for &d in docs {
        lo = lo.min(scores[d as usize]);
        hi = hi.max(scores[d as usize]);
    }
    if hi <= lo { (lo, 1.0) } else { (lo, hi - lo) }
}

/// Ranks with the semantic stage: `lexical` holds each tool's lexical score
/// (0 where no word matched), `allowed` the tools the domain lets through.
/// Returns the top `limit` as (doc, score, stages).
pub(super) fn rank(
    index: &Index,
    snapshot: &Snapshot,
    lexical: &[f32],
    allowed: &dyn Fn(usize) -> bool,
    semantic: Semantic<'_>,
    stages: &Stages<'_>,
    limit: usize,
) -> Vec<(u32, f32, StageScores)> {
    let cosines = semantic.docs.cosines(semantic.query);
    let all: Vec<u32> = (0..lexical.len() as u32)
        .filter(|&d| allowed(d as usize))
        .collect();
    // Tools no word matched score 0, so the lexical minimum is 0.
    let lex_hi = all
        .iter()
        .map(|&d| lexical[d as usize])
        .fold(0.0f32, f32::max);
    let (mut cos_lo, mut cos_span) = normalise(&cosines, &all);
    let tuning = &stages.tuning;
    if tuning.window > 0 && all.len() > tuning.window {
        let mut top: Vec<f32> = all.iter().map(|&d| cosines[d as usize]).collect();
        top.select_nth_unstable_by(tuning.window, |a, b| b.total_cmp(a));
        let hi = cos_lo + cos_span;
        cos_lo = top[tuning.window];
        cos_span = (hi - cos_lo).max(1e-6);
    }
    let w = if stages.lexical { tuning.weight } else { 1.0 };
    let fused = |d: usize| {
        let l = if lex_hi > 0.0 {
            lexical[d] / lex_hi
        } else {
            0.0
        };
        let c = ((cosines[d] - cos_lo) / cos_span).max(0.0);
        (1.0 - w) * l + w * c
    };
    let mut ranked: Vec<(u32, f32)> = all
        .iter()
        .filter(|&&d| {
            let d = d as usize;
            (stages.lexical && lexical[d] > 0.0) || cosines[d] >= MIN_COSINE
        })
        .map(|&d| (d, fused(d as usize)))
        .collect();
    let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if ranked.len() > limit {
        ranked.select_nth_unstable_by(limit, by_score);
        ranked.truncate(limit);
    }
    ranked.sort_by(by_score);
    let floor = ranked.first().map_or(0.0, |&(_, top)| top * FUSED_FLOOR);
    ranked.retain(|&(_, s)| s >= floor);
    let scores = |d: u32, s: f32| StageScores {
        lexical: lexical[d as usize],
        semantic: Some(cosines[d as usize]),
        fused: Some(s),
        pulled_by: None,
        learned: None,
    };
    let mut out: Vec<(u32, f32, StageScores)> =
        ranked.iter().map(|&(d, s)| (d, s, scores(d, s))).collect();
    if stages.near_duplicates {
        let ranking = Ranking {
            index,
            snapshot,
            docs: semantic.docs,
            allowed,
            cosines: &cosines,
        };
        out = pull_near_duplicates(&ranking, out, &scores, tuning);
        out.truncate(limit);
    }
    out
}

/// What one query's ranking reads.
#[derive(Clone, Copy)]
struct Ranking<'a> {
    index: &'a Index,
    snapshot: &'a Snapshot,
    docs: &'a DocVectors,
    allowed: &'a dyn Fn(usize) -> bool,
    /// Each tool's cosine with the query.
    cosines: &'a [f32],
}

/// Puts next to each of the first [`NEAR_ANCHORS`] results the tools of
/// other servers that do the same thing: vectors at least
/// [`NEAR_SIMILARITY`] alike and names that name the same action. An agent
/// then sees a tool's alternatives together (the same `git_show` of two git
/// servers, `send_message` of Slack and Discord).
fn pull_near_duplicates(
    ranking: &Ranking<'_>,
    ranked: Vec<(u32, f32, StageScores)>,
    scores: &dyn Fn(u32, f32) -> StageScores,
    tuning: &Tuning,
) -> Vec<(u32, f32, StageScores)> {
    let near_similarity = tuning.near_similarity;
    let Ranking {
        index,
        snapshot,
        docs,
        allowed,
        cosines,
    } = *ranking;
    let strict = near_similarity.max(NEAR_SIMILARITY_NO_ACTION);
    // A tool doing what a result does is near the query too: look among
    // the query's nearest tools only.
    let mut candidates: Vec<u32> = (0..docs.rows() as u32).collect();
    if candidates.len() > NEAR_CANDIDATES {
        candidates.select_nth_unstable_by(NEAR_CANDIDATES, |&a, &b| {
            cosines[b as usize].total_cmp(&cosines[a as usize])
        });
        candidates.truncate(NEAR_CANDIDATES);
    }
    let mut pulled: HashMap<u32, Vec<(u32, f32)>> = HashMap::new();
    let mut placed: Vec<u32> = Vec::new();
    for &(a, _, _) in ranked.iter().take(tuning.near_anchors) {
        placed.push(a);
        let anchor = &snapshot.tools[a as usize];
        let va = docs.row(a as usize);
        let action = index.doc_actions[a as usize];
        let mut twins: Vec<(u32, f32)> = candidates
            .iter()
            .map(|&d| d as usize)
            .filter(|&d| {
                allowed(d)
                    && snapshot.tools[d].server.id != anchor.server.id
                    && !placed.contains(&(d as u32))
                    && cosines[d] >= cosines[a as usize] - tuning.near_margin
            })
            .filter_map(|d| {
                let sim = model::dot(va, docs.row(d));
                let other = index.doc_actions[d];
                let threshold = if action == 0 && other == 0 {
                    strict
                } else if action & other != 0 {
                    near_similarity
                } else {
                    return None;
                };
                (sim >= threshold).then_some((d as u32, sim))
            })
            .collect();
        twins.sort_by(|x, y| y.1.total_cmp(&x.1));
        if tuning.near_one_per_server {
            let mut servers: Vec<&str> = Vec::new();
            twins.retain(|&(d, _)| {
                let id = snapshot.tools[d as usize].server.id.as_str();
                let new = !servers.contains(&id);
                servers.push(id);
                new
            });
        }
        twins.truncate(tuning.near_per_anchor);
        placed.extend(twins.iter().map(|t| t.0));
        pulled.insert(a, twins);
    }
    let mut out: Vec<(u32, f32, StageScores)> = Vec::with_capacity(ranked.len() + 6);
    let mut seen: Vec<u32> = Vec::new();
    for (d, s, st) in ranked {
        if seen.contains(&d) {
            continue;
        }
        seen.push(d);
        out.push((d, s, st));
        for &(t, sim) in pulled.get(&d).into_iter().flatten() {
            if seen.contains(&t) {
                continue;
            }
            seen.push(t);
            // Just under the result it follows, so scores still read in order.
            let score = out.last().map_or(s, |l| l.1) * 0.999;
            let mut st = scores(t, score);
            st.pulled_by = Some((snapshot.tools[d as usize].name.clone(), sim));
            out.push((t, score, st));
        }
    }
    // A pulled tool may already have a place further down: the first wins,
    // and what follows keeps its order under the pulled scores.
    let mut last = f32::MAX;
    for r in &mut out {
        last = last.min(r.1);
        r.1 = last;
    }
    out
}

type QueryVectors = HashMap<String, (u64, Arc<[f32]>)>;

/// Query vectors already computed, by query text: agents repeat queries,
/// and a forward pass costs milliseconds. Least recently used goes first.
/// Shared by every session (a memo, not state: any thread may fill it).
pub struct QueryCache {
    /// A use counter, and per query its last use and vector.
    entries: Mutex<(u64, QueryVectors)>,
    capacity: usize,
}

impl QueryCache {
    pub fn new(capacity: usize) -> QueryCache {
        QueryCache {
            entries: Mutex::new((0, HashMap::new())),
            capacity,
        }
    }

    pub fn get(&self, query: &str) -> Option<Arc<[f32]>> {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (tick, map) = &mut *guard;
        *tick += 1;
        let now = *tick;
        map.get_mut(query).map(|(used, v)| {
            *used = now;
            v.clone()
        })
    }

    pub fn put(&self, query: &str, vector: Arc<[f32]>) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (tick, map) = &mut *guard;
        *tick += 1;
        if map.len() >= self.capacity && !map.contains_key(query) {
            let oldest = map
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        map.insert(query.to_string(), (*tick, vector));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |g| g.1.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_reads_name_value_pairs_over_the_defaults() {
        let t = Tuning::parse("near_per_anchor=2, near_anchors=3,weight=0.5").unwrap();
        assert_eq!(t.near_per_anchor, 2);
        assert_eq!(t.near_anchors, 3);
        assert_eq!(t.weight, 0.5);
        assert_eq!(t.near_similarity, NEAR_SIMILARITY);
        assert_eq!(Tuning::parse("").unwrap(), Tuning::DEFAULT);
        let err = Tuning::parse("nearness=1").unwrap_err();
        assert!(err.contains("no tuning constant 'nearness'"), "{err}");
        let err = Tuning::parse("weight=heavy").unwrap_err();
        assert!(err.contains("weight: 'heavy' is not a number"), "{err}");
        assert!(Tuning::parse("weight").unwrap_err().contains("name=value"));
    }

    #[test]
    fn the_query_cache_forgets_the_least_recently_used() {
        let cache = QueryCache::new(2);
        let v = |x: f32| -> Arc<[f32]> { Arc::from(vec![x]) };
        cache.put("a", v(1.0));
        cache.put("b", v(2.0));
        assert!(cache.get("a").is_some());
        cache.put("c", v(3.0));
        assert!(cache.get("b").is_none(), "b was used least recently");
        assert_eq!(cache.get("a").as_deref(), Some(&[1.0][..]));
        assert_eq!(cache.get("c").as_deref(), Some(&[3.0][..]));
        assert_eq!(cache.len(), 2);
    }
}
