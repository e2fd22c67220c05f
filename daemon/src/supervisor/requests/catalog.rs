//! What the catalog holds, as `evoctl` asks for it: `describe`, `docs`,
//! `search`, `resources`, `prompts`, `read`, and what the Catalog actor
//! answers itself (`diff`, `trust`).

use std::time::Instant;

use actix::prelude::*;
use evo_proto::ctl::{self, CtlReply, ErrorKind, Reply};

use crate::catalog::Catalog;
use crate::catalog::IntegrityRefusal;
use crate::error_text;
use crate::metrics;
use crate::schema;
use crate::schema::example;
use crate::search;
use crate::search::embedder;
use crate::search::learned::learned;
use crate::session;
use crate::session::disclosure;
use crate::supervisor::Supervisor;

impl Supervisor {
    /// `evoctl resources [--server S]`.
    pub(super) fn resources(&self, server: Option<&str>) -> CtlReply {
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
    pub(super) fn prompts(&self) -> CtlReply {
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
                    summary: schema::summary(p.prompt.description.as_deref()),
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
    pub(super) fn read(&self, uri: String) -> ResponseFuture<CtlReply> {
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
                            error_text::readable_error(&e)
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

    /// `evoctl search`: every stage the semantic view has ready, each
    /// stage's score per result with `explain`.
    pub(super) fn search(
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
            let outcome = embedder::search(&semantic, &snapshot, &query, limit, None).await;
            metrics::metrics().search(started.elapsed());
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
                            learned: h.stages.learned.map(round),
                        }),
                        ..Default::default()
                    })
                    .collect(),
                reason: outcome.reason,
                unavailable: outcome.unavailable,
            }))
        })
    }

    /// `evoctl search forget [TOOL]`.
    pub(super) fn forget_learned(&self, tool: Option<String>) -> CtlReply {
        // `search forget WORD` where WORD is no tool is more likely a search
        // for two words than a forget: say how to do either.
        if let Some(t) = &tool
            && self.snapshot.load().get(t).is_none()
            && !learned().knows(t)
        {
            return CtlReply::error(
                ErrorKind::NotFound,
                format!(
                    "no tool '{t}' in the catalog or in what search learned; to forget one \
                     tool's learned queries name it exactly (evoctl search forget TOOL); to \
                     search for these words, quote them: evoctl search \"forget {t}\""
                ),
            );
        }
        let dropped = learned().forget(tool.as_deref());
        let whose = tool.map_or_else(|| "every tool".to_string(), |t| format!("'{t}'"));
        CtlReply::data(Reply::Action(ctl::ActionReport {
            message: format!("forgot {dropped} learned queries of {whose}"),
            ..Default::default()
        }))
    }

    /// A request the Catalog answers (`diff`, `trust`: it owns the pins).
    pub(super) fn ask_catalog<M, R>(
        &self,
        msg: M,
        reply: fn(R) -> Reply,
    ) -> ResponseFuture<CtlReply>
    where
        M: Message<Result = Result<R, IntegrityRefusal>> + Send + 'static,
        R: Send + 'static,
        Catalog: Handler<M>,
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

    /// `evoctl describe NAME`: one tool in full, or why it is not listed.
    pub(super) fn describe(&self, name: &str) -> CtlReply {
        let snapshot = self.snapshot.load_full();
        match snapshot.get(name) {
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
                    arguments: example::example_arguments(&e.tool.input_schema),
                },
                text: disclosure::describe_tool(e, self.config.code_mode.enabled),
            })),
            None => CtlReply::error(
                ErrorKind::UnknownTool,
                match snapshot.quarantined.get(name) {
                    Some(q) => q.refusal(),
                    None => session::unknown_tool_message(&snapshot, name, session::Asker::Person),
                },
            ),
        }
    }

    /// `evoctl docs`.
    pub(super) fn docs(&self) -> CtlReply {
        let snapshot = self.snapshot.load_full();
        CtlReply::data(Reply::Docs(disclosure::docs(&snapshot)))
    }
}
