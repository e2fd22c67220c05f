//! The recorded servers the tests replay (`tests/fixtures/catalog-excerpt.json`)
//! are entries of the recorded catalog of real MCP servers, unchanged. The
//! whole catalog (2,529 tools) lives outside the repository: `EVO_CATALOG`.

use evo_tests::harness::{
    locations::{catalog_excerpt, outside_file},
    skipped,
};
use serde_json::Value;

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn excerpt_matches_the_real_catalog() {
    let Some(real) = outside_file("EVO_CATALOG") else {
        return skipped(
            "EVO_CATALOG is not set (the 2,529-tool catalog lives outside the repository)",
        );
    };
    let real = read_json(&real);
    let excerpt = read_json(&catalog_excerpt());
    assert_eq!(excerpt["generated"], real["generated"]);
    let servers = excerpt["servers"].as_array().expect("servers");
    assert!(!servers.is_empty());
    for server in servers {
        let id = server["id"].as_str().expect("id");
        let recorded = real["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("{id} is not in the recorded catalog"));
        assert_eq!(server, recorded, "{id} differs from its recorded entry");
    }
}
