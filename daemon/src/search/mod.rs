//! Tool search: a BM25F ranking over each tool's name, server, summary,
//! description and parameters, widened by a small lexicon of the words people
//! use for the same action or thing, with typo tolerance, a bonus for
//! documents that cover more of the query and for tools whose name does what
//! the query asks, and fuzzy name matching (nucleo-matcher) for queries that
//! look like tool names. The [`Index`] is built once per catalog snapshot; a
//! query only reads it.

mod lexicon;
mod porter;

use std::collections::HashMap;
use std::sync::Arc;

use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::catalog::snapshot::{Snapshot, ToolEntry};
use lexicon::{ACTIONS, ALIASES, PACKAGING, PHRASES, PRONOUNS, STOPWORDS, THINGS};

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

/// Top-level domains: `name.com` is a site, `name.yaml` a file.
const TLDS: &[&str] = &[
    "com", "org", "net", "io", "dev", "app", "ai", "co", "edu", "gov", "uk", "de", "fr",
];

/// Words for what the shape of a query's tokens shows: `#general` is a
/// channel, `+1 415 555 0134` a phone number, `models.py` a file,
/// `docs.example.com` a site, `https://…` a link, `~/code` a path, 🎉 an
/// emoji, `17.5% of 2340 + 12` arithmetic.
fn shape_words(query: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut add = |w: &'static str| {
        if !out.contains(&w) {
            out.push(w);
        }
    };
    let mut digits_run = 0;
    let mut arithmetic = false;
    for token in query.split_whitespace() {
        let t = token.trim_matches(|c: char| ",;:!?()\"'`".contains(c));
        let bytes = t.as_bytes();
        if bytes.len() > 1 && bytes[0] == b'#' && bytes[1].is_ascii_alphabetic() {
            add("channel");
        }
        let lower = t.to_ascii_lowercase();
        if lower.starts_with("http://")
            || lower.starts_with("https://")
            || lower.starts_with("www.")
        {
            add("url");
            add("link");
        } else if (t.starts_with("~/") || t.starts_with("./") || t.starts_with('/'))
            && t[1..].contains(|c: char| c.is_alphanumeric())
        {
            add("path");
        }
        if t.chars().any(emoji)
            || (t.len() > 2
                && t.starts_with(':')
                && t.ends_with(':')
                && t[1..t.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'))
        {
            add("emoji");
        }
        let digits = t.chars().filter(char::is_ascii_digit).count();
        if digits > 0 && t.chars().all(|c| c.is_ascii_digit() || "+-().".contains(c)) {
            digits_run += digits;
            if digits_run >= 10 || (t.starts_with('+') && digits >= 1 && digits_run >= 7) {
                add("phone");
            }
        } else {
            digits_run = 0;
        }
        if ["+", "-", "*", "/", "=", "x", "×", "÷"].contains(&t)
            || (t.ends_with('%') && t[..t.len() - 1].parse::<f64>().is_ok())
        {
            arithmetic = true;
        }
        // A dotfile: `.env`, `.gitignore`.
        if t.len() > 2 && t.starts_with('.') && t[1..].bytes().all(|b| b.is_ascii_alphanumeric()) {
            add("file");
        }
        if let Some((stem, ext)) = t.rsplit_once('.')
            && stem.len() >= 2
            && !stem.contains('@')
            // "Node.js", "Next.js": products, not files.
            && !(ext == "js" && stem.starts_with(char::is_uppercase))
            && !stem.contains("://")
            && (1..=5).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && ext.chars().any(|c| c.is_ascii_alphabetic())
            && stem.chars().next().is_some_and(char::is_alphanumeric)
        {
            if TLDS.contains(&ext.to_ascii_lowercase().as_str()) {
                add("website");
            } else {
                add("file");
            }
        }
    }
    if arithmetic && query.chars().any(|c| c.is_ascii_digit()) {
        add("calculate");
    }
    out
}

/// The query cut into spans, each marked whether it only gives a value:
/// text in quotes ('k8s cheatsheet', "colour", `env`) is what to look for or
/// write, and a clause after a negation ("I don't want them deleted") says
/// what not to do. Neither says which tool to use.
fn spans(query: &str) -> Vec<(&str, bool)> {
    let chars: Vec<(usize, char)> = query.char_indices().collect();
    let alnum = |i: usize| chars.get(i).is_some_and(|c| c.1.is_alphanumeric());
    // An apostrophe inside a word: "don't", "Marco's".
    let inner = |i: usize| i > 0 && alnum(i - 1) && alnum(i + 1);
    let mut value = vec![false; chars.len()];
    // Quotes first.
    let mut closing: Option<(char, usize)> = None;
    for (i, &(_, c)) in chars.iter().enumerate() {
        if let Some((close, opened)) = closing {
            if c == close && !inner(i) {
                closing = None;
                // A quoted identifier is the tool asked for, not a value.
                if identifier(&query[chars[opened + 1].0..chars[i].0]) {
                    value[opened + 1..i].iter_mut().for_each(|v| *v = false);
                }
            } else {
                value[i] = true;
            }
            continue;
        }
        let close = match c {
            '"' | '`' => Some(c),
            '“' => Some('”'),
            '\'' | '‘' | '’' if !(i > 0 && alnum(i - 1)) && alnum(i + 1) => {
                Some(if c == '\'' { '\'' } else { '’' })
            }
            _ => None,
        };
        closing = close.map(|c| (c, i));
    }
    // Then negated clauses, over the words outside quotes.
    let mut left = 0; // words left in the current negated clause
    let mut gap = 0; // where the space after the previous word starts
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i].1;
        if !c.is_alphanumeric() {
            if ",;:.!?()".contains(c) && !inner(i) {
                left = 0;
            }
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (alnum(i) || (matches!(chars[i].1, '\'' | '’') && inner(i))) {
            i += 1;
        }
        if value[start] {
            gap = i;
            continue;
        }
        let word: String = chars[start..i]
            .iter()
            .filter(|c| c.1.is_alphanumeric())
            .map(|c| c.1.to_ascii_lowercase())
            .collect();
        if left > 0 && CLAUSE_ENDS.contains(&word.as_str()) {
            left = 0;
        } else if left > 0 {
            // The gap after the clause's previous word too, so it is one span.
            let from = if left < NEGATED_WORDS { gap } else { start };
            value[from..i].iter_mut().for_each(|v| *v = true);
            left -= 1;
        } else if NEGATIONS.contains(&word.as_str()) {
            // "Never mind" is a phrase: cancel.
            let rest = query[chars.get(i).map_or(query.len(), |c| c.0)..].trim_start();
            let mind = rest
                .get(..4)
                .is_some_and(|r| r.eq_ignore_ascii_case("mind"));
            left = if mind { 0 } else { NEGATED_WORDS };
        }
        gap = i;
    }
    let mut out = Vec::new();
    let mut from = 0;
    for i in 1..=chars.len() {
        if i == chars.len() || value[i] != value[from] {
            let end = chars.get(i).map_or(query.len(), |c| c.0);
            out.push((&query[chars[from].0..end], value[from]));
            from = i;
        }
    }
    out
}

/// Is `c` an emoji (the pictographic blocks and dingbats)?
fn emoji(c: char) -> bool {
    matches!(c, '\u{1F300}'..='\u{1FAFF}' | '\u{2600}'..='\u{27BF}')
}

/// Does `text` look like a tool name: one word with `_` or a camelCase hump?
fn identifier(text: &str) -> bool {
    let word = text
        .chars()
        .all(|c| c.is_alphanumeric() || "_-.".contains(c));
    let snake = text.contains('_');
    let camel = text
        .chars()
        .zip(text.chars().skip(1))
        .any(|(a, b)| a.is_lowercase() && b.is_uppercase());
    word && (snake || camel)
}

/// A name lowercase without separators: `create-event`, `create_event` and
/// `createEvent` are one name.
fn squash(name: &str) -> String {
    squashed(name).collect()
}

fn squashed(name: &str) -> impl Iterator<Item = char> + '_ {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
}

/// `query` with each phrase of [`PHRASES`] replaced by its word.
fn rewrite_phrases(query: &str) -> String {
    let words: Vec<&str> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = String::with_capacity(query.len());
    let mut i = 0;
    while i < words.len() {
        match PHRASES
            .iter()
            .find_map(|(p, word)| Some((phrase_len(p, &words[i..])?, word)))
        {
            Some((n, word)) => {
                out.push_str(word);
                i += n;
            }
            None => {
                out.push_str(words[i]);
                i += 1;
            }
        }
        out.push(' ');
    }
    out
}

/// How many of `words` the phrase spans when they start with it. A verb and
/// its particle may have a pronoun between them: "bring it back".
fn phrase_len(phrase: &str, words: &[&str]) -> Option<usize> {
    let same = |p: &str, w: &&str| p.eq_ignore_ascii_case(w);
    let n = phrase.split(' ').count();
    if words.len() >= n && phrase.split(' ').zip(words).all(|(p, w)| same(p, w)) {
        return Some(n);
    }
    let (verb, particle) = phrase.split_once(' ')?;
    let separable = n == 2
        && words.len() >= 3
        && same(verb, &words[0])
        && PRONOUNS.iter().any(|p| same(p, &words[1]))
        && same(particle, &words[2]);
    separable.then_some(3)
}

/// Calls `f` with each chunk of `text` between non-alphanumerics and the
/// chunk's parts: split on camelCase and acronym boundaries ("getURLInfo" →
/// get, URL, Info) and between letters and digits, except in short names
/// like "s3", "k8s" or "mp4".
fn for_each_chunk(text: &str, mut f: impl FnMut(&str, &[&str])) {
    let mut parts = Vec::new();
    for chunk in text.split(|c: char| !c.is_alphanumeric()) {
        if chunk.is_empty() {
            continue;
        }
        parts.clear();
        let mixed = chunk.chars().any(char::is_numeric) && chunk.chars().any(char::is_alphabetic);
        if mixed && chunk.chars().count() <= 4 {
            parts.push(chunk);
            f(chunk, &parts);
            continue;
        }
        let chars: Vec<(usize, char)> = chunk.char_indices().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (p, c) = (chars[i - 1].1, chars[i].1);
            let next_lower = chars.get(i + 1).is_some_and(|&(_, n)| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower)
                || (p.is_alphabetic() && c.is_numeric())
                || (p.is_numeric() && c.is_alphabetic());
            if boundary {
                parts.push(&chunk[start..chars[i].0]);
                start = chars[i].0;
            }
        }
        parts.push(&chunk[start..]);
        f(chunk, &parts);
    }
}

/// Is this chunk a product name written in mixed case ("GitHub",
/// "PagerDuty", "arXiv"), which people also write as one word, rather than
/// an identifier like "getIssue"?
fn product_name(chunk: &str, parts: &[&str]) -> bool {
    (2..=3).contains(&parts.len())
        && chunk.chars().all(char::is_alphabetic)
        && (chunk.starts_with(char::is_uppercase) || parts[0].len() <= 2)
}

/// `word` lowercase, unless it is a stopword, a single letter or a number.
fn keep(word: &str) -> Option<String> {
    let word = word.to_lowercase();
    let useful = word.chars().nth(1).is_some()
        && !word.chars().all(|c| c.is_ascii_digit())
        && !STOPWORDS.contains(&word.as_str());
    useful.then_some(word)
}

/// Calls `emit` with each search word of `text`, lowercase: the parts of
/// each chunk (see [`for_each_chunk`]) and, for a product name, the whole of
/// it too, so "GitHub" meets both "github" and "git hub".
fn for_each_word(text: &str, mut emit: impl FnMut(&str)) {
    for_each_chunk(text, |chunk, parts| {
        for w in parts.iter().filter_map(|p| keep(p)) {
            emit(&w);
        }
        if product_name(chunk, parts)
            && let Some(w) = keep(chunk)
        {
            emit(&w);
        }
    });
}

/// Splits text into search terms: the words of [`for_each_word`], stemmed so
/// "files", "filed" and "file" meet.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, |w| out.push(porter::stem(w)));
    out
}

/// Parameter names, enum values and descriptions of a schema's top-level
/// properties.
fn param_texts(schema: &JsonObject) -> (Vec<&str>, Vec<&str>, Vec<String>) {
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
fn server_terms(tools: &[Arc<ToolEntry>], docs: &[DocTerms]) -> Vec<Box<[u32]>> {
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
struct Posting {
    doc: u32,
    /// Saturated BM25F term frequency: everything but the query's weights,
    /// worked out at build time.
    tf: f32,
    /// Is the term one of the words of the tool's name?
    in_name: bool,
}

/// A tool's words, counted per field, while the index is built.
struct DocTerms {
    tf: HashMap<u32, [u16; FIELD_COUNT]>,
    len: [f32; FIELD_COUNT],
    /// Terms of the name that are not its server's words ("linear" in
    /// `linear_createIssue`).
    name_terms: Vec<u32>,
    /// Terms of its server's id and domain.
    server_terms: Vec<u32>,
}

impl DocTerms {
    /// Counts the words of `text` in `field`; `raw_words` remembers each
    /// unstemmed word's term, which also saves stemming it again.
    fn add(
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
    vocab: HashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
    idf: Vec<f32>,
    /// Per stem: other terms the lexicon says a query word also means, with
    /// their query weight.
    related: HashMap<String, Vec<(u32, f32)>>,
    /// Per stem: the [`ACTIONS`] groups (one bit each) it belongs to.
    actions: HashMap<String, u64>,
    /// Per document: the action its name names first, as [`ACTIONS`] bits.
    doc_actions: Vec<u64>,
    /// Per document: how many distinct terms its name has, server words aside.
    name_lens: Vec<f32>,
    /// Per document: the terms of its server id and domain that name few
    /// servers (see [`SERVER_NAMED_MAX`]).
    server_terms: Vec<Box<[u32]>>,
    /// Per document: lowercase exposed and upstream names.
    names: Vec<(String, String)>,
    /// The catalog's words (unstemmed), with their term, for typo correction.
    words: Vec<(String, u32)>,
    /// Each long word and its one-letter deletions → words: two words one
    /// edit apart share a key (symmetric-delete spelling correction).
    deletions: HashMap<String, Vec<u32>>,
}

impl Index {
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
            add(&mut doc, &entry.upstream, Field::Name);
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
            .map(|e| (e.name.to_lowercase(), e.upstream.to_lowercase()))
            .collect();
        index.build_typos(raw_words);
        index
    }

    /// BM25F: each field's count is normalised by that field's length
    /// against its average, the weighted sum saturates once.
    fn finish_postings(&mut self, docs: &[DocTerms]) {
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
    fn build_lexicon(&mut self) {
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
    fn name_action(&self, entry: &ToolEntry) -> u64 {
        let server = tokenize(&entry.server.id);
        let mut action = 0;
        for_each_word(&entry.upstream, |w| {
            let s = porter::stem(w);
            if action == 0 && !server.contains(&s) {
                action = self.actions.get(&s).copied().unwrap_or(0);
            }
        });
        action
    }

    fn build_typos(&mut self, raw_words: HashMap<String, u32>) {
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
    fn correct(&self, word: &str) -> Option<&(String, u32)> {
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
    fn expand(&self, word: &str) -> (Vec<(u32, f32)>, u64) {
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
fn deletions(word: &str) -> impl Iterator<Item = String> + '_ {
    std::iter::once(word.to_string()).chain((0..word.len()).map(|i| {
        let mut w = word.to_string();
        w.remove(i);
        w
    }))
}

/// Are `a` and `b` one insertion, deletion, substitution or transposition
/// of adjacent letters apart?
fn one_edit(a: &[u8], b: &[u8]) -> bool {
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
    /// Servers the query names by id or capability that have listed no
    /// tools (down, failed, still starting): a sentence each.
    pub unavailable: Vec<String>,
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
    snapshot
        .unlisted
        .iter()
        .filter_map(|link| {
            let capabilities = snapshot
                .capabilities
                .iter()
                .find(|(id, _)| *id == link.id)
                .map(|(_, c)| c.as_slice())
                .unwrap_or_default();
            if !(named(&link.id) || capabilities.iter().any(|c| named(c))) {
                return None;
            }
            let having = if capabilities.is_empty() {
                String::new()
            } else {
                format!(" (capabilities: {})", capabilities.join(", "))
            };
            Some(format!(
                "Server '{}'{having} has no tools listed: it is {}. Its tools become searchable once it runs; a person can check `evoctl status` and run `evoctl refresh {}`.",
                link.id,
                link.state().as_str(),
                link.id
            ))
        })
        .collect()
}

/// Does the query look like (part of) a tool name rather than a sentence?
fn name_like(query: &str) -> bool {
    !query.contains(char::is_whitespace) && query.len() <= 80
}

/// The lowest score kept, as a fraction of the best match's. On the tuned
/// query sets every expected tool in a top 5 scores at least 0.26 of the
/// best; a tenth of all fifth places score under 0.28, down to 0.03.
const MIN_RELATIVE_SCORE: f32 = 0.15;

/// Ranks the snapshot's tools for `query`.
pub fn search(snapshot: &Snapshot, query: &str, limit: usize, domain: Option<&str>) -> Outcome {
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
    let index = &*snapshot.search;
    let mut scores = index.score_words(query);
    add_name_bonuses(index, snapshot, query, &mut scores);
    let mut ranked: Vec<(u32, f32)> = scores
        .into_iter()
        .enumerate()
        .filter(|&(d, s)| {
            s > 0.0 && domain.is_none_or(|dm| snapshot.tools[d].domain.eq_ignore_ascii_case(dm))
        })
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

impl Index {
    /// The words a query is looked up by, each with its weight: phrases
    /// read as their word ("get rid of" → delete), a product name whole when
    /// the catalog knows it ("GitHub" → github), and two words the catalog
    /// writes as one after them ("work log" → worklog). Words that only give
    /// a value or say what not to do (see [`spans`]) weigh [`W_VALUE`].
    fn query_words(&self, query: &str) -> Vec<(String, f32)> {
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
    fn score_words(&self, query: &str) -> Vec<f32> {
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
fn add_name_bonuses(index: &Index, snapshot: &Snapshot, query: &str, scores: &mut [f32]) {
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
    for (i, (e, (name, upstream))) in snapshot.tools.iter().zip(&index.names).enumerate() {
        let mut bonus = 0.0;
        if *name == lower || *upstream == lower {
            bonus += 100.0;
        } else if name.starts_with(&lower) || upstream.starts_with(&lower) {
            bonus += 20.0;
        } else if name.contains(&lower) && lower.len() >= 3 {
            bonus += 8.0;
        }
        if named
            .iter()
            .any(|w| squashed(name).eq(w.chars()) || squashed(upstream).eq(w.chars()))
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

/// One line a hit: `name — summary (domain) score`.
pub fn render(outcome: &Outcome) -> String {
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
        let outcome = search(&snapshot, "convert a time between timezones", 5, None);
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
        let outcome = search(snapshot, query, 5, None);
        outcome
            .hits
            .first()
            .map(|h| h.entry.name.clone())
            .unwrap_or_default()
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
            let outcome = search(&snapshot, &query, 5, None);
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
                "discord_discord_delete_message",
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
                "discord_discord_delete_message",
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
            let outcome = search(&snap, query, 5, domain);
            assert!(
                outcome.hits.is_empty() && outcome.reason.is_some(),
                "{query:.20}"
            );
        }
        assert!(search(&snap, "zzzz qqqq", 5, None).reason.is_some());
        assert_eq!(search(&snap, "issues", 5, Some("github")).hits.len(), 2);
    }
}
