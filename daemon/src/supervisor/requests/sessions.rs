//! Live sessions as `evoctl` sees and changes them: `sessions`, `list`,
//! `activate|deactivate` (a session's, here or on another instance).

use actix::prelude::*;
use evo_proto::ctl::{self, CtlReply, ErrorKind, Reply};

use crate::catalog::snapshot::Snapshot;
use crate::catalog::snapshot::ToolEntry;
use crate::schema;
use crate::session::native_tools;
use crate::session::{self, Session};
use crate::store::Event;
use crate::store::Shared;
use crate::supervisor::{SessionEntry, Supervisor};

/// A live session `evoctl` named, or the one it picked (the most recently
/// active).
struct ResolvedSession {
    id: String,
    name: Option<String>,
    addr: Addr<Session>,
}

impl ResolvedSession {
    /// How messages name it: `s3 (dave)` for a named session, else `s3`.
    pub(super) fn label(&self) -> String {
        ctl::session_label(&self.id, self.name.as_deref())
    }
}

impl Supervisor {
    /// Resolves `--session` (an id or a name), else the most recently active
    /// live session.
    fn resolve_session(
        &self,
        wanted: Option<&str>,
    ) -> ResponseFuture<Result<ResolvedSession, CtlReply>> {
        let resolved = |(id, e): (&String, &SessionEntry)| ResolvedSession {
            id: id.clone(),
            name: e.name.clone(),
            addr: e.addr.clone(),
        };
        if let Some(w) = wanted {
            // A bare local id (`s2`) names this instance's session.
            let tagged = self
                .opts
                .store
                .shared()
                .map(|shared| format!("{w}@{}", shared.tag()));
            let found = self
                .sessions
                .iter()
                .find(|(id, e)| {
                    id.as_str() == w
                        || Some(id.as_str()) == tagged.as_deref()
                        || e.name.as_deref() == Some(w)
                })
                .map(resolved);
            let err = CtlReply::error(
                ErrorKind::UnknownSession,
                format!("no live session '{w}'; `evoctl sessions` lists them"),
            );
            return Box::pin(async move { found.ok_or(err) });
        }
        let recent = self
            .sessions
            .iter()
            .min_by_key(|(_, e)| e.view.idle_ms())
            .map(resolved);
        Box::pin(async move {
            recent.ok_or_else(|| {
                CtlReply::error(
                    ErrorKind::UnknownSession,
                    "no live session: connect an MCP client through `evoctl shim` first",
                )
            })
        })
    }

    /// What each live session says of itself, ordered by id.
    pub(in crate::supervisor) fn session_infos(
        &self,
    ) -> impl Future<Output = Vec<ctl::SessionInfo>> + 'static {
        let sessions: Vec<Addr<Session>> = self.sessions.values().map(|e| e.addr.clone()).collect();
        async move {
            let mut infos = Vec::new();
            for s in sessions {
                if let Ok((info, _)) = s.send(session::Describe).await {
                    infos.push(info);
                }
            }
            infos.sort_by(|a, b| a.id.cmp(&b.id));
            infos
        }
    }

    pub(in crate::supervisor) fn set_active(
        &self,
        tools: Vec<String>,
        session: Option<String>,
        active: bool,
    ) -> ResponseFuture<CtlReply> {
        let snapshot = self.snapshot.load_full();
        if active {
            let unknown: Vec<String> = tools
                .iter()
                .filter(|t| snapshot.get(t).is_none())
                .cloned()
                .collect();
            if let Some(t) = unknown.first() {
                let msg = snapshot.refusal(t).unwrap_or_else(|| {
                    session::unknown_tool_message(&snapshot, t, session::Asker::Person)
                });
                return Box::pin(async move { CtlReply::error(ErrorKind::UnknownTool, msg) });
            }
        }
        // A doubled name (`git_git_log`) means the tool it routes to.
        let tools: Vec<String> = tools
            .into_iter()
            .map(|t| snapshot.get(&t).map_or(t, |e| e.name.clone()))
            .collect();
        let resolve = self.resolve_session(session.as_deref());
        let shared = self.opts.store.shared().cloned();
        Box::pin(async move {
            let target = match resolve.await {
                Ok(s) => s,
                Err(e) => match (shared, session) {
                    // Not held here: maybe by another instance.
                    (Some(shared), Some(name)) => {
                        return remote_set_active(&shared, &name, &tools, active)
                            .await
                            .unwrap_or(e);
                    }
                    _ => return e,
                },
            };
            match target
                .addr
                .send(session::SetActive {
                    tools,
                    active,
                    touch: false,
                })
                .await
            {
                Ok(Ok(change)) => CtlReply::data(Reply::Activation(ctl::ActivationReport {
                    session: target.id,
                    session_name: target.name,
                    changed: change.changed,
                    activated: change.activated,
                })),
                Ok(Err(refusal)) => CtlReply::error(
                    ErrorKind::Unsupported,
                    format!("session {}: {refusal}", target.label()),
                ),
                Err(_) => CtlReply::error(
                    ErrorKind::UnknownSession,
                    format!("session {} closed", target.label()),
                ),
            }
        })
    }

    pub(super) fn list(&self, session: Option<String>, all: bool) -> ResponseFuture<CtlReply> {
        let snapshot = self.snapshot.load_full();
        if all {
            let tools = snapshot
                .tools
                .iter()
                .map(|e| tool_line(&snapshot, e))
                .collect();
            return Box::pin(async move {
                CtlReply::data(Reply::Tools(ctl::ToolList {
                    session: None,
                    session_name: None,
                    tools,
                }))
            });
        }
        let resolve = self.resolve_session(session.as_deref());
        let code_mode = self.config.code_mode.enabled;
        Box::pin(async move {
            let target = match resolve.await {
                Ok(s) => s,
                Err(e) => return e,
            };
            let Ok((info, activated)) = target.addr.send(session::Describe).await else {
                return CtlReply::error(
                    ErrorKind::UnknownSession,
                    format!("session {} closed", target.label()),
                );
            };
            let mut tools: Vec<ctl::ToolLine> = native_tools::tools(code_mode)
                .iter()
                .map(|t| ctl::ToolLine {
                    name: t.name.to_string(),
                    summary: schema::summary(t.description.as_deref()),
                    domain: "evo".into(),
                    hot: true,
                    permission: Some("allow".into()),
                    rule: Some("native tool".into()),
                    ..Default::default()
                })
                .collect();
            let snapshot = snapshot.for_role(info.role.as_deref());
            let by = session::Visibility {
                mode: info.mode,
                activated: &activated,
                profile: info.profile.as_deref(),
                modern: info.era == ctl::SessionEra::Modern,
            };
            tools.extend(
                session::visible_entries(&snapshot, by)
                    .into_iter()
                    .map(|e| tool_line(&snapshot, e)),
            );
            CtlReply::data(Reply::Tools(ctl::ToolList {
                session: Some(target.id),
                session_name: target.name,
                tools,
            }))
        })
    }

    /// `evoctl sessions`: this instance's, and with the shared store the
    /// others' as they last wrote them.
    pub(super) fn list_sessions(&self) -> ResponseFuture<CtlReply> {
        let sessions = self.session_infos();
        let shared = self.opts.store.shared().cloned();
        Box::pin(async move {
            let mut sessions = sessions.await;
            let mut unavailable = None;
            // With the shared store: this instance's own, live, and
            // the others' as they last wrote them.
            if let Some(shared) = shared {
                for s in &mut sessions {
                    s.instance = Some(shared.instance().to_string());
                }
                match shared.sessions_of_others().await {
                    Ok(others) => sessions.extend(others),
                    Err(e) => {
                        unavailable = Some(format!("only this instance's sessions are listed: {e}"))
                    }
                }
            }
            CtlReply::data(Reply::Sessions(ctl::SessionsReport {
                sessions,
                unavailable,
            }))
        })
    }
}

/// A listed tool as `evoctl list` shows it, with its permission and the
/// rule that decided it.
fn tool_line(snapshot: &Snapshot, e: &ToolEntry) -> ctl::ToolLine {
    let decision = snapshot.decided.get(&e.name);
    ctl::ToolLine {
        name: e.name.clone(),
        summary: e.summary.clone(),
        domain: e.domain.clone(),
        hot: e.hot,
        permission: decision.map(|(p, _)| p.as_str().to_string()),
        rule: decision.map(|(_, rule)| rule.clone()),
        ..Default::default()
    }
}

/// `evoctl activate|deactivate --session ID` for a session another
/// instance holds. An id another instance lists goes to that instance: a
/// session with a store name (an HTTP session's id, a named session's name)
/// through its activations in the store, an unnamed one as an event its
/// instance answers. Else `ID` may be a store name no instance lists now.
/// `None`: the store does not know the session either.
async fn remote_set_active(
    shared: &Shared,
    wanted: &str,
    tools: &[String],
    active: bool,
) -> Option<CtlReply> {
    let listed = match shared.sessions_of_others().await {
        Ok(listed) => listed,
        Err(e) => {
            return Some(CtlReply::error(
                ErrorKind::UnknownSession,
                format!("no live session '{wanted}' here, and {e}"),
            ));
        }
    };
    let Some(info) = listed.into_iter().find(|s| s.id == wanted) else {
        return set_active_by_name(shared, wanted, None, tools, active).await;
    };
    if let Some(name) = &info.name {
        return set_active_by_name(shared, name, Some(&info.id), tools, active).await;
    }
    Some(match shared.ask_set_active(&info.id, tools, active).await {
        Ok(Some(reply)) => reply,
        Ok(None) => CtlReply::error(
            ErrorKind::UnknownSession,
            format!(
                "no live session '{wanted}': its instance {} did not answer (it may have stopped)",
                info.instance.as_deref().unwrap_or("?")
            ),
        ),
        Err(e) => CtlReply::error(
            ErrorKind::UnknownSession,
            format!("no live session '{wanted}' here, and {e}"),
        ),
    })
}

/// Changes the activations the store keeps under session name `name`
/// atomically and tells the instances holding it (the client's
/// list_changed goes out from there). `id`: how `evoctl sessions` lists it.
async fn set_active_by_name(
    shared: &Shared,
    name: &str,
    id: Option<&str>,
    tools: &[String],
    active: bool,
) -> Option<CtlReply> {
    match shared.session_known(name).await {
        Ok(true) => {}
        Ok(false) => return None,
        Err(e) => {
            return Some(CtlReply::error(
                ErrorKind::UnknownSession,
                format!("no live session '{name}' here, and {e}"),
            ));
        }
    }
    Some(match shared.activations_change(name, tools, active).await {
        Ok((changed, after)) => {
            shared
                .publish(Event::Activations {
                    name: name.to_string(),
                })
                .await;
            CtlReply::data(Reply::Activation(ctl::ActivationReport {
                session: id.unwrap_or(name).to_string(),
                session_name: Some(name.to_string()),
                changed,
                activated: after.into_iter().collect(),
            }))
        }
        Err(e) => CtlReply::error(ErrorKind::InvalidRequest, e.to_string()),
    })
}
