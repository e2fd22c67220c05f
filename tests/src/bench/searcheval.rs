//! In-process search evaluation and timing over the real catalog: the same
//! `Snapshot` and `search` the daemon uses, without processes around them.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use evo_daemon::catalog::snapshot::Snapshot;
use evo_daemon::search::{LexicalIndexes, VersionedIndex};
use rmcp::model::Tool;
use serde_json::{Value, json};

/// One query of an evaluation set.
pub struct Query {
    pub id: String,
    pub query: String,
    pub kind: String,
    /// Exposed names of every tool that satisfies the query.
    pub relevant: HashSet<String>,
}

pub fn load_queries(path: &Path) -> Vec<Query> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("query line");
            Query {
                id: v["id"].as_str().unwrap_or_default().into(),
                query: v["query"].as_str().unwrap_or_default().into(),
                kind: v["kind"].as_str().unwrap_or_default().into(),
                relevant: v["relevant"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        evo_daemon::names::exposed_name(
                            p[0].as_str().unwrap_or(""),
                            p[1].as_str().unwrap_or(""),
                        )
                    })
                    .collect(),
            }
        })
        .collect()
}

/// (server id, tools) of the recorded catalog.
pub fn load_catalog(path: &Path) -> Vec<(String, Vec<Tool>)> {
    let v: Value =
        serde_json::from_slice(&std::fs::read(path).expect("catalog")).expect("catalog JSON");
    v["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .map(|s| {
            let tools = s["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| {
                    let mut t = t.clone();
                    if !t["inputSchema"].is_object() {
                        t["inputSchema"] = json!({"type": "object"});
                    }
                    serde_json::from_value::<Tool>(t).ok()
                })
                .collect();
            (s["id"].as_str().unwrap_or_default().to_string(), tools)
        })
        .collect()
}

/// A snapshot of `servers` built the way the Catalog builds one, with a
/// version of its own, so that [`index_of`] tells it from any other.
pub fn snapshot(servers: &[(String, Vec<Tool>)]) -> Snapshot {
    static VERSIONS: AtomicU64 = AtomicU64::new(1);
    let mut snapshot = Snapshot::of_tools(servers);
    snapshot.version = VERSIONS.fetch_add(1, Ordering::Relaxed);
    snapshot
}

/// The lexical index of a snapshot [`snapshot`] built: one
/// [`LexicalIndexes`] serves every snapshot of the bench, as the daemon's
/// serves its catalog (built on first use, then only read).
pub fn index_of(snapshot: &Snapshot) -> Arc<VersionedIndex> {
    static INDEXES: LazyLock<LexicalIndexes> = LazyLock::new(LexicalIndexes::default);
    INDEXES.for_snapshot(snapshot)
}

/// Recall@1, recall@5 and MRR (over the top 10) of a ranking function.
pub struct Quality {
    pub recall1: f64,
    pub recall5: f64,
    pub mrr: f64,
    pub misses: Vec<String>,
    /// Per query kind, in name order: (kind, queries, found in the top 5).
    pub by_kind: Vec<(String, usize, usize)>,
}

pub fn evaluate(queries: &[Query], rank: &mut dyn FnMut(&str) -> Vec<String>) -> Quality {
    let (mut r1, mut r5, mut mrr) = (0.0, 0.0, 0.0);
    let mut misses = Vec::new();
    let mut kinds: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for q in queries {
        let got = rank(&q.query);
        let first = got.iter().take(10).position(|n| q.relevant.contains(n));
        let kind = kinds.entry(q.kind.as_str()).or_default();
        kind.0 += 1;
        kind.1 += usize::from(first.is_some_and(|i| i < 5));
        match first {
            Some(0) => {
                r1 += 1.0;
                r5 += 1.0;
                mrr += 1.0;
            }
            Some(i) => {
                if i < 5 {
                    r5 += 1.0;
                } else {
                    misses.push(format!("{} [{}] rank {}: {}", q.id, q.kind, i + 1, q.query));
                }
                mrr += 1.0 / (i as f64 + 1.0);
            }
            None => misses.push(format!(
                "{} [{}] miss: {} (top: {})",
                q.id,
                q.kind,
                q.query,
                got.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }
    let n = queries.len().max(1) as f64;
    Quality {
        recall1: r1 / n,
        recall5: r5 / n,
        mrr: mrr / n,
        misses,
        by_kind: kinds
            .into_iter()
            .map(|(k, (n, found))| (k.to_string(), n, found))
            .collect(),
    }
}

pub fn evo_ranking(snapshot: &Snapshot) -> impl FnMut(&str) -> Vec<String> + '_ {
    move |q| {
        evo_daemon::search::search(&index_of(snapshot).index, snapshot, q, 10, None)
            .hits
            .iter()
            .map(|h| h.entry.name.clone())
            .collect()
    }
}

/// (name, lowercased "name description") of every tool, for the baselines.
fn haystacks(snapshot: &Snapshot) -> Vec<(String, String)> {
    snapshot
        .tools
        .iter()
        .map(|e| {
            let hay = format!("{} {}", e.name, e.tool.description.as_deref().unwrap_or(""));
            (e.name.clone(), hay.to_lowercase())
        })
        .collect()
}

/// The baseline: tools whose name or description contains the query as a
/// plain, case-insensitive substring, in catalog order.
pub fn substring_ranking(snapshot: &Snapshot) -> impl FnMut(&str) -> Vec<String> + '_ {
    let haystacks = haystacks(snapshot);
    move |q| {
        let q = q.to_lowercase();
        haystacks
            .iter()
            .filter(|(_, h)| h.contains(&q))
            .take(10)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// A second, kinder baseline: tools ranked by how many of the query's words
/// (3+ letters) occur as substrings of their name or description.
pub fn word_substring_ranking(snapshot: &Snapshot) -> impl FnMut(&str) -> Vec<String> + '_ {
    let haystacks = haystacks(snapshot);
    move |q| {
        let words: Vec<String> = q
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() >= 3)
            .map(str::to_string)
            .collect();
        let mut scored: Vec<(usize, usize)> = haystacks
            .iter()
            .enumerate()
            .map(|(i, (_, h))| (words.iter().filter(|w| h.contains(w.as_str())).count(), i))
            .filter(|(n, _)| *n > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        scored
            .into_iter()
            .take(10)
            .map(|(_, i)| haystacks[i].0.clone())
            .collect()
    }
}

/// Prints the quality table of `queries`; unless the set is `blind`, also
/// what `EVO_BENCH_EXPLAIN`, `EVO_BENCH_DUMP` and `EVO_BENCH_MISSES` ask for.
pub fn print_quality(title: &str, queries: &[Query], snapshot: &Snapshot, blind: bool) {
    let evo = evaluate(queries, &mut evo_ranking(snapshot));
    let base = evaluate(queries, &mut substring_ranking(snapshot));
    let words = evaluate(queries, &mut word_substring_ranking(snapshot));
    println!(
        "\n## Search quality: {title} ({} queries, {} tools)\n",
        queries.len(),
        snapshot.tools.len()
    );
    println!("| ranking | recall@1 | recall@5 | MRR |");
    println!("|---|---|---|---|");
    println!(
        "| substring baseline (whole query) | {:.3} | {:.3} | {:.3} |",
        base.recall1, base.recall5, base.mrr
    );
    println!(
        "| substring baseline (query words, most matched first) | {:.3} | {:.3} | {:.3} |",
        words.recall1, words.recall5, words.mrr
    );
    println!(
        "| **evo discover_tools** | **{:.3}** | **{:.3}** (target ≥ 0.90) | **{:.3}** |",
        evo.recall1, evo.recall5, evo.mrr
    );
    let kinds: Vec<String> = evo
        .by_kind
        .iter()
        .map(|(k, n, found)| format!("{k} {:.2} ({n})", *found as f64 / *n as f64))
        .collect();
    println!("\nevo recall@5 by kind of query: {}", kinds.join(", "));
    // A blind set stays blind: its misses are never listed, so nobody tunes
    // on them.
    if blind {
        return;
    }
    // EVO_BENCH_EXPLAIN=q001,r017: the top 8 of those queries, with scores.
    let explain = std::env::var("EVO_BENCH_EXPLAIN").unwrap_or_default();
    for q in queries
        .iter()
        .filter(|q| explain.split(',').any(|id| id == q.id))
    {
        println!("  {} {}", q.id, q.query);
        for h in
            evo_daemon::search::search(&index_of(snapshot).index, snapshot, &q.query, 8, None).hits
        {
            let mark = if q.relevant.contains(&h.entry.name) {
                "*"
            } else {
                " "
            };
            println!("    {mark} {:7.2} {}", h.score, h.entry.name);
        }
    }
    // EVO_BENCH_DUMP=dir: one line per query (id, kind, rank of the first
    // relevant tool or 0, query, top 50 as name=score) in dir/<first id>.tsv,
    // for analysis.
    if let Some(dir) = std::env::var_os("EVO_BENCH_DUMP") {
        let mut out = String::new();
        for q in queries {
            let hits =
                evo_daemon::search::search(&index_of(snapshot).index, snapshot, &q.query, 50, None)
                    .hits;
            let got: Vec<&str> = hits.iter().map(|h| h.entry.name.as_str()).collect();
            let rank = got
                .iter()
                .position(|n| q.relevant.contains(*n))
                .map_or(0, |i| i + 1);
            let top: Vec<String> = hits
                .iter()
                .map(|h| format!("{}={:.3}", h.entry.name, h.score))
                .collect();
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\n",
                q.id,
                q.kind,
                rank,
                q.query,
                top.join(" ")
            ));
        }
        let name = queries.first().map_or("none", |q| q.id.as_str());
        let _ = std::fs::write(Path::new(&dir).join(format!("{name}.tsv")), out);
    }
    if std::env::var_os("EVO_BENCH_MISSES").is_some() {
        for m in &evo.misses {
            println!("  - {m}");
        }
    }
}

/// Median search latency over a catalog replicated to at least `min_tools`.
pub fn search_latency(
    catalog: &[(String, Vec<Tool>)],
    queries: &[Query],
    min_tools: usize,
) -> (usize, Duration, Duration) {
    let mut big = Vec::new();
    let mut copy = 0;
    while big
        .iter()
        .map(|(_, t): &(String, Vec<Tool>)| t.len())
        .sum::<usize>()
        < min_tools
    {
        for (id, tools) in catalog {
            big.push((format!("{id}{copy}"), tools.clone()));
        }
        copy += 1;
    }
    let build = Instant::now();
    let snap = snapshot(&big);
    let build_time = build.elapsed();
    let mut times = Vec::new();
    for _ in 0..3 {
        for q in queries {
            let t = Instant::now();
            let r = evo_daemon::search::search(&index_of(&snap).index, &snap, &q.query, 8, None);
            times.push(t.elapsed());
            std::hint::black_box(r);
        }
    }
    times.sort();
    (snap.tools.len(), times[times.len() / 2], build_time)
}
