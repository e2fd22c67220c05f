//! A remote server's OAuth side of its ChildServer: the stored credential a
//! run starts with, what a 401 means (a login needed, or wrong headers), and
//! `evoctl login` / `logout` and a client's URL elicitation (one login flow,
//! shared).
//!
//! A remote child's start that gets 401 (`StartError::Unauthorized`; for Streamable HTTP the
//! challenge is kept by the `Authed` client wrapper, since rmcp's handshake error drops it) runs
//! RFC 9728 / RFC 8414 discovery (rmcp's `AuthorizationManager`): metadata found, the ChildServer
//! enters `LoginRequired` (no retry, no run) and says `evoctl login ID`. A 401 with no metadata is
//! an ordinary failure (wrong `headers`) and reconnects, unless the challenge names
//! `resource_metadata` or the server has an `oauth` entry: then it still needs a login, and says
//! why discovery failed.

use std::sync::Arc;

use actix::prelude::*;

use super::link::{LoginUnderWay, OfferLogin};
use super::{ChildServer, Phase, Restart};
use crate::config::{Grant, TransportSpec};
use crate::oauth::login::{Target, begin, logout};
use crate::oauth::{Bearer, discover};

impl ChildServer {
    /// The server's stored OAuth credential for run `generation`, if it has
    /// one (or gets one headlessly): a refused refresh takes the server to
    /// `login required`.
    pub(super) fn load_bearer(
        &self,
        url: &str,
        generation: u64,
        ctx: &mut Context<Self>,
    ) -> Option<Arc<Bearer>> {
        let actor = ctx.address();
        Bearer::load(
            &self.spec.id,
            url,
            self.spec.oauth.as_ref(),
            move |reason| actor.do_send(LoginLost { generation, reason }),
        )
    }

    /// Run `generation` was answered 401. With OAuth metadata (RFC 9728,
    /// then the authorization server's), the server needs `evoctl login`;
    /// a 401 without them means its headers are wrong.
    pub(super) fn unauthorized(
        &mut self,
        generation: u64,
        challenge: String,
        ctx: &mut Context<Self>,
    ) {
        let TransportSpec::Http { url, .. } = &self.spec.transport else {
            return;
        };
        let url = url.clone();
        self.challenge = Some(challenge.clone());
        let hinted = challenge.to_ascii_lowercase().contains("resource_metadata")
            || self.spec.oauth.is_some();
        let probe = tracing::Instrument::instrument(
            async move { discover(&url, Some(&challenge)).await.map(|_| ()) },
            tracing::info_span!("child", server = %self.spec.id),
        );
        ctx.spawn(probe.into_actor(self).map(move |found, act, ctx| {
            if !act.phase.is_run(generation) {
                return;
            }
            let id = act.spec.id.clone();
            match found {
                Ok(()) => act.login_required(
                    format!("server '{id}' needs a login: run `evoctl login {id}`"),
                    ctx,
                ),
                Err(e) if hinted => act.login_required(
                    format!("server '{id}' needs a login, but {e}; {}", e.advice(&id)),
                    ctx,
                ),
                Err(_) => act.down(
                    generation,
                    "answered 401 Unauthorized without OAuth metadata; check its `headers`".into(),
                    ctx,
                ),
            }
        }));
    }

    /// Leaves the current run for `login required`, saying why.
    pub(super) fn login_required(&mut self, reason: String, ctx: &mut Context<Self>) {
        tracing::warn!(server = %self.spec.id, reason = %reason, "login required");
        self.last_error = Some(reason);
        self.abandon(Phase::LoginRequired, ctx);
    }
}

/// The refresh token of run `generation` was refused: the server needs a
/// login again.
#[derive(Message)]
#[rtype(result = "()")]
struct LoginLost {
    generation: u64,
    reason: String,
}

impl Handler<LoginLost> for ChildServer {
    type Result = ();
    fn handle(&mut self, msg: LoginLost, ctx: &mut Context<Self>) {
        if self.phase.is_run(msg.generation) {
            let id = self.spec.id.clone();
            self.login_required(
                format!(
                    "server '{id}' needs a login: {}; run `evoctl login {id}`",
                    msg.reason
                ),
                ctx,
            );
        }
    }
}

/// `evoctl login SERVER`: starts the login; answers with the URL to open.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct BeginLogin;

impl Handler<BeginLogin> for ChildServer {
    type Result = ResponseActFuture<Self, Result<String, String>>;
    fn handle(&mut self, _: BeginLogin, ctx: &mut Context<Self>) -> Self::Result {
        Box::pin(
            self.begin_login(ctx)
                .map(|started, _, _| started.map(|l| l.url)),
        )
    }
}

impl Handler<OfferLogin> for ChildServer {
    type Result = ResponseActFuture<Self, Result<LoginUnderWay, String>>;
    fn handle(&mut self, _: OfferLogin, ctx: &mut Context<Self>) -> Self::Result {
        if !matches!(self.phase, Phase::LoginRequired) {
            let e = self.unavailable();
            return Box::pin(fut::ready(Err(e)));
        }
        if let Some(login) = self.login.clone().filter(LoginUnderWay::pending) {
            return Box::pin(fut::ready(Ok(login)));
        }
        self.begin_login(ctx)
    }
}

impl ChildServer {
    /// Starts the authorization code flow (see `oauth::login`); a success
    /// restarts the child with its new tokens.
    fn begin_login(
        &mut self,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<LoginUnderWay, String>> {
        let id = self.spec.id.clone();
        let TransportSpec::Http { url, .. } = &self.spec.transport else {
            let e = format!(
                "server '{id}' is a stdio server: only remote (http or sse) servers log in"
            );
            return Box::pin(fut::ready(Err(e)));
        };
        if self
            .spec
            .oauth
            .as_ref()
            .is_some_and(|o| o.grant == Grant::ClientCredentials)
        {
            let e = format!(
                "server '{id}' uses oauth.grant client_credentials: evo gets its tokens itself, no login needed"
            );
            return Box::pin(fut::ready(Err(e)));
        }
        let target = Target {
            id,
            url: url.clone(),
            spec: self.spec.oauth.clone(),
            challenge: self.challenge.clone(),
        };
        let actor = ctx.address();
        let done = move || actor.do_send(Restart);
        let span = tracing::info_span!("child", server = %self.spec.id);
        let begin = tracing::Instrument::instrument(begin(target, done), span);
        Box::pin(begin.into_actor(self).map(|started, act, _| {
            let started = started?;
            let login = LoginUnderWay {
                url: started.url,
                outcome: started.outcome,
            };
            act.login = Some(login.clone());
            Ok(login)
        }))
    }
}

/// Waits for the login under way to end: what to tell the person.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct AwaitLogin;

impl Handler<AwaitLogin> for ChildServer {
    type Result = ResponseFuture<Result<String, String>>;
    fn handle(&mut self, _: AwaitLogin, _: &mut Context<Self>) -> Self::Result {
        let id = self.spec.id.clone();
        let Some(login) = self.login.clone() else {
            return Box::pin(async move {
                Err(format!(
                    "no login of server '{id}' is under way; run `evoctl login {id}`"
                ))
            });
        };
        Box::pin(async move { login.outcome(&id).await })
    }
}

/// `evoctl logout SERVER`: revoke where supported, forget, reconnect
/// (without tokens: `login required` if the server asks for them).
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct Logout;

impl Handler<Logout> for ChildServer {
    type Result = ResponseActFuture<Self, Result<String, String>>;
    fn handle(&mut self, _: Logout, _: &mut Context<Self>) -> Self::Result {
        let id = self.spec.id.clone();
        let TransportSpec::Http { url, .. } = &self.spec.transport else {
            let e = format!("server '{id}' is a stdio server: it has no OAuth tokens");
            return Box::pin(fut::ready(Err(e)));
        };
        let url = url.clone();
        let spec = self.spec.oauth.clone();
        let span = tracing::info_span!("child", server = %id);
        let out = tracing::Instrument::instrument(
            async move { logout(&id, &url, spec.as_ref()).await },
            span,
        );
        Box::pin(out.into_actor(self).map(|result, act, ctx| {
            act.bearer = None;
            if !matches!(act.phase, Phase::Idle | Phase::Stopped) {
                ctx.notify(Restart);
            }
            result
        }))
    }
}
