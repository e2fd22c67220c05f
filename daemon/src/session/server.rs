//! The rmcp server of one session: its MCP methods and native tools.

use std::sync::Arc;
use std::sync::atomic::Ordering;

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
use super::{Listener, Session, SessionView, SetActive, level_rank, visible_entries};
use crate::catalog::snapshot::{Snapshot, ToolEntry};
use crate::config::DiscoveryMode;
use crate::disclosure;
use crate::native;
use crate::search;
use crate::supervisor::Supervisor;

/// The rmcp server of one session. Cheap to clone; all shared state is the
/// catalog snapshot (read-only) and the Session actor's address.
#[derive(Clone)]
pub struct SessionServer {
    pub id: String,
    pub mode: DiscoveryMode,
    pub session: Addr<Session>,
    pub supervisor: Addr<Supervisor>,
    pub view: SessionView,
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub search_limit: usize,
    /// The semantic search stage (see `crate::embedder`).
    pub semantic: Arc<ArcSwap<crate::embedder::SemanticView>>,
    /// Byte budget of the one-line listing in `instructions`.
    pub instructions_budget: usize,
    /// Identical failing calls of this session (see [`super::breaker`]).
    pub breaker: Arc<std::sync::Mutex<RetryBreaker>>,
    /// Approvals asked in band on 2026-07-28 sessions, awaiting the retry
    /// that carries the user's answer.
    pub asks: Arc<std::sync::Mutex<Vec<Ask>>>,
}

/// The error for an MCP method evo does not serve: it aggregates tools only.
pub(super) fn not_served(method: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method '{method}' is not served by evo (it serves tools: tools/list, tools/call and its native tools)"
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
    pub(super) async fn list(&self) -> Vec<Tool> {
        let snapshot = self.snapshot.load_full();
        let mut tools = native::tools();
        match self.mode {
            DiscoveryMode::Legacy => {
                tools.extend(snapshot.tools.iter().map(|e| e.tool.clone()));
            }
            DiscoveryMode::Dynamic => {
                let activated = self.view.activated.load();
                tools.extend(
                    visible_entries(&snapshot, self.mode, &activated).map(|e| e.tool.clone()),
                );
            }
        }
        tools
    }

    pub(super) fn describe_tool(&self, args: Option<&JsonObject>) -> CallToolResult {
        let name = match native::string_arg(args, "name", native::DESCRIBE_TOOL) {
            Ok(n) => n,
            Err(e) => return text_result(e, true),
        };
        self.view.touch();
        if let Some(text) = native::describe(name) {
            return text_result(text, false);
        }
        let snapshot = self.snapshot.load_full();
        match (snapshot.get(name), snapshot.quarantined.get(name)) {
            (Some(entry), _) => text_result(disclosure::describe_tool(entry), false),
            (None, Some(held)) => text_result(held.refusal(), true),
            (None, None) => text_result(unknown_tool_message(&snapshot, name, Asker::Agent), true),
        }
    }

    pub(super) fn describe_capability(&self, args: Option<&JsonObject>) -> CallToolResult {
        self.view.touch();
        let domain = args
            .and_then(|a| a.get("domain"))
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty());
        let snapshot = self.snapshot.load_full();
        match disclosure::describe_capability(
            &snapshot,
            domain.map(str::trim),
            &snapshot.capabilities,
        ) {
            Ok(text) => text_result(text, false),
            Err(e) => text_result(e, true),
        }
    }

    pub(super) async fn discover(&self, args: Option<&JsonObject>) -> CallToolResult {
        let params = match search::DiscoverParams::parse(args, self.search_limit) {
            Ok(p) => p,
            Err(e) => return text_result(e, true),
        };
        let snapshot = self.snapshot.load_full();
        let outcome = crate::embedder::search(
            &self.semantic,
            &snapshot,
            &params.query,
            params.limit,
            params.domain.as_deref(),
        )
        .await;
        let mut text = search::render(&outcome);
        if params.activate && !outcome.hits.is_empty() {
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
        #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let mut info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("evo", crate::VERSION));
        let snapshot = self.snapshot.load();
        let activated = self.view.activated.load();
        let mode = self.mode;
        let listed = |e: &ToolEntry| match mode {
            DiscoveryMode::Legacy => true,
            DiscoveryMode::Dynamic => e.hot || activated.contains(&e.name),
        };
        info.instructions = Some(disclosure::instructions(
            &snapshot,
            &listed,
            self.instructions_budget,
        ));
        info
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let id = sink.id().clone();
        let _ = self.session.send(Listener::Add(sink)).await;
        context.cancelled().await;
        self.session.do_send(Listener::Remove(id));
        Ok(())
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
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        Err(not_served("resources/list"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        Err(not_served("resources/templates/list"))
    }

    async fn read_resource(
        &self,
        _request: rmcp::model::ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        Err(not_served("resources/read"))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        Err(not_served("prompts/list"))
    }

    async fn get_prompt(
        &self,
        _request: rmcp::model::GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        Err(not_served("prompts/get"))
    }

    async fn complete(
        &self,
        _request: rmcp::model::CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        Err(not_served("completion/complete"))
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
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.view.request(&ctx);
        Ok(ListToolsResult::with_all_items(self.list().await))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.view.request(&ctx);
        let answers = Answers {
            responses: request.input_responses,
            state: request.request_state,
        };
        match request.name.as_ref() {
            native::CALL_TOOL => match native::parse_call_tool(request.arguments.as_ref()) {
                Ok((name, arguments)) => self.call_proxied(&name, arguments, answers, &ctx).await,
                Err(e) => Ok(text_result(e, true).into()),
            },
            native::DISCOVER_TOOLS => Ok(self.discover(request.arguments.as_ref()).await.into()),
            native::DESCRIBE_TOOL => Ok(self.describe_tool(request.arguments.as_ref()).into()),
            native::DESCRIBE_CAPABILITY => {
                Ok(self.describe_capability(request.arguments.as_ref()).into())
            }
            name => {
                self.call_proxied(name, request.arguments, answers, &ctx)
                    .await
            }
        }
    }
}
