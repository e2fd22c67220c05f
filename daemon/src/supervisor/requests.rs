//! The Supervisor's answers to `evoctl` requests: status, lists, search,
//! activation, refresh, approvals, reload and stop.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use actix::prelude::*;
use evo_proto::ctl::{self, CtlReply, CtlRequest, ErrorKind, Reply};

use super::{ChildHandle, Shutdown, Supervisor};
use crate::catalog::CatalogStatus;
use crate::child::{self, ChildServer};
use crate::config::{self, ServerSpec};
use crate::search;
use crate::session::{self, Session};

/// A live session `evoctl` named, or the one it picked (the most recently
/// active).
struct ResolvedSession {
    id: String,
    name: Option<String>,
    addr: Addr<Session>,
}

impl ResolvedSession {
    /// How messages name it: `s3 (dave)` for a named session, else `s3`.
    fn label(&self) -> String {
        ctl::session_label(&self.id, self.name.as_deref())
    }
}

impl Supervisor {
    /// What `token create` refuses: a role permissions.yml lacks, an
    /// unknown profile.
    fn token_checks(&self, role: &Option<String>, profile: &Option<String>) -> Option<CtlReply> {
        if let Some(r) = role
            && !self.permissions.defines_role(r)
        {
            let known: Vec<&str> = self
                .permissions
                .active_role()
                .into_iter()
                .chain(self.permissions.other_roles())
                .collect();
            return Some(CtlReply::error(
                ErrorKind::InvalidRequest,
                if known.is_empty() {
                    format!("role '{r}' is not defined: permissions.yml has no `roles`")
                } else {
                    format!(
                        "role '{r}' is not defined in permissions.yml (its roles: {})",
                        known.join(", ")
                    )
                },
            ));
        }
        if let Some(p) = profile
            && self.profiles.get(p).is_none()
        {
            return Some(CtlReply::error(
                ErrorKind::InvalidRequest,
                self.profiles.unknown(p),
            ));
        }
        None
    }

    /// `evoctl token create`: a new token, recorded (its hash) in the
    /// tokens file before it is shown.
    fn create_token(
        &mut self,
        name: &str,
        role: Option<String>,
        profile: Option<String>,
    ) -> CtlReply {
        if let Some(e) = &self.tokens_error {
            return CtlReply::error(
                ErrorKind::InvalidRequest,
                format!("{e}; fix the tokens file first"),
            );
        }
        if let Some(refused) = self.token_checks(&role, &profile) {
            return refused;
        }
        let mut table = (*self.tokens).clone();
        let created = crate::auth::tokens::rfc3339(SystemTime::now());
        let token = match table.create(name, role.clone(), profile.clone(), created.clone()) {
            Ok(t) => t,
            Err(e) => return CtlReply::error(ErrorKind::InvalidRequest, e),
        };
        let path = self.tokens_path();
        if let Err(e) = table.save(&path) {
            return CtlReply::error(ErrorKind::Internal, e);
        }
        tracing::info!(token = %name, role = ?role, profile = ?profile, file = %path.display(), "API token created");
        self.set_tokens(table);
        CtlReply::data(Reply::TokenCreated(ctl::TokenCreated {
            name: name.to_string(),
            token,
            role,
            profile,
            created,
            file: path.display().to_string(),
        }))
    }

    /// `evoctl token create|list|revoke`.
    fn token_request(&mut self, req: CtlRequest) -> CtlReply {
        match req {
            CtlRequest::TokenCreate {
                name,
                role,
                profile,
            } => self.create_token(&name, role, profile),
            CtlRequest::TokenRevoke { name } => self.revoke_token(&name),
            _ => self.list_tokens(),
        }
    }

    /// `evoctl token create|revoke` with the shared store: the record is
    /// added (unless one of that name exists on any instance) or removed in
    /// Redis, every instance re-reads the records.
    fn shared_token_request(&mut self, req: CtlRequest) -> ResponseFuture<CtlReply> {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return Box::pin(std::future::ready(self.token_request(req)));
        };
        let me = self.me.clone();
        // In force here before the answer, as with the file.
        let refresh = move || {
            let me = me.clone();
            async move {
                if let Some(me) = me {
                    let _ = me.send(super::RefreshTokens).await;
                }
            }
        };
        match req {
            CtlRequest::TokenCreate {
                name,
                role,
                profile,
            } => {
                // The checks and the token of the file path, on a scratch
                // table: the store decides whether the name is free.
                let mut scratch = crate::auth::tokens::TokenTable::default();
                if let Some(refused) = self.token_checks(&role, &profile) {
                    return Box::pin(std::future::ready(refused));
                }
                let created = crate::auth::tokens::rfc3339(SystemTime::now());
                let token =
                    match scratch.create(&name, role.clone(), profile.clone(), created.clone()) {
                        Ok(t) => t,
                        Err(e) => {
                            return Box::pin(std::future::ready(CtlReply::error(
                                ErrorKind::InvalidRequest,
                                e,
                            )));
                        }
                    };
                let record = scratch.record(&name).unwrap_or_default();
                Box::pin(async move {
                    match shared.token_add(&name, &record).await {
                        Ok(true) => {
                            shared.publish(crate::store::Event::Tokens).await;
                            refresh().await;
                            tracing::info!(token = %name, role = ?role, profile = ?profile, "API token created (in the shared store)");
                            CtlReply::data(Reply::TokenCreated(ctl::TokenCreated {
                                name,
                                token,
                                role,
                                profile,
                                created,
                                file: format!("{} (shared store)", shared.shown()),
                            }))
                        }
                        Ok(false) => CtlReply::error(
                            ErrorKind::InvalidRequest,
                            format!(
                                "a token named '{name}' exists; revoke it first (`evoctl token revoke {name}`) or choose another name"
                            ),
                        ),
                        Err(e) => CtlReply::error(ErrorKind::Internal, e.to_string()),
                    }
                })
            }
            CtlRequest::TokenRevoke { name } => Box::pin(async move {
                match shared.token_remove(&name).await {
                    Ok(true) => {
                        shared.publish(crate::store::Event::Tokens).await;
                        refresh().await;
                        tracing::info!(token = %name, "API token revoked (in the shared store)");
                        CtlReply::data(Reply::Action(ctl::ActionReport {
                            message: format!(
                                "token '{name}' revoked: every instance refuses it from the next request on, and its sessions end"
                            ),
                            ..Default::default()
                        }))
                    }
                    Ok(false) => CtlReply::error(
                        ErrorKind::NotFound,
                        format!("no token named '{name}'; `evoctl token list` shows them"),
                    ),
                    Err(e) => CtlReply::error(ErrorKind::Internal, e.to_string()),
                }
            }),
            other => Box::pin(std::future::ready(self.token_request(other))),
        }
    }

    /// `evoctl token list`: never the tokens, only what the file says of them.
    fn list_tokens(&self) -> CtlReply {
        let tokens = self
            .tokens
            .entries()
            .iter()
            .map(|e| ctl::TokenInfo {
                name: e.name.clone(),
                role: e.role.clone(),
                profile: e.profile.clone(),
                created: e.created.clone(),
            })
            .collect();
        CtlReply::data(Reply::Tokens(ctl::TokenList {
            tokens,
            file: self.tokens_path().display().to_string(),
        }))
    }

    /// `evoctl token revoke`: refused from the next request on; its
    /// sessions end.
    fn revoke_token(&mut self, name: &str) -> CtlReply {
        let mut table = (*self.tokens).clone();
        if let Err(e) = table.revoke(name) {
            return CtlReply::error(ErrorKind::NotFound, e);
        }
        let path = self.tokens_path();
        if let Err(e) = table.save(&path) {
            return CtlReply::error(ErrorKind::Internal, e);
        }
        tracing::info!(token = %name, "API token revoked");
        self.set_tokens(table);
        CtlReply::data(Reply::Action(ctl::ActionReport {
            message: format!(
                "token '{name}' revoked: it is refused from the next request on, and its sessions end"
            ),
            ..Default::default()
        }))
    }

    /// `evoctl ui`: the console's address with a new one-time sign-in
    /// token; without `serve.http`, the console's own loopback listener,
    /// started now if it is not running.
    fn ui(&mut self) -> CtlReply {
        let Some(console) = self.console.clone() else {
            return CtlReply::error(
                ErrorKind::Unsupported,
                "the web console is not running in this evod",
            );
        };
        let (base, served) = if let Some(front) = &self.front {
            (front.console_base(), "http")
        } else {
            let addr = match self.console_addr {
                Some(a) => a,
                None => match crate::console::listener::start(
                    console.clone(),
                    console.saved_port().unwrap_or(0),
                ) {
                    Ok(a) => {
                        self.console_addr = Some(a);
                        console.set_port(a.port());
                        a
                    }
                    Err(e) => return CtlReply::error(ErrorKind::Internal, e),
                },
            };
            (format!("http://{addr}"), "loopback")
        };
        match console.mint_login() {
            Ok(token) => CtlReply::data(Reply::Ui(ctl::UiAddress {
                url: format!("{base}/ui/login?token={token}"),
                console: format!("{base}/ui/"),
                served: served.into(),
                expires_s: crate::console::LOGIN_TTL.as_secs(),
            })),
            Err(e) => CtlReply::error(ErrorKind::Internal, e),
        }
    }

    /// `evoctl approve|deny ID`: in the book, or in the shared store
    /// (where any instance's held call can be decided).
    fn decide(&mut self, id: String, approve: bool) -> ResponseFuture<CtlReply> {
        let shown = id.clone();
        let answer = move |decided: Result<String, String>| match decided {
            Ok(tool) => {
                let verb = if approve { "approved" } else { "denied" };
                let id = &shown;
                tracing::info!(id = %id, tool = %tool, "held call {verb} by a person");
                CtlReply::data(Reply::Action(ctl::ActionReport {
                    message: if approve {
                        format!(
                            "{id} approved: the identical call to {tool} passes once within 5 minutes"
                        )
                    } else {
                        format!("{id} denied: the identical call to {tool} is refused")
                    },
                    ..Default::default()
                }))
            }
            Err(e) => CtlReply::error(ErrorKind::NotFound, e),
        };
        let approvals_changed =
            || crate::console::events::changed(crate::console::events::Topic::Approvals);
        if let Some(shared) = self.opts.store.shared().cloned() {
            return Box::pin(async move {
                let decided = shared.approval_decide(&id, approve).await;
                if decided.is_ok() {
                    shared
                        .publish(crate::store::Event::Approval { id: id.clone() })
                        .await;
                }
                approvals_changed();
                answer(decided)
            });
        }
        let decided = self
            .approvals
            .decide(&id, approve, Instant::now())
            .map(|a| a.tool);
        approvals_changed();
        Box::pin(std::future::ready(answer(decided)))
    }

    /// `evoctl approvals`: the held calls of this instance, or of every
    /// instance (from the shared store).
    fn pending_approvals(&mut self) -> ResponseFuture<CtlReply> {
        let row = |a: crate::policy::approvals::Approval, age_s: u64| ctl::PendingApproval {
            age_s,
            id: a.id,
            tool: a.tool,
            arguments: a.preview,
            identity: Some(a.identity.unwrap_or_else(|| ctl::LOCAL_IDENTITY.into())),
        };
        if let Some(shared) = self.opts.store.shared().cloned() {
            return Box::pin(async move {
                match shared.approvals_pending().await {
                    Ok(list) => CtlReply::data(Reply::Approvals(ctl::ApprovalsReport {
                        approvals: list.into_iter().map(|(a, age)| row(a, age)).collect(),
                    })),
                    Err(e) => CtlReply::error(ErrorKind::InvalidRequest, e.to_string()),
                }
            });
        }
        let now = Instant::now();
        let approvals = self
            .approvals
            .pending(now)
            .into_iter()
            .map(|a| {
                let age = now.duration_since(a.since).as_secs();
                row(a, age)
            })
            .collect();
        Box::pin(std::future::ready(CtlReply::data(Reply::Approvals(
            ctl::ApprovalsReport { approvals },
        ))))
    }

    /// Resolves `--session` (an id or a name), else the most recently active
    /// live session.
    fn resolve_session(
        &self,
        wanted: Option<&str>,
    ) -> ResponseFuture<Result<ResolvedSession, CtlReply>> {
        let resolved = |(id, e): (&String, &super::SessionEntry)| ResolvedSession {
            id: id.clone(),
            name: e.name.clone(),
            addr: e.addr.clone(),
        };
        if let Some(w) = wanted {
            let found = self
                .sessions
                .iter()
                .find(|(id, e)| id.as_str() == w || e.name.as_deref() == Some(w))
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

    /// Every profile as `evoctl profiles` shows it (`with_tools`), or as
    /// `evoctl status` sums it up.
    fn profile_infos(&self, with_tools: bool) -> Vec<ctl::ProfileInfo> {
        let snapshot = self.snapshot.load_full();
        self.profiles
            .iter()
            .map(|(name, profile)| {
                let resolved = snapshot.resolve(profile);
                let tools: Vec<String> = resolved
                    .members
                    .iter()
                    .map(|&i| snapshot.tools[i].name.clone())
                    .collect();
                ctl::ProfileInfo {
                    name: name.clone(),
                    patterns: profile.patterns.clone(),
                    added: profile.changes.added.iter().cloned().collect(),
                    removed: profile.changes.removed.iter().cloned().collect(),
                    count: tools.len(),
                    tools: if with_tools { tools } else { Vec::new() },
                    denied: resolved.denied,
                    unmatched: resolved.unmatched,
                    sessions: self.sessions_using(name),
                }
            })
            .collect()
    }

    /// `evoctl activate|deactivate --profile P TOOL…`: every session using
    /// the profile lists (or stops listing) the tools.
    fn set_in_profile(&mut self, profile: &str, tools: Vec<String>, active: bool) -> CtlReply {
        if self.profiles.get(profile).is_none() {
            return CtlReply::error(ErrorKind::NotFound, self.profiles.unknown(profile));
        }
        let snapshot = self.snapshot.load_full();
        let mut names = Vec::with_capacity(tools.len());
        for t in tools {
            // A doubled name (`git_git_log`) means the tool it routes to; a
            // denied tool may be named (it shows as denied, never listed).
            match snapshot.get(&t) {
                Some(e) => names.push(e.name.clone()),
                None if !active || snapshot.denied.contains_key(&t) => names.push(t),
                None => {
                    let msg = snapshot.refusal(&t).unwrap_or_else(|| {
                        session::unknown_tool_message(&snapshot, &t, session::Asker::Person)
                    });
                    return CtlReply::error(ErrorKind::UnknownTool, msg);
                }
            }
        }
        let changed = self.change_profile(profile, &names, active);
        crate::console::events::changed(crate::console::events::Topic::Profiles);
        tracing::info!(profile, changed = ?changed, active, "profile changed by a person");
        let tools = self
            .profiles
            .get(profile)
            .map(|p| snapshot.resolve(p))
            .unwrap_or_default()
            .members
            .iter()
            .map(|&i| snapshot.tools[i].name.clone())
            .collect();
        CtlReply::data(Reply::ProfileChange(ctl::ProfileChangeReport {
            profile: profile.to_string(),
            changed,
            tools,
            sessions: self.sessions_using(profile),
        }))
    }

    /// `evoctl resources [--server S]`.
    fn resources(&self, server: Option<&str>) -> CtlReply {
        if let Some(s) = server
            && !self.children.iter().any(|c| c.spec.id == s)
        {
            return CtlReply::error(
                ErrorKind::UnknownServer,
                format!("no server '{s}'; `evoctl status` lists them"),
            );
        }
        let snapshot = self.snapshot.load_full();
        let offers = &snapshot.offers;
        let wanted = |id: &str| server.is_none_or(|s| s == id);
        CtlReply::data(Reply::Resources(ctl::ResourcesReport {
            resources: offers
                .resources
                .iter()
                .filter(|r| wanted(&r.server.id))
                .map(|r| ctl::ResourceLine {
                    uri: r.resource.uri.clone(),
                    name: r.resource.name.clone(),
                    server: r.server.id.clone(),
                    mime_type: r.resource.mime_type.clone(),
                    description: r.resource.description.clone(),
                })
                .collect(),
            templates: offers
                .templates
                .iter()
                .filter(|t| wanted(&t.server.id))
                .map(|t| ctl::TemplateLine {
                    uri_template: t.template.uri_template.clone(),
                    name: t.template.name.clone(),
                    server: t.server.id.clone(),
                    description: t.template.description.clone(),
                })
                .collect(),
        }))
    }

    /// `evoctl prompts`.
    fn prompts(&self) -> CtlReply {
        let snapshot = self.snapshot.load_full();
        CtlReply::data(Reply::Prompts(ctl::PromptsReport {
            prompts: snapshot
                .offers
                .prompts
                .iter()
                .map(|p| ctl::PromptLine {
                    name: p.name.clone(),
                    server: p.server.id.clone(),
                    upstream: p.upstream.clone(),
                    summary: crate::schema::summary(p.prompt.description.as_deref()),
                    arguments: p
                        .prompt
                        .arguments
                        .iter()
                        .flatten()
                        .map(|a| {
                            if a.required == Some(true) {
                                format!("{}*", a.name)
                            } else {
                                a.name.clone()
                            }
                        })
                        .collect(),
                })
                .collect(),
        }))
    }

    /// `evoctl read URI`: through the owning server, started if idle.
    fn read(&self, uri: String) -> ResponseFuture<CtlReply> {
        let snapshot = self.snapshot.load_full();
        let Some(server) = snapshot.offers.owner_of(&uri).cloned() else {
            let msg = match snapshot.offers.refusal_for_uri(&uri) {
                Some(why) => why.to_owned(),
                None => format!(
                    "no server lists the resource '{uri}' or a template matching it; `evoctl resources` lists them"
                ),
            };
            return Box::pin(async move { CtlReply::error(ErrorKind::NotFound, msg) });
        };
        Box::pin(async move {
            let _busy = server.begin_call();
            let peer = match server.peer().await {
                Ok(p) => p,
                Err(e) => return CtlReply::error(ErrorKind::Unsupported, e),
            };
            let read = peer.read_resource(rmcp::model::ReadResourceRequestParams::new(uri.clone()));
            let result = match tokio::time::timeout(server.timeout(), read).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    return CtlReply::error(
                        ErrorKind::Unsupported,
                        format!(
                            "server '{}' could not read '{uri}': {}",
                            server.id,
                            crate::error_text::readable_error(&e)
                        ),
                    );
                }
                Err(_) => {
                    return CtlReply::error(
                        ErrorKind::Unsupported,
                        format!(
                            "server '{}' did not answer within {} s (its timeout_s)",
                            server.id,
                            server.timeout().as_secs()
                        ),
                    );
                }
            };
            use rmcp::model::ResourceContents as C;
            let contents = result
                .contents
                .into_iter()
                .map(|c| match c {
                    C::TextResourceContents {
                        uri,
                        mime_type,
                        text,
                        ..
                    } => ctl::ReadContent {
                        uri,
                        mime_type,
                        text: Some(text),
                        blob: None,
                    },
                    C::BlobResourceContents {
                        uri,
                        mime_type,
                        blob,
                        ..
                    } => ctl::ReadContent {
                        uri,
                        mime_type,
                        text: None,
                        blob: Some(blob),
                    },
                    #[allow(unreachable_patterns)]
                    _ => ctl::ReadContent::default(),
                })
                .collect();
            CtlReply::data(Reply::Read(ctl::ReadReport {
                uri,
                server: server.id.clone(),
                contents,
            }))
        })
    }

    /// What each live session says of itself, ordered by id.
    pub(super) fn session_infos(&self) -> impl Future<Output = Vec<ctl::SessionInfo>> + 'static {
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

    fn status(&self) -> ResponseFuture<CtlReply> {
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
        let http = self.front.as_ref().map(crate::http::Front::status);
        let search = search_status(&self.semantic.load());
        let store = self.opts.store.status();
        // A file that did not load has its error, not the warnings of the
        // text it replaced.
        let config_status = ctl::FileStatus {
            path: self.opts.config_path.display().to_string(),
            ok: self.config_error.is_none(),
            error: self.config_error.clone(),
            warnings: match self.config_error {
                Some(_) => Vec::new(),
                None => self.config.warnings.iter().map(file_warning).collect(),
            },
        };
        let permissions_path = self.opts.permissions_path.display().to_string();
        let permissions = ctl::FileStatus {
            ok: self.permissions_error.is_none(),
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
            version: crate::VERSION.into(),
            pid: std::process::id(),
            socket: self.opts.socket_path.display().to_string(),
            uptime_s: self.started.elapsed().as_secs(),
            tools: snapshot.tools.len(),
            guard_error: crate::runtime::guard::problem(),
        };
        Box::pin(async move {
            // Children first, then the catalog: a child is ready only once
            // the catalog has its tools, so "ready" never shows 0 tools.
            let mut states = Vec::with_capacity(children.len());
            for (_, addr) in &children {
                states.push(addr.send(child::GetStatus).await.ok());
            }
            let cat = catalog.send(CatalogStatus).await.unwrap_or_default();
            let (integrity, quarantined) = catalog
                .send(crate::catalog::IntegrityStatus)
                .await
                .unwrap_or_default();
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

    fn set_active(
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

    fn list(&self, session: Option<String>, all: bool) -> ResponseFuture<CtlReply> {
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
            let mut tools: Vec<ctl::ToolLine> = crate::session::native_tools::tools()
                .iter()
                .map(|t| ctl::ToolLine {
                    name: t.name.to_string(),
                    summary: crate::schema::summary(t.description.as_deref()),
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
}

/// One configured server's line in `evoctl status`: its child's state and
/// what the catalog knows of its lists.
fn server_status(
    spec: &ServerSpec,
    st: Option<&child::ChildStatus>,
    info: Option<&crate::catalog::ServerCatalogInfo>,
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
        stderr_tail: st
            .as_ref()
            .filter(|s| {
                matches!(
                    s.state,
                    crate::child::link::ServerState::Failed
                        | crate::child::link::ServerState::Restarting
                )
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
    }
}

/// A listed tool as `evoctl list` shows it, with its permission and the
/// rule that decided it.
fn tool_line(
    snapshot: &crate::catalog::snapshot::Snapshot,
    e: &crate::catalog::snapshot::ToolEntry,
) -> ctl::ToolLine {
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

impl Supervisor {
    /// A request the Catalog answers (`diff`, `trust`: it owns the pins).
    fn ask_catalog<M, R>(&self, msg: M, reply: fn(R) -> Reply) -> ResponseFuture<CtlReply>
    where
        M: Message<Result = Result<R, crate::catalog::IntegrityRefusal>> + Send + 'static,
        R: Send + 'static,
        crate::catalog::Catalog: Handler<M>,
    {
        let asked = self.catalog.send(msg);
        Box::pin(async move {
            match asked.await {
                Ok(Ok(r)) => CtlReply::data(reply(r)),
                Ok(Err((kind, message))) => CtlReply::error(kind, message),
                Err(e) => CtlReply::error(
                    ErrorKind::Internal,
                    format!("the catalog did not answer ({e}); evod may be shutting down"),
                ),
            }
        })
    }
}

/// A control request from `evoctl`.
#[derive(Message)]
#[rtype(result = "CtlReply")]
pub struct Ctl(pub CtlRequest);

impl Handler<Ctl> for Supervisor {
    type Result = ResponseFuture<CtlReply>;
    fn handle(&mut self, msg: Ctl, ctx: &mut Context<Self>) -> Self::Result {
        let ready = |r: CtlReply| -> ResponseFuture<CtlReply> { Box::pin(async move { r }) };
        match msg.0 {
            CtlRequest::Status => self.status(),
            CtlRequest::List { session, all } => self.list(session, all),
            CtlRequest::Activate {
                tools,
                profile: Some(profile),
                ..
            } => ready(self.set_in_profile(&profile, tools, true)),
            CtlRequest::Deactivate {
                tools,
                profile: Some(profile),
                ..
            } => ready(self.set_in_profile(&profile, tools, false)),
            CtlRequest::Activate { tools, session, .. } => self.set_active(tools, session, true),
            CtlRequest::Deactivate { tools, session, .. } => self.set_active(tools, session, false),
            CtlRequest::Profiles => ready(CtlReply::data(Reply::Profiles(ctl::ProfilesReport {
                profiles: self.profile_infos(true),
            }))),
            CtlRequest::Resources { server } => ready(self.resources(server.as_deref())),
            CtlRequest::Prompts => ready(self.prompts()),
            CtlRequest::Read { uri } => self.read(uri),
            CtlRequest::Search {
                query,
                limit,
                explain,
            } => self.search(query, limit, explain),
            CtlRequest::Describe { name } => {
                let snapshot = self.snapshot.load_full();
                let reply = match snapshot.get(&name) {
                    Some(e) => CtlReply::data(Reply::Tool(ctl::ToolDescription {
                        name: e.name.clone(),
                        summary: e.summary.clone(),
                        domain: e.domain.clone(),
                        server: e.server.id.clone(),
                        upstream: e.upstream.clone(),
                        hot: e.hot,
                        description: e.tool.description.as_ref().map(|d| d.to_string()),
                        input_schema: (*e.tool.input_schema).clone(),
                        example: ctl::ExampleCall {
                            name: e.name.clone(),
                            arguments: crate::schema::example::example_arguments(
                                &e.tool.input_schema,
                            ),
                        },
                        text: crate::session::disclosure::describe_tool(e),
                    })),
                    None => CtlReply::error(
                        ErrorKind::UnknownTool,
                        match snapshot.quarantined.get(&name) {
                            Some(q) => q.refusal(),
                            None => session::unknown_tool_message(
                                &snapshot,
                                &name,
                                session::Asker::Person,
                            ),
                        },
                    ),
                };
                ready(reply)
            }
            CtlRequest::Docs => {
                let snapshot = self.snapshot.load_full();
                ready(CtlReply::data(Reply::Docs(
                    crate::session::disclosure::docs(&snapshot),
                )))
            }
            CtlRequest::Sessions => {
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
                                unavailable =
                                    Some(format!("only this instance's sessions are listed: {e}"))
                            }
                        }
                    }
                    CtlReply::data(Reply::Sessions(ctl::SessionsReport {
                        sessions,
                        unavailable,
                    }))
                })
            }
            CtlRequest::Refresh { server } => {
                let targets: Vec<&ChildHandle> = self
                    .children
                    .iter()
                    .filter(|c| server.as_deref().is_none_or(|s| s == c.spec.id))
                    .collect();
                if targets.is_empty() {
                    let msg = match server {
                        Some(s) => format!("no server '{s}'; `evoctl status` lists them"),
                        None => "no servers are configured".into(),
                    };
                    return ready(CtlReply::error(ErrorKind::UnknownServer, msg));
                }
                let ids: Vec<String> = targets.iter().map(|c| c.spec.id.clone()).collect();
                for c in targets {
                    c.addr.do_send(child::Restart);
                }
                ready(CtlReply::data(Reply::Action(ctl::ActionReport {
                    message: format!("re-discovering {}", ids.join(", ")),
                    restarted: ids,
                    ..Default::default()
                })))
            }
            CtlRequest::Approve { id } => self.decide(id, true),
            CtlRequest::Deny { id } => self.decide(id, false),
            CtlRequest::Approvals => self.pending_approvals(),
            CtlRequest::Reload => {
                self.reload_tokens();
                let reply = match self.reload() {
                    Ok(report) => CtlReply::data(Reply::Action(report)),
                    Err(e) => CtlReply::error(ErrorKind::InvalidRequest, e),
                };
                self.watch_files(ctx);
                ready(reply)
            }
            CtlRequest::Diff { server, tool } => {
                self.ask_catalog(crate::catalog::DiffTools { server, tool }, Reply::Diff)
            }
            CtlRequest::Trust { server, tool } => {
                self.ask_catalog(crate::catalog::TrustTools { server, tool }, Reply::Action)
            }
            req @ (CtlRequest::TokenCreate { .. }
            | CtlRequest::TokenList
            | CtlRequest::TokenRevoke { .. }) => {
                if self.opts.store.shared().is_some() {
                    self.shared_token_request(req)
                } else {
                    ready(self.token_request(req))
                }
            }
            CtlRequest::Ui => ready(self.ui()),
            CtlRequest::Login { server, wait } => self.login(server, wait),
            CtlRequest::Logout { server } => self.logout(server),
            CtlRequest::Stop => {
                ctx.notify(Shutdown);
                ready(CtlReply::data(Reply::Action(ctl::ActionReport {
                    message: "evod is shutting down".into(),
                    ..Default::default()
                })))
            }
        }
    }
}

impl Supervisor {
    /// `evoctl login`: starts the server's login (the reply has the URL),
    /// or with `wait` answers once it ended.
    fn login(&self, server: String, wait: bool) -> ResponseFuture<CtlReply> {
        let Some(c) = self.children.iter().find(|c| c.spec.id == server) else {
            let reply = unknown_server(&server);
            return Box::pin(async move { reply });
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
    fn logout(&self, server: String) -> ResponseFuture<CtlReply> {
        let Some(c) = self.children.iter().find(|c| c.spec.id == server) else {
            let reply = unknown_server(&server);
            return Box::pin(async move { reply });
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
}

/// The refusal of a request naming a server the config does not have.
fn unknown_server(server: &str) -> CtlReply {
    CtlReply::error(
        ErrorKind::UnknownServer,
        format!("no server '{server}'; `evoctl status` lists them"),
    )
}

/// A config warning as `evoctl status` carries it.
fn file_warning(w: &config::ConfigWarning) -> ctl::FileWarning {
    ctl::FileWarning {
        file: w.file.display().to_string(),
        line: w.line,
        message: w.message.clone(),
    }
}

impl Supervisor {
    /// `evoctl search`: every stage the semantic view has ready, each
    /// stage's score per result with `explain`.
    fn search(
        &self,
        query: String,
        limit: Option<usize>,
        explain: bool,
    ) -> ResponseFuture<CtlReply> {
        let snapshot = self.snapshot.load_full();
        let semantic = self.semantic.clone();
        let limit = limit
            .unwrap_or(self.config.discovery.search_limit)
            .clamp(1, search::MAX_LIMIT);
        Box::pin(async move {
            let started = Instant::now();
            let outcome =
                crate::search::embedder::search(&semantic, &snapshot, &query, limit, None).await;
            crate::metrics::metrics().search(started.elapsed());
            let round = |x: f32| (x as f64 * 1000.0).round() / 1000.0;
            CtlReply::data(Reply::Search(ctl::SearchResults {
                query,
                results: outcome
                    .hits
                    .iter()
                    .map(|h| ctl::ToolLine {
                        name: h.entry.name.clone(),
                        summary: h.entry.summary.clone(),
                        domain: h.entry.domain.clone(),
                        score: Some((h.score as f64 * 100.0).round() / 100.0),
                        hot: h.entry.hot,
                        explain: explain.then(|| ctl::StageScores {
                            lexical: round(h.stages.lexical),
                            semantic: h.stages.semantic.map(round),
                            fused: h.stages.fused.map(round),
                            near_duplicate_of: h.stages.pulled_by.as_ref().map(|p| p.0.clone()),
                            similarity: h.stages.pulled_by.as_ref().map(|p| round(p.1)),
                        }),
                        ..Default::default()
                    })
                    .collect(),
                reason: outcome.reason,
                unavailable: outcome.unavailable,
            }))
        })
    }
}

/// `status`'s `search`: the stages in force and the model's progress.
/// `evoctl activate|deactivate --session NAME` for a session another
/// instance holds: its activations change in the shared store and the
/// instance holding it hears of it (the client's list_changed goes out
/// from there). `None`: the store does not know the session either.
async fn remote_set_active(
    shared: &crate::store::Shared,
    name: &str,
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
                .publish(crate::store::Event::Activations {
                    name: name.to_string(),
                })
                .await;
            CtlReply::data(Reply::Activation(ctl::ActivationReport {
                session: name.to_string(),
                session_name: Some(name.to_string()),
                changed,
                activated: after.into_iter().collect(),
            }))
        }
        Err(e) => CtlReply::error(ErrorKind::InvalidRequest, e.to_string()),
    })
}

fn search_status(view: &crate::search::embedder::SemanticView) -> ctl::SearchStatus {
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
    }
}
