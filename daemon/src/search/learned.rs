//! Search that learns from use: which tool a session ended up calling after
//! its `discover_tools` queries. Each remembered (query, tool) pair carries
//! how many sessions gave that evidence; a later query like a remembered
//! one (in shared terms or, with a model, in meaning) lifts that tool's
//! lexical score by up to a bounded share of the best score, unless it asks
//! for another action or names another tool (see `strength` and the rules
//! in `Learned::boost`): a query that only shares words with a learned one
//! but asks for something else ranks as it did. Why the bars sit where they
//! do, and what they reach: docs/notes/2026-12-06-learning.md.
//!
//! One process-wide [`Learned`] (like the metrics), because sessions record
//! into it and every search reads it: a `Mutex` held for microseconds, never
//! across an await. Evidence is kept in `learned-queries.json` in the cache
//! directory, rewritten (atomically) a moment after a change by a thread of
//! its own, so a call never waits for a disk; under scale-out in the store
//! instead ([`crate::store::learned`]), written by a task of its own, so
//! every instance learns from the sessions of all. Only queries and tool
//! names are kept: no arguments, no results.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::lexicon::ACTIONS;
use super::model::dot;
use super::porter;
use super::text::tokenize;
use crate::catalog::snapshot::Snapshot;
use crate::runtime::atomic_file::{self, Mode};
use crate::store::Shared;
use crate::store::learned::SharedPair;

/// Most (query, tool) pairs remembered; past it the weakest, then oldest, go.
pub const MAX_RECORDS: usize = 10_000;
/// The file in the cache directory.
pub const FILE: &str = "learned-queries.json";
/// A remembered query counts fully for a search when the two share this
/// much of their terms (Dice: twice the shared terms over both counts), and
/// in part from [`DICE_FROM`] up; never when the query asks for another
/// action ([`first_action`]) or names another tool of the learned tool's
/// server ([`sibling_words`]): "who wrote the last few changes" meets "see
/// who wrote the last few changes", "read the file about the login page"
/// gains nothing from "file a bug about the login page". Set on the
/// development pairs (`bench/pairs-dev*.jsonl`).
const MIN_DICE: f32 = 0.75;
/// Below this Dice, shared words count nothing.
const DICE_FROM: f32 = 0.4;
/// Below this cosine, a remembered query's vector counts nothing.
const COSINE_FROM: f32 = 0.5;
/// The learned part at full evidence, as a share of the best lexical score:
/// at the weakest match and evidence still above 1 (2 × 0.8 × 0.75), so a
/// strongly matching tool comes first.
const WEIGHT: f32 = 2.0;
/// Evidence counted at most: more sessions agreeing adds no more.
const EVIDENCE_CAP: f32 = 3.0;
/// A remembered query counts fully through the semantic stage when its
/// vector's cosine with the query's is at least this, in part from
/// [`COSINE_FROM`] up. Lower, the controls of the development pairs (same
/// topic, another request) start to move: this model puts them closer
/// (0.53–0.87) than most true rewordings (median 0.31).
const MIN_COSINE: f32 = 0.78;
/// How long a write waits for more changes to join it.
const SAVE_AFTER: Duration = Duration::from_millis(300);

/// One remembered query and the tool it led to.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    query: String,
    tool: String,
    /// Sessions whose call gave this evidence (less the withdrawn ones).
    count: u32,
    /// Unix seconds of the latest evidence.
    last: u64,
    #[serde(skip)]
    terms: Vec<u64>,
    /// The action its first action word asks for ([`first_action`]).
    #[serde(skip)]
    first: u64,
    /// The query's vector of the semantic stage's model, when one runs:
    /// taken from the query cache when the evidence comes, or embedded
    /// off the request path after a restart.
    #[serde(skip)]
    vector: Option<Arc<[f32]>>,
}

impl Record {
    /// A pair as remembered, with what a search matches it by derived from
    /// its query.
    fn new(
        query: String,
        tool: String,
        count: u32,
        last: u64,
        vector: Option<Arc<[f32]>>,
    ) -> Record {
        Record {
            terms: terms(&query),
            first: first_action(&query),
            query,
            tool,
            count,
            last,
            vector,
        }
    }
}

#[derive(Default, Serialize, Deserialize)]
struct Saved {
    records: Vec<Record>,
}

/// The learned queries of this installation. See the module docs.
pub struct Learned {
    records: Mutex<Vec<Record>>,
    enabled: AtomicBool,
    path: Mutex<Option<PathBuf>>,
    saving: Arc<AtomicBool>,
    /// Changed since the file was last written.
    dirty: AtomicBool,
    /// The shared store under scale-out: evidence goes there, not to the file.
    shared: OnceLock<Arc<Shared>>,
}

static LEARNED: OnceLock<Learned> = OnceLock::new();

/// The process's learned queries.
pub fn learned() -> &'static Learned {
    LEARNED.get_or_init(Learned::empty)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The terms a query is matched by: stemmed, without stopwords, once each,
/// hashed so that matching 10,000 remembered queries compares integers.
fn terms(query: &str) -> Vec<u64> {
    let mut t: Vec<u64> = tokenize(query).iter().map(|w| term_hash(w)).collect();
    t.sort_unstable();
    t.dedup();
    t
}

fn term_hash(stem: &str) -> u64 {
    let mut h = DefaultHasher::new();
    stem.hash(&mut h);
    h.finish()
}

/// Each action word's stem and its [`ACTIONS`] groups (a bit each):
/// two queries asking for actions of no common group ask for different
/// things ("delete the crashing pods" is not "which pods crash"), while
/// synonyms ("open a ticket", "create an issue") agree.
static ACTION_TERMS: LazyLock<Vec<(u64, u64)>> = LazyLock::new(|| {
    let mut t: Vec<(u64, u64)> = Vec::new();
    for (g, group) in ACTIONS.iter().enumerate() {
        for w in group.iter() {
            t.push((term_hash(&porter::stem(w)), 1 << g));
        }
    }
    t.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (h, bits) in t {
        match merged.last_mut() {
            Some(last) if last.0 == h => last.1 |= bits,
            _ => merged.push((h, bits)),
        }
    }
    merged
});

/// The groups of reading actions (get, list, search).
const READING: u64 = (1 << 2) | (1 << 3) | (1 << 4);

/// The [`ACTIONS`] groups of one term (0: not an action word).
fn action_of(term: u64) -> u64 {
    ACTION_TERMS
        .binary_search_by_key(&term, |(h, _)| *h)
        .map_or(0, |i| ACTION_TERMS[i].1)
}

/// The action a query asks for: the groups of an action word among its
/// first two words (stopwords aside). Later ones are mostly part of the
/// object ("add a thumbs up to the deploy message", "create a task to call
/// the dentist", "who wrote the last few changes"). A question with no
/// action word up front ("which pods are crashing?") asks to read.
fn first_action(query: &str) -> u64 {
    let first = tokenize(query)
        .iter()
        .take(2)
        .map(|w| action_of(term_hash(w)))
        .find(|&bits| bits != 0)
        .unwrap_or(0);
    if first != 0 {
        return first;
    }
    let lower = query.trim().to_lowercase();
    let opening = lower.split_whitespace().next().unwrap_or("");
    let question = lower.ends_with('?') || QUESTION_WORDS.contains(&opening);
    if question { READING } else { 0 }
}

/// Words a question opens with.
const QUESTION_WORDS: &[&str] = &[
    "what", "what's", "which", "who", "who's", "where", "when", "how", "is", "are", "does", "do",
    "did", "any", "why",
];

fn shared_terms(a: &[u64], b: &[u64]) -> usize {
    a.iter().filter(|t| b.binary_search(t).is_ok()).count()
}

/// How strongly a query matches a remembered one, 0 to 1: by their terms
/// (`q`, `r`: the Dice coefficient, from [`DICE_FROM`] to [`MIN_DICE`]) or
/// by their vectors (the cosine, from [`COSINE_FROM`] to [`MIN_COSINE`]),
/// whichever is stronger; nothing when the query asks for an action of
/// another group than the remembered one's (`asked`, `remembered`: their
/// [`first_action`]s).
fn strength(r: &[u64], remembered: u64, q: &[u64], asked: u64, cosine: f32) -> Option<f32> {
    // A verb left out ("who wrote…" for "see who wrote…") asks for the
    // same; a verb of another kind asks for something else.
    if asked != 0 && asked & remembered == 0 {
        return None;
    }
    let dice = 2.0 * shared_terms(r, q) as f32 / (r.len() + q.len()).max(1) as f32;
    let ramp = |x: f32, from: f32, full: f32| ((x - from) / (full - from)).clamp(0.0, 1.0);
    let s = ramp(dice, DICE_FROM, MIN_DICE).max(ramp(cosine, COSINE_FROM, MIN_COSINE));
    (s > 0.0).then_some(s)
}

impl Learned {
    fn empty() -> Learned {
        Learned {
            records: Mutex::new(Vec::new()),
            enabled: AtomicBool::new(true),
            path: Mutex::new(None),
            saving: Arc::new(AtomicBool::new(false)),
            dirty: AtomicBool::new(false),
            shared: OnceLock::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Record>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads what was learned from `<cache_dir>/learned-queries.json` and
    /// keeps writing there. An unreadable file is set aside with a warning.
    pub fn load(&self, cache_dir: &Path) {
        let path = cache_dir.join(FILE);
        let mut records: Vec<Record> = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<Saved>(&bytes) {
                Ok(saved) => saved
                    .records
                    .into_iter()
                    .map(|r| Record::new(r.query, r.tool, r.count, r.last, None))
                    .collect(),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "unreadable learned queries ignored");
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        };
        records.retain(|r| !r.terms.is_empty() && r.count > 0);
        *self.lock() = records;
        *self.path.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
    }

    /// `search.learn`: off, nothing is recorded and nothing learned counts.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Queries remembered (pairs of a query and a tool), for `status`.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts `query` as evidence for `tool`; `vector` is the query's in
    /// the semantic stage's model, when one runs.
    pub fn add(&self, query: &str, tool: &str, vector: Option<Arc<[f32]>>) {
        if !self.enabled() {
            return;
        }
        if terms(query).is_empty() {
            return;
        }
        let query = query.trim().to_lowercase();
        let last = now();
        let dropped = {
            let mut records = self.lock();
            match records
                .iter_mut()
                .find(|r| r.tool == tool && r.query == query)
            {
                Some(r) => {
                    r.count = r.count.saturating_add(1);
                    r.last = last;
                    if vector.is_some() {
                        r.vector = vector;
                    }
                    None
                }
                None => {
                    let dropped = (records.len() >= MAX_RECORDS)
                        .then(|| weakest(&records))
                        .flatten()
                        .map(|i| records.swap_remove(i));
                    records.push(Record::new(
                        query.clone(),
                        tool.to_string(),
                        1,
                        last,
                        vector,
                    ));
                    dropped
                }
            }
        };
        self.changed(tool, &query, 1, last, dropped);
    }

    /// Writes a change of one pair where what was learned is kept (the
    /// store's count then stands here too; see [`Learned::write`]).
    fn changed(&self, tool: &str, query: &str, delta: i32, last: u64, dropped: Option<Record>) {
        let (tool, query) = (tool.to_string(), query.to_string());
        self.write(move |shared| async move {
            if let Some(d) = dropped
                && let Err(e) = shared.learned_trim(&[(d.tool, d.query)]).await
            {
                tracing::warn!("learned queries: the weakest not dropped from the store: {e}");
            }
            match shared.learned_change(&tool, &query, delta, last).await {
                Ok(count) => learned().apply(SharedPair {
                    tool,
                    query,
                    count,
                    last,
                }),
                Err(e) => tracing::warn!(
                    tool = %tool,
                    "what search learned was not written to the store (this instance keeps it \
                     until its next resync): {e}"
                ),
            }
        });
    }

    /// Writes a change where what was learned is kept: `job` runs on the
    /// store under scale-out (on the runtime, never on the caller's
    /// path), else the file is written a moment later.
    fn write<F, Fut>(&self, job: F)
    where
        F: FnOnce(Arc<Shared>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        match self.shared.get().cloned() {
            Some(shared) => {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(job(shared));
                }
            }
            None => self.save_soon(),
        }
    }

    /// Shares what is learned through the store from now on (scale-out):
    /// what the store holds replaces the file's.
    pub fn share(&self, shared: Arc<Shared>) {
        if self.shared.set(shared).is_err() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async { learned().read_shared().await });
        }
    }

    /// Reads every remembered pair from the store (at start and after the
    /// store was away), keeping the vectors of queries already embedded,
    /// and bounds the store as [`Learned::add`] bounds a file.
    pub async fn read_shared(&self) {
        let Some(shared) = self.shared.get().cloned() else {
            return;
        };
        let pairs = match shared.learned_get().await {
            Ok(pairs) => pairs,
            Err(e) => {
                tracing::warn!("what search learned was not read from the store: {e}");
                return;
            }
        };
        let excess = {
            let mut records = self.lock();
            let vectors: HashMap<String, Arc<[f32]>> = records
                .iter()
                .filter_map(|r| Some((r.query.clone(), r.vector.clone()?)))
                .collect();
            *records = pairs
                .into_iter()
                .filter(|p| p.count > 0)
                .map(|p| {
                    let vector = vectors.get(&p.query).cloned();
                    Record::new(p.query, p.tool, p.count, p.last, vector)
                })
                .filter(|r| !r.terms.is_empty())
                .collect();
            let mut excess = Vec::new();
            while records.len() > MAX_RECORDS {
                let Some(i) = weakest(&records) else { break };
                let r = records.swap_remove(i);
                excess.push((r.tool, r.query));
            }
            excess
        };
        if !excess.is_empty()
            && let Err(e) = shared.learned_trim(&excess).await
        {
            tracing::warn!("learned queries past the bound not dropped from the store: {e}");
        }
    }

    /// Another instance's change (or the store's answer to ours): the
    /// pair now counts `count` sessions (0: gone).
    pub fn apply(&self, pair: SharedPair) {
        let mut records = self.lock();
        let at = records
            .iter()
            .position(|r| r.tool == pair.tool && r.query == pair.query);
        match (at, pair.count) {
            (Some(i), 0) => {
                records.swap_remove(i);
            }
            (Some(i), n) => {
                records[i].count = n;
                records[i].last = records[i].last.max(pair.last);
            }
            (None, 0) => {}
            (None, n) => {
                let record = Record::new(pair.query, pair.tool, n, pair.last, None);
                if record.terms.is_empty() {
                    return;
                }
                if records.len() >= MAX_RECORDS
                    && let Some(i) = weakest(&records)
                {
                    records.swap_remove(i);
                }
                records.push(record);
            }
        }
    }

    /// Another instance forgot what was learned for `tool` (`None`: all);
    /// how many pairs this one dropped.
    pub fn forgotten_elsewhere(&self, tool: Option<&str>) -> usize {
        let mut records = self.lock();
        let before = records.len();
        records.retain(|r| tool.is_some_and(|t| r.tool != t));
        before - records.len()
    }

    /// Takes back one piece of evidence of `query` for `tool`: the agent
    /// went on to another tool for the same task.
    pub fn withdraw(&self, query: &str, tool: &str) {
        let query = query.trim().to_lowercase();
        let found = {
            let mut records = self.lock();
            let at = records
                .iter()
                .position(|r| r.tool == tool && r.query == query);
            if let Some(i) = at {
                records[i].count -= 1;
                if records[i].count == 0 {
                    records.swap_remove(i);
                }
            }
            at.is_some()
        };
        if found {
            self.changed(tool, &query, -1, now(), None);
        }
    }

    /// Whether anything is remembered for `tool`.
    pub fn knows(&self, tool: &str) -> bool {
        self.lock().iter().any(|r| r.tool == tool)
    }

    /// Drops what was learned for `tool`, or everything; how many queries
    /// were dropped.
    pub fn forget(&self, tool: Option<&str>) -> usize {
        let dropped = self.forgotten_elsewhere(tool);
        let tool = tool.map(str::to_string);
        self.write(|shared| async move {
            if let Err(e) = shared.learned_forget(tool.as_deref()).await {
                tracing::warn!("what search learned was not forgotten in the store: {e}");
            }
        });
        dropped
    }

    /// Drops the evidence of tools no longer in the catalog: neither listed
    /// nor of a server that is configured but has no tools listed now.
    pub fn retain_catalog(&self, snapshot: &Snapshot) {
        if snapshot.tools.is_empty() && snapshot.unlisted.is_empty() {
            return;
        }
        let dropped: Vec<(String, String)> = {
            let mut records = self.lock();
            let (kept, dropped): (Vec<Record>, Vec<Record>) =
                std::mem::take(&mut *records).into_iter().partition(|r| {
                    snapshot.get(&r.tool).is_some()
                        || snapshot
                            .unlisted
                            .iter()
                            .any(|l| r.tool.starts_with(&format!("{}_", l.id)))
                });
            *records = kept;
            dropped.into_iter().map(|r| (r.tool, r.query)).collect()
        };
        if dropped.is_empty() {
            return;
        }
        self.write(|shared| async move {
            if let Err(e) = shared.learned_trim(&dropped).await {
                tracing::warn!("learned queries of tools gone not dropped from the store: {e}");
            }
        });
    }

    /// Adds the learned part to `scores` (the lexical scores of the
    /// snapshot's tools) and returns it per tool (0 where nothing counts).
    /// With `query_vector` (the semantic stage runs) a remembered query
    /// whose vector is close enough counts too.
    pub fn boost(
        &self,
        snapshot: &Snapshot,
        query: &str,
        query_vector: Option<&[f32]>,
        scores: &mut [f32],
    ) -> Vec<f32> {
        let mut learned = vec![0.0; scores.len()];
        if !self.enabled() {
            return learned;
        }
        let q = terms(query);
        if q.is_empty() {
            return learned;
        }
        let asked = first_action(query);
        // Per learned tool: the words naming its server's other tools.
        let mut siblings: HashMap<&str, (Vec<u64>, Vec<u64>)> = HashMap::new();
        // Per tool: the best match and the evidence behind matches.
        let mut matched: HashMap<&str, (f32, u32)> = HashMap::new();
        let records = self.lock();
        for r in records.iter() {
            let cosine = match (query_vector, r.vector.as_deref()) {
                (Some(qv), Some(rv)) if qv.len() == rv.len() => dot(qv, rv),
                _ => 0.0,
            };
            let Some(dice) = strength(&r.terms, r.first, &q, asked, cosine) else {
                continue;
            };
            // A word naming another tool of the same server, which neither
            // the remembered query nor this tool's name has, asks for that
            // tool ("list subscriptions" after "list invoices").
            let (others, own) = siblings
                .entry(r.tool.as_str())
                .or_insert_with(|| sibling_words(snapshot, &r.tool));
            if q.iter()
                .any(|t| others.binary_search(t).is_ok() && r.terms.binary_search(t).is_err())
            {
                continue;
            }
            // The words the remembered query shares with the tool's name
            // say what it was about: a query without one of them asks
            // about something else ("list the namespaces" after "list
            // pods in the staging namespace" → `pods_list_in_namespace`).
            if r.terms.iter().any(|t| {
                own.binary_search(t).is_ok() && action_of(*t) == 0 && q.binary_search(t).is_err()
            }) {
                continue;
            }
            let m = matched.entry(r.tool.as_str()).or_default();
            m.0 = m.0.max(dice);
            m.1 = m.1.saturating_add(r.count);
        }
        if matched.is_empty() {
            return learned;
        }
        let top = scores.iter().copied().fold(0.0f32, f32::max);
        let top = if top > 0.0 { top } else { 1.0 };
        for (tool, (dice, count)) in matched {
            let Some(d) = snapshot.position(tool) else {
                continue;
            };
            let part = WEIGHT * top * dice * evidence_weight(count);
            learned[d] = part;
            scores[d] += part;
        }
        learned
    }

    /// Remembered queries without a vector (after a restart), for the
    /// Embedder to embed off the request path.
    pub fn without_vectors(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .lock()
            .iter()
            .filter(|r| r.vector.is_none())
            .map(|r| r.query.clone())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Gives each remembered `query` its vector.
    pub fn set_vectors(&self, vectors: Vec<(String, Arc<[f32]>)>) {
        let by_query: HashMap<String, Arc<[f32]>> = vectors.into_iter().collect();
        for r in self.lock().iter_mut() {
            if let Some(v) = by_query.get(&r.query) {
                r.vector = Some(v.clone());
            }
        }
    }

    /// Writes the file a moment from now on a thread of its own, once for
    /// any number of changes meanwhile.
    fn save_soon(&self) {
        let Some(path) = self.path.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            return;
        };
        self.dirty.store(true, Ordering::Release);
        if self.saving.swap(true, Ordering::AcqRel) {
            return;
        }
        let saving = self.saving.clone();
        let spawned = std::thread::Builder::new()
            .name("evo-learned".into())
            .spawn(move || {
                std::thread::sleep(SAVE_AFTER);
                saving.store(false, Ordering::Release);
                learned().save(&path);
            });
        if let Err(e) = spawned {
            self.saving.store(false, Ordering::Release);
            tracing::warn!(error = %e, "learned queries not written");
        }
    }

    /// Writes what a write still pending would (evod is stopping).
    pub fn flush(&self) {
        let path = self.path.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(path) = path
            && self.dirty.load(Ordering::Acquire)
        {
            self.save(&path);
        }
    }

    fn save(&self, path: &Path) {
        self.dirty.store(false, Ordering::Release);
        let saved = Saved {
            records: self.lock().clone(),
        };
        let written = serde_json::to_vec(&saved)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                atomic_file::write(path, &bytes, Mode::OwnerOnly).map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "learned queries not written");
        }
    }
}

/// The words of the names of `tool`'s server's other tools that its own
/// name lacks ("reply" beside `email_forward_email`), and its own name's.
fn sibling_words(snapshot: &Snapshot, tool: &str) -> (Vec<u64>, Vec<u64>) {
    let Some(entry) = snapshot.get(tool) else {
        return (Vec::new(), Vec::new());
    };
    let own = terms(&entry.upstream);
    let mut words: Vec<u64> = snapshot
        .tools
        .iter()
        .filter(|e| e.server.id == entry.server.id && e.name != entry.name)
        .flat_map(|e| terms(&e.upstream))
        .filter(|t| own.binary_search(t).is_err())
        .collect();
    words.sort_unstable();
    words.dedup();
    (words, own)
}

/// The weakest, then oldest, remembered pair: the first to go.
fn weakest(records: &[Record]) -> Option<usize> {
    records
        .iter()
        .enumerate()
        .min_by_key(|(_, r)| (r.count, r.last))
        .map(|(i, _)| i)
}

/// From 0.75 for one session's evidence to 1 at [`EVIDENCE_CAP`]: more
/// agreement counts for more, but a tool needs no crowd to be learned.
fn evidence_weight(count: u32) -> f32 {
    let n = (count as f32).min(EVIDENCE_CAP);
    0.5 + 0.5 * ((1.0 + n).ln() / (1.0 + EVIDENCE_CAP).ln())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `query` counts for what `remembered` taught, its vector
    /// `cosine` from the remembered one's.
    fn counts(remembered: &str, query: &str, cosine: f32) -> bool {
        let (r, q) = (terms(remembered), terms(query));
        strength(
            &r,
            first_action(remembered),
            &q,
            first_action(query),
            cosine,
        )
        .is_some()
    }

    #[test]
    fn near_same_queries_match_and_others_do_not() {
        let bug = "file a bug about the login page";
        assert!(counts(bug, "file a bug about the login pages", 0.0));
        assert!(!counts(bug, "read the file about the login page", 0.9));
        // One word more, but an action: another request.
        let crashing = "which pods are crashing in staging";
        assert!(!counts(
            crashing,
            "delete the crashing pods in staging",
            0.9
        ));
        assert!(counts(crashing, "which pods keep crashing in staging", 0.0));
        assert!(counts(crashing, "show the pods crashing in staging", 0.0));
        // A verb left out is the same request; a synonym too.
        assert!(counts(
            "see who wrote the last few changes",
            "who wrote the last few changes",
            0.0
        ));
        assert!(counts(
            "create an issue for the login bug",
            "open an issue for the login bug",
            0.0
        ));
        // The first action word says what is asked; later ones are objects.
        let task = "create a task to call the dentist";
        assert!(!counts(task, "delete the task to call the dentist", 0.9));
        // Little in common, in words or meaning: nothing.
        assert!(!counts(bug, "convert 9am Tokyo time to New York", 0.2));
    }

    /// The learned part of `tool` for `query` after `remembered` led to it.
    fn learned_part(remembered: &str, tool: &str, query: &str) -> f32 {
        let snapshot = crate::search::tests::snapshot(&[
            (
                "mail",
                &[
                    ("forward_email", "Forward an email"),
                    ("reply_email", "Reply to an email"),
                ],
            ),
            (
                "k8s",
                &[
                    ("pods_list_in_namespace", "List pods in a namespace"),
                    ("namespaces_list", "List namespaces"),
                ],
            ),
        ]);
        let learned = Learned::empty();
        learned.add(remembered, tool, None);
        let mut scores = vec![1.0; snapshot.tools.len()];
        let parts = learned.boost(&snapshot, query, None, &mut scores);
        snapshot.position(tool).map_or(0.0, |d| parts[d])
    }

    #[test]
    fn a_word_of_another_tool_or_a_missing_object_is_another_request() {
        let forward = "forward the email from HR to my personal address";
        assert!(learned_part(forward, "mail_forward_email", "forward the email from HR") > 0.0);
        // "reply" names the server's other tool.
        assert_eq!(
            learned_part(forward, "mail_forward_email", "reply to the email from HR"),
            0.0
        );
        let pods = "list pods in the staging namespace";
        let tool = "k8s_pods_list_in_namespace";
        assert!(learned_part(pods, tool, "list the pods in the staging namespace") > 0.0);
        // The object the remembered query and the tool's name share is gone.
        assert_eq!(
            learned_part(pods, tool, "list the namespaces in the staging cluster"),
            0.0
        );
    }

    #[test]
    fn evidence_grows_and_is_bounded() {
        assert!(evidence_weight(1) < evidence_weight(2));
        assert_eq!(evidence_weight(3), evidence_weight(100));
        assert!((evidence_weight(3) - 1.0).abs() < 1e-6);
    }
}
