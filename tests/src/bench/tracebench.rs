//! `evo-bench --tracing`: what traces cost the call path. Four evods alike but
//! for `telemetry`: off; on, exporting to a receiver that answers; on, its
//! collector's port closed (down); on, its collector accepting and never
//! answering (hung). Each serves the fixture; echo calls through a shim, the
//! four taking turns in rounds (each round in another order). Calls/s from
//! each round's wall time, evod's CPU per call (its user + system time, the
//! exporter's threads included) from `/proc/PID/stat`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::codebench::cpu_time;
use evo_tests::harness::{
    daemon::Daemon, mcp::McpClient, otlp::OtlpReceiver, ports::free_port, servers::fixture_server,
};

fn config(endpoint: Option<&str>) -> Value {
    let mut c = json!({"mcpServers": {"fx": fixture_server(&[])}});
    if let Some(url) = endpoint {
        c["telemetry"] = json!({"otlp_endpoint": url});
    }
    c
}

pub fn tracing_benchmarks(quick: bool) {
    let (rounds, per_round) = if quick { (6, 200) } else { (40, 250) };
    println!(
        "# evo tracing benchmarks ({})",
        if quick { "quick" } else { "full" }
    );
    let up = OtlpReceiver::start();
    let hung = OtlpReceiver::hanging();
    let down = format!("http://127.0.0.1:{}", free_port());
    let kinds: [(&str, Option<String>); 4] = [
        ("tracing off", None),
        ("on, collector up", Some(up.url())),
        ("on, collector down (port closed)", Some(down)),
        ("on, collector hung (never answers)", Some(hung.url())),
    ];
    let mut sides: Vec<(Daemon, McpClient)> = kinds
        .iter()
        .map(|(_, endpoint)| {
            let d = Daemon::start(&config(endpoint.as_deref()));
            d.wait_ready(&["fx"]);
            let c = d.legacy_session();
            (d, c)
        })
        .collect();
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    let mut cpu: Vec<Duration> = vec![Duration::ZERO; kinds.len()];
    for round in 0..=rounds {
        for i in (0..kinds.len()).map(|k| (k + round) % kinds.len()) {
            let (d, c) = &mut sides[i];
            let pid = d.pid();
            let (cpu0, t0) = (cpu_time(pid), Instant::now());
            for n in 0..per_round {
                let (text, is_error) = c.call_text("fx_echo", json!({"text": n.to_string()}));
                assert_eq!((text, is_error), (n.to_string(), false), "{}", kinds[i].0);
            }
            let (spent, took) = (cpu_time(pid) - cpu0, t0.elapsed());
            if round > 0 {
                // Round 0 warms evod, the child and the exporter.
                rates[i].push(per_round as f64 / took.as_secs_f64());
                cpu[i] += spent;
            }
        }
    }
    let calls = (rounds * per_round) as f64;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "\n## Echo calls through a shim ({rounds} rounds of {per_round} per side, alternating)\n"
    );
    println!(
        "Paired: the median over rounds of (this side's rate / tracing off's rate in the same round), \
         which load drifting between rounds cannot skew.\n"
    );
    println!(
        "| evod | calls/s (median of rounds) | vs off (paired median) | evod CPU per call µs |"
    );
    println!("|---|---|---|---|");
    for (((name, _), r), spent) in kinds.iter().zip(&rates).zip(&cpu) {
        let paired = median(r.iter().zip(&rates[0]).map(|(x, off)| x / off).collect());
        println!(
            "| {name} | {:.0} | {:+.1}% | {:.1} |",
            median(r.clone()),
            (paired - 1.0) * 100.0,
            spent.as_secs_f64() * 1e6 / calls
        );
    }
    println!(
        "\nSpans received by the collector that was up: {} exports.",
        up.exports()
    );
}
