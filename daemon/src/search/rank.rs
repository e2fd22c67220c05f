//! Scoring a query against the index: BM25F over the expanded query words, coverage
//! and name bonuses.

use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};

use super::index::Index;
use super::text::{
    for_each_chunk, identifier, keep, product_name, rewrite_phrases, shape_words, spans, squash,
    squashed,
};
use super::{
    ACTION_MATCH, COVERAGE, NAME_COVERAGE, SERVER_NAMED, W_TYPO, W_VALUE, name_like, porter,
};
use crate::catalog::snapshot::Snapshot;

impl Index {
    /// The words a query is looked up by, each with its weight: phrases
    /// read as their word ("get rid of" → delete), a product name whole when
    /// the catalog knows it ("GitHub" → github), and two words the catalog
    /// writes as one after them ("work log" → worklog). Words that only give
    /// a value or say what not to do (see [`spans`]) weigh [`W_VALUE`].
    pub(super) fn query_words(&self, query: &str) -> Vec<(String, f32)> {
        let known = |w: &str| self.vocab.contains_key(&porter::stem(w));
        let mut words: Vec<(String, f32)> = Vec::new();
        for (span, value) in spans(query) {
            let weight = if value { W_VALUE } else { 1.0 };
            for_each_chunk(&rewrite_phrases(span), |chunk, parts| {
                if product_name(chunk, parts)
                    && let Some(w) = keep(chunk).filter(|w| known(w))
                {
                    words.push((w, weight));
                } else {
                    words.extend(parts.iter().filter_map(|p| Some((keep(p)?, weight))));
                }
            });
        }
        let mut out: Vec<(String, f32)> = Vec::with_capacity(words.len() + 4);
        let mut push = |w: String, weight: f32| match out.iter_mut().find(|o| o.0 == w) {
            Some(o) => o.1 = o.1.max(weight),
            None => out.push((w, weight)),
        };
        // "markdown to rst", "usd to eur": a terse query naming two forms of
        // one thing asks to convert between them.
        if let [_, to, _] = query.split_whitespace().collect::<Vec<_>>()[..]
            && (to.eq_ignore_ascii_case("to") || to.eq_ignore_ascii_case("into"))
        {
            push("convert".into(), 1.0);
        }
        for w in shape_words(query) {
            push(w.into(), 1.0);
        }
        for (i, (w, weight)) in words.iter().enumerate() {
            push(w.clone(), *weight);
            if i > 0 {
                let (before, weight_before) = &words[i - 1];
                let compound = format!("{before}{w}");
                if known(&compound) {
                    push(compound, weight.min(*weight_before));
                }
            }
        }
        out
    }

    /// Per document, the lexical score of `query`: BM25F over each query
    /// word's alternatives (the best one counts), scaled up for documents
    /// that cover more of the query, whose name the query covers, and whose
    /// name does what the query asks first.
    pub(super) fn score_words(&self, query: &str) -> Vec<f32> {
        let n = self.names.len();
        let mut scores = vec![0.0f32; n];
        // Per document: how many query words it matches, and how much of its
        // name they match (a related word counts for its weight).
        let mut covered = vec![0.0f32; n];
        let mut name_covered = vec![0.0f32; n];
        // Per document, for the current query word: best score, best name match.
        let mut best = vec![(0.0f32, 0.0f32); n];
        let mut touched: Vec<u32> = Vec::new();
        let mut looked_up = 0.0;
        // Later verbs are often part of the object ("set up a meeting to
        // review the budget"): the first one says what to do.
        let mut asked_action = 0;
        // Terms that stand for a word of the query itself, not a related one.
        let mut said: Vec<u32> = Vec::new();
        for (word, weight) in self.query_words(query) {
            let (alternatives, actions) = self.expand(&word);
            // A past tense tells what happened ("I closed it by accident,
            // bring it back"), not what to do; nor does a value.
            let past = word.len() > 4 && word.ends_with("ed");
            let intent = weight == 1.0;
            if asked_action == 0 && !past && intent {
                asked_action = actions;
            }
            if intent {
                said.extend(alternatives.iter().filter(|a| a.1 >= W_TYPO).map(|a| a.0));
            }
            if alternatives.is_empty() {
                continue;
            }
            looked_up += weight;
            for (t, w) in alternatives {
                let w = w * weight;
                let idf = self.idf[t as usize];
                for p in &self.postings[t as usize] {
                    let b = &mut best[p.doc as usize];
                    if b.0 == 0.0 {
                        touched.push(p.doc);
                    }
                    b.0 = b.0.max(w * idf * p.tf);
                    if p.in_name {
                        b.1 = b.1.max(w);
                    }
                }
            }
            for &d in &touched {
                let d = d as usize;
                scores[d] += best[d].0;
                name_covered[d] += best[d].1;
                covered[d] += weight;
                best[d] = (0.0, 0.0);
            }
            touched.clear();
        }
        for d in 0..n {
            if scores[d] > 0.0 {
                let mut boost = 1.0 + COVERAGE * covered[d] / looked_up;
                if self.name_lens[d] > 0.0 {
                    boost += NAME_COVERAGE * (name_covered[d] / self.name_lens[d]).min(1.0);
                }
                if asked_action & self.doc_actions[d] != 0 {
                    boost += ACTION_MATCH;
                }
                // A factor of its own, so it keeps the order of the server's tools.
                if self.server_terms[d].iter().any(|t| said.contains(t)) {
                    boost *= 1.0 + SERVER_NAMED;
                }
                scores[d] *= boost;
            }
        }
        scores
    }
}

/// Exact, prefix and fuzzy matches of a query that is (part of) a tool name.
pub(super) fn add_name_bonuses(
    index: &Index,
    snapshot: &Snapshot,
    query: &str,
    scores: &mut [f32],
) {
    // A name is often quoted: `git_status`, "list_issues".
    let query = query.trim_matches(|c: char| "'\"`‘’“”".contains(c));
    let lower = query.to_lowercase();
    let mut matcher = name_like(query).then(|| Matcher::new(Config::DEFAULT));
    let pattern = Pattern::parse(&lower, CaseMatching::Ignore, Normalization::Smart);
    let mut buf = Vec::new();
    // Tool names written inside a sentence: "what does `create_event` take?"
    let named: Vec<String> = if name_like(query) {
        Vec::new()
    } else {
        query
            .split_whitespace()
            .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
            .filter(|t| t.len() >= 4 && identifier(t))
            .map(squash)
            .collect()
    };
    for (i, (e, (name, base))) in snapshot.tools.iter().zip(&index.names).enumerate() {
        let mut bonus = 0.0;
        if *name == lower || *base == lower {
            bonus += 100.0;
        } else if name.starts_with(&lower) || base.starts_with(&lower) {
            bonus += 20.0;
        } else if name.contains(&lower) && lower.len() >= 3 {
            bonus += 8.0;
        }
        if named
            .iter()
            .any(|w| squashed(name).eq(w.chars()) || squashed(base).eq(w.chars()))
        {
            bonus += 50.0;
        }
        if let Some(m) = matcher.as_mut()
            && let Some(s) = pattern.score(Utf32Str::new(&e.name, &mut buf), m)
        {
            bonus += (s as f32 / (8.0 * lower.len().max(1) as f32)).min(6.0);
        }
        scores[i] += bonus;
    }
}
