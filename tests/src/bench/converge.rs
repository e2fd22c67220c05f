//! `evo-bench --converge [--sizes 30,60,123]`: a cold start of many children
//! written on the official Python SDK (`tests/fixtures/sdk_server.py`, about a
//! second of CPU each to import the SDK and answer), from an empty cache.
//! For each size it measures the time until every server has listed its
//! tools, the restarts on the way, and the CPU the children used, and sets
//! the time against that CPU spread over the machine's cores (the least any
//! scheduling could take). Each size runs with the start gate at its default
//! and, side by side, with the gate open (`limits.max_concurrent_starts` =
//! the number of children: everything starts at once, as before the gate).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use evo_tests::harness::{
    daemon::Daemon,
    locations::{repo_root, sdk_python},
};
use serde_json::{Value, json};

/// Clock ticks per second of `/proc/PID/stat`'s CPU times.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// User plus system CPU seconds a live process has used.
fn cpu_seconds(pid: u64, ticks: f64) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command, which is in parentheses and may hold spaces.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: 12 and 13 here.
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    (field(11).unwrap_or(0.0) + field(12).unwrap_or(0.0)) / ticks
}

struct Outcome {
    listed: usize,
    took: Duration,
    restarts: u64,
    child_cpu: f64,
    peak_starting: usize,
}

fn run(n: usize, limit: Option<usize>, python: &PathBuf, deadline: Duration) -> Outcome {
    let script = repo_root().join("tests/fixtures/sdk_server.py");
    let servers: serde_json::Map<String, Value> = (0..n)
        .map(|i| {
            let id = format!("py{i:03}");
            let entry = json!({"command": python, "args": [script, id]});
            (id, entry)
        })
        .collect();
    let mut config = json!({"mcpServers": servers});
    if let Some(limit) = limit {
        config["limits"] = json!({"max_concurrent_starts": limit});
    }
    let begun = Instant::now();
    let d = Daemon::start(&config);
    let ticks = clock_ticks();
    let mut peak_starting = 0;
    loop {
        let s = d.ctl_json(&["status"]);
        let servers = s["servers"].as_array().cloned().unwrap_or_default();
        let listed = servers.iter().filter(|v| v["state"] == "ready").count();
        let starting = servers.iter().filter(|v| v["state"] == "starting").count();
        peak_starting = peak_starting.max(starting);
        let took = begun.elapsed();
        if listed == n || took > deadline {
            let restarts = servers.iter().filter_map(|v| v["restarts"].as_u64()).sum();
            let child_cpu = servers
                .iter()
                .filter_map(|v| v["pid"].as_u64())
                .map(|pid| cpu_seconds(pid, ticks))
                .sum();
            return Outcome {
                listed,
                took,
                restarts,
                child_cpu,
                peak_starting,
            };
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub fn converge_benchmarks(sizes: &[usize]) {
    let Some(python) = sdk_python() else {
        println!(
            "skipped: the convergence benchmark needs tests/interop/.venv (run ./tests/run once, or python3 -m venv tests/interop/.venv && tests/interop/.venv/bin/pip install -r tests/interop/requirements.txt)"
        );
        return;
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let default_limit = (2 * cores).max(4);
    // One child alone: the CPU a start needs with nothing competing.
    let solo = run(1, None, &python, Duration::from_secs(60));
    println!(
        "# cold start of Python-SDK children ({cores} cores; one child alone: listed in {:.1} s, {:.2} s CPU)\n",
        solo.took.as_secs_f64(),
        solo.child_cpu
    );
    println!(
        "| children | max_concurrent_starts | listed | time to all listed | restarts | peak starting | children's CPU | CPU / cores | time ÷ (CPU / cores) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        let need = n as f64 * solo.child_cpu.max(0.1) / cores as f64;
        let deadline = Duration::from_secs_f64(need * 4.0 + 120.0);
        for (label, limit) in [
            (format!("{default_limit} (default)"), None),
            (format!("{n} (gate open)"), Some(n)),
        ] {
            let o = run(n, limit, &python, deadline);
            let spread = o.child_cpu / cores as f64;
            let listed = if o.listed == n {
                format!("all {n}")
            } else {
                format!("**{}/{n}** (gave up)", o.listed)
            };
            println!(
                "| {n} | {label} | {listed} | {:.1} s | {} | {} | {:.0} s | {:.1} s | {:.2}× |",
                o.took.as_secs_f64(),
                o.restarts,
                o.peak_starting,
                o.child_cpu,
                spread,
                o.took.as_secs_f64() / spread.max(0.001)
            );
        }
    }
}
