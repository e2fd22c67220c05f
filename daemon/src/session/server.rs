//! The rmcp server of one session: its MCP methods and native tools.
//!
//! 2026-07-28 lists carry `ttlMs: 60000` and `cacheScope: "private"`: the catalog changes
//! (children, reloads, profile edits, each announced on the listen streams), and the list depends
//! on the caller's profile and role. Initialize-era results carry neither.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use actix::prelude::*;
use arc_swap::ArcSwap;
use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;

use super::approval::{Answers, Ask};
use super::breaker::RetryBreaker;
use super::evidence::Evidence;
use super::{Listener, Session, SessionView, SetActive, Visibility, level_rank, visible_entries};
use crate::VERSION;
use crate::catalog::snapshot::{Snapshot, ToolEntry};
use crate::config::{CodeModeSettings, DiscoveryMode};
use crate::metrics;
use crate::search;
use crate::search::embedder;
use crate::search::embedder::SemanticView;
use crate::session::config_trouble::ConfigTrouble;
use crate::session::disclosure;
use crate::session::native_tools;
use crate::session::startup;
use crate::store::Shared;
use crate::supervisor::OpenedSession;
use crate::supervisor::Supervisor;
use crate::telemetry::RequestSpan;

/// The rmcp server of one session. Cheap to clone; all shared state is the
/// catalog snapshot (read-only) and the Session actor's address.
#[derive(Clone)]
pub struct SessionServer {
    pub id: String,
    pub mode: DiscoveryMode,
    /// The profile whose tools it lists.
    pub profile: Option<String>,
    pub session: Addr<Session>,
    pub supervisor: Addr<Supervisor>,
    pub view: SessionView,
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub search_limit: usize,
    /// The semantic search stage (see `crate::search::embedder`).
    pub semantic: Arc<ArcSwap<SemanticView>>,
    /// Byte budget of the one-line listing in `instructions`.
    pub instructions_budget: usize,
    /// `code_mode`: `run_code` and its limits, signatures in cards.
    pub code_mode: CodeModeSettings,
    /// Until when its first answers wait for servers still starting
    /// (`discovery.startup_wait_ms` from its start; see `session::startup`).
    pub first_answers_by: Instant,
    /// Identical failing calls of this session (see [`super::breaker`]).
    pub breaker: Arc<std::sync::Mutex<RetryBreaker>>,
    /// Its recent searches, for what search learns (see `session/evidence.rs`).
    pub evidence: Arc<std::sync::Mutex<Evidence>>,
    /// Approvals asked in band on 2026-07-28 sessions, awaiting the retry
    /// that carries the user's answer.
    pub asks: Arc<std::sync::Mutex<Vec<Ask>>>,
    /// The permissions role of the identity that opened it over HTTP;
    /// `None`: the role in force (`active_role`).
    pub role: Option<String>,
    /// That identity (`token:NAME`, `oauth:SUB`); `None`: the local owner.
    /// QuarantinedOffers calls are approved for it alone.
    pub identity: Option<String>,
    /// Where answers the socket transport sends unparsed are filed; `None`
    /// over HTTP.
    pub raw: Option<super::transport::RawAnswers>,
    /// The shared store: retry-loop counts and in-band approval questions
    /// live there, so any instance serving the session sees them.
    pub shared: Option<Arc<Shared>>,
    pub events: crate::console::events::EventBus,
    /// The config could not be read: said wherever an answer would look
    /// empty or wrong for no visible reason.
    pub config_trouble: ConfigTrouble,
}

/// How long a 2026-07-28 client may treat a tools/list as fresh. The
/// catalog changes (a child's list, a reload, a person's profile edit) and
/// each change is announced on the listen streams; a client that does not
/// listen re-lists after this. `cacheScope` is `private`: the list depends
/// on the caller's profile and role, so no shared cache may serve it to
/// another caller.
pub const LIST_TTL_MS: u64 = 60_000;

/// The error for an MCP method evo does not serve.
pub(super) fn not_served(method: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method '{method}' is not served by evo (it serves tools, resources, resource templates, prompts and completions)"
        ),
        None,
    )
}

pub(super) fn text_result(text: impl Into<String>, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text.into())];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl SessionServer {
    /// The rmcp face of a session the Supervisor just opened.
    pub fn open(
        opened: &OpenedSession,
        supervisor: Addr<Supervisor>,
        snapshot: Arc<ArcSwap<Snapshot>>,
    ) -> SessionServer {
        SessionServer {
            id: opened.id.clone(),
            mode: opened.mode,
            profile: opened.profile.clone(),
            session: opened.addr.clone(),
            supervisor,
            view: opened.view.clone(),
            snapshot,
            search_limit: opened.search_limit,
            semantic: opened.semantic.clone(),
            instructions_budget: opened.instructions_budget,
            code_mode: opened.code_mode,
            first_answers_by: Instant::now() + opened.startup_wait,
            breaker: Default::default(),
            evidence: Default::default(),
            asks: Default::default(),
            role: opened.role.clone(),
            identity: opened.identity.clone(),
            raw: None,
            shared: opened.shared.clone(),
            events: opened.events.clone(),
            config_trouble: opened.config_trouble.clone(),
        }
    }

    /// The catalog as this session's identity sees it: one atomic load,
    /// and for an identity with a role of its own one map lookup.
    pub(super) fn catalog(&self) -> Arc<Snapshot> {
        self.snapshot.load_full().for_role(self.role.as_deref())
    }

    /// The session's tools/list: native tools, then its proxied tools in
    /// catalog order (the same catalog gives the same order).
    pub fn list(&self) -> Vec<Tool> {
        let snapshot = self.catalog();
        let activated = self.view.activated.load();
        super::list_tools(
            &snapshot,
            self.visibility(&activated),
            self.code_mode.enabled,
        )
    }

    fn visibility<'a>(&'a self, activated: &'a super::ActivationSet) -> Visibility<'a> {
        Visibility {
            mode: self.mode,
            activated,
            profile: self.profile.as_deref(),
            modern: self.view.is_modern(),
        }
    }

    /// The server's description of itself: capabilities and the
    /// instructions, worded for the session's era.
    fn info(&self, modern: bool) -> ServerConfig {
        let snapshot = self.catalog();
        let offers = snapshot.may_offer();
        #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
        let mut capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        // What at least one child offers, or may yet (one has not said);
        // evo announces changes to its merged lists itself, so listChanged
        // is always on.
        if offers.resources {
            let mut resources = rmcp::model::ResourcesCapability::default();
            resources.subscribe = Some(offers.subscribe);
            resources.list_changed = Some(true);
            capabilities.resources = Some(resources);
        }
        if offers.prompts {
            let mut prompts = rmcp::model::PromptsCapability::default();
            prompts.list_changed = Some(true);
            capabilities.prompts = Some(prompts);
        }
        if offers.completions {
            capabilities.completions = Some(Default::default());
        }
        let mut info =
            ServerConfig::new(capabilities).with_server_info(Implementation::new("evo", VERSION));
        let activated = self.view.activated.load();
        let by = Visibility {
            modern,
            ..self.visibility(&activated)
        };
        let listed: std::collections::HashSet<&str> = visible_entries(&snapshot, by)
            .into_iter()
            .map(|e| e.name.as_str())
            .collect();
        let mut text = disclosure::instructions(
            &snapshot,
            &|e: &ToolEntry| listed.contains(e.name.as_str()),
            self.instructions_budget,
        );
        if modern && self.mode == DiscoveryMode::Dynamic {
            text.push_str(native_tools::MODERN_NOTE);
        }
        if let Some(note) = startup::still_starting_note(&snapshot) {
            text.push_str(&note);
        }
        info.instructions = Some(self.config_trouble.appended(text));
        info
    }

    pub(super) fn describe_tool(&self, args: Option<&JsonObject>) -> CallToolResult {
        let name = match native_tools::string_arg(args, "name", native_tools::DESCRIBE_TOOL) {
            Ok(n) => n,
            Err(e) => return text_result(e, true),
        };
        self.view.touch();
        if let Some(text) = native_tools::describe(name, self.code_mode.enabled) {
            return text_result(text, false);
        }
        let snapshot = self.catalog();
        match (snapshot.get(name), snapshot.quarantined.get(name)) {
            (Some(entry), _) => text_result(
                disclosure::describe_tool(entry, self.code_mode.enabled),
                false,
            ),
            (None, Some(held)) => text_result(held.refusal(), true),
            (None, None) => text_result(
                self.config_trouble
                    .appended(unknown_tool_message(&snapshot, name, Asker::Agent)),
                true,
            ),
        }
    }

    pub(super) fn describe_capability(&self, args: Option<&JsonObject>) -> CallToolResult {
        self.view.touch();
        let domain = args
            .and_then(|a| a.get("domain"))
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty());
        let snapshot = self.catalog();
        match disclosure::describe_capability(
            &snapshot,
            domain.map(str::trim),
            &snapshot.capabilities,
        ) {
            Ok(mut text) => {
                if self.view.is_modern() && self.mode == DiscoveryMode::Dynamic {
                    text.push_str(native_tools::MODERN_NOTE);
                }
                text_result(text, false)
            }
            Err(e) => text_result(e, true),
        }
    }

    /// `discover_tools`: ranked matches. Before 2026-07-28 they are
    /// activated for this session (unless `activate: false`); on 2026-07-28
    /// nothing a request does changes the list, so they come back as cards
    /// (with compact schemas) to call by name or through `call_tool`.
    pub(super) async fn discover_tools(&self, args: Option<&JsonObject>) -> CallToolResult {
        let params = match search::DiscoverParams::parse(args, self.search_limit) {
            Ok(p) => p,
            Err(e) => return text_result(e, true),
        };
        let modern = self.view.is_modern();
        let snapshot = self.catalog();
        let started = std::time::Instant::now();
        let outcome = embedder::search(
            &self.semantic,
            &snapshot,
            &params.query,
            params.limit,
            params.domain.as_deref(),
        )
        .await;
        metrics::metrics().search(started.elapsed());
        // The query's vector, when the semantic stage computed one: what
        // it teaches is then found by meaning too.
        let vector = self.semantic.load().queries.get(&params.query);
        self.evidence
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .searched(&params.query, vector, started);
        let cards = params.schemas || modern;
        let parts = search::CardParts {
            schema: cards,
            signature: cards && self.code_mode.enabled,
        };
        let mut text = search::render(&outcome, parts);
        if outcome.hits.is_empty() {
            text = self.config_trouble.appended(text);
        }
        if modern {
            self.view.touch();
            if !outcome.hits.is_empty() {
                text.push_str(if params.activate == Some(true) {
                    native_tools::MODERN_NO_ACTIVATION
                } else {
                    native_tools::MODERN_CALL_HINT
                });
            }
        } else if params.activate.unwrap_or(true) && !outcome.hits.is_empty() {
            let names: Vec<String> = outcome.hits.iter().map(|h| h.entry.name.clone()).collect();
            let _ = self
                .session
                .send(SetActive {
                    tools: names,
                    active: true,
                    touch: true,
                })
                .await;
            text.push_str("\nThese tools are now active in this session: call them by name, or through call_tool if your client does not refresh its tool list.");
        } else {
            self.view.touch();
        }
        text_result(text, false)
    }
}

/// "No tool named X" with the closest names, so the caller can correct itself.
pub fn unknown_tool_message(snapshot: &Snapshot, name: &str, asker: Asker) -> String {
    // A name under a server that needs a login and has listed nothing.
    if let Some(link) = snapshot.login_required_owner(name) {
        return format!(
            "No tool named '{name}' is known yet. {}",
            search::login_note(&link.id)
        );
    }
    let close = search::closest_names(snapshot, name, 5);
    let search = match asker {
        Asker::Agent => "Use discover_tools to search",
        Asker::Person => "Run `evoctl search WORDS` to search",
    };
    if close.is_empty() {
        format!("No tool named '{name}'. {search} for one.")
    } else {
        format!(
            "No tool named '{name}'. Closest: {}. {search}.",
            close.join(", ")
        )
    }
}

/// Who is told about an unknown tool, so the hint names a tool they have:
/// an agent in a session (`discover_tools`), or a person at `evoctl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asker {
    Agent,
    Person,
}

impl ServerHandler for SessionServer {
    fn get_info(&self) -> ServerConfig {
        self.info(self.view.is_modern())
    }

    /// `server/discover` opens a 2026-07-28 session: the instructions say
    /// how tools are reached on that era.
    async fn discover(
        &self,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("server/discover", &self.id, &mut ctx);
        self.first_answers(&ctx.ct).await;
        let result = Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.info(true),
        ));
        RequestSpan::answered(span, result)
    }

    /// What a listen stream may hear: tool, resource and prompt list
    /// changes, and updates of the resources it names that a server
    /// subscribable for them owns.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let snapshot = self.catalog();
        let offers = &snapshot.offers;
        let may_offer = snapshot.may_offer();
        let mut filter = SubscriptionFilter::builder().tools_list_changed();
        if may_offer.resources {
            filter = filter.resources_list_changed();
        }
        if may_offer.prompts {
            filter = filter.prompts_list_changed();
        }
        let mut filter = filter.build();
        let uris: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| {
                offers
                    .owner_of(uri)
                    .and_then(|s| offers.caps_of(&s.id))
                    .is_some_and(|c| c.subscribe)
            })
            .cloned()
            .collect();
        if !uris.is_empty() {
            filter.resource_subscriptions = Some(uris);
        }
        Some(filter)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let id = sink.id().clone();
        let key = format!("{}#{id}", self.id);
        for uri in sink
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default()
        {
            let listener = crate::child::subscriptions::Listener::Sink(sink.clone());
            if let Err(e) = self.subscribe_to(&uri, listener, &key).await {
                tracing::warn!(session = %self.id, uri = %uri, error = %e.message, "a listen stream's resource subscription failed at the server");
            }
        }
        let listening = &self.view.flags.listening;
        listening.fetch_add(1, Ordering::Relaxed);
        let _ = self.session.send(Listener::Add(sink)).await;
        context.cancelled().await;
        listening.fetch_sub(1, Ordering::Relaxed);
        self.session.do_send(Listener::Remove(id));
        self.view.end_subscriptions(Some(&key));
        Ok(())
    }

    /// The handshake of an initialize-era session: its peer is kept for
    /// notifications (over HTTP this is the only place to learn it).
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.session.do_send(super::Attach(context.peer.clone()));
        self.first_answers(&context.ct).await;
        self.negotiate_initialize(&request)
    }

    /// Requests rmcp could not read as one it knows: a known method with
    /// params of the wrong shape is invalid params, saying what is wrong;
    /// anything else is a method evo does not serve.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        let params = request.params.as_ref();
        let invalid = match request.method.as_str() {
            "tools/call" => {
                let problem = match params {
                    None | Some(Value::Null) => "params are missing".to_string(),
                    Some(Value::Object(p)) => match (p.get("name"), p.get("arguments")) {
                        (None, _) => "'name' is missing".to_string(),
                        (Some(n), _) if !n.is_string() => {
                            format!("'name' must be a string, got {n}")
                        }
                        (_, Some(a)) if !a.is_object() && !a.is_null() => {
                            format!("'arguments' must be an object, got {a}")
                        }
                        _ => "they do not match the MCP schema".to_string(),
                    },
                    Some(other) => format!("params must be an object, got {other}"),
                };
                Some(format!(
                    "tools/call: {problem}; expected {{\"name\": string, \"arguments\": object}}"
                ))
            }
            "tools/list" => {
                Some("tools/list: params must be an object (with an optional 'cursor')".into())
            }
            _ => None,
        };
        Err(match invalid {
            Some(message) => ErrorData::invalid_params(message, None),
            None => not_served(&request.method),
        })
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("resources/list", &self.id, &mut ctx);
        self.first_answers(&ctx.ct).await;
        let result = self.resources_page(request.as_ref());
        RequestSpan::answered(span, result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("resources/templates/list", &self.id, &mut ctx);
        self.first_answers(&ctx.ct).await;
        let result = self.templates_page(request.as_ref());
        RequestSpan::answered(span, result)
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("resources/read", &self.id, &mut ctx);
        let result = self.read(request, ctx.id).await;
        RequestSpan::answered(span, result)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("prompts/list", &self.id, &mut ctx);
        self.first_answers(&ctx.ct).await;
        let result = self.prompts_page(request.as_ref());
        RequestSpan::answered(span, result)
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("prompts/get", &self.id, &mut ctx);
        let result = self.prompt(request).await;
        RequestSpan::answered(span, result)
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("completion/complete", &self.id, &mut ctx);
        self.first_answers(&ctx.ct).await;
        let result = self.completion(request).await;
        RequestSpan::answered(span, result)
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.view.request(&ctx);
        let listener = crate::child::subscriptions::Listener::Peer(ctx.peer.clone());
        self.subscribe_to(&request.uri, listener, &self.id).await
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.view.request(&ctx);
        self.unsubscribe_from(&request.uri, &self.id).await
    }

    /// Children's log messages at `level` and above are forwarded to this
    /// session from now on (none before it asks).
    #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.view.request(&ctx);
        self.view
            .flags
            .log_level
            .store(level_rank(request.level) + 1, Ordering::Relaxed);
        Ok(())
    }

    async fn ping(&self, ctx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.view.request(&ctx);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("tools/list", &self.id, &mut ctx);
        self.first_answers(&ctx.ct).await;
        let result = ListToolsResult::with_all_items(self.list());
        let result = Ok(if self.view.is_modern() {
            result
                .with_ttl_ms(LIST_TTL_MS)
                .with_cache_scope(rmcp::model::CacheScope::Private)
        } else {
            result
        });
        RequestSpan::answered(span, result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.view.request(&ctx);
        let span = RequestSpan::start("tools/call", &self.id, &mut ctx);
        if let Some(span) = &span {
            span.called(&request.name, request.arguments.as_ref());
        }
        let answers = Answers {
            responses: request.input_responses,
            state: request.request_state,
            from_script: false,
        };
        let result = match request.name.as_ref() {
            native_tools::CALL_TOOL => {
                match native_tools::parse_call_tool(request.arguments.as_ref()) {
                    Ok((name, arguments)) => {
                        self.call_proxied(&name, arguments, answers, &ctx).await
                    }
                    Err(e) => Ok(text_result(e, true).into()),
                }
            }
            native_tools::DISCOVER_TOOLS => {
                Ok(self.discover_tools(request.arguments.as_ref()).await.into())
            }
            native_tools::DESCRIBE_TOOL => {
                Ok(self.describe_tool(request.arguments.as_ref()).into())
            }
            native_tools::DESCRIBE_CAPABILITY => {
                Ok(self.describe_capability(request.arguments.as_ref()).into())
            }
            native_tools::RUN_CODE if self.code_mode.enabled => {
                Ok(self.run_code(request.arguments.as_ref(), &ctx).await.into())
            }
            name => {
                self.call_proxied(name, request.arguments, answers, &ctx)
                    .await
            }
        };
        RequestSpan::call_answered(span, result)
    }
}
