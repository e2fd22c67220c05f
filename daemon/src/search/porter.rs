/// The Porter (1980) stemmer, so "deleting", "deleted" and "deletes" all
/// meet at "delet". Words with digits or non-ASCII letters, and words of two
/// letters or fewer, are kept as they are.
pub fn stem(word: &str) -> String {
    if word.len() <= 2 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_string();
    }
    let mut w = word.as_bytes().to_vec();
    step1ab(&mut w);
    if w.ends_with(b"y") && has_vowel(&w[..w.len() - 1]) {
        *w.last_mut().unwrap() = b'i';
    }
    replace_first(&mut w, STEP2);
    replace_first(&mut w, STEP3);
    step4(&mut w);
    if w.ends_with(b"e") {
        let m = measure(&w[..w.len() - 1]);
        if m > 1 || (m == 1 && !cvc(&w[..w.len() - 1])) {
            w.pop();
        }
    }
    if w.ends_with(b"ll") && measure(&w) > 1 {
        w.pop();
    }
    // Porter keeps the e of a short "queue" but not of "queued".
    if w.ends_with(b"ue") {
        w.pop();
    }
    String::from_utf8(w).unwrap_or_else(|_| word.to_string())
}

const STEP2: &[(&str, &str)] = &[
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
];

const STEP3: &[(&str, &str)] = &[
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
];

const STEP4: &[&str] = &[
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
];

fn is_consonant(w: &[u8], i: usize) -> bool {
    match w[i] {
        b'a' | b'e' | b'i' | b'o' | b'u' => false,
        b'y' => i == 0 || !is_consonant(w, i - 1),
        _ => true,
    }
}

/// The number of vowel-consonant sequences in `w`: `[C](VC){m}[V]`.
fn measure(w: &[u8]) -> usize {
    let n = w.len();
    let mut i = 0;
    while i < n && is_consonant(w, i) {
        i += 1;
    }
    let mut m = 0;
    loop {
        while i < n && !is_consonant(w, i) {
            i += 1;
        }
        if i >= n {
            return m;
        }
        while i < n && is_consonant(w, i) {
            i += 1;
        }
        m += 1;
    }
}

fn has_vowel(w: &[u8]) -> bool {
    (0..w.len()).any(|i| !is_consonant(w, i))
}

/// Ends consonant-vowel-consonant, the last not w, x or y ("hop", not "how").
fn cvc(w: &[u8]) -> bool {
    let n = w.len();
    n >= 3
        && is_consonant(w, n - 3)
        && !is_consonant(w, n - 2)
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], b'w' | b'x' | b'y')
}

fn step1ab(w: &mut Vec<u8>) {
    if w.ends_with(b"sses") || w.ends_with(b"ies") {
        w.truncate(w.len() - 2);
    } else if w.ends_with(b"s") && !w.ends_with(b"ss") {
        w.pop();
    }
    if w.ends_with(b"eed") {
        if measure(&w[..w.len() - 3]) > 0 {
            w.pop();
        }
        return;
    }
    let cut = if w.ends_with(b"ed") {
        2
    } else if w.ends_with(b"ing") {
        3
    } else {
        return;
    };
    if !has_vowel(&w[..w.len() - cut]) {
        return;
    }
    w.truncate(w.len() - cut);
    let n = w.len();
    if w.ends_with(b"at") || w.ends_with(b"bl") || w.ends_with(b"iz") {
        w.push(b'e');
    } else if n >= 2
        && w[n - 1] == w[n - 2]
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], b'l' | b's' | b'z')
    {
        w.pop();
    } else if measure(w) == 1 && cvc(w) {
        w.push(b'e');
    }
}

/// Replaces the longest listed suffix when the rest has a measure above
/// zero; a matching suffix whose rest is too short ends the step.
fn replace_first(w: &mut Vec<u8>, rules: &[(&str, &str)]) {
    let best = rules
        .iter()
        .filter(|(s, _)| w.ends_with(s.as_bytes()))
        .max_by_key(|(s, _)| s.len());
    if let Some((suffix, with)) = best {
        let stem = w.len() - suffix.len();
        if measure(&w[..stem]) > 0 {
            w.truncate(stem);
            w.extend_from_slice(with.as_bytes());
        }
    }
}

fn step4(w: &mut Vec<u8>) {
    let best = STEP4
        .iter()
        .filter(|s| w.ends_with(s.as_bytes()))
        .max_by_key(|s| s.len());
    if let Some(suffix) = best {
        let stem = w.len() - suffix.len();
        let ion_ok = *suffix != "ion" || (stem > 0 && matches!(w[stem - 1], b's' | b't'));
        if ion_ok && measure(&w[..stem]) > 1 {
            w.truncate(stem);
        }
    }
}
