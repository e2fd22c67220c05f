//! What the soak counts and how it prints it: per phase what became of the
//! calls and their latency, the raced approvals, evod's memory through the
//! run.

use std::collections::BTreeMap;
use std::time::Duration;

use super::approvals::Race;
use super::wire::{Outcome, Record};
use crate::timing::{ms, percentile};

/// The soak's phases, in order.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    WarmUp,
    Steady,
    Kill,
    RedisRestart,
    SteadyAgain,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::WarmUp => "warm-up",
            Phase::Steady => "steady",
            Phase::Kill => "instance SIGKILLed",
            Phase::RedisRestart => "Redis restarted",
            Phase::SteadyAgain => "steady again",
        }
    }
}

/// What became of a phase's calls.
#[derive(Default)]
pub struct Tally {
    pub calls: usize,
    pub ok: usize,
    pub refused: usize,
    pub lost: usize,
    pub retries: usize,
    pub reinitialized: usize,
    pub times: Vec<Duration>,
    /// Error answers by their text (digits masked), counted.
    pub refusals: BTreeMap<String, usize>,
    /// The first lost calls' reasons.
    pub losses: Vec<String>,
}

/// Error texts differ by ids and counts: one key per kind.
fn kind_of(text: &str) -> String {
    let masked: String = text
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect();
    masked.chars().take(120).collect()
}

impl Tally {
    pub fn add(&mut self, r: Record) {
        self.calls += 1;
        self.retries += r.retries;
        self.reinitialized += usize::from(r.reinitialized);
        self.times.push(r.took);
        match r.outcome {
            Outcome::Ok => self.ok += 1,
            Outcome::Refused(text) => {
                self.refused += 1;
                *self.refusals.entry(kind_of(&text)).or_default() += 1;
            }
            Outcome::Lost(why) => {
                self.lost += 1;
                if self.losses.len() < 10 {
                    self.losses.push(why);
                }
            }
        }
    }

    pub fn merge(&mut self, other: Tally) {
        self.calls += other.calls;
        self.ok += other.ok;
        self.refused += other.refused;
        self.lost += other.lost;
        self.retries += other.retries;
        self.reinitialized += other.reinitialized;
        self.times.extend(other.times);
        for (k, n) in other.refusals {
            *self.refusals.entry(k).or_default() += n;
        }
        for l in other.losses {
            if self.losses.len() < 10 {
                self.losses.push(l);
            }
        }
    }

    fn row(&mut self, name: &str, chaos: &str, took: Duration) -> String {
        self.times.sort();
        let (p50, p99) = if self.times.is_empty() {
            (String::new(), String::new())
        } else {
            (
                ms(percentile(&self.times, 0.5)),
                ms(percentile(&self.times, 0.99)),
            )
        };
        format!(
            "| {name} | {chaos} | {} | {} | {} | **{}** | {} | {} | {p50} | {p99} | {:.0} |",
            self.calls,
            self.ok,
            self.refused,
            self.lost,
            self.reinitialized,
            self.retries,
            self.calls as f64 / took.as_secs_f64().max(1e-9)
        )
    }
}

/// One evod process's RSS samples.
struct Row {
    label: String,
    pid: u32,
    cells: Vec<String>,
    /// Shown in the next sample's cell instead of a reading (the process
    /// is gone by then).
    pending: Option<String>,
}

/// evod's RSS (KiB) at start and after each phase, one row per process.
pub struct Memory {
    rows: Vec<Row>,
    /// Each instance's current row.
    current: Vec<usize>,
}

impl Memory {
    pub fn start(pids: &[u32]) -> Memory {
        Memory {
            rows: pids
                .iter()
                .enumerate()
                .map(|(k, &pid)| Row {
                    label: format!("evod {}", k + 1),
                    pid,
                    cells: Vec::new(),
                    pending: None,
                })
                .collect(),
            current: (0..pids.len()).collect(),
        }
    }

    /// A reading of every instance's current process (`kib[k]`).
    pub fn sample(&mut self, kib: &[u64]) {
        for (r, row) in self.rows.iter_mut().enumerate() {
            let cell = match self.current.iter().position(|&c| c == r) {
                Some(k) => kib[k].to_string(),
                None => row.pending.take().unwrap_or_else(|| "—".into()),
            };
            row.cells.push(cell);
        }
    }

    /// Instance `k`'s reading just before it is SIGKILLed.
    pub fn before_kill(&mut self, k: usize, kib: u64) {
        self.rows[self.current[k]].pending = Some(format!("{kib} (at SIGKILL)"));
    }

    /// Instance `k` started again as `pid`, `kib` its reading once serving.
    pub fn restarted(&mut self, k: usize, pid: u32, kib: u64) {
        let taken = self.rows[0].cells.len();
        let mut cells = vec![format!("{kib} (at its start)")];
        cells.resize(taken, "—".into());
        self.rows.push(Row {
            label: format!("evod {}, restarted", k + 1),
            pid,
            cells,
            pending: None,
        });
        self.current[k] = self.rows.len() - 1;
    }
}

/// The soak's tables.
pub fn print(
    phases: Vec<(Phase, Tally, Duration, String)>,
    races: &[Race],
    memory: &Memory,
    restarts: &[u64],
    wall: Duration,
) {
    println!(
        "| phase | chaos | calls | right answers | error answers | lost | re-initialized sessions | sent again | p50 ms | p99 ms | calls/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut all = Tally::default();
    for (phase, mut tally, took, chaos) in phases {
        println!("{}", tally.row(phase.name(), &chaos, took));
        all.merge(tally);
    }
    println!("{}", all.row("**all**", "", wall));
    let count = |n: usize| {
        races
            .iter()
            .filter(|r| matches!(r, Race::Passed(p) if *p == n))
            .count()
    };
    let broken: Vec<&String> = races
        .iter()
        .filter_map(|r| match r {
            Race::Broken(why) => Some(why),
            Race::Passed(_) => None,
        })
        .collect();
    let twice = races
        .iter()
        .filter(|r| matches!(r, Race::Passed(p) if *p > 1))
        .count();
    println!();
    println!(
        "| raced approvals | passed one call | consumed twice | passed no call | round not completed |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| {} | {} | **{twice}** | {} | {} |",
        races.len(),
        count(1),
        count(0),
        broken.len()
    );
    println!();
    println!(
        "| evod RSS KiB | pid | at start | after warm-up | after steady | after kill phase | after Redis phase | at end |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in &memory.rows {
        println!(
            "| {} | {} | {} |",
            row.label,
            row.pid,
            row.cells.join(" | ")
        );
    }
    println!();
    let restarts: Vec<String> = restarts
        .iter()
        .enumerate()
        .map(|(k, n)| format!("evod {}: {n}", k + 1))
        .collect();
    println!(
        "Crashy children restarted (evoctl status, the restarted instance since its restart): {}.",
        restarts.join(", ")
    );
    if !all.refusals.is_empty() {
        println!("\nError answers by kind (digits masked):\n");
        let mut kinds: Vec<(&String, &usize)> = all.refusals.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1));
        for (text, n) in kinds.iter().take(8) {
            println!("- {n} × {text}");
        }
    }
    if !all.losses.is_empty() {
        println!("\nLost calls (first {}):\n", all.losses.len());
        for l in &all.losses {
            println!("- {l}");
        }
    }
    for why in broken.iter().take(5) {
        println!("- approval round not completed: {why}");
    }
}
