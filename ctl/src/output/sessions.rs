//! `evoctl sessions`, and what `activate` / `deactivate` changed in one.

use evo_proto::ctl::{ActivationReport, SessionsReport, session_label};

use super::text::{Printout, age, table};

/// `evoctl sessions`: a table; with the shared store, which instance holds
/// each, and why other instances' sessions are missing (on stderr).
pub fn sessions(r: &SessionsReport) -> Printout {
    let mut p = Printout::default();
    if let Some(note) = &r.unavailable {
        p.note(format!("evoctl: {note}"));
    }
    if r.sessions.is_empty() {
        p.line("no live sessions");
        return p;
    }
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
    p.lines(table(&headers, &rows));
    p
}

/// `evoctl activate` (`activating`) or `deactivate`: what changed.
pub fn activation(r: &ActivationReport, activating: bool) -> Printout {
    let verb = if activating {
        "activated"
    } else {
        "deactivated"
    };
    let session = session_label(&r.session, r.session_name.as_deref());
    let mut p = Printout::default();
    if r.changed.is_empty() {
        p.line(format!("session {session}: nothing {verb} (already so)"));
    } else {
        p.line(format!(
            "session {session}: {verb} {}",
            r.changed.join(", ")
        ));
    }
    p
}

#[cfg(test)]
mod tests {
    use evo_proto::ctl::{DiscoveryMode, SessionInfo, SessionIo};

    use super::*;

    fn session(id: &str, instance: Option<&str>) -> SessionInfo {
        SessionInfo {
            id: id.into(),
            mode: DiscoveryMode::Dynamic,
            io: SessionIo::Socket,
            activated: vec!["fx_echo".into()],
            last_active: 90,
            instance: instance.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn sessions_add_an_instance_column_only_with_the_shared_store() {
        let mut r = SessionsReport {
            sessions: vec![session("s1", None)],
            unavailable: None,
        };
        assert_eq!(
            sessions(&r).stdout(),
            "SESSION  NAME  MODE     IO      ERA         IDENTITY  PROFILE  ACTIVATED  LAST ACTIVE\n\
             s1       -     dynamic  socket  initialize  local     -        1          1m ago\n"
        );
        r.sessions.push(session("s2", Some("b")));
        r.unavailable = Some("the store did not answer".into());
        let p = sessions(&r);
        assert_eq!(p.stderr(), "evoctl: the store did not answer\n");
        assert!(
            p.stdout()
                .lines()
                .next()
                .unwrap_or("")
                .ends_with("LAST ACTIVE  INSTANCE")
        );
        assert!(p.stdout().ends_with("1m ago       b\n"));
    }

    #[test]
    fn activation_names_the_session_and_what_changed() {
        let mut r = ActivationReport {
            session: "s1".into(),
            session_name: Some("dave".into()),
            changed: vec!["fx_echo".into()],
            activated: vec!["fx_echo".into()],
        };
        assert_eq!(
            activation(&r, true).stdout(),
            "session s1 (dave): activated fx_echo\n"
        );
        r.changed.clear();
        assert_eq!(
            activation(&r, false).stdout(),
            "session s1 (dave): nothing deactivated (already so)\n"
        );
    }
}
