//! Approval of a call that needs a person: in band (elicitation, or the
//! 2026-07-28 `input_required` round) or held for `evoctl approve`.

use std::time::Instant;

use rmcp::model::JsonObject;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::SessionServer;
use crate::catalog::snapshot::ToolEntry;
use crate::policy::approvals::Gate;
use crate::supervisor::{CheckApproval, log_held};

/// An approval question sent in an `input_required` result: the retry's
/// `requestState` must name it, for the same tool and arguments.
pub struct Ask {
    pub(super) state: String,
    pub(super) tool: String,
    pub(super) key: u64,
    pub(super) at: Instant,
}

/// How long an in-band approval question stays answerable.
pub(super) const ASK_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// The key of the approval question in `inputRequests`.
pub(super) const ASK_KEY: &str = "evo/approve";

/// A retried `tools/call`'s answers to the questions of its last
/// `input_required` result (2026-07-28), and whether the user may be asked
/// at all.
#[derive(Default)]
pub struct Answers {
    pub(super) responses: Option<rmcp::model::InputResponses>,
    pub(super) state: Option<String>,
    /// A call from a script (`run_code`): nobody can answer a question in
    /// band, so a call that needs approval is held for `evoctl approve`
    /// and the script is told the approval id.
    pub(super) from_script: bool,
}

impl Answers {
    /// A script's call.
    pub(super) fn from_script() -> Answers {
        Answers {
            from_script: true,
            ..Answers::default()
        }
    }
}

/// Whether a call that needs approval may go on.
pub(super) enum Approval {
    Granted,
    Refused(String),
    /// Ask the user in band and have the client retry with the answer.
    Ask(rmcp::model::InputRequiredResult),
}

impl SessionServer {
    /// A person approves each call of a `require_approval` tool: through the
    /// client when it can ask its user (elicitation: a request to the client
    /// on sessions with the initialize handshake, an `input_required` result
    /// on 2026-07-28 ones), else by `evoctl approve ID`.
    pub(super) async fn approval(
        &self,
        entry: &ToolEntry,
        rule: &str,
        args: &JsonObject,
        key: u64,
        answers: Answers,
        ctx: &RequestContext<RoleServer>,
    ) -> Approval {
        let preview = Value::Object(args.clone()).to_string();
        let question = rmcp::model::ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!(
                "Allow the call {} with arguments {}? (evo permissions: {rule})",
                entry.name,
                preview.chars().take(500).collect::<String>()
            ),
            requested_schema: rmcp::model::ElicitationSchema::new(Default::default()),
        };
        let declined = || {
            Approval::Refused(format!(
                "The user declined the call to {}; it was not made.",
                entry.name
            ))
        };
        if answers.from_script {
            // Held for evoctl below.
        } else if ctx.meta.protocol_version().is_some() {
            // 2026-07-28: capabilities come with each request, and the
            // question goes back in the result.
            if ctx
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some())
            {
                let unavailable = |why: String| {
                    Approval::Refused(format!(
                        "This call to {} needs the user's approval ({rule}) and it cannot be asked or checked now: {why}. It was not made; retry it later.",
                        entry.name
                    ))
                };
                return match self.answer(&entry.name, key, answers).await {
                    Ok(Some(true)) => Approval::Granted,
                    Ok(Some(false)) => declined(),
                    Ok(None) => match self.ask(&entry.name, key, question).await {
                        Ok(ask) => Approval::Ask(ask),
                        Err(why) => unavailable(why),
                    },
                    Err(why) => unavailable(why),
                };
            }
        } else if !ctx.peer.supported_elicitation_modes().is_empty() {
            match ctx
                .peer
                .create_elicitation_with_timeout(question, Some(ASK_TTL))
                .await
            {
                Ok(r) if r.action == rmcp::model::ElicitationAction::Accept => {
                    return Approval::Granted;
                }
                Ok(_) => return declined(),
                // The client could not ask: hold the call for an approval by
                // evoctl instead.
                Err(e) => {
                    tracing::debug!(error = %e, "elicitation failed; holding the call for evoctl approve")
                }
            }
        }
        let check = CheckApproval {
            tool: entry.name.clone(),
            key,
            preview,
            identity: self.identity.clone(),
        };
        let gate = match &self.shared {
            // The book is in the store: asked from this (the I/O) thread,
            // with no round trip through the Supervisor's.
            Some(shared) => {
                let gate = shared
                    .approval_check(&check.tool, key, check.identity.as_deref(), &check.preview)
                    .await
                    .unwrap_or_else(|e| Gate::Unavailable(e.to_string()));
                log_held(&self.events, &check, &gate);
                Ok(gate)
            }
            None => self.supervisor.send(check).await,
        };
        match gate {
            Err(_) => Approval::Refused("evod is shutting down".to_string()),
            Ok(Gate::Pass) => Approval::Granted,
            Ok(Gate::Pending(id)) => Approval::Refused(format!(
                "This call to {} needs a person's approval ({rule}); it was not made. Ask the user to run `evoctl approve {id}` (or `evoctl deny {id}`), then repeat exactly the same call within 5 minutes.",
                entry.name
            )),
            Ok(Gate::Denied(id)) => Approval::Refused(format!(
                "A person denied this call to {} ({id}); it was not made. Do not retry it.",
                entry.name
            )),
            Ok(Gate::Unavailable(why)) => Approval::Refused(format!(
                "This call to {} needs a person's approval ({rule}) and approvals cannot be checked now: {why}. It was not made; retry it later.",
                entry.name
            )),
        }
    }

    /// The call a question is asked for, as the shared store records it.
    fn asked_call(&self, tool: &str, key: u64) -> String {
        format!(
            "{}|{tool}|{key:016x}",
            self.identity
                .as_deref()
                .unwrap_or(evo_proto::ctl::LOCAL_IDENTITY)
        )
    }

    /// Records an in-band approval question for `tool` with these arguments
    /// (with the shared store, there: the retry may reach another instance)
    /// and builds the `input_required` result that asks it.
    pub(super) async fn ask(
        &self,
        tool: &str,
        key: u64,
        question: rmcp::model::ElicitRequestParams,
    ) -> Result<rmcp::model::InputRequiredResult, String> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| format!("no randomness for the question: {e}"))?;
        let state: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        if let Some(shared) = &self.shared {
            shared
                .ask_put(&state, &self.asked_call(tool, key), ASK_TTL.as_secs())
                .await
                .map_err(|e| e.to_string())?;
        } else {
            let mut asks = self.asks.lock().unwrap_or_else(|e| e.into_inner());
            asks.retain(|a| a.at.elapsed() < ASK_TTL);
            asks.push(Ask {
                state: state.clone(),
                tool: tool.to_string(),
                key,
                at: Instant::now(),
            });
        }
        let request =
            rmcp::model::InputRequest::Elicitation(rmcp::model::ElicitRequest::new(question));
        Ok(rmcp::model::InputRequiredResult::new(
            Some([(ASK_KEY.to_string(), request)].into()),
            Some(state),
        ))
    }

    /// The user's answer in a retried call: `Some(accepted)` when its
    /// `requestState` names a question asked for this tool and these
    /// arguments (each question is answered once, on whichever instance
    /// the retry reaches), else `None`.
    pub(super) async fn answer(
        &self,
        tool: &str,
        key: u64,
        answers: Answers,
    ) -> Result<Option<bool>, String> {
        let Some(state) = answers.state else {
            return Ok(None);
        };
        if let Some(shared) = &self.shared {
            let taken = shared
                .ask_take(&state, &self.asked_call(tool, key))
                .await
                .map_err(|e| e.to_string())?;
            if !taken {
                return Ok(None);
            }
        } else {
            let mut asks = self.asks.lock().unwrap_or_else(|e| e.into_inner());
            let Some(i) = asks
                .iter()
                .position(|a| a.state == state && a.tool == tool && a.key == key)
            else {
                return Ok(None);
            };
            let ask = asks.swap_remove(i);
            if ask.at.elapsed() >= ASK_TTL {
                return Ok(None);
            }
        }
        let Some(answer) = answers.responses.and_then(|mut r| r.remove(ASK_KEY)) else {
            return Ok(None);
        };
        Ok(Some(
            answer.get("action").and_then(Value::as_str) == Some("accept"),
        ))
    }
}
