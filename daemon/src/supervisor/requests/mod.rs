//! The Supervisor's answers to `evoctl` requests: [`Ctl`] and its handler,
//! which hands each request to one method; the methods live by topic in
//! this module's files.

mod approvals;
mod catalog;
mod console;
mod profiles;
mod servers;
mod sessions;
mod tokens;

use actix::prelude::*;
use evo_proto::ctl::{CtlReply, CtlRequest, ErrorKind, Reply};

use crate::catalog::DiffTools;
use crate::catalog::TrustTools;
use crate::supervisor::Supervisor;

/// A control request from `evoctl`.
#[derive(Message)]
#[rtype(result = "CtlReply")]
pub struct Ctl(pub CtlRequest);

impl Handler<Ctl> for Supervisor {
    type Result = ResponseFuture<CtlReply>;
    fn handle(&mut self, msg: Ctl, ctx: &mut Context<Self>) -> Self::Result {
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
            CtlRequest::Profiles => ready(self.profiles()),
            CtlRequest::Resources { server } => ready(self.resources(server.as_deref())),
            CtlRequest::Prompts => ready(self.prompts()),
            CtlRequest::Read { uri } => self.read(uri),
            CtlRequest::Search {
                query,
                limit,
                explain,
            } => self.search(query, limit, explain),
            CtlRequest::SearchForget { tool } => ready(self.forget_learned(tool)),
            CtlRequest::Describe { name } => ready(self.describe(&name)),
            CtlRequest::Docs => ready(self.docs()),
            CtlRequest::Sessions => self.list_sessions(),
            CtlRequest::Refresh { server } => ready(self.refresh(server)),
            CtlRequest::Approve { id } => self.decide(id, true),
            CtlRequest::Deny { id } => self.decide(id, false),
            CtlRequest::Approvals => self.pending_approvals(),
            CtlRequest::Reload => ready(self.reload_on_request(ctx)),
            CtlRequest::Diff { server, tool } => {
                self.ask_catalog(DiffTools { server, tool }, Reply::Diff)
            }
            CtlRequest::Trust { server, tool } => {
                self.ask_catalog(TrustTools { server, tool }, Reply::Action)
            }
            req @ (CtlRequest::TokenCreate { .. }
            | CtlRequest::TokenList
            | CtlRequest::TokenRevoke { .. }) => self.tokens(req),
            CtlRequest::Ui => ready(self.ui()),
            CtlRequest::Login { server, wait } => self.login(server, wait),
            CtlRequest::Logout { server } => self.logout(server),
            CtlRequest::Stop => ready(self.stop_on_request(ctx)),
        }
    }
}

/// A reply known at once, as the handler returns it.
fn ready(reply: CtlReply) -> ResponseFuture<CtlReply> {
    Box::pin(async move { reply })
}

/// The refusal of a request naming a server the config does not have.
fn unknown_server(server: &str) -> CtlReply {
    CtlReply::error(
        ErrorKind::UnknownServer,
        format!("no server '{server}'; `evoctl status` lists them"),
    )
}
