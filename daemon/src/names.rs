//! The one name sanitiser: turns a server prefix and an upstream tool name into the name a
//! client sees.
//!
//! Exposed names match `^[a-zA-Z0-9_-]{1,64}$`, the limit common model APIs enforce
//! (docs/configuration.md, "Names"). Every character outside that set becomes `_`; a name
//! longer than [`MAX_NAME_LEN`] is cut and ends in `_` plus 6 hex digits of the SHA-256 of the full,
//! unsanitised name, so it is stable across runs and distinct long names stay distinct.
//! Collisions that remain (two raw names that sanitise alike) are the catalog's to resolve.

use sha2::{Digest, Sha256};

/// Longest exposed name, in characters (all of them ASCII, so also in bytes).
pub const MAX_NAME_LEN: usize = 64;

/// Hex digits of the hash that end a shortened name.
const HASH_DIGITS: usize = 6;
/// Characters kept from the front of a name too long to keep whole: 57, so that with `_` and
/// the hash digits the result is exactly [`MAX_NAME_LEN`].
const KEPT_LEN: usize = MAX_NAME_LEN - 1 - HASH_DIGITS;

/// The name a proxied tool is exposed under: `{prefix}_{tool}`, or `tool` alone when the
/// prefix is empty, sanitised. Always satisfies [`is_valid`].
pub fn exposed_name(prefix: &str, tool: &str) -> String {
    sanitize(&joined(prefix, tool))
}

/// `{prefix}_{tool}` (or `tool` alone) before sanitising: what [`exposed_name`] keeps whole
/// when it is already valid, so a name a person chose can be checked to fit.
pub fn joined(prefix: &str, tool: &str) -> String {
    if prefix.is_empty() || carries_prefix(prefix, tool) {
        tool.to_owned()
    } else {
        format!("{prefix}_{tool}")
    }
}

/// For a tool whose name already starts with its prefix and `_` (`git_log`
/// of server `git`), which is exposed once (`git_log`): the doubled form
/// (`git_git_log`), which still routes to it.
pub fn doubled_name(prefix: &str, tool: &str) -> Option<String> {
    carries_prefix(prefix, tool).then(|| sanitize(&format!("{prefix}_{tool}")))
}

/// Whether `tool` is `{prefix}_…` with something after the separator.
fn carries_prefix(prefix: &str, tool: &str) -> bool {
    !prefix.is_empty()
        && tool
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|rest| !rest.is_empty())
}

/// Makes `raw` a valid name: characters outside `[a-zA-Z0-9_-]` become `_` (one per character,
/// not per byte), an empty name becomes `_`, and a name over [`MAX_NAME_LEN`] characters keeps
/// its first 57 and ends in `_` plus 6 lowercase hex digits of the SHA-256 of `raw`.
///
/// Idempotent: a valid name is returned unchanged.
pub fn sanitize(raw: &str) -> String {
    let mut name = underscored(raw);
    if name.is_empty() {
        name.push('_');
    } else if name.len() > MAX_NAME_LEN {
        // Every char is ASCII now, so byte and char positions agree.
        name.truncate(KEPT_LEN);
        name.push('_');
        let digest = Sha256::digest(raw.as_bytes());
        for byte in digest.iter().take(HASH_DIGITS / 2) {
            name.push(hex_digit(byte >> 4));
            name.push(hex_digit(byte & 0x0f));
        }
    }
    name
}

/// `raw` with every character outside `[a-zA-Z0-9_-]` made `_` (one per character), and
/// nothing else changed: also what makes a server id safe in a file name.
pub fn underscored(raw: &str) -> String {
    raw.chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect()
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len()) && name.chars().all(is_name_char)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0x0f)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_carries_its_prefix_is_not_doubled() {
        assert_eq!(exposed_name("git", "git_log"), "git_log");
        assert_eq!(
            doubled_name("git", "git_log").as_deref(),
            Some("git_git_log")
        );
        assert_eq!(exposed_name("git", "log"), "git_log");
        assert_eq!(doubled_name("git", "log"), None);
        // Only the whole prefix and its separator count.
        assert_eq!(exposed_name("git", "github_x"), "git_github_x");
        assert_eq!(exposed_name("git", "git_"), "git_git_");
        assert_eq!(exposed_name("", "git_log"), "git_log");
        assert_eq!(doubled_name("", "git_log"), None);
    }

    #[test]
    fn characters_outside_the_set_become_underscores() {
        let cases = [
            ("read_file", "read_file"),
            ("get-time", "get-time"),
            ("ABC123", "ABC123"),
            ("read file", "read_file"),
            ("files.read", "files_read"),
            ("a/b:c@d", "a_b_c_d"),
            ("héllo", "h_llo"),
            ("日本", "__"),
            ("emoji🙂", "emoji_"),
            ("tab\tnew\nline", "tab_new_line"),
            ("", "_"),
            ("   ", "___"),
        ];
        for (raw, expected) in cases {
            assert_eq!(sanitize(raw), expected, "{raw:?}");
        }
    }

    #[test]
    fn exposed_name_joins_prefix_and_tool() {
        let cases = [
            ("fs", "read_file", "fs_read_file"),
            ("", "read_file", "read_file"),
            ("my server", "do.it", "my_server_do_it"),
            ("gh", "", "gh_"),
            ("", "", "_"),
        ];
        for (prefix, tool, expected) in cases {
            assert_eq!(exposed_name(prefix, tool), expected, "{prefix:?} {tool:?}");
        }
    }

    #[test]
    fn sixty_four_is_the_boundary() {
        let exact = "a".repeat(MAX_NAME_LEN);
        assert_eq!(sanitize(&exact), exact);
        assert!(is_valid(&exact));

        let over = "a".repeat(MAX_NAME_LEN + 1);
        let short = sanitize(&over);
        assert_eq!(short.len(), MAX_NAME_LEN);
        assert_eq!(&short[..KEPT_LEN], &over[..KEPT_LEN]);
        assert_eq!(&short[KEPT_LEN..KEPT_LEN + 1], "_");
        let suffix = &short[KEPT_LEN + 1..];
        assert_eq!(suffix.len(), HASH_DIGITS);
        assert!(
            suffix
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );

        // 64 characters but more bytes: measured after sanitising, so kept whole.
        let wide = "é".repeat(MAX_NAME_LEN);
        assert_eq!(sanitize(&wide), "_".repeat(MAX_NAME_LEN));
    }

    #[test]
    fn hash_suffix_is_sha256_of_the_raw_name() {
        // Known answer from Python: hashlib.sha256(b"a" * 65).hexdigest()[:6] == "635361".
        let raw = "a".repeat(65);
        assert_eq!(sanitize(&raw), format!("{}_635361", "a".repeat(KEPT_LEN)));

        // The raw (unsanitised) name is hashed, so names that sanitise alike still differ.
        let dots = format!("{}.x", "a".repeat(70));
        let spaces = format!("{} x", "a".repeat(70));
        assert_ne!(sanitize(&dots), sanitize(&spaces));
    }

    #[test]
    fn long_names_sharing_a_prefix_stay_distinct_and_stable() {
        let common = "x".repeat(60);
        let first = sanitize(&format!("{common}_alpha"));
        let second = sanitize(&format!("{common}_bravo"));
        assert_eq!(first[..KEPT_LEN], second[..KEPT_LEN]);
        assert_ne!(first, second);
        assert_eq!(first, sanitize(&format!("{common}_alpha")));
    }

    #[test]
    fn sanitize_is_idempotent_and_always_valid() {
        let inputs = [
            String::new(),
            "ok".to_owned(),
            "sp ace".to_owned(),
            "ü".repeat(100),
            "a-b_c".repeat(30),
            format!("{}🙂", "z".repeat(63)),
        ];
        for raw in inputs {
            let once = sanitize(&raw);
            assert!(is_valid(&once), "{raw:?} -> {once:?}");
            assert_eq!(sanitize(&once), once, "{raw:?}");
        }
    }

    #[test]
    fn validity() {
        let long = "a".repeat(MAX_NAME_LEN + 1);
        let cases = [
            ("a", true),
            ("A-z_0", true),
            ("_", true),
            ("", false),
            ("a b", false),
            ("a.b", false),
            ("é", false),
            (&long, false),
        ];
        for (name, expected) in cases {
            assert_eq!(is_valid(name), expected, "{name:?}");
        }
    }

    /// Every tool in the collected catalog of real MCP servers gets a valid exposed name, and
    /// the ten Twilio names that run past 64 characters are the ones shortened.
    #[test]
    fn real_catalog_names_are_valid() {
        let Some((path, catalog)) =
            crate::test_catalog::load("names::real_catalog_names_are_valid")
        else {
            return;
        };
        let servers = catalog["servers"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: no 'servers' array"));

        let mut tools = 0;
        let mut shortened = Vec::new();
        for server in servers {
            let id = server["id"]
                .as_str()
                .unwrap_or_else(|| panic!("server without id"));
            for tool in server["tools"].as_array().into_iter().flatten() {
                let tool = tool["name"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{id}: tool without name"));
                let name = exposed_name(id, tool);
                assert!(is_valid(&name), "{id}/{tool} -> {name:?}");
                let raw_len = id.chars().count() + 1 + tool.chars().count();
                if raw_len > MAX_NAME_LEN {
                    assert_eq!(name.len(), MAX_NAME_LEN, "{id}/{tool}");
                    assert_eq!(name.as_bytes()[KEPT_LEN], b'_', "{name}");
                    shortened.push((id.to_owned(), name));
                }
                tools += 1;
            }
        }
        assert!(tools > 1000, "only {tools} tools in {path}");
        assert_eq!(shortened.len(), 10, "{shortened:?}");
        assert!(
            shortened.iter().all(|(id, _)| id == "twilio"),
            "{shortened:?}"
        );
        let mut distinct: Vec<&str> = shortened.iter().map(|(_, name)| name.as_str()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 10, "{shortened:?}");
    }
}
