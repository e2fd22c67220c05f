//! Rendering replies: readable tables by default, the reply's JSON with
//! `--json`. One function per reply kind, in a file per topic that mirrors
//! the report types' own in `evo_proto::ctl`; [`render`] picks the one.

mod access;
mod approvals;
mod catalog;
mod integrity;
mod profiles;
mod sessions;
mod status;
mod text;

use std::path::Path;

use evo_proto::ctl::ActionReport;
use evo_proto::{CtlRequest, Reply};

pub use status::{refresh_outcome, refresh_progress};
pub use text::pretty;

use text::Printout;

/// Prints the reply to `request`: as a table or lines for a person, or
/// its JSON with `--json`.
pub fn render(
    request: &CtlRequest,
    reply: &Reply,
    json: bool,
    out: Option<&Path>,
) -> Result<(), String> {
    if let (Reply::Read(r), Some(path)) = (reply, out) {
        catalog::write_read(r, path, json)?.print();
        return Ok(());
    }
    // `docs` has a `--json` shape of its own.
    if json && !matches!(reply, Reply::Docs(_)) {
        println!("{}", pretty(reply));
        return Ok(());
    }
    let activating = matches!(request, CtlRequest::Activate { .. });
    let printout = match reply {
        Reply::Status(s) => status::status(s),
        Reply::Tools(l) => catalog::tools(l),
        Reply::Search(r) => catalog::search(r),
        Reply::Tool(t) => catalog::describe(t),
        Reply::Resources(r) => catalog::resources(r),
        Reply::Prompts(r) => catalog::prompts(r),
        Reply::Read(r) => catalog::read(r),
        Reply::Docs(markdown) => catalog::docs(markdown, json, out)?,
        Reply::Sessions(r) => sessions::sessions(r),
        Reply::Activation(r) => sessions::activation(r, activating),
        Reply::Profiles(r) => profiles::profiles(r),
        Reply::ProfileChange(r) => profiles::profile_change(r, activating),
        Reply::Approvals(r) => approvals::approvals(r),
        Reply::Diff(d) => integrity::diff(d),
        Reply::TokenCreated(t) => access::token_created(t),
        Reply::Tokens(l) => access::tokens(l),
        Reply::Ui(u) => access::ui(u),
        Reply::Login(r) => access::login(r),
        Reply::Action(r) => action(r),
    };
    printout.print();
    Ok(())
}

/// `reload`, `refresh`, `stop`, `approve`, `deny`, `trust`, `token
/// revoke`, `logout`: what happened, then each non-empty list.
fn action(r: &ActionReport) -> Printout {
    let mut p = Printout::default();
    p.line(r.message.clone());
    for (label, list) in [
        ("added", &r.added),
        ("removed", &r.removed),
        ("restarted", &r.restarted),
        ("re-prefixed", &r.reprefixed),
    ] {
        if !list.is_empty() {
            p.line(format!("{label}: {}", list.join(", ")));
        }
    }
    p.lines(r.failed.iter().map(|failed| format!("failed: {failed}")));
    p.lines(r.warnings.iter().map(|w| format!("warning: {w}")));
    p.lines(
        r.restart_needed
            .iter()
            .map(|why| format!("needs a restart: {why}")),
    );
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_lists_only_what_happened() {
        let r = ActionReport {
            message: "reloaded".into(),
            added: vec!["a".into(), "b".into()],
            restarted: vec!["c".into()],
            failed: vec!["d: bad command".into()],
            warnings: vec!["/c/mcp.json:3: unknown key 'x' ignored".into()],
            restart_needed: vec!["serve.http changed".into()],
            trusted: vec!["fx:echo".into()],
            ..Default::default()
        };
        assert_eq!(
            action(&r).stdout(),
            "reloaded\nadded: a, b\nrestarted: c\nfailed: d: bad command\nwarning: /c/mcp.json:3: unknown key 'x' ignored\nneeds a restart: serve.http changed\n"
        );
    }
}
