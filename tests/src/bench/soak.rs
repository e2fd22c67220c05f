//! `evo-bench --soak`: a user's week in minutes. Three evod instances share
//! a redis-server behind haproxy running `examples/haproxy.cfg`; sessions of
//! both MCP eras make calls with fresh arguments through it while the
//! children crash every few hundred calls, one instance is SIGKILLed and
//! started again, and Redis is restarted; approvals are raced between
//! instances. One table: per phase the calls, what became of them and their
//! latency; approvals consumed twice; evod's memory through the run.
//!
//! It installs nothing: without `haproxy` or `redis-server` on PATH it says
//! "skipped: …" and exits 0.

mod approvals;
mod report;
mod wire;

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use self::approvals::{PERMISSIONS, Race, Targets, race};
use self::report::{Memory, Phase, Tally};
use self::wire::{Era, Session};
use evo_tests::harness::{
    daemon::server,
    http::{request, wait_http},
    instances::{Instance, instance_of, store_of},
    locations::repo_root,
    ports::free_port,
    process::{TempDir, end_started_on_signal, ended, on_path, rss_kib, started},
    redis::Redis,
    servers::fixture_server,
    wait::eventually,
};

/// How big a run is.
pub struct Size {
    pub calls: usize,
    pub sessions: usize,
    pub approvals: usize,
    /// Each crashy child exits without answering on every N-th call.
    pub crash_every: u64,
    /// Crashy children per instance, the calls spread over them (each
    /// child's crashes must stay under evod's crash-loop limit, 5 a minute).
    pub children: usize,
    /// Client threads, each with one call in flight.
    pub workers: usize,
    /// Calls a second over all sessions (0: as fast as they go). A user's
    /// pace, and the crashes spread so that no child reaches evod's
    /// crash-loop limit.
    pub rate: usize,
}

impl Size {
    /// The full run, or `--quick`'s smoke check; `--calls N`,
    /// `--sessions N`, `--approvals N`, `--crash-every N`, `--children N`,
    /// `--workers N` and `--rate N` override.
    pub fn from_args(quick: bool, args: &[String]) -> Size {
        let mut s = if quick {
            Size {
                calls: 2_000,
                sessions: 20,
                approvals: 10,
                crash_every: 200,
                children: 2,
                workers: 4,
                rate: 0,
            }
        } else {
            Size {
                calls: 100_000,
                sessions: 200,
                approvals: 500,
                crash_every: 500,
                children: 4,
                workers: 20,
                rate: 300,
            }
        };
        let flag = |name: &str| -> Option<usize> {
            let i = args.iter().position(|a| a == name)?;
            args.get(i + 1)?.parse().ok()
        };
        s.calls = flag("--calls").unwrap_or(s.calls);
        s.sessions = flag("--sessions").unwrap_or(s.sessions);
        s.approvals = flag("--approvals").unwrap_or(s.approvals);
        s.crash_every = flag("--crash-every").map_or(s.crash_every, |n| n as u64);
        s.children = flag("--children").unwrap_or(s.children).max(1);
        s.rate = flag("--rate").unwrap_or(s.rate);
        s.workers = flag("--workers").unwrap_or(s.workers).clamp(1, s.sessions);
        s
    }
}

/// haproxy on the shipped config, its ports substituted; killed on drop.
struct Haproxy {
    child: Child,
    dir: TempDir,
}

impl Haproxy {
    fn start(front: u16, backends: &[u16]) -> Haproxy {
        let shipped = repo_root().join("examples/haproxy.cfg");
        let mut text = std::fs::read_to_string(&shipped)
            .unwrap_or_else(|e| panic!("{}: {e}", shipped.display()));
        let mut swap = |from: &str, to: u16| {
            assert!(text.contains(from), "{} names no {from}", shipped.display());
            text = text.replace(from, &format!("127.0.0.1:{to}"));
        };
        swap("127.0.0.1:8787", front);
        for (k, &port) in backends.iter().enumerate() {
            swap(&format!("127.0.0.1:880{}", k + 1), port);
        }
        let dir = TempDir::new("haproxy");
        let cfg = dir.path().join("haproxy.cfg");
        std::fs::write(&cfg, text).expect("write haproxy.cfg");
        let log = File::create(dir.path().join("haproxy.log")).expect("haproxy log");
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn haproxy");
        started(child.id());
        let h = Haproxy { child, dir };
        eventually(
            format!(
                "haproxy to answer on {front} (log in {})",
                h.dir.path().display()
            ),
            Duration::from_secs(20),
            || {
                std::net::TcpStream::connect(("127.0.0.1", front)).is_ok()
                    && request(front, "GET", "/readyz", &[], b"").status == 200
            },
        );
        // Every backend's health checks passed (`rise 2`, `inter 1s`).
        std::thread::sleep(Duration::from_secs(3));
        h
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        ended(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config of one instance: crashy children, the approvals child, HTTP
/// with API tokens, the shared store.
fn config(port: u16, store: &Value, size: &Size) -> Value {
    let every = size.crash_every.to_string();
    let mut servers: serde_json::Map<String, Value> = (0..size.children)
        .map(|k| (format!("fx{k}"), fixture_server(&["--crash-every", &every])))
        .collect();
    servers.insert("gate".into(), fixture_server(&[]));
    json!({
        "mcpServers": servers,
        "serve": {"http": {"listen": format!("127.0.0.1:{port}"), "auth": {}}},
        "store": store,
    })
}

/// Waits until every child of `i` has tools listed.
fn listed(i: &Instance, size: &Size) {
    let mut ids: Vec<String> = (0..size.children).map(|k| format!("fx{k}")).collect();
    ids.push("gate".into());
    i.d.wait_status("every child listed", |s| {
        ids.iter()
            .all(|id| server(s, id).is_some_and(|v| v["tools"].as_u64() > Some(0)))
    });
}

/// The phases, each a share (per cent) of the calls; the chaos of a phase
/// happens once a tenth of its calls are made.
const PHASES: [(Phase, usize); 5] = [
    (Phase::WarmUp, 10),
    (Phase::Steady, 30),
    (Phase::Kill, 20),
    (Phase::RedisRestart, 15),
    (Phase::SteadyAgain, 25),
];

/// The index of the instance the soak SIGKILLs.
const VICTIM: usize = 2;

/// Everything the client threads share.
struct Load<'a> {
    size: &'a Size,
    targets: Targets<'a>,
    next: AtomicUsize,
    races: Mutex<Vec<Race>>,
    /// When ticket 0 was due (the pace's origin).
    origin: Instant,
}

impl Load<'_> {
    /// Calls tickets until `end`, round-robin over `sessions`.
    fn work(&self, sessions: &mut [Session], end: usize) -> Tally {
        let mut tally = Tally::default();
        let stride = (self.size.calls / self.size.approvals.max(1)).max(1);
        let mut turn = 0;
        loop {
            let t = self.next.fetch_add(1, Ordering::Relaxed);
            if t >= end {
                return tally;
            }
            if self.size.rate > 0 {
                let due = self.origin + Duration::from_secs_f64(t as f64 / self.size.rate as f64);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
            let s = &mut sessions[turn % sessions.len()];
            turn += 1;
            let child = format!("fx{}", t % self.size.children);
            // Fresh arguments every call, and the answer they must give.
            let (tool, args, expect) = if t.is_multiple_of(2) {
                let (a, b) = (t as i64, (turn * 7 + 3) as i64);
                (
                    format!("{child}_add"),
                    json!({"a": a, "b": b}),
                    (a + b).to_string(),
                )
            } else {
                let text = format!("call-{t}-{turn}");
                (format!("{child}_echo"), json!({ "text": text }), text)
            };
            tally.add(s.call(&tool, args, &expect));
            if self.size.approvals > 0
                && t % stride == stride / 2
                && t / stride < self.size.approvals
            {
                let held = sessions.iter_mut().find(|s| s.era == Era::Initialize);
                if let Some(s) = held {
                    let r = race(t / stride, s, &self.targets);
                    self.races.lock().unwrap_or_else(|p| p.into_inner()).push(r);
                }
            }
        }
    }
}

/// RSS of every instance now (0 for one not running).
fn rss_all(instances: &[Instance]) -> Vec<u64> {
    instances
        .iter()
        .map(|i| i.d.child.as_ref().map_or(0, |c| rss_kib(c.id())))
        .collect()
}

pub fn soak_benchmarks(quick: bool, args: &[String]) {
    if !on_path("haproxy") {
        println!("skipped: haproxy not on PATH (apt-get install -y haproxy)");
        return;
    }
    end_started_on_signal();
    let Some(mut redis) = Redis::start("soak") else {
        println!("skipped: redis-server / redis-cli not on PATH (apt-get install -y redis-server)");
        return;
    };
    let size = Size::from_args(quick, args);
    let store = store_of(&redis);
    let mut instances: Vec<Instance> = (0..3)
        .map(|_| instance_of(&|port| config(port, &store, &size), PERMISSIONS, &[]))
        .collect();
    for i in &instances {
        listed(i, &size);
    }
    let (code, out, err) = instances[0].d.ctl(&["token", "create", "soak"]);
    assert_eq!(code, 0, "token create: {err}");
    let token = out.trim().to_string();
    let bearer = format!("Bearer {token}");
    for i in &instances {
        eventually(
            "every instance to know the token",
            Duration::from_secs(20),
            || {
                request(
                    i.port,
                    "GET",
                    "/metrics",
                    &[("Authorization", &bearer)],
                    b"",
                )
                .status
                    == 200
            },
        );
    }
    let ports: Vec<u16> = instances.iter().map(|i| i.port).collect();
    let sockets: Vec<PathBuf> = instances.iter().map(|i| i.d.socket.clone()).collect();
    let front = free_port();
    let haproxy = Haproxy::start(front, &ports);
    let mut rss = Memory::start(&instances.iter().map(|i| i.d.pid()).collect::<Vec<_>>());
    rss.sample(&rss_all(&instances));
    let mut load = Load {
        size: &size,
        targets: Targets {
            ports: &ports,
            sockets: &sockets,
            front,
        },
        next: AtomicUsize::new(0),
        races: Mutex::new(Vec::new()),
        origin: Instant::now(),
    };
    // Sessions, half of each era, dealt to the workers in blocks.
    let mut sessions: Vec<Session> = (0..size.sessions)
        .map(|n| {
            let era = if n % 2 == 0 {
                Era::Initialize
            } else {
                Era::PerRequest
            };
            let mut s = Session::new(front, &token, era);
            s.initialize().expect("a session through haproxy");
            s
        })
        .collect();
    let per = size.sessions.div_ceil(size.workers);
    println!(
        "# evo soak: 3 instances behind haproxy, Redis {}, {} sessions ({} workers), {} calls ({}), {} approvals, children crash every {} calls ({} crashy children per instance)\n",
        redis.url(),
        size.sessions,
        size.workers,
        size.calls,
        if size.rate > 0 {
            format!("paced at {} a second", size.rate)
        } else {
            "unpaced".to_string()
        },
        size.approvals,
        size.crash_every,
        size.children
    );
    let mut tallies: Vec<(Phase, Tally, Duration, String)> = Vec::new();
    let mut end = 0;
    let started = Instant::now();
    load.origin = started;
    for (phase, share) in PHASES {
        let begin = end;
        end = if phase == Phase::SteadyAgain {
            size.calls
        } else {
            end + size.calls * share / 100
        };
        let trigger = begin + (end - begin) / 10;
        // Each worker took one ticket past the last phase's end.
        load.next.store(begin, Ordering::Relaxed);
        let phase_start = Instant::now();
        let (tally, chaos) = std::thread::scope(|scope| {
            let chaos = scope.spawn(|| {
                if !matches!(phase, Phase::Kill | Phase::RedisRestart) {
                    return String::new();
                }
                while load.next.load(Ordering::Relaxed) < trigger {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let t = Instant::now();
                match phase {
                    Phase::Kill => {
                        kill_and_restart(&mut instances[VICTIM], &mut rss, &size);
                        format!(
                            "instance {} SIGKILLed, serving again after {:.1} s",
                            VICTIM + 1,
                            t.elapsed().as_secs_f64()
                        )
                    }
                    _ => {
                        redis.restart();
                        format!(
                            "Redis SIGKILLed and answering again after {:.1} s",
                            t.elapsed().as_secs_f64()
                        )
                    }
                }
            });
            let workers: Vec<_> = sessions
                .chunks_mut(per)
                .map(|block| scope.spawn(|| load.work(block, end)))
                .collect();
            let mut tally = Tally::default();
            for w in workers {
                tally.merge(w.join().expect("a worker"));
            }
            (tally, chaos.join().expect("the chaos thread"))
        });
        eprintln!(
            "soak: {} done ({} calls, {:.0} s)",
            phase.name(),
            tally.calls,
            phase_start.elapsed().as_secs_f64()
        );
        rss.sample(&rss_all(&instances));
        tallies.push((phase, tally, phase_start.elapsed(), chaos));
    }
    let wall = started.elapsed();
    let restarts: Vec<u64> = instances.iter().map(|i| child_restarts(i, &size)).collect();
    let races = load.races.into_inner().unwrap_or_else(|p| p.into_inner());
    report::print(tallies, &races, &rss, &restarts, wall);
    drop(haproxy);
}

/// SIGKILLs instance `i`, starts it again on its config and port, and
/// waits until it serves; its RSS rows follow it.
fn kill_and_restart(i: &mut Instance, rss: &mut Memory, size: &Size) {
    rss.before_kill(VICTIM, i.d.child.as_ref().map_or(0, |c| rss_kib(c.id())));
    if let Some(mut child) = i.d.child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    eprintln!("soak: instance {} SIGKILLed", VICTIM + 1);
    // The first life's log, kept beside the second's.
    let _ = std::fs::copy(&i.d.log, i.d.log.with_extension("log.1"));
    std::thread::sleep(Duration::from_millis(500));
    i.d.spawn(&[], &[]);
    eprintln!("soak: instance {} started again", VICTIM + 1);
    wait_http(&i.d, i.port);
    listed(i, size);
    eprintln!("soak: instance {} serving", VICTIM + 1);
    rss.restarted(VICTIM, i.d.pid(), rss_kib(i.d.pid()));
}

/// Restarts of the crashy children `evoctl status` counts on `i`.
fn child_restarts(i: &Instance, size: &Size) -> u64 {
    let s = i.d.ctl_json(&["status"]);
    (0..size.children)
        .filter_map(|k| server(&s, &format!("fx{k}"))?["restarts"].as_u64())
        .sum()
}
