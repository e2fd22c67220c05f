//! `evo-bench --offers`: a 1 MiB text resource read through evo against the
//! same fixture read directly (alternating rounds, one run), and
//! `prompts/list` of 100 servers' prompts from a snapshot, in process.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use evo_daemon::catalog::resources::{OfferCaps, Offered, Offers};
use evo_daemon::child::link::ServerLink;
use rmcp::model::{Prompt, PromptArgument};
use serde_json::json;

use crate::timing::{median, ms};
use evo_tests::harness::{
    daemon::Daemon, locations::fixture, mcp::McpClient, servers::fixture_server,
};

const MIB: usize = 1 << 20;

fn read_big(c: &mut McpClient) -> Duration {
    let t = Instant::now();
    let r = c.request("resources/read", json!({"uri": format!("fx://big/{MIB}")}));
    let took = t.elapsed();
    let len = r["result"]["contents"][0]["text"]
        .as_str()
        .map_or(0, str::len);
    assert_eq!(
        len,
        MIB,
        "read failed: {}",
        &r.to_string()[..200.min(r.to_string().len())]
    );
    took
}

pub fn offer_benchmarks() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&["--offers"])}}));
    d.wait_ready(&["fx"]);
    let mut through = d.legacy_session();
    let mut direct = McpClient::spawn_cmd(Command::new(fixture()).arg("--offers"));
    direct.initialize();
    // Warm both paths.
    read_big(&mut through);
    read_big(&mut direct);
    let (mut via, mut own, mut added) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..15 {
        let (mut v, mut o) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            v.push(read_big(&mut through));
            o.push(read_big(&mut direct));
        }
        let (mv, mo) = (median(&mut v), median(&mut o));
        added.push(mv.saturating_sub(mo));
        via.extend(v);
        own.extend(o);
    }
    println!("\n## resources/read of a 1 MiB text resource (60 reads each, alternating rounds)\n");
    println!("| path | median |");
    println!("|---|---|");
    println!("| the fixture directly | {} ms |", ms(median(&mut own)));
    println!(
        "| through evo (shim, socket) | {} ms |",
        ms(median(&mut via))
    );
    println!(
        "| added, median over rounds | **{} ms** (budget 2) |",
        ms(median(&mut added))
    );
    drop((through, direct, d));

    // prompts/list over 100 servers' prompts, from a snapshot.
    let servers: serde_json::Map<String, serde_json::Value> = (0..100)
        .map(|i| (format!("s{i:03}"), json!({"command": "unused"})))
        .collect();
    let text = json!({"mcpServers": servers}).to_string();
    let specs = evo_daemon::config::parse(&text, std::path::Path::new("bench.json"), &|_| None)
        .map(|c| c.servers)
        .unwrap_or_default();
    let links: Vec<Arc<ServerLink>> = specs
        .iter()
        .map(|s| Arc::new(ServerLink::new(s.id.clone(), s.timeout, None)))
        .collect();
    let offered: Vec<Offered> = (0..specs.len())
        .map(|_| Offered {
            caps: OfferCaps {
                prompts: true,
                ..Default::default()
            },
            prompts: (0..5)
                .map(|j| {
                    Prompt::new(
                        format!("prompt_{j}"),
                        Some("Draft a message to a team about a change, in their words."),
                        Some(vec![
                            PromptArgument::new("topic").with_required(true),
                            PromptArgument::new("tone"),
                        ]),
                    )
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let held = evo_daemon::catalog::resources::QuarantinedOffers::new();
    let offers = Offers::build(
        specs
            .iter()
            .zip(&links)
            .zip(&offered)
            .map(|((s, l), o)| (s, l, o, &held)),
        &Default::default(),
    );
    let mut times = Vec::new();
    let mut count = 0;
    for _ in 0..2_000 {
        let t = Instant::now();
        let page = evo_daemon::session::offers::prompts_page(&offers, None);
        times.push(t.elapsed());
        count = page.map_or(0, |p| p.prompts.len());
    }
    println!(
        "\n| prompts/list of {count} prompts from 100 servers, from a snapshot, in process | median **{:.1} µs** (budget 200) |",
        median(&mut times).as_secs_f64() * 1e6
    );
    println!("|---|---|");
}
