//! `evo-bench --search --model DIR`: each search stage measured on its own
//! over the real catalog (lexical alone, semantic alone, fused, fused +
//! near-duplicates), in one run, and what the model costs here.
//!
//! The same `Encoder`, `tool_text` and `search_with` the daemon runs, on one
//! embedding thread as the daemon's default.

use std::collections::BTreeMap;
use std::path::Path;
use std::process;
use std::time::{Duration, Instant};

use evo_daemon::catalog::snapshot::Snapshot;
use evo_daemon::search::model::{Encoder, Pool, TextKind};
use evo_daemon::search::semantic::{self, DocVectors, QUERY_TOKENS, Tuning};
use evo_daemon::search::{Semantic, Stages};

use crate::searcheval::{Query, index_of};
use evo_tests::harness::process::rss_kib;

/// Recall@k counts the relevant tools in the top k out of at most k (a query
/// with 3 relevant tools and 2 in the top 5 scores 2/3); hit@5 counts
/// queries with any relevant tool in the top 5; MRR reads the top 10.
#[derive(Default, Clone, Copy)]
pub struct Scores {
    pub n: usize,
    pub recall1: f64,
    pub recall5: f64,
    pub recall10: f64,
    pub mrr: f64,
    pub hit5: f64,
}

/// The relevant tools among the first `k` of `got`, and how many there can
/// be (the query's relevant tools, at most `k`, at least 1).
fn found(q: &Query, got: &[String], k: usize) -> (usize, usize) {
    let n = got
        .iter()
        .take(k)
        .filter(|n| q.relevant.contains(*n))
        .count();
    (n, q.relevant.len().clamp(1, k))
}

impl Scores {
    fn add(&mut self, q: &Query, got: &[String]) {
        let recall = |k: usize| {
            let (n, of) = found(q, got, k);
            n as f64 / of as f64
        };
        self.n += 1;
        self.recall1 += recall(1);
        self.recall5 += recall(5);
        self.recall10 += recall(10);
        if let Some(i) = got.iter().take(10).position(|n| q.relevant.contains(n)) {
            self.mrr += 1.0 / (i as f64 + 1.0);
            if i < 5 {
                self.hit5 += 1.0;
            }
        }
    }

    /// Adds a set's mean scores, weighted by its queries, for a pooled mean.
    fn pool(&mut self, s: &Scores) {
        let n = s.n as f64;
        self.n += s.n;
        self.recall1 += s.recall1 * n;
        self.recall5 += s.recall5 * n;
        self.recall10 += s.recall10 * n;
        self.mrr += s.mrr * n;
        self.hit5 += s.hit5 * n;
    }

    fn mean(mut self) -> Scores {
        let n = self.n.max(1) as f64;
        self.recall1 /= n;
        self.recall5 /= n;
        self.recall10 /= n;
        self.mrr /= n;
        self.hit5 /= n;
        self
    }

    fn row(&self, label: &str) -> String {
        format!(
            "| {label} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0}% |",
            self.n,
            self.recall1,
            self.recall5,
            self.recall10,
            self.mrr,
            self.hit5 * 100.0
        )
    }
}

/// Each set's queries with their vectors, computed once.
pub struct EncodedSet<'q> {
    pub title: String,
    pub queries: &'q [Query],
    pub vectors: Vec<Vec<f32>>,
    /// Only totals are printed (a blind set).
    pub blind: bool,
}

/// The four rankings measured.
#[derive(Clone, Copy)]
enum Variant {
    Lexical,
    Semantic,
    Fused,
    FusedNear,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Lexical,
        Variant::Semantic,
        Variant::Fused,
        Variant::FusedNear,
    ];

    fn label(self) -> &'static str {
        match self {
            Variant::Lexical => "lexical alone",
            Variant::Semantic => "semantic alone",
            Variant::Fused => "fused",
            Variant::FusedNear => "fused + near-duplicates",
        }
    }

    fn stages<'a>(self, semantic: Semantic<'a>, weight: f32, near: f32) -> Stages<'a> {
        let mut stages = Stages::all(semantic);
        stages.tuning = tuning();
        if let Some(w) = std::env::var("EVO_BENCH_WINDOW")
            .ok()
            .and_then(|w| w.parse().ok())
        {
            stages.tuning.window = w;
        }
        stages.tuning.weight = weight;
        stages.tuning.near_similarity = near;
        match self {
            Variant::Lexical => Stages::LEXICAL,
            Variant::Semantic => Stages {
                lexical: false,
                near_duplicates: false,
                ..stages
            },
            Variant::Fused => Stages {
                near_duplicates: false,
                ..stages
            },
            Variant::FusedNear => stages,
        }
    }
}

/// `EVO_BENCH_TUNING=near_per_anchor=4,near_anchors=2`: other values of
/// the semantic stage's constants, on every set but the blind one's table.
fn tuning() -> Tuning {
    match std::env::var("EVO_BENCH_TUNING") {
        Ok(spec) => Tuning::parse(&spec).unwrap_or_else(|e| {
            eprintln!("evo-bench: EVO_BENCH_TUNING: {e}");
            std::process::exit(2)
        }),
        Err(_) => Tuning::DEFAULT,
    }
}

fn rank(snap: &Snapshot, query: &str, stages: &Stages<'_>) -> Vec<String> {
    evo_daemon::search::search_with(&index_of(snap).index, snap, query, 10, None, stages)
        .hits
        .iter()
        .map(|h| h.entry.name.clone())
        .collect()
}

/// Totals and per-kind scores of one variant over one set.
fn score_set(
    snap: &Snapshot,
    docs: &DocVectors,
    set: &EncodedSet<'_>,
    variant: Variant,
    weight: f32,
    near: f32,
) -> (Scores, BTreeMap<String, Scores>) {
    let mut total = Scores::default();
    let mut kinds: BTreeMap<String, Scores> = BTreeMap::new();
    for (q, v) in set.queries.iter().zip(&set.vectors) {
        let stages = variant.stages(Semantic { docs, query: v }, weight, near);
        let got = rank(snap, &q.query, &stages);
        total.add(q, &got);
        kinds.entry(q.kind.clone()).or_default().add(q, &got);
    }
    (
        total.mean(),
        kinds.into_iter().map(|(k, s)| (k, s.mean())).collect(),
    )
}

/// `EVO_BENCH_TOKENS` and `EVO_BENCH_CHARS`: the tokens of a tool's text
/// the model reads and the description characters in it, for trying other
/// values than the daemon's.
fn text_limits() -> (usize, usize) {
    text_limits_and_params().0
}

/// [`text_limits`], and whether the text has its parameters' names
/// (`EVO_BENCH_PARAMS=1`).
fn text_limits_and_params() -> ((usize, usize), bool) {
    let params = std::env::var("EVO_BENCH_PARAMS").is_ok_and(|v| v == "1");
    (text_limits_only(), params)
}

fn text_limits_only() -> (usize, usize) {
    let var = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    (
        var("EVO_BENCH_TOKENS", semantic::TOOL_TOKENS),
        var("EVO_BENCH_CHARS", semantic::EMBED_DESCRIPTION_CHARS),
    )
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Every tool's vector, as the daemon computes them. With
/// `EVO_BENCH_VECTORS=DIR`, vectors are kept there between runs (in the
/// daemon's cache format) and only missing ones computed: for tuning runs,
/// not for timing the embedding.
pub fn embed_catalog(
    encoder: &Encoder,
    pool: &Pool,
    snap: &Snapshot,
) -> (DocVectors, usize, Duration) {
    use std::sync::Arc;
    let ((tokens, chars), params) = text_limits_and_params();
    let texts: Vec<String> = snap
        .tools
        .iter()
        .map(|e| semantic::tool_text_with(e, chars, params))
        .collect();
    let keys: Vec<semantic::TextKey> = texts.iter().map(|t| semantic::text_key(t)).collect();
    let store = std::env::var_os("EVO_BENCH_VECTORS").map(|d| {
        Path::new(&d).join(format!(
            "{}-{tokens}-{chars}-{}.bin",
            encoder.key(),
            params as u8
        ))
    });
    let mut known = store
        .as_deref()
        .map(|p| evo_daemon::search::embedder::read_vectors(p, encoder.dim()))
        .unwrap_or_default();
    // Each distinct text once, as the daemon does (the same tool on two
    // servers reads the same).
    let mut missing: Vec<usize> = Vec::new();
    let mut wanted = std::collections::HashSet::new();
    for (i, key) in keys.iter().enumerate() {
        if !known.contains_key(key) && wanted.insert(*key) {
            missing.push(i);
        }
    }
    let refs: Vec<&str> = missing.iter().map(|&i| texts[i].as_str()).collect();
    let (vectors, cpu) = pool.run(|| {
        let start = thread_cpu();
        let v = encoder
            .encode_many(&refs, TextKind::Passage, tokens, &mut |_| {})
            .unwrap_or_else(|e| panic!("embedding the catalog: {e}"));
        (v, thread_cpu() - start)
    });
    for (&i, v) in missing.iter().zip(vectors) {
        known.insert(keys[i], Arc::from(v));
    }
    if let Some(path) = &store {
        let entries: Vec<_> = keys.iter().map(|k| (*k, known[k].clone())).collect();
        let bytes = evo_daemon::search::embedder::encode_vectors(encoder.dim(), &entries);
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")));
        let _ = std::fs::write(path, bytes);
    }
    let data: Vec<f32> = keys.iter().flat_map(|k| known[k].iter().copied()).collect();
    let docs = DocVectors {
        version: snap.version,
        dim: encoder.dim(),
        data,
    };
    (docs, missing.len(), cpu)
}

/// The whole `--model` bench: costs, then the table of every set and stage.
pub fn model_benchmarks(dir: &Path, snap: &Snapshot, sets: &[(String, &[Query], bool)]) {
    let pool = Pool::new(1).expect("one embedding thread");
    let before = rss_kib(process::id());
    let t = Instant::now();
    let encoder = Encoder::load(dir, None).unwrap_or_else(|e| {
        eprintln!("evo-bench: {e}");
        std::process::exit(2)
    });
    let load = t.elapsed();
    let loaded = rss_kib(process::id());
    let t = Instant::now();
    let (docs, computed, embed_cpu) = embed_catalog(&encoder, &pool, snap);
    let (tool_tokens, chars) = text_limits();
    let embed = t.elapsed();
    let with_vectors = rss_kib(process::id());
    let tokens: Vec<usize> = snap
        .tools
        .iter()
        .map(|e| {
            encoder.token_count(&semantic::tool_text_with(
                e,
                chars,
                text_limits_and_params().1,
            ))
        })
        .collect();
    let cut = tokens.iter().filter(|&&n| n > tool_tokens).count();
    let mean_tokens = tokens.iter().map(|&n| n.min(tool_tokens)).sum::<usize>() as f64
        / tokens.len().max(1) as f64;

    // A query end to end: its forward pass (never cached here) and the fused
    // ranking with near-duplicates.
    let mut times: Vec<Duration> = Vec::new();
    let mut cpu_times: Vec<Duration> = Vec::new();
    let mut forward_times: Vec<Duration> = Vec::new();
    let mut encoded: Vec<EncodedSet<'_>> = Vec::new();
    for (title, queries, blind) in sets {
        let mut vectors = Vec::with_capacity(queries.len());
        for q in queries.iter() {
            let t = Instant::now();
            let (v, cpu) = pool.run(|| {
                let start = thread_cpu();
                let v = encoder
                    .encode(&[q.query.as_str()], TextKind::Query, QUERY_TOKENS)
                    .unwrap_or_else(|e| panic!("embedding a query: {e}"))
                    .remove(0);
                (v, thread_cpu() - start)
            });
            let ranked_at = thread_cpu();
            let stages = Stages::all(Semantic {
                docs: &docs,
                query: &v,
            });
            std::hint::black_box(rank(snap, &q.query, &stages));
            times.push(t.elapsed());
            cpu_times.push(cpu + (thread_cpu() - ranked_at));
            forward_times.push(cpu);
            vectors.push(v);
        }
        encoded.push(EncodedSet {
            title: title.clone(),
            queries,
            vectors,
            blind: *blind,
        });
    }
    times.sort();
    cpu_times.sort();
    let cpu_median = cpu_times[cpu_times.len() / 2];
    forward_times.sort();
    let forward_median = forward_times[forward_times.len() / 2];
    let median = times[times.len() / 2];
    let p95 = times[times.len() * 95 / 100];
    let cache_bytes = docs.rows() * (16 + 4 * docs.dim) + 16;

    println!(
        "\n## Semantic search: {} ({} tools, one embedding thread)\n",
        dir.display(),
        snap.tools.len()
    );
    println!("| cost | measured | goal |");
    println!("|---|---|---|");
    println!("| model load | {:.2} s | |", load.as_secs_f64());
    println!(
        "| embedding {computed} of {} tools (texts of {chars} description characters cut at {tool_tokens} tokens, {mean_tokens:.0} on average; {cut} were longer) | {:.1} s wall, {:.1} s CPU | ≤ 40 s for all |",
        snap.tools.len(),
        embed.as_secs_f64(),
        embed_cpu.as_secs_f64()
    );
    println!(
        "| a query end to end (forward pass + fused ranking + near-duplicates), median / p95 wall; median CPU (of which the forward pass) | {:.1} / {:.1} ms; {:.1} ms ({:.1} ms) | ≤ 15 ms median |",
        median.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3,
        cpu_median.as_secs_f64() * 1e3,
        forward_median.as_secs_f64() * 1e3
    );
    println!(
        "| RSS: model loaded / with the catalog's vectors | +{:.0} MB / +{:.0} MB | ≤ +150 MB |",
        (loaded.saturating_sub(before)) as f64 / 1024.0,
        (with_vectors.saturating_sub(before)) as f64 / 1024.0
    );
    println!(
        "| the vectors' cache file | {:.1} MB | |",
        cache_bytes as f64 / 1e6
    );

    // EVO_BENCH_WEIGHTS=0.3,0.5,0.7 and EVO_BENCH_NEAR=0.8,0.9: recall for
    // other fusion weights and near-duplicate similarities, on the sets that
    // may be tuned on (never a blind one).
    let list = |var: &str, default: f32| -> Vec<f32> {
        std::env::var(var).map_or(vec![default], |v| {
            v.split(',').filter_map(|w| w.trim().parse().ok()).collect()
        })
    };
    if std::env::var_os("EVO_BENCH_WEIGHTS").is_some()
        || std::env::var_os("EVO_BENCH_NEAR").is_some()
    {
        println!("\n### Sweep (tuning sets only)\n");
        println!(
            "| set | weight | near | variant | queries | recall@1 | recall@5 | recall@10 | MRR | hit@5 |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for w in list("EVO_BENCH_WEIGHTS", tuning().weight) {
            for near in list("EVO_BENCH_NEAR", tuning().near_similarity) {
                let mut pooled = [Scores::default(); 2];
                for set in encoded.iter().filter(|s| !s.blind) {
                    for (i, v) in [Variant::Fused, Variant::FusedNear].into_iter().enumerate() {
                        let (total, _) = score_set(snap, &docs, set, v, w, near);
                        println!(
                            "{}",
                            total.row(&format!("{} | {w} | {near} | {}", set.title, v.label()))
                        );
                        pooled[i].pool(&total);
                    }
                }
                for (i, v) in [Variant::Fused, Variant::FusedNear].into_iter().enumerate() {
                    println!(
                        "{}",
                        pooled[i]
                            .mean()
                            .row(&format!("**pooled** | {w} | {near} | {}", v.label()))
                    );
                }
            }
        }
    }

    if let Some(dir) = std::env::var_os("EVO_BENCH_FEATURES") {
        write_features(Path::new(&dir), snap, &docs, &encoded);
    }
    for set in &encoded {
        println!(
            "\n### {} ({} queries{})\n",
            set.title,
            set.queries.len(),
            if set.blind {
                ", blind: totals only"
            } else {
                ""
            }
        );
        println!("| stages | queries | recall@1 | recall@5 | recall@10 | MRR | hit@5 |");
        println!("|---|---|---|---|---|---|---|");
        let mut per_kind: Vec<(Variant, BTreeMap<String, Scores>)> = Vec::new();
        for v in Variant::ALL {
            let (total, kinds) = score_set(
                snap,
                &docs,
                set,
                v,
                tuning().weight,
                tuning().near_similarity,
            );
            println!("{}", total.row(&format!("**{}**", v.label())));
            per_kind.push((v, kinds));
        }
        if set.blind {
            continue;
        }
        // EVO_BENCH_MISSES=1: the fused + near-duplicates misses of the sets
        // that may be read (never a blind one's): the query, its relevant
        // tools, and the top 8 with each stage's score.
        if std::env::var_os("EVO_BENCH_MISSES").is_some() {
            print_misses(snap, &docs, set);
        }
        println!("\nby kind:\n");
        println!("| kind | stages | queries | recall@1 | recall@5 | recall@10 | MRR | hit@5 |");
        println!("|---|---|---|---|---|---|---|---|");
        let kinds: Vec<String> = per_kind
            .first()
            .map(|(_, k)| k.keys().cloned().collect())
            .unwrap_or_default();
        for kind in kinds {
            for (v, k) in &per_kind {
                if let Some(s) = k.get(&kind) {
                    println!("{}", s.row(&format!("{kind} | {}", v.label())));
                }
            }
        }
    }
}

/// The queries of a set that may be read whose top 5 (fused + near-duplicates)
/// misses a relevant tool, with the top 8 and each stage's score.
fn print_misses(snap: &Snapshot, docs: &DocVectors, set: &EncodedSet<'_>) {
    assert!(!set.blind, "a blind set's misses are never listed");
    println!("\nmisses (fused + near-duplicates):\n");
    for (q, v) in set.queries.iter().zip(&set.vectors) {
        let stages = Variant::FusedNear.stages(
            Semantic { docs, query: v },
            tuning().weight,
            tuning().near_similarity,
        );
        let hits = evo_daemon::search::search_with(
            &index_of(snap).index,
            snap,
            &q.query,
            8,
            None,
            &stages,
        )
        .hits;
        let got: Vec<String> = hits.iter().map(|h| h.entry.name.clone()).collect();
        let (n, of) = found(q, &got, 5);
        if n >= of {
            continue;
        }
        let mut relevant: Vec<&String> = q.relevant.iter().collect();
        relevant.sort();
        println!("- {} [{}] {}", q.id, q.kind, q.query);
        println!("  want: {relevant:?}");
        for h in &hits {
            let mark = if q.relevant.contains(&h.entry.name) {
                "*"
            } else {
                " "
            };
            let s = &h.stages;
            println!(
                "  {mark} {:.3} lex {:6.2} cos {:.3}{} {}",
                h.score,
                s.lexical,
                s.semantic.unwrap_or(0.0),
                s.pulled_by
                    .as_ref()
                    .map_or(String::new(), |(by, sim)| format!(" <-{by} {sim:.2}")),
                h.entry.name
            );
        }
    }
}

/// `EVO_BENCH_FEATURES=DIR`: each readable set's queries with every tool's
/// lexical score and cosine (`<set's first id>.jsonl`), and the tools' names,
/// servers, action bits and vectors (`tools.json`), to study fusions offline.
/// Never a blind set's.
fn write_features(dir: &Path, snap: &Snapshot, docs: &DocVectors, sets: &[EncodedSet<'_>]) {
    use std::fmt::Write as _;
    let _ = std::fs::create_dir_all(dir);
    for set in sets.iter().filter(|s| !s.blind) {
        let mut out = String::new();
        for (q, v) in set.queries.iter().zip(&set.vectors) {
            let lex = evo_daemon::search::lexical_scores(&index_of(snap).index, snap, &q.query);
            let cos = docs.cosines(v);
            let mut relevant: Vec<&String> = q.relevant.iter().collect();
            relevant.sort();
            let _ = writeln!(
                out,
                "{}",
                serde_json::json!({"id": q.id, "kind": q.kind, "query": q.query,
                    "relevant": relevant, "lex": lex, "cos": cos})
            );
        }
        let name = set.queries.first().map_or("none", |q| q.id.as_str());
        let _ = std::fs::write(dir.join(format!("{name}.jsonl")), out);
    }
    let tools = serde_json::json!({
        "names": snap.tools.iter().map(|e| e.name.clone()).collect::<Vec<_>>(),
        "servers": snap.tools.iter().map(|e| e.server.id.clone()).collect::<Vec<_>>(),
        "actions": evo_daemon::search::name_actions(&index_of(snap).index),
        "dim": docs.dim,
        "vectors": docs.data,
    });
    let _ = std::fs::write(dir.join("tools.json"), tools.to_string());
}
