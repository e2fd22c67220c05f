//! The configuration reference (docs/configuration.md) is checked against the loader: every
//! key the loader accepts is documented, and nothing documented is unknown
//! to it.

use std::collections::BTreeSet;

fn readme() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/configuration.md"
    ))
    .expect("docs/configuration.md")
}

#[test]
fn every_config_key_is_documented() {
    let text = readme();
    let keys = evo_daemon::config::known_keys();
    let mut missing = BTreeSet::new();
    for (section, names) in keys {
        for k in names {
            let written = if section.is_empty() || section == "server" {
                format!("`{k}`")
            } else {
                format!("`{section}.{k}`")
            };
            // A section is documented through its keys (`cache.max_age_hours`).
            let as_section = format!("`{k}.");
            let documented =
                text.contains(&written) || (section.is_empty() && text.contains(&as_section));
            if !documented {
                missing.insert(written);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md lacks {missing:?}"
    );
}
