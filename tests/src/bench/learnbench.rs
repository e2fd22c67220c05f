//! `evo-bench --learning [PAIRS.jsonl …]`: search that learns from use,
//! measured through real sessions on the recorded catalog replayed by its
//! fixture children. Per pair set: every test query is ranked first (what
//! learning off answers: nothing learned yet), then each pair's feedback is
//! given as an agent would (a session's `discover_tools` with the feedback
//! query, then a call of the pair's tool), then every test query is ranked
//! again in a fresh session. Pairs of kind `control` ask for something else
//! than their feedback: their top 5 must not change. The plain query set
//! (`bench/queries.jsonl`) is scored before and after too. Then the cost of
//! the learned part of a query, in process, at 10,000 remembered queries.
//! Only totals are printed: a blind set's misses are never shown.
//! `EVO_BENCH_LEARN_MODEL=DIR` runs evod with that `search.model`.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use evo_daemon::names::exposed_name;
use evo_daemon::schema::example::example_arguments;
use evo_daemon::search;
use evo_daemon::search::learned::{MAX_RECORDS, learned};
use evo_daemon::search::model::{Encoder, Pool, TextKind, dot};
use evo_daemon::search::semantic::QUERY_TOKENS;
use evo_daemon::search::{Semantic, Stages};
use evo_tests::harness::{
    daemon::Daemon, mcp::McpClient, servers::fixture_server, wait::eventually,
};
use rmcp::model::Tool;

use crate::searcheval;
use crate::semanticeval::embed_catalog;
use crate::timing::{percentile, us};

/// One line of a pair set.
struct Pair {
    kind: String,
    feedback: String,
    tool: String,
    test: String,
    /// A control's right tool for its test query.
    test_tool: Option<String>,
    /// The server of the pair's tool (the split by server halves these).
    server: String,
}

fn tool_name(v: &Value) -> Option<(String, String)> {
    match v {
        Value::Array(p) => {
            let server = p.first().and_then(Value::as_str)?;
            let tool = p.get(1).and_then(Value::as_str)?;
            Some((server.to_string(), exposed_name(server, tool)))
        }
        Value::String(s) => Some((s.split('_').next().unwrap_or("").to_string(), s.clone())),
        _ => None,
    }
}

fn load_pairs(path: &Path) -> Vec<Pair> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("pair line");
            let (server, tool) = tool_name(&v["tool"]).unwrap_or_default();
            Pair {
                kind: v["kind"].as_str().unwrap_or_default().to_string(),
                feedback: v["feedback"].as_str().unwrap_or_default().to_string(),
                tool,
                test: v["test"].as_str().unwrap_or_default().to_string(),
                test_tool: tool_name(&v["test_tool"]).map(|(_, t)| t),
                server,
            }
        })
        .collect()
}

fn is_control(p: &Pair) -> bool {
    p.kind.to_lowercase().contains("control")
}

/// The names `discover_tools` ranks for `query`, best first.
fn ranked(c: &mut McpClient, query: &str) -> Vec<String> {
    let r = c.call(
        "discover_tools",
        json!({"query": query, "limit": 10, "activate": false}),
    );
    r["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter(|l| l.contains(" — "))
        .filter_map(|l| l.split(" — ").next())
        .map(str::to_string)
        .collect()
}

#[derive(Default)]
struct Scores {
    n: usize,
    r1: usize,
    hit5: usize,
    mrr: f64,
}

impl Scores {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if rank == Some(0) {
            self.r1 += 1;
        }
        if rank.is_some_and(|r| r < 5) {
            self.hit5 += 1;
        }
        self.mrr += rank.map_or(0.0, |r| 1.0 / (r as f64 + 1.0));
    }

    fn row(&self, what: &str) -> String {
        let n = self.n.max(1) as f64;
        format!(
            "| {what} | {} | {:.3} | {:.3} | {:.3} |",
            self.n,
            self.r1 as f64 / n,
            self.hit5 as f64 / n,
            self.mrr / n
        )
    }
}

/// A pair's right tool for its test query: the feedback's tool for a pair,
/// the test's own tool for a control (none when the control names none).
fn right_tool(p: &Pair) -> Option<&str> {
    if is_control(p) {
        p.test_tool.as_deref()
    } else {
        Some(p.tool.as_str())
    }
}

/// The rank of a pair's right tool.
fn right_rank(p: &Pair, ranked: &[String]) -> Option<usize> {
    let right = right_tool(p)?;
    ranked.iter().position(|n| n == right)
}

/// Whether a set's misses may be printed (`EVO_BENCH_SHOW_MISSES=1`): a
/// development set's may be read, a blind set's never.
fn shows_misses(set: &Path) -> bool {
    std::env::var("EVO_BENCH_SHOW_MISSES").is_ok_and(|v| v == "1")
        && set.to_string_lossy().contains("dev")
}

/// Prints a pair whose right tool is not first with learning on, or moved.
fn print_miss(p: &Pair, off: &[String], on: &[String]) {
    if right_rank(p, on) == Some(0) && right_rank(p, off) == right_rank(p, on) {
        return;
    }
    println!(
        "{} {:?} (after {:?}) → {}: off {:?} on {:?} top {:?}",
        p.kind,
        p.test,
        p.feedback,
        right_tool(p).unwrap_or("-"),
        right_rank(p, off),
        right_rank(p, on),
        on.iter().take(3).collect::<Vec<_>>()
    );
}

/// One session per pair: `discover_tools` with the feedback, then a call of
/// the pair's tool with example arguments. How many calls succeeded.
fn give_feedback(d: &Daemon, pairs: &[&Pair], schemas: &HashMap<String, Value>) -> usize {
    let mut called = 0;
    for p in pairs {
        let mut c = d.session(&["--mode", "dynamic"]);
        c.initialize();
        let _ = ranked(&mut c, &p.feedback);
        let schema = schemas
            .get(&p.tool)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let args = example_arguments(&schema);
        let (_, is_error) = c.call_text("call_tool", json!({"name": p.tool, "arguments": args}));
        if !is_error {
            called += 1;
        }
    }
    called
}

/// Which half of a split a server is in.
fn in_first_half(server: &str, seed: u64) -> bool {
    let mut h = DefaultHasher::new();
    (seed, server).hash(&mut h);
    h.finish().is_multiple_of(2)
}

/// A split by server's scores: per half (taught, not) and kind (pairs,
/// controls), learning off and on.
#[derive(Default)]
struct Split {
    off: [[Scores; 2]; 2],
    on: [[Scores; 2]; 2],
}

impl Split {
    fn add(&mut self, pairs: &[Pair], before: &[Vec<String>], after: &[Vec<String>], seed: u64) {
        for ((p, b), a) in pairs.iter().zip(before).zip(after) {
            let half = usize::from(!in_first_half(&p.server, seed));
            let kind = usize::from(is_control(p));
            if kind == 1 && p.test_tool.is_none() {
                continue;
            }
            self.off[half][kind].add(right_rank(p, b));
            self.on[half][kind].add(right_rank(p, a));
        }
    }

    fn print(&self, title: &str) {
        println!("\n### {title}\n\n{HEADER}");
        for (half, label) in [(0, "A (taught)"), (1, "B (not taught)")] {
            for (kind, what) in [(0, "pairs"), (1, "controls")] {
                let row = |s: &Scores, state| s.row(&format!("half {label}, {what}, {state}"));
                println!("{}", row(&self.off[half][kind], "off"));
                println!("{}", row(&self.on[half][kind], "on"));
            }
        }
    }
}

const HEADER: &str = "| test queries | n | recall@1 | recall@5 | MRR |\n|---|---|---|---|---|";

pub fn learning_benchmarks(catalog_path: &Path, sets: &[PathBuf]) {
    let catalog = searcheval::load_catalog(catalog_path);
    let schemas: HashMap<String, Value> = catalog
        .iter()
        .flat_map(|(id, tools)| {
            tools.iter().map(move |t| {
                (
                    exposed_name(id, &t.name),
                    Value::Object((*t.input_schema).clone()),
                )
            })
        })
        .collect();
    let plain = searcheval::load_queries(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/queries.jsonl"),
    );
    let splits: u64 = std::env::var("EVO_BENCH_LEARN_SPLITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    for set in sets {
        let pairs = load_pairs(set);
        let servers: serde_json::Map<String, Value> = catalog
            .iter()
            .map(|(id, _)| {
                (
                    id.clone(),
                    fixture_server(&["--replay", &catalog_path.to_string_lossy(), "--server", id]),
                )
            })
            .collect();
        // `EVO_BENCH_LEARN_MODEL=DIR`: with the semantic stage.
        let model = std::env::var("EVO_BENCH_LEARN_MODEL").ok();
        let search = model.as_ref().map_or(json!({}), |m| json!({"model": m}));
        let d = Daemon::start(&json!({"mcpServers": servers, "search": search}));
        // 123 servers starting on a busy machine take longer than the
        // harness's usual wait.
        eventually("every server ready", Duration::from_secs(600), || {
            let s = d.ctl_json(&["status"]);
            s["servers"].as_array().is_some_and(|all| {
                all.len() == catalog.len() && all.iter().all(|v| v["state"] == "ready")
            })
        });
        if model.is_some() {
            eventually("every tool embedded", Duration::from_secs(900), || {
                d.ctl_json(&["status"])["search"]["state"] == "ready"
            });
        }
        let rank_all = || -> Vec<Vec<String>> {
            let mut c = d.session(&["--mode", "dynamic"]);
            c.initialize();
            pairs.iter().map(|p| ranked(&mut c, &p.test)).collect()
        };
        let before = rank_all();
        let plain_before = {
            let mut c = d.session(&["--mode", "dynamic"]);
            c.initialize();
            searcheval::evaluate(&plain, &mut |q| ranked(&mut c, q))
        };
        let name = set
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let controls = pairs.iter().filter(|p| is_control(p)).count();
        println!(
            "\n## Learning from use: {name} ({} pairs, {controls} control)",
            pairs.len() - controls
        );
        // Split by server: feedback only for the pairs of one half of the
        // servers; the other half's test queries must rank as before.
        for seed in 0..splits {
            let _ = d.ctl(&["search", "forget"]);
            let taught: Vec<&Pair> = pairs
                .iter()
                .filter(|p| in_first_half(&p.server, seed))
                .collect();
            give_feedback(&d, &taught, &schemas);
            let after = rank_all();
            let mut split = Split::default();
            split.add(&pairs, &before, &after, seed);
            split.print(&format!(
                "Split by server {seed}: feedback given for half A's pairs only"
            ));
        }
        // Everything taught.
        let _ = d.ctl(&["search", "forget"]);
        let all: Vec<&Pair> = pairs.iter().collect();
        let called = give_feedback(&d, &all, &schemas);
        let learned = d.ctl_json(&["status"])["search"]["learned"]
            .as_u64()
            .unwrap_or(0);
        let mut fresh = d.session(&["--mode", "dynamic"]);
        fresh.initialize();
        let mut times = Vec::new();
        let after: Vec<Vec<String>> = pairs
            .iter()
            .map(|p| {
                let t = Instant::now();
                let r = ranked(&mut fresh, &p.test);
                times.push(t.elapsed());
                r
            })
            .collect();
        let plain_after = searcheval::evaluate(&plain, &mut |q| ranked(&mut fresh, q));
        let (mut off, mut on, mut c_off, mut c_on) = (
            Scores::default(),
            Scores::default(),
            Scores::default(),
            Scores::default(),
        );
        let (mut unchanged, mut lifted) = (0, 0);
        let show = shows_misses(set);
        for ((p, b), a) in pairs.iter().zip(&before).zip(&after) {
            let feedback_rank = |r: &Vec<String>| r.iter().position(|n| *n == p.tool);
            if show {
                print_miss(p, b, a);
            }
            if is_control(p) {
                if b.iter().take(5).eq(a.iter().take(5)) {
                    unchanged += 1;
                }
                if feedback_rank(a).is_some_and(|r| r < 5)
                    && feedback_rank(b).is_none_or(|r| r >= 5)
                {
                    lifted += 1;
                }
                if p.test_tool.is_some() {
                    c_off.add(right_rank(p, b));
                    c_on.add(right_rank(p, a));
                }
            } else {
                off.add(right_rank(p, b));
                on.add(right_rank(p, a));
            }
        }
        times.sort();
        println!(
            "\n### Every pair's feedback given\n\nfeedback calls that succeeded: {called} of {}; queries remembered: {learned}\n",
            pairs.len()
        );
        println!("{HEADER}");
        println!("{}", off.row("pairs, learning off"));
        println!("{}", on.row("pairs, learning on, one feedback each"));
        println!("{}", c_off.row("controls (their own right tool), off"));
        println!("{}", c_on.row("controls (their own right tool), on"));
        println!(
            "\n| controls | top 5 unchanged | feedback tool lifted into the top 5 |\n|---|---|---|\n| {controls} | {unchanged} | {lifted} |"
        );
        println!(
            "\n| plain query set (bench/queries.jsonl, {} queries) | recall@1 | recall@5 | MRR |\n|---|---|---|---|\n| before feedback | {:.3} | {:.3} | {:.3} |\n| after feedback | {:.3} | {:.3} | {:.3} |",
            plain.len(),
            plain_before.recall1,
            plain_before.recall5,
            plain_before.mrr,
            plain_after.recall1,
            plain_after.recall5,
            plain_after.mrr
        );
        println!(
            "\ndiscover_tools through the shim after learning: median {}, p95 {}",
            us(percentile(&times, 0.5)),
            us(percentile(&times, 0.95))
        );
    }
    cost_at_scale(&catalog);
}

/// `evo-bench --learning-cosines MODEL [SET]`: each pair's cosine of its
/// feedback and test queries (a development set only: it prints queries).
pub fn learning_cosines(model: &Path, set: &Path) {
    assert!(
        set.to_string_lossy().contains("dev"),
        "only a development set's queries may be printed"
    );
    let encoder = Encoder::load(model, None).expect("model");
    for p in load_pairs(set) {
        let v = encoder
            .encode(&[p.feedback.as_str(), p.test.as_str()], TextKind::Query, 64)
            .expect("encode");
        println!(
            "{:.3} {} {:?} / {:?}",
            dot(&v[0], &v[1]),
            p.kind,
            p.feedback,
            p.test
        );
    }
}

/// `evo-bench --learning-cost`: only the in-process cost (meant for a
/// release build; the sessions' part needs the daemon's binaries beside it).
pub fn learning_cost(catalog_path: &Path) {
    cost_at_scale(&searcheval::load_catalog(catalog_path));
}

/// The learned part's cost in process: the same queries ranked with nothing
/// remembered, then with 10,000 remembered queries.
fn cost_at_scale(catalog: &[(String, Vec<Tool>)]) {
    let snapshot = searcheval::snapshot(catalog);
    let index = searcheval::index_of(&snapshot);
    let queries: Vec<String> = searcheval::load_queries(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/queries.jsonl"),
    )
    .into_iter()
    .map(|q| q.query)
    .collect();
    let time = |queries: &[String]| {
        let mut t: Vec<Duration> = queries
            .iter()
            .map(|q| {
                let s = Instant::now();
                search::search(&index.index, &snapshot, q, 10, None);
                s.elapsed()
            })
            .collect();
        t.sort();
        t
    };
    let empty = time(&queries);
    let words = [
        "send", "email", "issue", "create", "list", "delete", "file", "page", "team", "channel",
        "message", "calendar", "event", "pod", "log", "branch", "customer", "refund", "weather",
        "table", "query", "user", "project", "repo",
    ];
    for i in 0..MAX_RECORDS {
        let q = format!(
            "{} {} {} {} n{i}",
            words[i % words.len()],
            words[(i / 3) % words.len()],
            words[(i / 7) % words.len()],
            words[(i / 11) % words.len()]
        );
        let tool = &snapshot.tools[i % snapshot.tools.len()].name;
        learned().add(&q, tool, None);
    }
    let full = time(&queries);
    println!(
        "\n## The learned part's cost, in process ({} tools, {} queries)\n\n| remembered queries | median | p95 |\n|---|---|---|\n| 0 | {} | {} |\n| {} | {} | {} |",
        snapshot.tools.len(),
        queries.len(),
        us(percentile(&empty, 0.5)),
        us(percentile(&empty, 0.95)),
        learned().len(),
        us(percentile(&full, 0.5)),
        us(percentile(&full, 0.95)),
    );
}

/// `evo-bench --learning-offline SET… [--model DIR]`: the same learned
/// part of the same ranking, in process (no daemon, no sessions): each
/// pair's feedback query is remembered for its tool directly. For tuning on
/// development sets in seconds; the numbers that count come from
/// `--learning`, through real sessions.
pub fn learning_offline(catalog_path: &Path, sets: &[PathBuf], model: Option<&Path>) {
    let catalog = searcheval::load_catalog(catalog_path);
    let snap = searcheval::snapshot(&catalog);
    let index = searcheval::index_of(&snap);
    let model = model.map(|dir| {
        let encoder = Encoder::load(dir, None).expect("model");
        let pool = Pool::new(1).expect("one embedding thread");
        let (docs, _, _) = embed_catalog(&encoder, &pool, &snap);
        (encoder, pool, docs)
    });
    let encode = |q: &str| -> Option<Arc<[f32]>> {
        model.as_ref().map(|(encoder, pool, _)| {
            let v = pool.run(|| encoder.encode(&[q], TextKind::Query, QUERY_TOKENS));
            Arc::from(v.expect("a query's vector").remove(0))
        })
    };
    let rank = |q: &str, v: Option<&Arc<[f32]>>| -> Vec<String> {
        let stages = match (v, &model) {
            (Some(v), Some((_, _, docs))) => Stages::all(Semantic { docs, query: v }),
            _ => Stages::LEXICAL,
        };
        search::search_with(&index.index, &snap, q, 10, None, &stages)
            .hits
            .iter()
            .map(|h| h.entry.name.clone())
            .collect()
    };
    let splits: u64 = std::env::var("EVO_BENCH_LEARN_SPLITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    for set in sets {
        let pairs = load_pairs(set);
        let show = shows_misses(set);
        let tests: Vec<Option<Arc<[f32]>>> = pairs.iter().map(|p| encode(&p.test)).collect();
        let feedbacks: Vec<Option<Arc<[f32]>>> =
            pairs.iter().map(|p| encode(&p.feedback)).collect();
        let rank_all = || -> Vec<Vec<String>> {
            pairs
                .iter()
                .zip(&tests)
                .map(|(p, v)| rank(&p.test, v.as_ref()))
                .collect()
        };
        let teach = |only: &dyn Fn(&Pair) -> bool| {
            learned().forget(None);
            for (p, v) in pairs.iter().zip(&feedbacks) {
                if only(p) {
                    learned().add(&p.feedback, &p.tool, v.clone());
                }
            }
        };
        teach(&|_| false);
        let before = rank_all();
        let name = set
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        println!(
            "\n## Learning from use, in process: {name}{}",
            if model.is_some() {
                ", with the model"
            } else {
                ", lexical"
            }
        );
        // Split by server, pooled over the splits.
        let mut split = Split::default();
        for seed in 0..splits {
            teach(&|p| in_first_half(&p.server, seed));
            split.add(&pairs, &before, &rank_all(), seed);
        }
        split.print(&format!(
            "Split by server ({splits} splits pooled): feedback for half A only"
        ));
        teach(&|_| true);
        let after = rank_all();
        let mut rows: [[Scores; 2]; 2] = Default::default();
        for ((p, b), a) in pairs.iter().zip(&before).zip(&after) {
            let kind = usize::from(is_control(p));
            if kind == 1 && p.test_tool.is_none() {
                continue;
            }
            rows[kind][0].add(right_rank(p, b));
            rows[kind][1].add(right_rank(p, a));
            if show {
                print_miss(p, b, a);
            }
        }
        println!("\n### Every pair's feedback remembered\n\n{HEADER}");
        println!("{}", rows[0][0].row("pairs, off"));
        println!("{}", rows[0][1].row("pairs, on"));
        println!("{}", rows[1][0].row("controls (own right tool), off"));
        println!("{}", rows[1][1].row("controls (own right tool), on"));
        learned().forget(None);
    }
}
