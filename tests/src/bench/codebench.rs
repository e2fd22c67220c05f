//! `evo-bench --code-mode`: what `run_code` costs and saves against direct
//! `tools/call`s, through a real evod with the fixture, on the control
//! socket (no shim, so the numbers are evod's own): the bytes a client
//! receives and the wall time of a 20-call task done either way; the time a
//! call inside a script adds over a direct call; the engine's start per
//! run; evod's RSS with 10 scripts running at once; and evod's CPU per
//! call (from `/proc/PID/stat`) beside the latency.
//!
//! Each comparison alternates its sides in rounds in one run, as every
//! bench here does.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::timing::{median, ms, us};
use evo_tests::harness::{
    daemon::Daemon, mcp::McpClient, process::rss_kib, servers::fixture_server, wait::eventually,
};

/// Calls a script may make here: 200 sequential ones in one run, and more.
const MAX_CALLS: usize = 1000;
/// The text each call of the 20-call task echoes: about a small record.
const RECORD_BYTES: usize = 400;

/// A request on `c`: the response and the bytes it took on the wire (the
/// JSON line as evod writes it: compact, one line).
fn request(c: &mut McpClient, method: &str, params: Value) -> (Value, usize) {
    let r = c.request(method, params);
    let bytes = serde_json::to_string(&r).map_or(0, |s| s.len() + 1);
    (r, bytes)
}

fn call(c: &mut McpClient, name: &str, args: Value) -> (Value, usize) {
    let (r, bytes) = request(c, "tools/call", json!({"name": name, "arguments": args}));
    assert!(
        r["result"].is_object() && r["result"]["isError"] != json!(true),
        "{name} failed: {r}"
    );
    (r, bytes)
}

fn run_code(c: &mut McpClient, code: &str) -> (Value, usize) {
    call(c, "run_code", json!({"code": code}))
}

fn record(i: usize) -> String {
    let head = format!("record {i}: ");
    format!("{head}{}", "x".repeat(RECORD_BYTES - head.len()))
}

/// evod's CPU time so far (user + system), from `/proc/PID/stat`.
pub(crate) fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces), from field 3:
    // utime and stime are fields 14 and 15.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let total = ticks(11) + ticks(12);
    Duration::from_nanos(total * 1_000_000_000 / per_second)
}

pub fn code_mode_benchmarks(quick: bool) {
    println!(
        "# evo code mode benchmarks ({})",
        if quick { "quick" } else { "full" }
    );
    let d = Daemon::start(&json!({
        "mcpServers": {"fx": fixture_server(&[])},
        "code_mode": {"max_calls": MAX_CALLS},
    }));
    d.wait_ready(&["fx"]);
    let mut c = McpClient::connect_socket(&d.socket, "legacy");
    c.initialize();
    twenty_call_task(&mut c, if quick { 10 } else { 40 });
    let start = engine_start(&mut c, if quick { 100 } else { 500 });
    per_call(&mut c, start, if quick { 3 } else { 30 });
    cpu_per_call(&d, &mut c, if quick { 1000 } else { 10_000 });
    memory(&d);
}

/// The 20-call task: 20 direct calls, one script returning all 20 results,
/// one script returning what the task wants of them (a digest).
fn twenty_call_task(c: &mut McpClient, rounds: usize) {
    let direct = |c: &mut McpClient| {
        let mut bytes = 0;
        for i in 0..20 {
            let (r, b) = call(c, "fx_echo", json!({"text": record(i)}));
            assert_eq!(r["result"]["content"][0]["text"], record(i));
            bytes += b;
        }
        bytes
    };
    let records = format!(
        "const rec = (i) => {{ const h = 'record ' + i + ': '; return h + 'x'.repeat({RECORD_BYTES} - h.length); }};"
    );
    let all = format!(
        "{records} const out = []; for (let i = 0; i < 20; i++) out.push(await tools.fx_echo({{text: rec(i)}})); return out;"
    );
    let digest = format!(
        "{records} let n = 0, bytes = 0; for (let i = 0; i < 20; i++) {{ const t = await tools.fx_echo({{text: rec(i)}}); n += t.startsWith('record') ? 1 : 0; bytes += t.length; }} return {{records: n, bytes}};"
    );
    let parallel = format!(
        "{records} const out = await Promise.all(Array.from({{length: 20}}, (_, i) => tools.fx_echo({{text: rec(i)}}))); return {{records: out.length}};"
    );
    let scripts: [(&str, &str); 3] = [
        ("one `run_code`, returning all 20 results", &all),
        ("one `run_code`, returning a digest of them", &digest),
        (
            "one `run_code`, the 20 calls in `Promise.all`, a digest",
            &parallel,
        ),
    ];
    let mut wall: Vec<Vec<Duration>> = vec![Vec::new(); 1 + scripts.len()];
    let mut bytes = vec![0usize; 1 + scripts.len()];
    for _ in 0..2 {
        direct(c);
        for (_, code) in &scripts {
            run_code(c, code);
        }
    }
    for _ in 0..rounds {
        let t = Instant::now();
        bytes[0] = direct(c);
        wall[0].push(t.elapsed());
        for (i, (_, code)) in scripts.iter().enumerate() {
            let t = Instant::now();
            let (r, b) = run_code(c, code);
            wall[i + 1].push(t.elapsed());
            assert_eq!(r["result"]["structuredContent"]["calls"], 20, "{r}");
            bytes[i + 1] = b;
        }
    }
    println!(
        "\n## A 20-call task (fx_echo of a {RECORD_BYTES}-byte record each), on evod's socket, {rounds} alternating rounds\n"
    );
    println!("| how | responses | bytes the client receives | wall time, median ms |");
    println!("|---|---|---|---|");
    println!(
        "| 20 direct `tools/call` | 20 | {} | {} |",
        bytes[0],
        ms(median(&mut wall[0]))
    );
    for (i, (name, _)) in scripts.iter().enumerate() {
        println!(
            "| {name} | 1 | {} | {} |",
            bytes[i + 1],
            ms(median(&mut wall[i + 1]))
        );
    }
}

/// An empty script's round trip against `run_code` refused before any
/// engine starts (no `code`): the difference is the engine's start and end.
fn engine_start(c: &mut McpClient, runs: usize) -> Duration {
    let mut empty = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..20 {
        run_code(c, "return 1");
    }
    for _ in 0..runs {
        let t = Instant::now();
        let (r, _) = run_code(c, "return 1");
        empty.push(t.elapsed());
        assert_eq!(r["result"]["structuredContent"]["result"], 1, "{r}");
        let t = Instant::now();
        let (r, _) = request(
            c,
            "tools/call",
            json!({"name": "run_code", "arguments": {}}),
        );
        refused.push(t.elapsed());
        assert_eq!(r["result"]["isError"], true, "{r}");
    }
    let (empty, refused) = (median(&mut empty), median(&mut refused));
    println!("\n## Engine start per run ({runs} runs each, alternating)\n");
    println!("| what | median µs |");
    println!("|---|---|");
    println!("| `run_code` `return 1`, round trip | {} |", us(empty));
    println!(
        "| `run_code` without `code` (refused before the engine), round trip | {} |",
        us(refused)
    );
    let start = empty.saturating_sub(refused);
    println!(
        "| **engine start and end per run** (difference) | **{}** (goal ≤ 5,000) |",
        us(start)
    );
    start
}

/// 200 sequential calls inside one script against 200 direct calls.
fn per_call(c: &mut McpClient, engine: Duration, rounds: usize) {
    const N: usize = 200;
    let script = format!(
        "let n = 0; for (let i = 0; i < {N}; i++) n += (await tools.fx_echo({{text: String(i)}})).length; return n;"
    );
    let mut direct = Vec::new();
    let mut scripted = Vec::new();
    let mut paired = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        for i in 0..N {
            let (r, _) = call(c, "fx_echo", json!({"text": i.to_string()}));
            assert_eq!(r["result"]["content"][0]["text"], i.to_string());
        }
        let d = t.elapsed() / N as u32;
        let t = Instant::now();
        let (r, _) = run_code(c, &script);
        let s = t.elapsed().saturating_sub(engine) / N as u32;
        assert_eq!(r["result"]["structuredContent"]["calls"], N, "{r}");
        direct.push(d);
        scripted.push(s);
        paired.push(s.as_secs_f64() - d.as_secs_f64());
    }
    paired.sort_by(f64::total_cmp);
    let added = paired[paired.len() / 2];
    println!(
        "\n## Time per call: {N} sequential calls in one script against {N} direct calls ({rounds} alternating rounds)\n"
    );
    println!("| what | per call, median µs |");
    println!("|---|---|");
    println!(
        "| direct `tools/call` fx_echo on the socket (client round trip each) | {} |",
        us(median(&mut direct))
    );
    println!(
        "| inside one `run_code` (run time less the engine start, / {N}) | {} |",
        us(median(&mut scripted))
    );
    println!(
        "| **added per call inside a script** (paired by round; negative: faster) | **{:.1}** (goal ≤ 50) |",
        added * 1e6
    );
}

/// evod's own CPU per call, direct and inside scripts, beside latency.
fn cpu_per_call(d: &Daemon, c: &mut McpClient, calls: usize) {
    let pid = d.pid();
    let per_run = 200;
    let script = format!(
        "for (let i = 0; i < {per_run}; i++) await tools.fx_echo({{text: String(i)}}); return 1;"
    );
    let (cpu0, t0) = (cpu_time(pid), Instant::now());
    for i in 0..calls {
        call(c, "fx_echo", json!({"text": i.to_string()}));
    }
    let (direct_cpu, direct_wall) = (cpu_time(pid) - cpu0, t0.elapsed());
    let (cpu0, t0) = (cpu_time(pid), Instant::now());
    for _ in 0..calls / per_run {
        run_code(c, &script);
    }
    let (script_cpu, script_wall) = (cpu_time(pid) - cpu0, t0.elapsed());
    let each = |d: Duration| us(d / calls as u32);
    println!("\n## evod's CPU per call ({calls} calls each way; /proc/PID/stat utime + stime)\n");
    println!("| how | evod CPU per call µs | wall per call µs |");
    println!("|---|---|---|");
    println!(
        "| direct `tools/call` | {} | {} |",
        each(direct_cpu),
        each(direct_wall)
    );
    println!(
        "| inside `run_code` ({per_run} calls a run) | {} | {} |",
        each(script_cpu),
        each(script_wall)
    );
}

/// evod's RSS idle, with 10 direct slow calls in flight, and with 10
/// scripts running at once, each awaiting a slow call.
fn memory(d: &Daemon) {
    const SCRIPTS: usize = 10;
    let pid = d.pid();
    let mut clients: Vec<McpClient> = (0..SCRIPTS)
        .map(|_| {
            let mut c = McpClient::connect_socket(&d.socket, "legacy");
            c.initialize();
            // Warm: each session has run a script and called the tool once.
            run_code(&mut c, "return await tools.fx_add({a: 1, b: 1});");
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500)); // the point: RSS at rest
    let idle = rss_kib(pid);
    let mut in_flight = |label: &str, ms: u64, request: &dyn Fn(u64) -> Value| -> u64 {
        for (i, c) in clients.iter_mut().enumerate() {
            c.send(&json!({"jsonrpc": "2.0", "id": 900 + i, "method": "tools/call", "params": request(ms + i as u64)}));
        }
        eventually(label, Duration::from_secs(30), || {
            let log = d.log_text();
            (0..SCRIPTS).all(|i| log.contains(&format!("sleep {} started", ms + i as u64)))
        });
        let rss = rss_kib(pid);
        for (i, c) in clients.iter_mut().enumerate() {
            let r = c.response(&json!(900 + i));
            assert!(r["result"]["isError"] != json!(true), "{r}");
        }
        rss
    };
    let direct = in_flight(
        "10 direct sleeps under way",
        3000,
        &|ms| json!({"name": "fx_sleep", "arguments": {"ms": ms}}),
    );
    let scripts = in_flight(
        "10 scripts' sleeps under way",
        3100,
        &|ms| json!({"name": "run_code", "arguments": {"code": format!("const t = await tools.fx_sleep({{ms: {ms}}}); return t;")}}),
    );
    let heavy = in_flight(
        "10 scripts holding 16 MiB each",
        3200,
        &|ms| json!({"name": "run_code", "arguments": {"code": format!("const a = new Array(1 << 20).fill(1.5); await tools.fx_sleep({{ms: {ms}}}); return a.length;")}}),
    );
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    let more = |kib: u64| format!("{:+.1}", (kib as f64 - idle as f64) / 1024.0);
    println!("\n## evod RSS with {SCRIPTS} scripts running at once\n");
    println!("| state | evod RSS MiB | against idle MiB |");
    println!("|---|---|---|");
    println!("| idle ({SCRIPTS} sessions open) | {} | |", mib(idle));
    println!(
        "| {SCRIPTS} direct `fx_sleep` calls in flight | {} | {} |",
        mib(direct),
        more(direct)
    );
    println!(
        "| **{SCRIPTS} scripts running**, each awaiting `fx_sleep` | {} | **{}** (goal ≤ +64) |",
        mib(scripts),
        more(scripts)
    );
    println!(
        "| {SCRIPTS} scripts each holding an array of 2^20 numbers (16 MiB), awaiting `fx_sleep` | {} | {} |",
        mib(heavy),
        more(heavy)
    );
}
