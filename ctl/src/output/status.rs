//! `evoctl status`, and what `evoctl refresh` reads from status while it
//! waits: the daemon, its files, search and store, a table of servers, then
//! notes on whatever needs a person's eye.

use std::time::{SystemTime, UNIX_EPOCH};

use evo_proto::ctl::{
    AuthStatus, AuthWireState, FileStatus, ProfileInfo, SearchStatus, ServerState, ServerStatus,
    StatusReport,
};

use super::integrity::integrity_lines;
use super::text::{Printout, age, table};

/// `evoctl status`.
pub fn status(s: &StatusReport) -> Printout {
    let mut p = Printout::default();
    p.lines(daemon_lines(s));
    p.line("");
    p.lines(server_table(s));
    p.lines(server_notes(s));
    p.lines(integrity_lines(s));
    p.lines(catalog_notes(s));
    p
}

/// The daemon, its HTTP endpoint, its files, search and the store.
fn daemon_lines(s: &StatusReport) -> Vec<String> {
    let mut lines = vec![format!(
        "evod {} (pid {}) on {}, up {}, {} tools",
        s.daemon.version,
        s.daemon.pid,
        s.daemon.socket,
        age(s.daemon.uptime_s),
        s.daemon.tools
    )];
    if let Some(why) = &s.daemon.guard_error {
        lines.push(format!("WARNING: {why}"));
    }
    if let Some(h) = &s.http {
        let scheme = if h.tls { "https" } else { "http" };
        let auth = if h.auth.is_empty() {
            "no auth".to_string()
        } else {
            format!("auth: {}", h.auth.join(", "))
        };
        lines.push(format!("http: {scheme}://{}{} ({auth})", h.listen, h.path));
        if let Some(why) = &h.warning {
            lines.push(format!("WARNING: {why}"));
        }
    }
    lines.extend(file_health("config", &s.config, true));
    lines.extend(file_health("permissions", &s.permissions, false));
    lines.push(search_line(&s.search));
    if s.store.kind != "file" {
        let url = s.store.url.as_deref().unwrap_or("");
        lines.push(match (&s.store.error, s.store.ok) {
            (_, true) => format!("store: {} {url} (reachable)", s.store.kind),
            (Some(why), false) => format!("store: {} {url} UNAVAILABLE: {why}", s.store.kind),
            (None, false) => format!("store: {} {url} UNAVAILABLE", s.store.kind),
        });
        if let Some(me) = &s.store.instance {
            lines.push(format!("instance: {me}"));
        }
    }
    lines
}

/// One row per configured server.
fn server_table(s: &StatusReport) -> Vec<String> {
    let rows: Vec<Vec<String>> = s
        .servers
        .iter()
        .map(|v| {
            vec![
                v.id.clone(),
                state_cell(v),
                v.tools.to_string(),
                v.source.to_string(),
                format!(
                    "{}/{}",
                    v.cached_tools.map_or("-".into(), |n| n.to_string()),
                    v.live_tools.map_or("-".into(), |n| n.to_string())
                ),
                v.last_refresh_age_s.map_or("-".into(), age),
                v.restarts.to_string(),
                v.config_hash.clone(),
                v.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if rows.is_empty() {
        return vec!["no servers configured".to_string()];
    }
    table(
        &[
            "SERVER",
            "STATE",
            "TOOLS",
            "SOURCE",
            "CACHED/LIVE",
            "REFRESHED",
            "RESTARTS",
            "HASH",
            "ERROR",
        ],
        &rows,
    )
}

/// What the table has no column for: logins, the start queue, shortened
/// names, annotations relied on, and a failed child's own last words.
fn server_notes(s: &StatusReport) -> Vec<String> {
    let mut lines = Vec::new();
    let with_auth: Vec<String> = s
        .servers
        .iter()
        .filter(|v| v.auth.state != AuthWireState::None)
        .map(|v| format!("{} auth: {}", v.id, auth_text(&v.auth)))
        .collect();
    if !with_auth.is_empty() {
        lines.push(String::new());
        lines.extend(with_auth);
    }
    let count = |state: ServerState| s.servers.iter().filter(|v| v.state == state).count();
    let queued = count(ServerState::Queued);
    if queued > 0 {
        let starting = count(ServerState::Starting);
        lines.push(format!(
            "\n{starting} starting, {queued} queued for a start slot (limits.max_concurrent_starts)"
        ));
    }
    if !s.shortened.is_empty() {
        let names: Vec<&str> = s.shortened.iter().map(|t| t.name.as_str()).collect();
        lines.push(format!(
            "\nnames already carrying their prefix, exposed once (the doubled form also routes): {}",
            names.join(", ")
        ));
    }
    if !s.annotations_relied_on.is_empty() {
        let relied: Vec<String> = s
            .annotations_relied_on
            .iter()
            .map(|r| format!("{} ({}: {} tools)", r.server, r.rule, r.tools))
            .collect();
        lines.push(format!(
            "\npermissions rely on these servers' own annotations (their claims, unchecked): {}",
            relied.join(", ")
        ));
    }
    lines.extend(sandbox_lines(s));
    // The child's own words about a failure (or a sandbox's refusal), where the cause is.
    for v in s.servers.iter().filter(|v| !v.stderr_tail.is_empty()) {
        lines.push(format!(
            "\n{} ({}), last lines of its stderr:",
            v.id, v.state
        ));
        lines.extend(v.stderr_tail.iter().map(|line| format!("  {line}")));
    }
    lines
}

/// Each confined server's sandbox: what it may read and write, and its network.
fn sandbox_lines(s: &StatusReport) -> Vec<String> {
    let mut lines = Vec::new();
    for v in &s.servers {
        let Some(b) = &v.sandbox else { continue };
        if lines.is_empty() {
            lines.push("\nsandboxes:".to_string());
        }
        let list = |paths: &[String]| {
            if paths.is_empty() {
                "nothing else".to_string()
            } else {
                paths.join(", ")
            }
        };
        let mut line = format!(
            "  {}: read {}; write {}; network {}",
            v.id,
            list(&b.read),
            list(&b.write),
            if b.network { "on" } else { "off" }
        );
        if !b.enforced {
            line.push_str(" (NOT CONFINED: evod enforces sandboxes only on Linux)");
        }
        lines.push(line);
    }
    lines
}

/// Resources and prompts offered, hot tools, profiles, sessions and
/// duplicate names.
fn catalog_notes(s: &StatusReport) -> Vec<String> {
    let mut lines = Vec::new();
    let offering: Vec<String> = s
        .servers
        .iter()
        .filter(|v| v.resources + v.templates + v.prompts > 0)
        .map(|v| {
            format!(
                "{} ({} resources, {} templates, {} prompts)",
                v.id, v.resources, v.templates, v.prompts
            )
        })
        .collect();
    if !offering.is_empty() {
        lines.push(format!("\nresources and prompts: {}", offering.join(", ")));
    }
    if !s.hot.is_empty() {
        lines.push(format!(
            "\nhot (listed in every session): {}",
            s.hot.join(", ")
        ));
    }
    lines.extend(profile_summary(&s.profiles));
    lines.push(format!("\n{} session(s)", s.sessions.len()));
    if !s.duplicates.is_empty() {
        lines.push("\nduplicate tool names (first in config order wins):".to_string());
        for d in &s.duplicates {
            lines.push(format!(
                "  {}: kept {}, skipped {}",
                d.name,
                d.kept,
                d.skipped.join(", ")
            ));
        }
    }
    lines
}

/// `evoctl status`'s lines about profiles: one per profile, with what is
/// wrong with it.
fn profile_summary(profiles: &[ProfileInfo]) -> Vec<String> {
    let mut lines = Vec::new();
    if profiles.is_empty() {
        return lines;
    }
    lines.push(String::new());
    for p in profiles {
        let mut line = format!(
            "profile {}: {} tool(s), {} session(s)",
            p.name, p.count, p.sessions
        );
        if !p.denied.is_empty() {
            line.push_str(&format!("; denied (never listed): {}", p.denied.join(", ")));
        }
        if !p.unmatched.is_empty() {
            line.push_str(&format!("; matching no tool: {}", p.unmatched.join(", ")));
        }
        lines.push(line);
    }
    lines
}

/// `status`'s line about search: the stages ranking queries now.
pub fn search_line(s: &SearchStatus) -> String {
    let thousands = |n: usize| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let model = s.model.as_deref().unwrap_or("");
    match s.state.as_str() {
        "ready" => format!(
            "search: lexical + semantic + near-duplicates ({n}/{n} embedded; model {model})",
            n = thousands(s.tools)
        ),
        "embedding" => format!(
            "search: lexical + semantic ({}/{} embedded; lexical alone until all are; model {model})",
            thousands(s.embedded),
            thousands(s.tools)
        ),
        "loading" => format!("search: lexical; loading model {model}"),
        "failed" => format!(
            "search: lexical only; {}",
            s.error.as_deref().unwrap_or("the model failed")
        ),
        _ => "search: lexical (no search.model)".to_string(),
    }
}

/// A server's state as the table shows it: how long a start has run, or
/// its place in the line.
fn state_cell(v: &ServerStatus) -> String {
    match (v.state, v.starting_s, v.queue_position) {
        (ServerState::Starting, Some(s), _) => format!("starting {s}s"),
        (ServerState::Queued, _, Some(n)) => format!("queued #{n}"),
        (state, _, _) => state.to_string(),
    }
}

/// A remote server's auth state in words: `ok (expires in 42m)`, `login
/// required`, `refresh failed: why`.
fn auth_text(auth: &AuthStatus) -> String {
    match auth.state {
        AuthWireState::None => "none".into(),
        AuthWireState::Ok => match auth.expires_at {
            Some(at) => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                if at > now {
                    format!("ok (expires in {})", age(at - now))
                } else {
                    "ok (expired; refreshed on the next call)".into()
                }
            }
            None => "ok".into(),
        },
        AuthWireState::LoginRequired => "login required".into(),
        AuthWireState::RefreshFailed => format!(
            "refresh failed: {}",
            auth.error.as_deref().unwrap_or("unknown reason")
        ),
    }
}

/// A file's health for `evoctl status`: `config PATH: ok` only without
/// warnings; else `ok, 2 warnings` and a line per warning (`file:line:
/// message`), or `ERROR: …`. A healthy file is left out unless `always`.
fn file_health(what: &str, f: &FileStatus, always: bool) -> Vec<String> {
    let head = if !f.ok {
        format!("ERROR: {}", f.error.as_deref().unwrap_or_default())
    } else if f.warnings.is_empty() {
        if !always {
            return Vec::new();
        }
        if f.missing {
            "no such file (its defaults apply)".to_string()
        } else {
            "ok".to_string()
        }
    } else {
        let n = f.warnings.len();
        format!("ok, {n} warning{}", if n == 1 { "" } else { "s" })
    };
    let mut lines = vec![format!("{what} {}: {head}", f.path)];
    lines.extend(f.warnings.iter().map(|w| format!("  {w}")));
    lines
}

/// Where a refresh stands, for the line `evoctl refresh` keeps updating.
pub struct RefreshProgress {
    pub line: String,
    /// Every targeted server has settled: `ready`, `failed`, or a state
    /// nothing more happens in by itself (`disabled`, `login_required`,
    /// `idle`).
    pub done: bool,
    /// At least one targeted server is `failed`.
    pub failed: bool,
}

/// Counts the servers in `ids` that are `ready` or `failed` in `status`. A
/// server missing from status (removed by a reload meanwhile) counts as
/// settled: nothing more will happen to it.
pub fn refresh_progress(status: &StatusReport, ids: &[String]) -> RefreshProgress {
    let state = |id: &String| status.servers.iter().find(|s| &s.id == id).map(|s| s.state);
    let ready = ids
        .iter()
        .filter(|id| state(id) == Some(ServerState::Ready))
        .count();
    let failed: Vec<&str> = ids
        .iter()
        .filter(|id| state(id) == Some(ServerState::Failed))
        .map(String::as_str)
        .collect();
    let done = ids.iter().all(|id| {
        state(id).is_none_or(|s| {
            matches!(
                s,
                ServerState::Ready
                    | ServerState::Failed
                    | ServerState::Disabled
                    | ServerState::LoginRequired
                    | ServerState::Idle
            )
        })
    });
    let verb = if done {
        "re-discovered"
    } else {
        "re-discovering"
    };
    let mut line = format!("{verb}: {ready}/{} ready", ids.len());
    if !failed.is_empty() {
        line.push_str(&format!(
            ", failed: {} (`evoctl status` has the error)",
            failed.join(", ")
        ));
    }
    RefreshProgress {
        line,
        done,
        failed: !failed.is_empty(),
    }
}

/// One server's outcome once a refresh has settled: `fx: ready, 14 tools`,
/// `fx: failed: <error>`, or `fx: no longer configured`.
pub fn refresh_outcome(status: &StatusReport, id: &str) -> String {
    match status.servers.iter().find(|s| s.id == id) {
        None => format!("{id}: no longer configured"),
        Some(s) if s.state == ServerState::Failed => format!(
            "{id}: failed: {}",
            s.error.as_deref().unwrap_or("no error recorded")
        ),
        Some(s) => format!("{id}: {}, {} tools", s.state.as_str(), s.tools),
    }
}

#[cfg(test)]
mod tests;
