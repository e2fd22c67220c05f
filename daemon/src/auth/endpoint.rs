//! The HTTP endpoint as the Supervisor reaches it, without its type: the
//! credential check whose token table the Supervisor swaps (the endpoint
//! reads it per request), a line on which the Supervisor says which
//! sessions end, and what `evoctl status` and `evoctl ui` show of it. The
//! endpoint (`http`) makes one when it starts and `main` hands it over.

use std::sync::Arc;

use evo_proto::ctl::HttpStatus;

use crate::auth::check::Authenticator;
use crate::auth::tokens::TokenTable;

/// Sessions the endpoint is told to end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Every session of an identity (a revoked token's `token:NAME`).
    Identity(String),
    /// This instance's copy of an HTTP session ended on another instance.
    Session(String),
}

/// See the module docs; cheap to clone.
#[derive(Clone)]
pub struct EndpointControl {
    auth: Arc<Authenticator>,
    /// Called at once, not queued: a revoked token's console sign-ins are
    /// gone before `evoctl token revoke` answers.
    end: Arc<dyn Fn(Ending) + Send + Sync>,
    /// `evoctl status`'s `http`, but for the OAuth keys' problem (read when
    /// asked).
    status: HttpStatus,
    console_base: String,
}

impl EndpointControl {
    pub fn new(
        auth: Arc<Authenticator>,
        status: HttpStatus,
        console_base: String,
        end: impl Fn(Ending) + Send + Sync + 'static,
    ) -> EndpointControl {
        EndpointControl {
            auth,
            end: Arc::new(end),
            status,
            console_base,
        }
    }

    /// Replaces the API tokens accepted (from the next request on).
    pub fn set_tokens(&self, table: Arc<TokenTable>) {
        self.auth.set_tokens(table);
    }

    /// Ends every session of identity `key` (a revoked token's).
    pub fn end_identity(&self, key: &str) {
        (self.end)(Ending::Identity(key.to_owned()));
    }

    /// Ends this instance's copy of HTTP session `id` (ended on another).
    pub fn end_session(&self, id: &str) {
        (self.end)(Ending::Session(id.to_owned()));
    }

    /// `evoctl status`'s `http`.
    pub fn status(&self) -> HttpStatus {
        let mut status = self.status.clone();
        if !status.insecure_no_auth {
            status.warning = self.auth.jwt.as_ref().and_then(|j| j.problem());
        }
        status
    }

    /// The endpoint asks for credentials (`serve.http.auth` was set when it
    /// started): only then is an API token checked.
    pub fn checks_credentials(&self) -> bool {
        self.auth.required
    }

    /// Where browsers reach the console on the endpoint.
    pub fn console_base(&self) -> &str {
        &self.console_base
    }
}
