//! The daemon and its servers as `evoctl` sees and drives them: `status`,
//! `refresh`, `login`, `logout`, `reload`, `stop`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use actix::prelude::*;
use evo_proto::ctl::{self, CtlReply, ErrorKind, Reply};

use super::{ready, unknown_server};
use crate::VERSION;
use crate::auth::endpoint::EndpointControl;
use crate::catalog::CatalogStatus;
use crate::catalog::IntegrityStatus;
use crate::catalog::ServerCatalogInfo;
use crate::child::link::ServerState;
use crate::child::sandbox::ENFORCED;
use crate::child::{self, ChildServer};
use crate::config::{self, ServerSpec};
use crate::runtime::guard;
use crate::search::embedder::SemanticView;
use crate::search::learned::learned;
use crate::supervisor::{ChildHandle, Shutdown, Supervisor};

impl Supervisor {
    pub(super) fn status(&self) -> ResponseFuture<CtlReply> {
        let children: Vec<(Arc<ServerSpec>, Addr<ChildServer>)> = self
            .children
            .iter()
            .map(|c| (c.spec.clone(), c.addr.clone()))
            .collect();
        let failed: Vec<config::ServerConfigError> = self.config.failed.clone();
        let disabled = self.config.disabled.clone();
        let catalog = self.catalog.clone();
        let snapshot = self.snapshot.load_full();
        let sessions = self.session_infos();
        let profiles = self.profile_infos(false);
        let hot: Vec<String> = snapshot
            .hot
            .iter()
            .map(|&i| snapshot.tools[i].name.clone())
            .collect();
        let http = self.endpoint.as_ref().map(EndpointControl::status);
        let search = search_status(&self.semantic.load());
        let store = self.opts.store.status();
        // A file that did not load has its error, not the warnings of the
        // text it replaced.
        let config_status = ctl::FileStatus {
            path: self.opts.config_path.display().to_string(),
            ok: self.config_error.is_none(),
            missing: self.config_error.is_none() && !self.opts.config_path.exists(),
            error: self.config_error.clone(),
            warnings: match self.config_error {
                Some(_) => Vec::new(),
                None => self.config.warnings.iter().map(file_warning).collect(),
            },
        };
        let permissions_path = self.opts.permissions_path.display().to_string();
        let permissions = ctl::FileStatus {
            ok: self.permissions_error.is_none(),
            missing: self.permissions_error.is_none() && !self.opts.permissions_path.exists(),
            error: self.permissions_error.clone(),
            warnings: match self.permissions_error {
                Some(_) => Vec::new(),
                None => self
                    .permissions
                    .warnings()
                    .iter()
                    .map(|message| ctl::FileWarning {
                        file: permissions_path.clone(),
                        line: None,
                        message: message.clone(),
                    })
                    .collect(),
            },
            path: permissions_path,
        };
        let daemon = ctl::DaemonInfo {
            version: VERSION.into(),
            pid: std::process::id(),
            socket: self.opts.socket_path.display().to_string(),
            uptime_s: self.started.elapsed().as_secs(),
            tools: snapshot.tools.len(),
            guard_error: guard::problem(),
        };
        Box::pin(async move {
            // Children first, then the catalog: a child is ready only once
            // the catalog has its tools, so "ready" never shows 0 tools.
            let mut states = Vec::with_capacity(children.len());
            for (_, addr) in &children {
                states.push(addr.send(child::GetStatus).await.ok());
            }
            let cat = catalog.send(CatalogStatus).await.unwrap_or_default();
            let (integrity, quarantined) = catalog.send(IntegrityStatus).await.unwrap_or_default();
            let mut servers = Vec::new();
            for ((spec, _), st) in children.into_iter().zip(states) {
                let info = cat.iter().find(|c| c.id == spec.id);
                servers.push(server_status(&spec, st.as_ref(), info));
            }
            for e in failed {
                servers.push(ctl::ServerStatus {
                    id: e.server.clone(),
                    state: ctl::ServerState::Failed,
                    source: ctl::ToolSource::None,
                    error: Some(e.to_string()),
                    ..Default::default()
                });
            }
            for id in disabled {
                servers.push(ctl::ServerStatus {
                    id,
                    state: ctl::ServerState::Disabled,
                    source: ctl::ToolSource::None,
                    ..Default::default()
                });
            }
            let infos = sessions.await;
            CtlReply::data(Reply::Status(ctl::StatusReport {
                daemon,
                servers,
                sessions: infos,
                duplicates: snapshot
                    .duplicates
                    .iter()
                    .chain(&snapshot.offers.duplicates)
                    .cloned()
                    .collect(),
                config: config_status,
                permissions,
                shortened: snapshot
                    .tools
                    .iter()
                    .filter_map(|e| {
                        e.also.as_ref().map(|also| ctl::Shortened {
                            name: e.name.clone(),
                            also: also.clone(),
                        })
                    })
                    .collect(),
                annotations_relied_on: snapshot.relied_on.clone(),
                integrity,
                quarantined,
                hot,
                store,
                profiles,
                http,
                search,
            }))
        })
    }

    /// `evoctl login`: starts the server's login (the reply has the URL),
    /// or with `wait` answers once it ended.
    pub(super) fn login(&self, server: String, wait: bool) -> ResponseFuture<CtlReply> {
        let Some(c) = self.children.iter().find(|c| c.spec.id == server) else {
            return ready(unknown_server(&server));
        };
        let addr = c.addr.clone();
        Box::pin(async move {
            let answer = if wait {
                addr.send(child::login::AwaitLogin)
                    .await
                    .map(|r| r.map(|m| (None, m)))
            } else {
                addr.send(child::login::BeginLogin).await.map(|r| {
                    r.map(|url| (Some(url), "open the URL in a browser to log in".to_string()))
                })
            };
            match answer {
                Ok(Ok((url, message))) => CtlReply::data(Reply::Login(ctl::LoginReport {
                    server,
                    url,
                    message,
                })),
                Ok(Err(e)) => CtlReply::error(ErrorKind::InvalidRequest, e),
                Err(e) => CtlReply::error(
                    ErrorKind::Internal,
                    format!("server '{server}' did not answer ({e})"),
                ),
            }
        })
    }

    /// `evoctl logout`: revoke where supported, forget the tokens.
    pub(super) fn logout(&self, server: String) -> ResponseFuture<CtlReply> {
        let Some(c) = self.children.iter().find(|c| c.spec.id == server) else {
            return ready(unknown_server(&server));
        };
        let addr = c.addr.clone();
        Box::pin(async move {
            match addr.send(child::login::Logout).await {
                Ok(Ok(message)) => CtlReply::data(Reply::Action(ctl::ActionReport {
                    message,
                    ..Default::default()
                })),
                Ok(Err(e)) => CtlReply::error(ErrorKind::InvalidRequest, e),
                Err(e) => CtlReply::error(
                    ErrorKind::Internal,
                    format!("server '{server}' did not answer ({e})"),
                ),
            }
        })
    }

    /// `evoctl refresh [SERVER]`: restarts the children (all, or one) so
    /// they list again.
    pub(super) fn refresh(&self, server: Option<String>) -> CtlReply {
        let targets: Vec<&ChildHandle> = self
            .children
            .iter()
            .filter(|c| server.as_deref().is_none_or(|s| s == c.spec.id))
            .collect();
        if targets.is_empty() {
            return match server {
                Some(s) => unknown_server(&s),
                None => CtlReply::error(ErrorKind::UnknownServer, "no servers are configured"),
            };
        }
        let ids: Vec<String> = targets.iter().map(|c| c.spec.id.clone()).collect();
        for c in targets {
            c.addr.do_send(child::Restart);
        }
        CtlReply::data(Reply::Action(ctl::ActionReport {
            message: format!("re-discovering {}", ids.join(", ")),
            restarted: ids,
            ..Default::default()
        }))
    }

    /// `evoctl reload`: the tokens, the config and permissions, and the
    /// files watched (the env file's path may have changed).
    pub(super) fn reload_on_request(&mut self, ctx: &mut Context<Self>) -> CtlReply {
        self.reload_tokens();
        let reply = match self.reload() {
            Ok(report) => CtlReply::data(Reply::Action(report)),
            Err(e) => CtlReply::error(ErrorKind::InvalidRequest, e),
        };
        self.watch_files(ctx);
        reply
    }

    /// `evoctl stop`.
    pub(super) fn stop_on_request(&self, ctx: &mut Context<Self>) -> CtlReply {
        ctx.notify(Shutdown);
        CtlReply::data(Reply::Action(ctl::ActionReport {
            message: "evod is shutting down".into(),
            ..Default::default()
        }))
    }
}

/// One configured server's line in `evoctl status`: its child's state and
/// what the catalog knows of its lists.
fn server_status(
    spec: &ServerSpec,
    st: Option<&child::ChildStatus>,
    info: Option<&ServerCatalogInfo>,
) -> ctl::ServerStatus {
    ctl::ServerStatus {
        id: spec.id.clone(),
        state: st
            .as_ref()
            .map_or(ctl::ServerState::Stopped, |s| s.state.into()),
        tools: info.map_or(0, |i| i.tools),
        source: info.map_or(ctl::ToolSource::None, |i| i.source),
        cached_tools: info.and_then(|i| i.cached),
        live_tools: info.and_then(|i| i.live),
        config_hash: spec.hash.short(),
        restarts: st.as_ref().map_or(0, |s| s.restarts),
        error: st.as_ref().and_then(|s| s.error.clone()),
        transport: spec.transport.kind().into(),
        pid: st.as_ref().and_then(|s| s.pid),
        last_refresh_age_s: info
            .and_then(|i| i.fetched_at)
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .map(|d| d.as_secs()),
        // A sandboxed server's refusals show there while it runs, as the process told them.
        stderr_tail: st
            .as_ref()
            .filter(|s| {
                spec.sandbox.is_some()
                    || matches!(s.state, ServerState::Failed | ServerState::Restarting)
            })
            .map(|s| s.stderr_tail.clone())
            .unwrap_or_default(),
        starting_s: st
            .as_ref()
            .and_then(|s| s.starting_for)
            .map(|d| d.as_secs()),
        queue_position: st.as_ref().and_then(|s| s.queue_position),
        resources: info.map_or(0, |i| i.offered.0),
        templates: info.map_or(0, |i| i.offered.1),
        prompts: info.map_or(0, |i| i.offered.2),
        auth: st.as_ref().map(|s| s.auth.wire()).unwrap_or_default(),
        sandbox: spec.sandbox.as_ref().map(|s| {
            let text = |paths: &[PathBuf]| paths.iter().map(|p| p.display().to_string()).collect();
            ctl::SandboxStatus {
                read: text(&s.read),
                write: text(&s.write),
                network: s.network,
                enforced: ENFORCED,
            }
        }),
    }
}

/// A config warning as `evoctl status` carries it.
fn file_warning(w: &config::ConfigWarning) -> ctl::FileWarning {
    ctl::FileWarning {
        file: w.file.display().to_string(),
        line: w.line,
        message: w.message.clone(),
    }
}

/// `status`'s `search`: the stages in force and the model's progress.
fn search_status(view: &SemanticView) -> ctl::SearchStatus {
    use crate::search::embedder::StageState;
    let (state, embedded, tools, error) = match &view.state {
        StageState::Off => ("off", 0, 0, None),
        StageState::Loading => ("loading", 0, 0, None),
        StageState::Failed(e) => ("failed", 0, 0, Some(e.clone())),
        StageState::Embedding { done, total } => ("embedding", *done, *total, None),
        StageState::Ready { total } => ("ready", *total, *total, None),
    };
    ctl::SearchStatus {
        stages: view.stages().into_iter().map(String::from).collect(),
        model: view.model.clone(),
        state: state.into(),
        embedded,
        tools,
        error,
        learned: learned().len(),
    }
}
