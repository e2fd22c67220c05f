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

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use evo_daemon::names::exposed_name;
use evo_daemon::schema::example::example_arguments;
use evo_daemon::search;
use evo_daemon::search::learned::{MAX_RECORDS, learned};
use evo_daemon::search::model::{Encoder, TextKind, dot};
use evo_tests::harness::{
    daemon::Daemon, mcp::McpClient, servers::fixture_server, wait::eventually,
};
use rmcp::model::Tool;

use crate::searcheval;
use crate::timing::{percentile, us};

/// One line of a pair set.
struct Pair {
    kind: String,
    feedback: String,
    tool: String,
    test: String,
}

fn load_pairs(path: &Path) -> Vec<Pair> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("pair line");
            let tool = match &v["tool"] {
                Value::Array(p) => exposed_name(
                    p.first().and_then(Value::as_str).unwrap_or(""),
                    p.get(1).and_then(Value::as_str).unwrap_or(""),
                ),
                Value::String(s) => s.clone(),
                _ => String::new(),
            };
            Pair {
                kind: v["kind"].as_str().unwrap_or_default().to_string(),
                feedback: v["feedback"].as_str().unwrap_or_default().to_string(),
                tool,
                test: v["test"].as_str().unwrap_or_default().to_string(),
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
            "| {what} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            self.n,
            self.r1 as f64 / n,
            self.hit5 as f64 / n,
            self.hit5 as f64 / n,
            self.mrr / n
        )
    }
}

pub fn learning_benchmarks(catalog_path: &Path, sets: &[PathBuf]) {
    let catalog = searcheval::load_catalog(catalog_path);
    let schemas: std::collections::HashMap<String, Value> = catalog
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
        let ids: Vec<&str> = catalog.iter().map(|(id, _)| id.as_str()).collect();
        d.wait_ready(&ids);
        if model.is_some() {
            eventually("every tool embedded", Duration::from_secs(900), || {
                d.ctl_json(&["status"])["search"]["state"] == "ready"
            });
        }
        let mut probe = d.session(&["--mode", "dynamic"]);
        probe.initialize();
        let before: Vec<Vec<String>> = pairs.iter().map(|p| ranked(&mut probe, &p.test)).collect();
        let plain_before = searcheval::evaluate(&plain, &mut |q| ranked(&mut probe, q));
        drop(probe);
        // Feedback, a session each.
        let mut called = 0;
        for p in &pairs {
            let mut c = d.session(&["--mode", "dynamic"]);
            c.initialize();
            let _ = ranked(&mut c, &p.feedback);
            let schema = schemas
                .get(&p.tool)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let args = example_arguments(&schema);
            let (_, is_error) =
                c.call_text("call_tool", json!({"name": p.tool, "arguments": args}));
            if !is_error {
                called += 1;
            }
        }
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
        let (mut off, mut on) = (Scores::default(), Scores::default());
        let (mut controls, mut unchanged, mut lifted) = (0, 0, 0);
        // A dev set's misses may be read; a blind set's never.
        let show = std::env::var("EVO_BENCH_SHOW_MISSES").is_ok_and(|v| v == "1")
            && set.to_string_lossy().contains("dev");
        for ((p, b), a) in pairs.iter().zip(&before).zip(&after) {
            let rank = |r: &Vec<String>| r.iter().position(|n| *n == p.tool);
            if show && (is_control(p) != (rank(a) != Some(0))) {
                println!(
                    "{} {:?} → {}: off {:?} on {:?} top {:?}",
                    p.kind,
                    p.test,
                    p.tool,
                    rank(b),
                    rank(a),
                    a.iter().take(3).collect::<Vec<_>>()
                );
            }
            if is_control(p) {
                controls += 1;
                if b.iter().take(5).eq(a.iter().take(5)) {
                    unchanged += 1;
                }
                if rank(a).is_some_and(|r| r < 5) && rank(b).is_none_or(|r| r >= 5) {
                    lifted += 1;
                }
            } else {
                off.add(rank(b));
                on.add(rank(a));
            }
        }
        times.sort();
        let name = set
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        println!(
            "\n## Learning from use: {name} ({} pairs, {controls} control)\n",
            pairs.len()
        );
        println!(
            "feedback calls that succeeded: {called} of {}; queries remembered: {learned}\n",
            pairs.len()
        );
        println!("| test queries | pairs | recall@1 | recall@5 | hit@5 | MRR |");
        println!("|---|---|---|---|---|---|");
        println!("{}", off.row("learning off"));
        println!("{}", on.row("learning on, one feedback each"));
        println!(
            "\n| control pairs | top 5 unchanged | feedback tool lifted into the top 5 |\n|---|---|---|\n| {controls} | {unchanged} | {lifted} |"
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
