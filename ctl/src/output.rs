//! Rendering replies: readable tables by default, the reply's JSON with `--json`.

use std::path::Path;

use evo_proto::ctl::{AuthWireState, FileStatus, ServerState, StatusReport};
use evo_proto::{CtlRequest, Reply};

/// `evoctl status`'s lines about profiles: one per profile, with what is
/// wrong with it.
fn profile_summary(profiles: &[evo_proto::ctl::ProfileInfo]) -> Vec<String> {
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

/// Prints a table: columns padded to their widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r.clone());
    }
}

fn age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Widest ARGUMENTS cell in `evoctl approvals`: with the other columns it
/// keeps a row within a 100-column terminal; `--json` has the daemon's text.
const ARGUMENTS_WIDTH: usize = 60;

/// `text` on one line and at most `max` characters, ending in "…" when cut.
/// `status`'s line about search: the stages ranking queries now.
pub fn search_line(s: &evo_proto::ctl::SearchStatus) -> String {
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
fn state_cell(v: &evo_proto::ctl::ServerStatus) -> String {
    match (v.state, v.starting_s, v.queue_position) {
        (ServerState::Starting, Some(s), _) => format!("starting {s}s"),
        (ServerState::Queued, _, Some(n)) => format!("queued #{n}"),
        (state, _, _) => state.to_string(),
    }
}

fn shorten(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `evoctl docs [--out FILE] [--json]`: the Markdown reference to the file
/// or stdout; with `--json`, `{"path", "bytes"}` for a file written, else
/// `{"markdown"}`.
fn docs(markdown: &str, json: bool, out: Option<&Path>) -> Result<(), String> {
    match out {
        Some(path) => {
            std::fs::write(path, markdown)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            if json {
                let report = serde_json::json!({"path": path, "bytes": markdown.len()});
                println!("{}", pretty(&report));
            }
        }
        None if json => {
            let report = serde_json::json!({ "markdown": markdown });
            println!("{}", pretty(&report));
        }
        None => print!("{markdown}"),
    }
    Ok(())
}

/// Bytes a base64 text decodes to.
fn decoded_len(blob: &str) -> usize {
    let padding = blob.bytes().rev().take_while(|&b| b == b'=').count();
    (blob.len() / 4 * 3).saturating_sub(padding)
}

/// `evoctl read URI --out FILE`: the contents (text as UTF-8, blobs
/// decoded) into FILE.
fn write_read(r: &evo_proto::ctl::ReadReport, path: &Path, json: bool) -> Result<(), String> {
    use base64::Engine as _;
    let mut bytes = Vec::new();
    for c in &r.contents {
        match (&c.text, &c.blob) {
            (Some(text), _) => bytes.extend_from_slice(text.as_bytes()),
            (None, Some(blob)) => bytes.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .map_err(|e| {
                        format!("{}: the server sent a blob that is not base64 ({e})", c.uri)
                    })?,
            ),
            (None, None) => {}
        }
    }
    std::fs::write(path, &bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if json {
        let report = serde_json::json!({"uri": r.uri, "server": r.server, "path": path, "bytes": bytes.len()});
        println!("{}", pretty(&report));
    } else {
        println!(
            "wrote {} bytes of {} to {}",
            bytes.len(),
            r.uri,
            path.display()
        );
    }
    Ok(())
}

/// JSON as evoctl prints it (`--json`, and where a table has no shape).
pub fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// A remote server's auth state in words: `ok (expires in 42m)`, `login
/// required`, `refresh failed: why`.
fn auth_text(auth: &evo_proto::ctl::AuthStatus) -> String {
    match auth.state {
        AuthWireState::None => "none".into(),
        AuthWireState::Ok => match auth.expires_at {
            Some(at) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
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

/// Prints the reply to `request`: as a table or lines for a person, or
/// its JSON with `--json`.
#[allow(
    clippy::too_many_lines,
    reason = "one arm per reply kind; each arm is a table of its own"
)]
pub fn render(
    request: &CtlRequest,
    reply: &Reply,
    json: bool,
    out: Option<&Path>,
) -> Result<(), String> {
    if let (Reply::Read(r), Some(path)) = (reply, out) {
        return write_read(r, path, json);
    }
    // `docs` has a `--json` shape of its own.
    if json && !matches!(reply, Reply::Docs(_)) {
        println!("{}", pretty(reply));
        return Ok(());
    }
    match reply {
        Reply::Docs(markdown) => return docs(markdown, json, out),
        Reply::Resources(r) => {
            if r.resources.is_empty() && r.templates.is_empty() {
                println!("no resources: none of the servers evo reaches lists any");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = r
                .resources
                .iter()
                .map(|x| {
                    vec![
                        x.uri.clone(),
                        x.server.clone(),
                        x.mime_type.clone().unwrap_or_else(|| "-".into()),
                        x.name.clone(),
                    ]
                })
                .collect();
            if !rows.is_empty() {
                table(&["URI", "SERVER", "MIME", "NAME"], &rows);
            }
            if !r.templates.is_empty() {
                println!("\ntemplates (a matching URI is read through their server):");
                let rows: Vec<Vec<String>> = r
                    .templates
                    .iter()
                    .map(|t| vec![t.uri_template.clone(), t.server.clone(), t.name.clone()])
                    .collect();
                table(&["TEMPLATE", "SERVER", "NAME"], &rows);
            }
        }
        Reply::Prompts(r) => {
            if r.prompts.is_empty() {
                println!("no prompts: none of the servers evo reaches lists any");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = r
                .prompts
                .iter()
                .map(|p| {
                    vec![
                        p.name.clone(),
                        p.server.clone(),
                        p.arguments.join(", "),
                        p.summary.clone(),
                    ]
                })
                .collect();
            table(
                &["PROMPT", "SERVER", "ARGUMENTS (* required)", "SUMMARY"],
                &rows,
            );
        }
        Reply::Read(r) => {
            for c in &r.contents {
                match (&c.text, &c.blob) {
                    (Some(text), _) => {
                        print!("{text}");
                        if !text.ends_with('\n') {
                            println!();
                        }
                    }
                    (None, Some(blob)) => println!(
                        "{}: {} of {} bytes (binary); write it to a file with `evoctl read {} --out FILE`",
                        c.uri,
                        c.mime_type.as_deref().unwrap_or("a blob"),
                        decoded_len(blob),
                        r.uri
                    ),
                    (None, None) => println!("{}: empty", c.uri),
                }
            }
        }
        Reply::Status(s) => {
            println!(
                "evod {} (pid {}) on {}, up {}, {} tools",
                s.daemon.version,
                s.daemon.pid,
                s.daemon.socket,
                age(s.daemon.uptime_s),
                s.daemon.tools
            );
            if let Some(why) = &s.daemon.guard_error {
                println!("WARNING: {why}");
            }
            if let Some(h) = &s.http {
                let scheme = if h.tls { "https" } else { "http" };
                let auth = if h.auth.is_empty() {
                    "no auth".to_string()
                } else {
                    format!("auth: {}", h.auth.join(", "))
                };
                println!("http: {scheme}://{}{} ({auth})", h.listen, h.path);
                if let Some(why) = &h.warning {
                    println!("WARNING: {why}");
                }
            }
            for line in file_health("config", &s.config, true) {
                println!("{line}");
            }
            for line in file_health("permissions", &s.permissions, false) {
                println!("{line}");
            }
            println!("{}", search_line(&s.search));
            if s.store.kind != "file" {
                let url = s.store.url.as_deref().unwrap_or("");
                match (&s.store.error, s.store.ok) {
                    (_, true) => println!("store: {} {url} (reachable)", s.store.kind),
                    (Some(why), false) => {
                        println!("store: {} {url} UNAVAILABLE: {why}", s.store.kind)
                    }
                    (None, false) => println!("store: {} {url} UNAVAILABLE", s.store.kind),
                }
                if let Some(me) = &s.store.instance {
                    println!("instance: {me}");
                }
            }
            println!();
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
                println!("no servers configured");
            } else {
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
                );
            }
            let with_auth: Vec<String> = s
                .servers
                .iter()
                .filter(|v| v.auth.state != AuthWireState::None)
                .map(|v| format!("{} auth: {}", v.id, auth_text(&v.auth)))
                .collect();
            if !with_auth.is_empty() {
                println!();
                for line in with_auth {
                    println!("{line}");
                }
            }
            let queued = s
                .servers
                .iter()
                .filter(|v| v.state == ServerState::Queued)
                .count();
            if queued > 0 {
                let starting = s
                    .servers
                    .iter()
                    .filter(|v| v.state == ServerState::Starting)
                    .count();
                println!(
                    "\n{starting} starting, {queued} queued for a start slot (limits.max_concurrent_starts)"
                );
            }
            if !s.shortened.is_empty() {
                let names: Vec<&str> = s.shortened.iter().map(|t| t.name.as_str()).collect();
                println!(
                    "\nnames already carrying their prefix, exposed once (the doubled form also routes): {}",
                    names.join(", ")
                );
            }
            if !s.annotations_relied_on.is_empty() {
                let relied: Vec<String> = s
                    .annotations_relied_on
                    .iter()
                    .map(|r| format!("{} ({}: {} tools)", r.server, r.rule, r.tools))
                    .collect();
                println!(
                    "\npermissions rely on these servers' own annotations (their claims, unchecked): {}",
                    relied.join(", ")
                );
            }
            // The child's own words about a failure, where the cause is.
            for v in s.servers.iter().filter(|v| !v.stderr_tail.is_empty()) {
                println!("\n{} ({}), last lines of its stderr:", v.id, v.state);
                for line in &v.stderr_tail {
                    println!("  {line}");
                }
            }
            for line in integrity_lines(s) {
                println!("{line}");
            }
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
                println!("\nresources and prompts: {}", offering.join(", "));
            }
            if !s.hot.is_empty() {
                println!("\nhot (listed in every session): {}", s.hot.join(", "));
            }
            for line in profile_summary(&s.profiles) {
                println!("{line}");
            }
            println!("\n{} session(s)", s.sessions.len());
            if !s.duplicates.is_empty() {
                println!("\nduplicate tool names (first in config order wins):");
                for d in &s.duplicates {
                    println!(
                        "  {}: kept {}, skipped {}",
                        d.name,
                        d.kept,
                        d.skipped.join(", ")
                    );
                }
            }
        }
        Reply::Tools(l) => {
            if let Some(s) = &l.session {
                eprintln!(
                    "session {}",
                    evo_proto::ctl::session_label(s, l.session_name.as_deref())
                );
            }
            for t in &l.tools {
                let hot = if t.hot { " [hot]" } else { "" };
                println!("{} — {} ({}){hot}", t.name, t.summary, t.domain);
            }
        }
        Reply::Search(r) => {
            if r.results.is_empty() {
                println!("no matches: {}", r.reason.as_deref().unwrap_or_default());
            }
            let explain = r.results.iter().any(|t| t.explain.is_some());
            let num = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.3}"));
            let rows: Vec<Vec<String>> = r
                .results
                .iter()
                .map(|t| {
                    let mut row = vec![format!("{:.2}", t.score.unwrap_or(0.0))];
                    if let Some(e) = t.explain.as_ref().filter(|_| explain) {
                        row.push(format!("{:.2}", e.lexical));
                        row.push(num(e.semantic));
                        row.push(num(e.fused));
                        row.push(match (&e.near_duplicate_of, e.similarity) {
                            (Some(of), Some(sim)) => format!("next to {of} ({sim:.2})"),
                            _ => "-".into(),
                        });
                    }
                    row.extend([t.name.clone(), t.domain.clone(), t.summary.clone()]);
                    row
                })
                .collect();
            if !rows.is_empty() && explain {
                table(
                    &[
                        "SCORE", "LEXICAL", "SEMANTIC", "FUSED", "NEAR-DUP", "TOOL", "DOMAIN",
                        "SUMMARY",
                    ],
                    &rows,
                );
            } else if !rows.is_empty() {
                table(&["SCORE", "TOOL", "DOMAIN", "SUMMARY"], &rows);
            }
            for note in &r.unavailable {
                println!("{note}");
            }
        }
        Reply::Sessions(r) => {
            if let Some(note) = &r.unavailable {
                eprintln!("evoctl: {note}");
            }
            if r.sessions.is_empty() {
                println!("no live sessions");
                return Ok(());
            }
            // With the shared store: which instance holds each.
            let shared = r.sessions.iter().any(|s| s.instance.is_some());
            let rows: Vec<Vec<String>> = r
                .sessions
                .iter()
                .map(|s| {
                    let mut row = vec![
                        s.id.clone(),
                        s.name.clone().unwrap_or_else(|| "-".into()),
                        s.mode.to_string(),
                        s.io.to_string(),
                        s.era.as_str().to_string(),
                        s.identity.clone().unwrap_or_else(|| "local".into()),
                        s.profile.clone().unwrap_or_else(|| "-".into()),
                        s.activated.len().to_string(),
                        format!("{} ago", age(s.last_active)),
                    ];
                    if shared {
                        row.push(s.instance.clone().unwrap_or_else(|| "-".into()));
                    }
                    row
                })
                .collect();
            let mut headers = vec![
                "SESSION",
                "NAME",
                "MODE",
                "IO",
                "ERA",
                "IDENTITY",
                "PROFILE",
                "ACTIVATED",
                "LAST ACTIVE",
            ];
            if shared {
                headers.push("INSTANCE");
            }
            table(&headers, &rows);
        }
        Reply::Profiles(r) => {
            if r.profiles.is_empty() {
                println!(
                    "no profiles: define them in the config, e.g. \"profiles\": {{\"coding\": [\"github_*\"]}}"
                );
                return Ok(());
            }
            for (i, p) in r.profiles.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                println!(
                    "{}: {} tool(s), {} session(s); patterns: {}",
                    p.name,
                    p.count,
                    p.sessions,
                    if p.patterns.is_empty() {
                        "(none)".to_string()
                    } else {
                        p.patterns.join(", ")
                    }
                );
                if !p.added.is_empty() {
                    println!("  added at run time: {}", p.added.join(", "));
                }
                if !p.removed.is_empty() {
                    println!("  taken out at run time: {}", p.removed.join(", "));
                }
                for t in &p.tools {
                    println!("  {t}");
                }
                for t in &p.denied {
                    println!("  {t} [denied by permissions: never listed]");
                }
                for u in &p.unmatched {
                    println!("  warning: '{u}' matches no tool");
                }
            }
        }
        Reply::ProfileChange(r) => {
            let verb = if matches!(request, CtlRequest::Activate { .. }) {
                "added to"
            } else {
                "taken out of"
            };
            if r.changed.is_empty() {
                println!("profile {}: nothing {verb} it (already so)", r.profile);
            } else {
                println!(
                    "profile {}: {} {verb} it; {} tool(s) now, {} session(s) told",
                    r.profile,
                    r.changed.join(", "),
                    r.tools.len(),
                    r.sessions
                );
            }
        }
        Reply::Approvals(r) => {
            if r.approvals.is_empty() {
                println!("no calls waiting for approval");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = r
                .approvals
                .iter()
                .map(|a| {
                    vec![
                        a.id.clone(),
                        a.tool.clone(),
                        a.identity.clone().unwrap_or_else(|| "local".into()),
                        age(a.age_s),
                        shorten(&a.arguments, ARGUMENTS_WIDTH),
                    ]
                })
                .collect();
            table(&["ID", "TOOL", "IDENTITY", "AGE", "ARGUMENTS"], &rows);
            println!(
                "\nevoctl approve ID lets the identical call pass once; evoctl deny ID refuses it."
            );
        }
        Reply::Activation(r) => {
            let verb = if matches!(request, CtlRequest::Activate { .. }) {
                "activated"
            } else {
                "deactivated"
            };
            if r.changed.is_empty() {
                println!(
                    "session {}: nothing {verb} (already so)",
                    evo_proto::ctl::session_label(&r.session, r.session_name.as_deref())
                );
            } else {
                println!(
                    "session {}: {verb} {}",
                    evo_proto::ctl::session_label(&r.session, r.session_name.as_deref()),
                    r.changed.join(", ")
                );
            }
        }
        Reply::Tool(t) => print!("{}", t.text),
        Reply::TokenCreated(t) => {
            // The token alone on stdout (`TOKEN=$(evoctl token create ci)`),
            // what it is on stderr.
            eprintln!(
                "token '{}' created (role {}, profile {}), recorded by its SHA-256 in {}.\nIt is shown this once: give it to the client now (Authorization: Bearer TOKEN).",
                t.name,
                t.role.as_deref().unwrap_or("-"),
                t.profile.as_deref().unwrap_or("-"),
                t.file
            );
            println!("{}", t.token);
        }
        Reply::Ui(u) => {
            println!("{}", u.url);
            eprintln!(
                "the link signs one browser in once (unused, it expires in {} min); `evoctl ui` again makes a new one",
                u.expires_s / 60
            );
        }
        Reply::Login(r) => {
            if let Some(url) = &r.url {
                println!("{url}");
            }
            println!("{}", r.message);
        }
        Reply::Tokens(l) => {
            if l.tokens.is_empty() {
                println!("no API tokens in {}", l.file);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = l
                .tokens
                .iter()
                .map(|t| {
                    vec![
                        t.name.clone(),
                        t.role.clone().unwrap_or_else(|| "-".into()),
                        t.profile.clone().unwrap_or_else(|| "-".into()),
                        t.created.clone(),
                    ]
                })
                .collect();
            table(&["NAME", "ROLE", "PROFILE", "CREATED"], &rows);
        }
        Reply::Diff(d) => {
            for t in &d.tools {
                println!(
                    "{} {} ({}): changed {}; drift {}",
                    d.server,
                    t.tool,
                    t.name,
                    t.changed.join(", "),
                    t.drift
                );
                print!("{}", t.diff);
                println!();
            }
            println!("{}", d.message);
        }
        Reply::Action(r) => {
            println!("{}", r.message);
            for (label, list) in [
                ("added", &r.added),
                ("removed", &r.removed),
                ("restarted", &r.restarted),
                ("re-prefixed", &r.reprefixed),
            ] {
                if !list.is_empty() {
                    println!("{label}: {}", list.join(", "));
                }
            }
            for failed in &r.failed {
                println!("failed: {failed}");
            }
        }
    }
    Ok(())
}

/// `evoctl status`'s lines about tools whose definition changed since
/// pinned: held (`integrity: pin`) or only shown (`warn`), with what to run.
fn integrity_lines(s: &StatusReport) -> Vec<String> {
    use evo_proto::ctl::IntegrityMode;
    if s.quarantined.is_empty() {
        return Vec::new();
    }
    let head = match s.integrity {
        IntegrityMode::Pin => {
            "quarantined tools (definition changed since pinned; hidden, calls refused):"
        }
        _ => "tools whose definition changed since pinned (integrity: warn; still usable):",
    };
    let mut lines = vec![String::new(), head.to_string()];
    for q in &s.quarantined {
        lines.push(format!(
            "  {} {} ({}): changed {}; drift {}",
            q.server,
            q.tool,
            q.name,
            q.changed.join(", "),
            q.drift
        ));
    }
    lines.push(
        "`evoctl diff SERVER TOOL` shows a change; `evoctl trust SERVER TOOL` accepts it".into(),
    );
    lines
}

/// Where a refresh stands, for the line `evoctl refresh` keeps updating.
pub struct RefreshProgress {
    pub line: String,
    /// Every targeted server is `ready` or `failed`.
    pub done: bool,
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
    let gone = ids.iter().filter(|id| state(id).is_none()).count();
    let done = ready + failed.len() + gone == ids.len();
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
    RefreshProgress { line, done }
}

/// One server's outcome once a refresh has settled: `fx: ready, 14 tools`,
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
        "ok".to_string()
    } else {
        let n = f.warnings.len();
        format!("ok, {n} warning{}", if n == 1 { "" } else { "s" })
    };
    let mut lines = vec![format!("{what} {}: {head}", f.path)];
    lines.extend(f.warnings.iter().map(|w| format!("  {w}")));
    lines
}

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
mod tests {
    use super::*;
    use evo_proto::ctl::ServerStatus;

    fn status(states: &[(&str, ServerState)]) -> StatusReport {
        StatusReport {
            servers: states
                .iter()
                .map(|&(id, state)| ServerStatus {
                    id: id.to_string(),
                    state,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn file_health_says_ok_only_without_warnings() {
        let mut f = FileStatus {
            path: "/c/mcp.config.json".into(),
            ok: true,
            ..Default::default()
        };
        assert_eq!(
            file_health("config", &f, true),
            ["config /c/mcp.config.json: ok"]
        );
        assert!(file_health("permissions", &f, false).is_empty());
        f.warnings = vec![
            evo_proto::ctl::FileWarning {
                file: "/c/mcp.config.json".into(),
                line: Some(5),
                message: "server 'fs': unknown key 'timeout' ignored".into(),
            },
            evo_proto::ctl::FileWarning {
                file: "/c/env".into(),
                line: None,
                message: "m".into(),
            },
        ];
        assert_eq!(
            file_health("config", &f, true),
            [
                "config /c/mcp.config.json: ok, 2 warnings",
                "  /c/mcp.config.json:5: server 'fs': unknown key 'timeout' ignored",
                "  /c/env: m",
            ]
        );
        f.warnings.truncate(1);
        assert_eq!(
            file_health("permissions", &f, false)[0],
            "permissions /c/mcp.config.json: ok, 1 warning"
        );
        f.ok = false;
        f.warnings.clear();
        f.error = Some("bad".into());
        assert_eq!(
            file_health("config", &f, true),
            ["config /c/mcp.config.json: ERROR: bad"]
        );
    }

    #[test]
    fn shorten_keeps_short_text_and_cuts_long_text_to_width() {
        assert_eq!(shorten(r#"{"text":"hi"}"#, 60), r#"{"text":"hi"}"#);
        assert_eq!(shorten("abcdefgh", 5), "abcd…");
        assert_eq!(shorten("ééééé", 5), "ééééé");
        assert_eq!(shorten("a\nb\tc", 60), "a b c");
        assert_eq!(shorten(&"x".repeat(500), 60).chars().count(), 60);
    }

    #[test]
    fn refresh_progress_counts_targeted_servers_only() {
        let s = status(&[
            ("a", ServerState::Ready),
            ("b", ServerState::Starting),
            ("c", ServerState::Starting),
        ]);
        let p = refresh_progress(&s, &ids(&["a", "b"]));
        assert_eq!(p.line, "re-discovering: 1/2 ready");
        assert!(!p.done);
    }

    #[test]
    fn refresh_progress_is_done_when_ready_or_failed() {
        let s = status(&[("a", ServerState::Ready), ("b", ServerState::Failed)]);
        let p = refresh_progress(&s, &ids(&["a", "b"]));
        assert!(p.done);
        assert_eq!(
            p.line,
            "re-discovered: 1/2 ready, failed: b (`evoctl status` has the error)"
        );
    }

    #[test]
    fn refresh_progress_settles_servers_removed_meanwhile() {
        let p = refresh_progress(&status(&[]), &ids(&["gone"]));
        assert!(p.done);
    }
}
