//! `evo-bench --tracing`: what traces cost the call path. Five evods alike but
//! for `telemetry`: off; on, exporting to a receiver that answers; on, its
//! collector's port closed (down); on, its collector accepting and never
//! answering (hung); on, exporting over gRPC to a receiver that answers. Each
//! serves the fixture; echo calls through a shim, the five taking turns in rounds (each round in another order). Calls/s from
//! each round's wall time, evod's CPU per call (its user + system time, the
//! exporter's threads included) from `/proc/PID/stat`. First, in process and
//! so out of the machine's scheduling noise: the CPU the spans of one call
//! take on the calling thread, and in the whole process (the exporter's
//! threads included), traces off and on.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use evo_daemon::config::TelemetrySettings;
use evo_daemon::telemetry::{self, RequestSpan, ServerCallSpan};
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, Extensions, RequestMetaObject};

use crate::timing::cpu_time;
use evo_tests::harness::{
    daemon::Daemon, mcp::McpClient, otlp::OtlpReceiver, ports::free_port, servers::fixture_server,
};

fn config(telemetry: Option<&Value>) -> Value {
    let mut c = json!({"mcpServers": {"fx": fixture_server(&[])}});
    if let Some(telemetry) = telemetry {
        c["telemetry"] = telemetry.clone();
    }
    c
}

/// A CPU clock of this process (`libc::CLOCK_THREAD_CPUTIME_ID`,
/// `libc::CLOCK_PROCESS_CPUTIME_ID`).
fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// What the session does for one traced `tools/call`: the request span,
/// the server-call span and its `traceparent` in the call's `_meta`, both
/// ended with a result.
fn one_call(args: &serde_json::Map<String, Value>, response: &CallToolResponse) {
    let mut extensions = Extensions::default();
    let meta = RequestMetaObject::default();
    let span = RequestSpan::begin("tools/call", "s1", "7".into(), &meta, &mut extensions);
    if let Some(span) = &span {
        span.called("fx_echo", Some(args));
    }
    let call = ServerCallSpan::begin(&extensions, &meta, "fx", "echo", "fx_echo", args);
    if let Some(call) = &call {
        let mut sent = RequestMetaObject::default();
        sent.set_traceparent(call.traceparent());
        std::hint::black_box(&sent);
    }
    if let Some(call) = call {
        call.end("ok", response);
    }
    let _ = RequestSpan::call_answered(span, Ok(response.clone()));
}

/// The spans' CPU per call in process: chunks of 1,500 calls (3,000 spans,
/// under the queue's 4,096), each followed by a pause past the batch
/// interval so that every span is exported, not dropped.
fn in_process(quick: bool, up: &OtlpReceiver) {
    let chunks = if quick { 3 } else { 10 };
    let per_chunk = 1_500;
    let args = json!({"text": "hello"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let response =
        CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text("hello")]));
    let measure = |label: &str| {
        let (mut thread, mut process) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..chunks {
            let (t0, p0) = (
                cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID),
                cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID),
            );
            for _ in 0..per_chunk {
                one_call(&args, &response);
            }
            thread += cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID) - t0;
            std::thread::sleep(Duration::from_millis(1300));
            process += cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID) - p0;
        }
        let n = (chunks * per_chunk) as f64;
        println!(
            "| {label} | {:.2} | {:.2} |",
            thread.as_secs_f64() * 1e6 / n,
            process.as_secs_f64() * 1e6 / n
        );
    };
    println!("\n## The spans of one call, in process ({chunks} × {per_chunk} calls)\n");
    println!(
        "| traces | calling thread CPU per call µs | process CPU per call µs (exporter included) |"
    );
    println!("|---|---|---|");
    measure("off");
    telemetry::start(&TelemetrySettings {
        otlp_endpoint: Some(up.url()),
        ..TelemetrySettings::default()
    });
    measure("on, collector up");
    println!("\n(The receiver's threads, in this process too, only store the bodies.)");
}

pub fn tracing_benchmarks(quick: bool) {
    let (rounds, per_round) = if quick { (6, 200) } else { (40, 250) };
    println!(
        "# evo tracing benchmarks ({})",
        if quick { "quick" } else { "full" }
    );
    in_process(quick, &OtlpReceiver::start());
    let up = OtlpReceiver::start();
    let hung = OtlpReceiver::hanging();
    let grpc_up = OtlpReceiver::grpc();
    let down = format!("http://127.0.0.1:{}", free_port());
    let kinds: [(&str, Option<Value>); 5] = [
        ("tracing off", None),
        ("on, collector up", Some(up.telemetry(false))),
        (
            "on, collector down (port closed)",
            Some(json!({"otlp_endpoint": down})),
        ),
        (
            "on, collector hung (never answers)",
            Some(hung.telemetry(false)),
        ),
        ("on, gRPC collector up", Some(grpc_up.telemetry(false))),
    ];
    let mut sides: Vec<(Daemon, McpClient)> = kinds
        .iter()
        .map(|(_, telemetry)| {
            let d = Daemon::start(&config(telemetry.as_ref()));
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
        "\nSpans received by the collectors that were up: {} exports over OTLP/HTTP, {} over gRPC.",
        up.exports(),
        grpc_up.exports()
    );
}
