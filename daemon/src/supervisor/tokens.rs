//! The Supervisor's API tokens for the HTTP endpoint: read from the tokens
//! file or the shared store, put in force on the endpoint, and the sessions
//! of tokens taken away ended.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;

use super::Supervisor;
use crate::auth::tokens::TokenTable;
use crate::config;
use crate::store::StoreError;

impl Supervisor {
    /// The tokens file in force: `serve.http.auth.tokens_file`, else
    /// `tokens.json` beside the config.
    pub(super) fn tokens_path(&self) -> PathBuf {
        config::serve::tokens_path(&self.opts.config_path, &self.config.serve)
    }

    /// Re-reads the tokens file (with the shared store: its records);
    /// tokens no longer in it end their sessions.
    pub(super) fn reload_tokens(&mut self) {
        if self.opts.store.shared().is_some() {
            if !self.tokens_from_store {
                // Until Redis answers, this machine's copy of the records
                // (the tokens file, written on each read that changed them).
                self.load_tokens_file();
            }
            if let Some(me) = &self.me {
                me.do_send(RefreshTokens);
            }
            return;
        }
        self.load_tokens_file();
    }

    pub(super) fn load_tokens_file(&mut self) {
        let path = self.tokens_path();
        match TokenTable::load(&path) {
            Ok(table) => {
                self.tokens_error = None;
                if table != *self.tokens {
                    self.set_tokens(table);
                }
            }
            Err(e) => {
                tracing::error!("{e}; the tokens read before stay in force");
                self.tokens_error = Some(e);
            }
        }
    }

    /// Puts `table` in force: the front accepts its tokens from the next
    /// request on, and the sessions of tokens it lacks end.
    pub(super) fn set_tokens(&mut self, table: TokenTable) {
        let table = Arc::new(table);
        if let Some(endpoint) = &self.endpoint {
            endpoint.set_tokens(table.clone());
            for name in self.tokens.removed_in(&table) {
                endpoint.end_identity(&format!("token:{name}"));
            }
        }
        self.tokens = table;
    }

    /// The API token records in the shared store, put in force (a token
    /// revoked on any instance ends its sessions here too).
    pub(super) fn shared_tokens(&mut self, ctx: &mut Context<Self>) {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return;
        };
        ctx.spawn(
            async move { shared.tokens_get().await }
                .into_actor(self)
                .map(|got, act, _| act.apply_shared_tokens(got)),
        );
    }

    pub(super) fn apply_shared_tokens(&mut self, got: Result<Vec<String>, StoreError>) {
        let table = got
            .map_err(|e| e.to_string())
            .and_then(|records| TokenTable::from_records(&records));
        match table {
            Ok(table) => {
                self.tokens_error = None;
                if !self.tokens_from_store {
                    self.tokens_from_store = true;
                    tracing::info!(
                        tokens = table.entries().len(),
                        "API tokens read from the shared store"
                    );
                }
                if table != *self.tokens {
                    // This machine's copy, in force at the next start if
                    // Redis does not answer then.
                    if let Err(e) = table.save(&self.tokens_path()) {
                        tracing::warn!("{e}; the shared store's API tokens stay in force");
                    }
                    self.set_tokens(table);
                }
            }
            Err(e) if !self.tokens_from_store => {
                let why = format!(
                    "API tokens not read from the shared store yet ({e}); the copy in {} is in force until it answers",
                    self.tokens_path().display()
                );
                tracing::warn!("{why}");
                self.tokens_error = Some(why);
            }
            Err(e) => {
                tracing::warn!(
                    "API tokens not read from the store: {e}; those read before stay in force"
                );
                self.tokens_error = Some(e);
            }
        }
    }
}

/// Read the API token records from the shared store again.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RefreshTokens;

impl Handler<RefreshTokens> for Supervisor {
    type Result = ResponseActFuture<Self, ()>;
    /// Answered once the records read are in force.
    fn handle(&mut self, _: RefreshTokens, _: &mut Context<Self>) -> Self::Result {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return Box::pin(actix::fut::ready(()));
        };
        Box::pin(
            async move { shared.tokens_get().await }
                .into_actor(self)
                .map(|got, act, _| act.apply_shared_tokens(got)),
        )
    }
}
