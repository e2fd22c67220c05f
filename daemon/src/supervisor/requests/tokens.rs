//! `evoctl token create|list|revoke`: the HTTP endpoint's API tokens, in
//! the tokens file or the shared store.

use std::time::SystemTime;

use actix::prelude::*;
use evo_proto::ctl::{self, CtlReply, CtlRequest, ErrorKind, Reply};

use super::ready;
use crate::auth::tokens::TokenTable;
use crate::store::Event;
use crate::supervisor::{RefreshTokens, Supervisor};

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
            unchecked: self.token_unchecked(),
        }))
    }

    /// Why a token made now would not be checked: evod serves no HTTP
    /// endpoint, or one without auth (it asks for none until evod restarts
    /// with `serve.http.auth`). `None`: the endpoint checks tokens.
    fn token_unchecked(&self) -> Option<String> {
        match &self.endpoint {
            Some(e) if e.checks_credentials() => None,
            Some(_) => Some(
                "the HTTP endpoint has no auth: this token is not checked until serve.http.auth is set and evod restarts".into(),
            ),
            None => Some(
                "evod serves no HTTP endpoint: this token is not checked until serve.http (with serve.http.auth) is set and evod restarts".into(),
            ),
        }
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
                    let _ = me.send(RefreshTokens).await;
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
                let mut scratch = TokenTable::default();
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
                let unchecked = self.token_unchecked();
                Box::pin(async move {
                    match shared.token_add(&name, &record).await {
                        Ok(true) => {
                            shared.publish(Event::Tokens).await;
                            refresh().await;
                            tracing::info!(token = %name, role = ?role, profile = ?profile, "API token created (in the shared store)");
                            CtlReply::data(Reply::TokenCreated(ctl::TokenCreated {
                                name,
                                token,
                                role,
                                profile,
                                created,
                                file: format!("{} (shared store)", shared.shown()),
                                unchecked,
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
                        shared.publish(Event::Tokens).await;
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

    /// `evoctl token ...`: in the shared store when there is one, else in
    /// the tokens file.
    pub(super) fn tokens(&mut self, req: CtlRequest) -> ResponseFuture<CtlReply> {
        if self.opts.store.shared().is_some() {
            self.shared_token_request(req)
        } else {
            ready(self.token_request(req))
        }
    }
}
