//! Building the index of one catalog snapshot: each tool's fields as postings, and
//! the vocabulary for typo tolerance.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::Value;

use super::lexicon::{ACTIONS, ALIASES, PACKAGING, THINGS};
use super::text::{for_each_word, tokenize};
use super::{
    ABSENT_BOOST, DESCRIPTION_CHARS, FIELD_COUNT, FIELDS, Field, K1, PARAM_DESCRIPTION_CHARS,
    SERVER_NAMED_MAX, TYPO_MIN_LEN, W_ALIAS, W_RELATED, W_TYPO, porter,
};
use crate::catalog::snapshot::{Snapshot, ToolEntry};

/// Parameter names, enum values and descriptions of a schema's top-level
/// properties.
pub(super) fn param_texts(schema: &JsonObject) -> (Vec<&str>, Vec<&str>, Vec<String>) {
    let (mut names, mut values, mut descs) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (k, v) in props {
            names.push(k.as_str());
            if let Some(Value::Array(options)) = v.get("enum") {
                values.extend(options.iter().filter_map(Value::as_str));
            }
            if let Some(d) = v.get("description").and_then(Value::as_str) {
                descs.push(d.chars().take(PARAM_DESCRIPTION_CHARS).collect());
            }
        }
    }
    (names, values, descs)
}

/// Per document, its server terms that name at most [`SERVER_NAMED_MAX`]
/// servers.
pub(super) fn server_terms(tools: &[Arc<ToolEntry>], docs: &[DocTerms]) -> Vec<Box<[u32]>> {
    let mut servers: HashMap<u32, Vec<&str>> = HashMap::new();
    for (entry, doc) in tools.iter().zip(docs) {
        for &t in &doc.server_terms {
            let ids = servers.entry(t).or_default();
            if !ids.contains(&entry.server.id.as_str()) {
                ids.push(&entry.server.id);
            }
        }
    }
    docs.iter()
        .map(|d| {
            let rare = |t: &&u32| servers.get(t).is_some_and(|s| s.len() <= SERVER_NAMED_MAX);
            d.server_terms.iter().filter(rare).copied().collect()
        })
        .collect()
}

/// One document's use of a term.
#[derive(Clone, Copy)]
pub(super) struct Posting {
    pub(super) doc: u32,
    /// Saturated BM25F term frequency: everything but the query's weights,
    /// worked out at build time.
    pub(super) tf: f32,
    /// Is the term one of the words of the tool's name?
    pub(super) in_name: bool,
}

/// A tool's words, counted per field, while the index is built.
pub(super) struct DocTerms {
    pub(super) tf: HashMap<u32, [u16; FIELD_COUNT]>,
    pub(super) len: [f32; FIELD_COUNT],
    /// Terms of the name that are not its server's words ("linear" in
    /// `linear_createIssue`).
    pub(super) name_terms: Vec<u32>,
    /// Terms of its server's id and domain.
    pub(super) server_terms: Vec<u32>,
}

impl DocTerms {
    /// Counts the words of `text` in `field`; `raw_words` remembers each
    /// unstemmed word's term, which also saves stemming it again.
    pub(super) fn add(
        &mut self,
        vocab: &mut HashMap<String, u32>,
        raw_words: &mut HashMap<String, u32>,
        text: &str,
        field: Field,
    ) {
        for_each_word(text, |w| {
            if matches!(field, Field::Server) && PACKAGING.contains(&w) {
                return;
            }
            let term = match raw_words.get(w) {
                Some(&t) => t,
                None => {
                    let next = vocab.len() as u32;
                    let t = *vocab.entry(porter::stem(w)).or_insert(next);
                    raw_words.insert(w.to_string(), t);
                    t
                }
            };
            let counts = self.tf.entry(term).or_default();
            counts[field as usize] = counts[field as usize].saturating_add(1);
            self.len[field as usize] += 1.0;
        });
    }
}

/// The search index of one snapshot. Documents are the snapshot's tools, in
/// order.
#[derive(Default)]
pub struct Index {
    pub(super) vocab: HashMap<String, u32>,
    pub(super) postings: Vec<Vec<Posting>>,
    pub(super) idf: Vec<f32>,
    /// Per stem: other terms the lexicon says a query word also means, with
    /// their query weight.
    pub(super) related: HashMap<String, Vec<(u32, f32)>>,
    /// Per stem: the [`ACTIONS`] groups (one bit each) it belongs to.
    pub(super) actions: HashMap<String, u64>,
    /// Per document: the action its name names first, as [`ACTIONS`] bits.
    pub(super) doc_actions: Vec<u64>,
    /// Per document: how many distinct terms its name has, server words aside.
    pub(super) name_lens: Vec<f32>,
    /// Per document: the terms of its server id and domain that name few
    /// servers (see [`SERVER_NAMED_MAX`]).
    pub(super) server_terms: Vec<Box<[u32]>>,
    /// Per document: lowercase exposed and base names (upstream, or as overridden).
    pub(super) names: Vec<(String, String)>,
    /// The catalog's words (unstemmed), with their term, for typo correction.
    pub(super) words: Vec<(String, u32)>,
    /// Each long word and its one-letter deletions → words: two words one
    /// edit apart share a key (symmetric-delete spelling correction).
    pub(super) deletions: HashMap<String, Vec<u32>>,
}

impl Index {
    /// Builds the index of `snapshot`'s listed tools.
    pub fn of(snapshot: &Snapshot) -> Index {
        let capabilities = snapshot.capabilities.iter().cloned().collect();
        Index::build(&snapshot.tools, &capabilities)
    }

    /// Builds the index of `tools`, with each server's capabilities.
    pub fn build(tools: &[Arc<ToolEntry>], capabilities: &HashMap<String, Vec<String>>) -> Index {
        let mut index = Index::default();
        let mut raw_words: HashMap<String, u32> = HashMap::new();
        let mut docs = Vec::with_capacity(tools.len());
        for entry in tools {
            let mut doc = DocTerms {
                tf: HashMap::new(),
                len: [0.0; FIELD_COUNT],
                name_terms: Vec::new(),
                server_terms: Vec::new(),
            };
            let vocab = &mut index.vocab;
            let mut add = |doc: &mut DocTerms, text: &str, field: Field| {
                doc.add(vocab, &mut raw_words, text, field)
            };
            add(&mut doc, &entry.server.id, Field::Server);
            if entry.domain != entry.server.id {
                add(&mut doc, &entry.domain, Field::Server);
            }
            doc.server_terms = doc.tf.keys().copied().collect();
            for c in capabilities.get(&entry.server.id).into_iter().flatten() {
                add(&mut doc, c, Field::Server);
            }
            let server_terms: Vec<u32> = doc.tf.keys().copied().collect();
            add(&mut doc, &entry.base_name, Field::Name);
            doc.name_terms = doc
                .tf
                .iter()
                .filter(|(t, c)| c[Field::Name as usize] > 0 && !server_terms.contains(t))
                .map(|(&t, _)| t)
                .collect();
            if !entry.summary_missing() {
                add(&mut doc, &entry.summary, Field::Summary);
            }
            if let Some(title) = &entry.tool.title {
                add(&mut doc, title, Field::Summary);
            }
            let description = entry.tool.description.as_deref().unwrap_or("");
            let head: String = description.chars().take(DESCRIPTION_CHARS).collect();
            add(&mut doc, &head, Field::Description);
            let (names, values, descs) = param_texts(&entry.tool.input_schema);
            for p in names {
                add(&mut doc, p, Field::ParamName);
            }
            for v in values {
                add(&mut doc, v, Field::ParamValue);
            }
            for d in &descs {
                add(&mut doc, d, Field::ParamDescription);
            }
            docs.push(doc);
        }
        index.finish_postings(&docs);
        index.server_terms = server_terms(tools, &docs);
        index.build_lexicon();
        index.doc_actions = tools.iter().map(|e| index.name_action(e)).collect();
        index.names = tools
            .iter()
            .map(|e| (e.name.to_lowercase(), e.base_name.to_lowercase()))
            .collect();
        index.build_typos(raw_words);
        index
    }

    /// BM25F: each field's count is normalised by that field's length
    /// against its average, the weighted sum saturates once.
    pub(super) fn finish_postings(&mut self, docs: &[DocTerms]) {
        let n = docs.len().max(1) as f32;
        let mut avg = [0.0f32; FIELD_COUNT];
        for d in docs {
            for (a, l) in avg.iter_mut().zip(d.len) {
                *a += l / n;
            }
        }
        self.postings = vec![Vec::new(); self.vocab.len()];
        for (d, doc) in docs.iter().enumerate() {
            for (&term, counts) in &doc.tf {
                let mut tf = 0.0;
                for (f, &count) in counts.iter().enumerate() {
                    if count > 0 {
                        let (w, b) = FIELDS[f];
                        let norm = 1.0 - b + b * doc.len[f] / avg[f].max(1e-6);
                        tf += w * count as f32 / norm;
                    }
                }
                self.postings[term as usize].push(Posting {
                    doc: d as u32,
                    tf: tf * (K1 + 1.0) / (tf + K1),
                    in_name: doc.name_terms.contains(&term),
                });
            }
        }
        self.name_lens = docs.iter().map(|d| d.name_terms.len() as f32).collect();
        self.idf = self
            .postings
            .iter()
            .map(|p| {
                let df = p.len() as f32;
                ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
            })
            .collect();
    }

    /// Resolves the lexicon against this catalog's terms.
    pub(super) fn build_lexicon(&mut self) {
        let groups = ACTIONS
            .iter()
            .map(|g| (true, g))
            .chain(THINGS.iter().map(|g| (false, g)));
        for (g, (is_action, group)) in groups.enumerate() {
            let stems: Vec<String> = group.iter().map(|w| porter::stem(w)).collect();
            for s in &stems {
                if is_action {
                    *self.actions.entry(s.clone()).or_default() |= 1 << g;
                }
                let targets = stems.iter().filter(|o| *o != s);
                let targets: Vec<u32> =
                    targets.filter_map(|o| self.vocab.get(o).copied()).collect();
                let related = self.related.entry(s.clone()).or_default();
                related.extend(targets.into_iter().map(|t| (t, W_RELATED)));
            }
        }
        for (short, long) in ALIASES {
            let targets: Vec<u32> = tokenize(long)
                .iter()
                .filter_map(|s| self.vocab.get(s).copied())
                .collect();
            let related = self.related.entry(porter::stem(short)).or_default();
            related.extend(targets.into_iter().map(|t| (t, W_ALIAS)));
        }
        // One weight per target: the highest.
        for related in self.related.values_mut() {
            related.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
            related.dedup_by_key(|r| r.0);
        }
    }

    /// The action a tool's name names first (`delete` in
    /// `discord_delete_message`), skipping its server's own words.
    pub(super) fn name_action(&self, entry: &ToolEntry) -> u64 {
        let server = tokenize(&entry.server.id);
        let mut action = 0;
        for_each_word(&entry.base_name, |w| {
            let s = porter::stem(w);
            if action == 0 && !server.contains(&s) {
                action = self.actions.get(&s).copied().unwrap_or(0);
            }
        });
        action
    }

    pub(super) fn build_typos(&mut self, raw_words: HashMap<String, u32>) {
        for (word, term) in raw_words {
            if word.len() < TYPO_MIN_LEN || !word.bytes().all(|b| b.is_ascii_lowercase()) {
                continue;
            }
            let id = self.words.len() as u32;
            for key in deletions(&word) {
                self.deletions.entry(key).or_default().push(id);
            }
            self.words.push((word, term));
        }
    }

    /// The catalog term one edit away from an unknown word, the most common
    /// if there are several.
    pub(super) fn correct(&self, word: &str) -> Option<&(String, u32)> {
        if word.len() < TYPO_MIN_LEN || !word.bytes().all(|b| b.is_ascii_lowercase()) {
            return None;
        }
        deletions(word)
            .filter_map(|k| self.deletions.get(&k))
            .flatten()
            .map(|&i| &self.words[i as usize])
            .filter(|(w, _)| one_edit(word.as_bytes(), w.as_bytes()))
            .max_by_key(|(w, t)| (self.postings[*t as usize].len(), std::cmp::Reverse(w)))
    }

    /// The alternatives a query word is looked up as, with their weights,
    /// and the actions it names.
    pub(super) fn expand(&self, word: &str) -> (Vec<(u32, f32)>, u64) {
        let stem = porter::stem(word);
        let mut alternatives = Vec::new();
        let mut weight = 1.0;
        let mut key = stem;
        if let Some(&t) = self.vocab.get(&key) {
            alternatives.push((t, 1.0));
        } else if !self.related.contains_key(&key)
            && let Some((corrected, t)) = self.correct(word)
        {
            weight = W_TYPO;
            alternatives.push((*t, weight));
            key = porter::stem(corrected);
        }
        let absent = if alternatives.is_empty() {
            ABSENT_BOOST
        } else {
            1.0
        };
        for &(t, w) in self.related.get(&key).into_iter().flatten() {
            let w = (w * weight * absent).min(1.0);
            match alternatives.iter_mut().find(|a| a.0 == t) {
                Some(a) => a.1 = a.1.max(w),
                None => alternatives.push((t, w)),
            }
        }
        (alternatives, self.actions.get(&key).copied().unwrap_or(0))
    }
}

/// `word` and each way of deleting one letter from it.
pub(super) fn deletions(word: &str) -> impl Iterator<Item = String> + '_ {
    std::iter::once(word.to_string()).chain((0..word.len()).map(|i| {
        let mut w = word.to_string();
        w.remove(i);
        w
    }))
}

/// Are `a` and `b` one insertion, deletion, substitution or transposition
/// of adjacent letters apart?
pub(super) fn one_edit(a: &[u8], b: &[u8]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let prefix = short.iter().zip(long).take_while(|(x, y)| x == y).count();
    match long.len() - short.len() {
        0 if prefix == short.len() => true,
        0 => {
            short[prefix + 1..] == long[prefix + 1..]
                || (prefix + 1 < short.len()
                    && short[prefix] == long[prefix + 1]
                    && short[prefix + 1] == long[prefix]
                    && short[prefix + 2..] == long[prefix + 2..])
        }
        1 => short[prefix..] == long[prefix + 1..],
        _ => false,
    }
}

/// The index of the latest snapshot searched, keyed by the snapshot's
/// version: built on the first search of a version (or ahead of it, by the
/// Embedder once a snapshot has stood for a moment), then only read. One
/// per daemon, beside the semantic stage's vectors, which are keyed the same
/// way; a snapshot carries no index of its own, so the catalog does not
/// depend on search.
#[derive(Default)]
pub struct LexicalIndexes {
    latest: arc_swap::ArcSwapOption<VersionedIndex>,
}

/// An index and the snapshot it was built from.
pub struct VersionedIndex {
    version: u64,
    tools: usize,
    pub index: Index,
}

impl LexicalIndexes {
    /// The index of `snapshot`, built now if the latest one is of another.
    pub fn for_snapshot(&self, snapshot: &Snapshot) -> Arc<VersionedIndex> {
        if let Some(latest) = self.latest.load_full()
            && latest.version == snapshot.version
            && latest.tools == snapshot.tools.len()
        {
            return latest;
        }
        let built = Arc::new(VersionedIndex {
            version: snapshot.version,
            tools: snapshot.tools.len(),
            index: Index::of(snapshot),
        });
        // A newer snapshot's index is never replaced by an older one's.
        self.latest.rcu(|current| match current {
            Some(c) if c.version > built.version => Some(c.clone()),
            _ => Some(built.clone()),
        });
        built
    }
}
