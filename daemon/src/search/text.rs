//! Reading text for search: the words of a query or a tool (phrases, product names,
//! identifiers split, stems), and the words its shape shows (a channel, a path, a link).

use super::lexicon::{PHRASES, PRONOUNS, STOPWORDS};
use super::{CLAUSE_ENDS, NEGATED_WORDS, NEGATIONS, porter};

/// Top-level domains: `name.com` is a site, `name.yaml` a file.
pub(super) const TLDS: &[&str] = &[
    "com", "org", "net", "io", "dev", "app", "ai", "co", "edu", "gov", "uk", "de", "fr",
];

/// Words for what the shape of a query's tokens shows: `#general` is a
/// channel, `+1 415 555 0134` a phone number, `models.py` a file,
/// `docs.example.com` a site, `https://…` a link, `~/code` a path, 🎉 an
/// emoji, `17.5% of 2340 + 12` arithmetic.
pub(super) fn shape_words(query: &str) -> Vec<&'static str> {
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
pub(super) fn spans(query: &str) -> Vec<(&str, bool)> {
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
pub(super) fn emoji(c: char) -> bool {
    matches!(c, '\u{1F300}'..='\u{1FAFF}' | '\u{2600}'..='\u{27BF}')
}

/// Does `text` look like a tool name: one word with `_` or a camelCase hump?
pub(super) fn identifier(text: &str) -> bool {
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
pub(super) fn squash(name: &str) -> String {
    squashed(name).collect()
}

pub(super) fn squashed(name: &str) -> impl Iterator<Item = char> + '_ {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
}

/// `query` with each phrase of [`PHRASES`] replaced by its word.
pub(super) fn rewrite_phrases(query: &str) -> String {
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
pub(super) fn phrase_len(phrase: &str, words: &[&str]) -> Option<usize> {
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
pub(super) fn for_each_chunk(text: &str, mut f: impl FnMut(&str, &[&str])) {
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
pub(super) fn product_name(chunk: &str, parts: &[&str]) -> bool {
    (2..=3).contains(&parts.len())
        && chunk.chars().all(char::is_alphabetic)
        && (chunk.starts_with(char::is_uppercase) || parts[0].len() <= 2)
}

/// `word` lowercase, unless it is a stopword, a single letter or a number.
pub(super) fn keep(word: &str) -> Option<String> {
    let word = word.to_lowercase();
    let useful = word.chars().nth(1).is_some()
        && !word.chars().all(|c| c.is_ascii_digit())
        && !STOPWORDS.contains(&word.as_str());
    useful.then_some(word)
}

/// Calls `emit` with each search word of `text`, lowercase: the parts of
/// each chunk (see [`for_each_chunk`]) and, for a product name, the whole of
/// it too, so "GitHub" meets both "github" and "git hub".
pub(super) fn for_each_word(text: &str, mut emit: impl FnMut(&str)) {
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

/// Splits text into search terms: the words of `for_each_word`, stemmed so
/// "files", "filed" and "file" meet.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, |w| out.push(porter::stem(w)));
    out
}
