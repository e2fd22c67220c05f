//! `evo-bench --profiles`: in process, over the recorded 2,529-tool catalog:
//! a 2026-07-28 session's `tools/list` with a 200-tool profile, the size of
//! `discover_tools` answers with tool cards, and their latency at 10,000+
//! tools.

use std::collections::BTreeMap;
use std::time::Instant;

use evo_daemon::catalog::snapshot::Snapshot;
use evo_daemon::config::DiscoveryMode;
use evo_daemon::policy::profiles::{ProfileBook, SavedProfiles};
use evo_daemon::search;
use evo_daemon::session::{ActivationSet, Visibility, list_tools};
use rmcp::model::ListToolsResult;

use crate::searcheval;
use crate::timing::{median, us};

/// Cards as measured before code mode: schemas, no signatures, so the sizes
/// stay comparable with earlier runs.
const SCHEMA_CARDS: search::CardParts = search::CardParts {
    schema: true,
    signature: false,
};

/// A profile of the first `n` tools of every fifth server, as exact names.
fn profile_of(snapshot: &Snapshot, n: usize) -> ProfileBook {
    let names: Vec<String> = snapshot
        .tools
        .iter()
        .step_by(5)
        .take(n)
        .map(|e| e.name.clone())
        .collect();
    let config = BTreeMap::from([("p".to_string(), names)]);
    ProfileBook::new(&config, &SavedProfiles::default())
}

pub fn profile_benchmarks(catalog_path: &std::path::Path, queries: &[searcheval::Query]) {
    let catalog = searcheval::load_catalog(catalog_path);
    let plain = searcheval::snapshot(&catalog);
    let book = profile_of(&plain, 200);
    let snapshot = searcheval::snapshot(&catalog).with_profiles(&book);
    let members = snapshot.profiles.get("p").map_or(0, |p| p.members.len());
    let none = ActivationSet::new();
    let by = Visibility {
        mode: DiscoveryMode::Dynamic,
        activated: &none,
        profile: Some("p"),
        modern: true,
    };
    let mut build = Vec::new();
    let mut with_json = Vec::new();
    let mut bytes = 0;
    for _ in 0..2_000 {
        let t = Instant::now();
        std::hint::black_box(list_tools(&snapshot, by, true));
        build.push(t.elapsed());
        let t = Instant::now();
        let tools = list_tools(&snapshot, by, true);
        let result = ListToolsResult::with_all_items(tools);
        let json = serde_json::to_vec(&result).unwrap_or_default();
        with_json.push(t.elapsed());
        bytes = json.len();
        std::hint::black_box(json);
    }
    println!(
        "\n## tools/list of a 2026-07-28 session with a {members}-tool profile, {} tools in the catalog, in process\n",
        snapshot.tools.len()
    );
    println!("| what | median | bytes |");
    println!("|---|---|---|");
    println!(
        "| the list (native + profile tools) | **{} µs** (budget 100) | |",
        us(median(&mut build))
    );
    println!(
        "| the list serialised to JSON | {} µs | {bytes} |",
        us(median(&mut with_json))
    );

    // The size of a 5-result discover_tools answer with cards.
    let mut sizes = Vec::new();
    let mut abridged = 0usize;
    let mut cards = 0usize;
    for q in queries {
        let outcome = search::search(
            &searcheval::index_of(&snapshot).index,
            &snapshot,
            &q.query,
            5,
            None,
        );
        let text = search::render(&outcome, SCHEMA_CARDS);
        for h in &outcome.hits {
            cards += 1;
            abridged += usize::from(h.entry.card_schema().abridged);
        }
        sizes.push(text.len());
    }
    sizes.sort_unstable();
    let at = |p: f64| sizes[((sizes.len() - 1) as f64 * p) as usize];
    let over = sizes.iter().filter(|&&s| s > 4096).count();
    // Every tool's card, for the share that needs abridging.
    let all_abridged = snapshot
        .tools
        .iter()
        .filter(|e| e.card_schema().abridged)
        .count();
    let full: usize = snapshot
        .tools
        .iter()
        .map(|e| serde_json::to_string(&*e.tool.input_schema).map_or(0, |s| s.len()))
        .sum();
    let compact: usize = snapshot
        .tools
        .iter()
        .map(|e| e.card_schema().json.len())
        .sum();
    println!(
        "\n## discover_tools answers with tool cards, 5 results ({} queries of bench/queries.jsonl)\n",
        queries.len()
    );
    println!("| median | p90 | max | answers over 4 KB | cards abridged |");
    println!("|---|---|---|---|---|");
    println!(
        "| **{} B** | {} B | {} B | {over} of {} | {abridged} of {cards} |",
        at(0.5),
        at(0.9),
        at(1.0),
        sizes.len()
    );
    println!(
        "\nAll {} tools: input schemas {full} B as listed, {compact} B as cards ({:.0}%); {all_abridged} abridged (over {} B compact).",
        snapshot.tools.len(),
        100.0 * compact as f64 / full.max(1) as f64,
        evo_daemon::session::tool_card::CARD_SCHEMA_BUDGET
    );

    // Latency with cards at 10,000+ tools (the catalog four times over).
    let mut big = Vec::new();
    for c in 0..4 {
        for (id, tools) in &catalog {
            big.push((format!("{id}{c}"), tools.clone()));
        }
    }
    let big = searcheval::snapshot(&big);
    let _ = search::search(
        &searcheval::index_of(&big).index,
        &big,
        "warm up the index",
        5,
        None,
    );
    let mut times = Vec::new();
    for q in queries.iter().cycle().take(300) {
        let t = Instant::now();
        let outcome = search::search(&searcheval::index_of(&big).index, &big, &q.query, 8, None);
        let text = search::render(&outcome, SCHEMA_CARDS);
        times.push(t.elapsed());
        std::hint::black_box(text);
    }
    println!(
        "\n| discover_tools with cards at {} tools, in process | median **{} µs** (budget 2,000) |",
        big.tools.len(),
        us(median(&mut times))
    );
    println!("|---|---|");
}
