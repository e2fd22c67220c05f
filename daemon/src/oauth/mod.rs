//! OAuth 2.1 towards remote child servers, whose `oauth` settings
//! ([`OAuthSpec`]) the config reads: the credential a remote child's requests carry
//! ([`Bearer`]: the current access token read without a lock, one refresh
//! in flight at a time, a timer refreshing it ahead of its expiry), the
//! login and logout flows (`login`), which run in evod so that a token never
//! crosses the control socket, and what is wrong with a server's metadata
//! when discovery fails (`diagnose`).
//!
//! rmcp's `AuthorizationManager` does the protocol: RFC 9728 and RFC 8414 /
//! OpenID discovery, dynamic registration (RFC 7591), PKCE, the RFC 8707
//! `resource`, the RFC 9207 `iss` check, code exchange and refresh. evo
//! adds the token files (`store`), the single flight and the states
//! `evoctl status` shows.
//!
//! `EVO_STATE_DIR` replaces `$XDG_STATE_HOME/evo`, so token files are in `$EVO_STATE_DIR/oauth/`,
//! one per server id (`ID-HASH.json`). A file records its binding (the SHA-256 of the URL and the
//! `oauth` settings): a file with another binding is deleted when read, which is how a changed URL
//! or OAuth setting forgets tokens; a reload that renames an id moves the file. `auth: "oauth"` is
//! optional: a 401 with metadata is recognised without it.
//!
//! Logout revokes the refresh token (which must succeed) and then the access token (best effort:
//! many servers cannot revoke JWTs). rmcp's `rmcp::transport::auth` log target is capped at `info`
//! whatever `EVO_LOG` says, because it logs codes and token responses at debug.
//!
//! `login_required` is a server state (the STATE column of `evoctl status`) as well as
//! `auth.state`. A login-required server with no tools listed is named by unknown-tool answers for
//! names under `ID_` (the id, not a custom prefix).
//!
//! A client ID metadata document is used only when the entry names one
//! (`oauth.client_metadata_url`) and the authorization server's metadata says
//! `client_id_metadata_document_supported`. The document must be an https URL the authorization
//! server can fetch, which evo cannot host for a loopback client, so evo serves none itself; its
//! `redirect_uris` list `http://127.0.0.1/callback` and `application_type: native`, so the server
//! accepts the login's loopback port, which varies (RFC 8252).
//!
//! Each run loads its `Bearer` from the token file: requests read the current token from an
//! `ArcSwap` (no lock, no I/O). A token within a tenth of its life (at most a minute) of expiry, or
//! one the server answered 401 to, is refreshed under the Bearer's mutex, so concurrent requests
//! wait for one refresh and take its result. Runs of one server alive at once (a restart overlapping
//! the old run, a reload) share its refresh token, so a refresh also holds the server's lock in
//! `store` ([`store::refresh_lock`]): a run that waited there takes the token the other run stored
//! instead of spending the refresh token again, which a rotating authorization server would answer
//! by revoking the grant. The refresh builds its `AuthorizationManager` on first
//! use (discovery once per run, never on the call path of a valid token). A timer task per Bearer
//! (holding a weak reference, so it ends with the run) wakes at that point and refreshes through
//! the same single flight, so a token is renewed ahead of its expiry with no request in between; a
//! refresh that fails because the authorization server is away is tried again 10 s later. A refused
//! refresh (`invalid_grant`) sends `LoginLost` to the ChildServer. `client_credentials` servers get
//! their first token the same way, without a person.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::{ArcSwap, ArcSwapOption};
use http::HeaderValue;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationMetadataSource,
    ClientCredentialsConfig, OAuthClientConfig, OAuthTokenResponse, StoredCredentials,
};

use crate::config::{Grant, OAuthSpec, binding};
use crate::error_text;

mod diagnose;
pub mod login;
pub mod store;
#[cfg(test)]
mod tests;

/// A remote server's auth state, as `evoctl status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AuthState {
    /// No OAuth.
    #[default]
    None,
    Ok {
        expires_at: Option<SystemTime>,
    },
    LoginRequired {
        reason: Option<String>,
    },
    RefreshFailed {
        reason: String,
    },
}

impl AuthState {
    pub fn wire(&self) -> evo_proto::ctl::AuthStatus {
        use evo_proto::ctl::{AuthStatus, AuthWireState as W};
        let (state, expires_at, error) = match self {
            AuthState::None => (W::None, None, None),
            AuthState::Ok { expires_at } => (W::Ok, *expires_at, None),
            AuthState::LoginRequired { reason } => (W::LoginRequired, None, reason.clone()),
            AuthState::RefreshFailed { reason } => (W::RefreshFailed, None, Some(reason.clone())),
        };
        AuthStatus {
            state,
            expires_at: expires_at
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs()),
            error,
        }
    }
}

/// The token a request carries now.
struct Current {
    token: Arc<str>,
    header: HeaderValue,
    /// Refresh once this time is reached (before the token expires).
    refresh_at: Option<SystemTime>,
}

impl Current {
    fn of(response: &OAuthTokenResponse, received_at: u64) -> Option<Current> {
        use oauth2::TokenResponse;
        let token: Arc<str> = response.access_token().secret().as_str().into();
        let header = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        let (expires_at, refresh_at) = match response.expires_in() {
            Some(lifetime) => {
                let received = UNIX_EPOCH + Duration::from_secs(received_at);
                // Refreshed when a tenth of its life (at most a minute) is left.
                let margin = (lifetime / 10).min(Duration::from_secs(60));
                (
                    Some(received + lifetime),
                    Some(received + lifetime - margin),
                )
            }
            None => (None, None),
        };
        let _ = expires_at;
        Some(Current {
            token,
            header,
            refresh_at,
        })
    }

    fn fresh(&self) -> bool {
        self.refresh_at.is_none_or(|t| SystemTime::now() < t)
    }
}

fn expires_at_of(response: &OAuthTokenResponse, received_at: u64) -> Option<SystemTime> {
    use oauth2::TokenResponse;
    response
        .expires_in()
        .map(|l| UNIX_EPOCH + Duration::from_secs(received_at) + l)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// How long after a failed timed refresh (the authorization server away)
/// the timer tries again.
const REFRESH_RETRY: Duration = Duration::from_secs(10);

/// What refreshing needs: built on the first refresh (it discovers the
/// authorization server's metadata, which a valid token never needs).
struct Refresher {
    manager: Option<AuthorizationManager>,
}

/// The OAuth credential of one remote server's run: see the module docs.
/// Shared by the server's transport (every request) and its ChildServer
/// (status); only refreshes write it.
pub struct Bearer {
    /// Itself, for the refresh timer (which must not keep it alive).
    me: std::sync::Weak<Bearer>,
    server: String,
    url: String,
    spec: OAuthSpec,
    binding: String,
    current: ArcSwapOption<Current>,
    state: ArcSwap<AuthState>,
    refresher: tokio::sync::Mutex<Refresher>,
    /// Told when the server needs a login again (the refresh token was
    /// refused): the ChildServer takes the server to `login required`.
    on_login_required: Box<dyn Fn(String) + Send + Sync>,
}

impl Bearer {
    /// The credential of server `id` at `url`: its stored tokens, or for
    /// the client-credentials grant none yet (the first request gets one).
    /// `None` when there is nothing to send (no login yet).
    pub fn load(
        id: &str,
        url: &str,
        spec: Option<&OAuthSpec>,
        on_login_required: impl Fn(String) + Send + Sync + 'static,
    ) -> Option<Arc<Bearer>> {
        let binding = binding(url, spec);
        let file = store::load(id, &binding);
        let credentials = file.as_ref().and_then(|f| f.credentials.as_ref());
        let headless = spec.is_some_and(|s| s.grant == Grant::ClientCredentials);
        let current = credentials.and_then(|c| {
            let response = c.token_response.as_ref()?;
            Current::of(response, c.token_received_at.unwrap_or_else(now_secs))
        });
        if current.is_none() && !headless {
            return None;
        }
        let expires_at = credentials.and_then(|c| {
            expires_at_of(
                c.token_response.as_ref()?,
                c.token_received_at.unwrap_or_else(now_secs),
            )
        });
        let bearer = Arc::new_cyclic(|me| Bearer {
            me: me.clone(),
            server: id.to_string(),
            url: url.to_string(),
            spec: spec.cloned().unwrap_or_default(),
            binding,
            state: ArcSwap::from_pointee(AuthState::Ok { expires_at }),
            current: ArcSwapOption::new(current.map(Arc::new)),
            refresher: tokio::sync::Mutex::new(Refresher { manager: None }),
            on_login_required: Box::new(on_login_required),
        });
        bearer.schedule_refresh();
        Some(bearer)
    }

    /// Refreshes the token ahead of its expiry, when a tenth of its life
    /// (at most a minute) is left, whether or not a request comes: a timer
    /// task that holds only a weak reference, so it ends with the run. It
    /// takes the same single flight as requests. A headless server with no
    /// token yet gets its first one now.
    fn schedule_refresh(&self) {
        let due = match &*self.current.load() {
            Some(c) => match c.refresh_at {
                Some(at) => at,
                None => return,
            },
            None if self.spec.grant == Grant::ClientCredentials => SystemTime::now(),
            None => return,
        };
        self.refresh_after(due.duration_since(SystemTime::now()).unwrap_or_default());
    }

    fn refresh_after(&self, wait: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let me = self.me.clone();
        let span = tracing::info_span!("child", server = %self.server);
        let timer = async move {
            tokio::time::sleep(wait).await;
            let Some(bearer) = me.upgrade() else { return };
            if matches!(&**bearer.state.load(), AuthState::LoginRequired { .. }) {
                return;
            }
            if bearer.refresh(None, "timer").await.is_err()
                && matches!(&**bearer.state.load(), AuthState::RefreshFailed { .. })
            {
                // The authorization server is away: try again, as a request would.
                bearer.refresh_after(REFRESH_RETRY);
            }
        };
        runtime.spawn(tracing::Instrument::instrument(timer, span));
    }

    pub fn state(&self) -> AuthState {
        (**self.state.load()).clone()
    }

    /// The access token for a request: the current one when it is fresh
    /// (no lock, no I/O), else a refreshed one.
    pub async fn token(&self) -> Result<Arc<str>, String> {
        if let Some(c) = &*self.current.load()
            && c.fresh()
        {
            return Ok(c.token.clone());
        }
        self.refresh(None, "request").await.map(|c| c.token.clone())
    }

    /// The `Authorization` header for a request (see [`Bearer::token`]).
    pub async fn header(&self) -> Result<HeaderValue, String> {
        if let Some(c) = &*self.current.load()
            && c.fresh()
        {
            return Ok(c.header.clone());
        }
        self.refresh(None, "request")
            .await
            .map(|c| c.header.clone())
    }

    /// The server refused the token sent as `sent` (a 401): refreshed once
    /// (unless another request already did); the new token if there is one.
    pub async fn rejected(&self, sent: &HeaderValue) -> Option<Arc<str>> {
        self.refresh(Some(sent), "401")
            .await
            .ok()
            .map(|c| c.token.clone())
    }

    /// One refresh at a time: a caller that waited for another's refresh
    /// takes its result.
    async fn refresh(
        &self,
        rejected: Option<&HeaderValue>,
        trigger: &'static str,
    ) -> Result<Arc<Current>, String> {
        let mut refresher = self.refresher.lock().await;
        if let Some(c) = self.current.load_full()
            && c.fresh()
            && rejected.is_none_or(|r| *r != c.header)
        {
            return Ok(c);
        }
        if matches!(&**self.state.load(), AuthState::LoginRequired { .. }) {
            return Err(self.login_message());
        }
        // Another run of this server may be spending the same refresh token:
        // wait for it, then take what it stored rather than spend the token again.
        let server_wide = store::refresh_lock(&self.server);
        let _spending = server_wide.lock().await;
        if let Some(c) = self.take_stored(rejected) {
            return Ok(c);
        }
        match self.exchange(&mut refresher).await {
            Ok((response, received_at)) => {
                let current = Current::of(&response, received_at)
                    .ok_or_else(|| format!("server '{}': the authorization server sent an access token that is not a valid header value", self.server))?;
                let current = Arc::new(current);
                self.current.store(Some(current.clone()));
                self.state.store(Arc::new(AuthState::Ok {
                    expires_at: expires_at_of(&response, received_at),
                }));
                tracing::info!(server = %self.server, trigger, "access token refreshed");
                self.schedule_refresh();
                Ok(current)
            }
            Err(Failure::Refused(reason)) => {
                tracing::warn!(server = %self.server, reason = %reason, "refresh refused: the server needs `evoctl login {}`", self.server);
                refresher.manager = None;
                self.current.store(None);
                self.state.store(Arc::new(AuthState::LoginRequired {
                    reason: Some(reason.clone()),
                }));
                (self.on_login_required)(reason);
                Err(self.login_message())
            }
            Err(Failure::Failed(reason)) => {
                tracing::warn!(server = %self.server, reason = %reason, "token refresh failed; trying again on the next request");
                refresher.manager = None;
                self.state.store(Arc::new(AuthState::RefreshFailed {
                    reason: reason.clone(),
                }));
                Err(format!(
                    "server '{}': refreshing its access token failed: {reason}",
                    self.server
                ))
            }
        }
    }

    /// The token file's access token when it is fresh and not the one this
    /// run has (or had refused): another run of the server refreshed it.
    fn take_stored(&self, rejected: Option<&HeaderValue>) -> Option<Arc<Current>> {
        let file = store::load(&self.server, &self.binding)?;
        let credentials = file.credentials?;
        let response = credentials.token_response?;
        let received_at = credentials.token_received_at?;
        let stored = Current::of(&response, received_at)?;
        let have = self.current.load();
        let known = have.as_ref().is_some_and(|c| c.token == stored.token);
        if !stored.fresh() || known || rejected.is_some_and(|r| *r == stored.header) {
            return None;
        }
        let stored = Arc::new(stored);
        self.current.store(Some(stored.clone()));
        self.state.store(Arc::new(AuthState::Ok {
            expires_at: expires_at_of(&response, received_at),
        }));
        tracing::info!(server = %self.server, "access token taken from another run's refresh");
        self.schedule_refresh();
        Some(stored)
    }

    fn login_message(&self) -> String {
        format!(
            "server '{}' needs a login: run `evoctl login {}`",
            self.server, self.server
        )
    }

    /// Gets a new access token: a refresh, or the client-credentials grant.
    async fn exchange(
        &self,
        refresher: &mut Refresher,
    ) -> Result<(OAuthTokenResponse, u64), Failure> {
        if refresher.manager.is_none() {
            refresher.manager = Some(self.manager().await?);
        }
        let Some(manager) = refresher.manager.as_ref() else {
            return Err(Failure::Failed("no authorization manager".into()));
        };
        if self.spec.grant == Grant::ClientCredentials {
            let config = self.client_credentials()?;
            let response = manager
                .exchange_client_credentials(&config)
                .await
                .map_err(|e| Failure::Failed(auth_error(&e)))?;
            let received = now_secs();
            let file = store::TokenFile {
                binding: self.binding.clone(),
                client_id: self.spec.client_id.clone().unwrap_or_default(),
                client_secret: None,
                redirect_uri: None,
                credentials: Some(StoredCredentials::new(
                    self.spec.client_id.clone().unwrap_or_default(),
                    Some(response.clone()),
                    self.spec.scopes.clone(),
                    Some(received),
                )),
            };
            if let Err(e) = store::save(&self.server, &file) {
                tracing::warn!(server = %self.server, error = %e, "could not write the token file");
            }
            return Ok((response, received));
        }
        match manager.refresh_token().await {
            Ok(response) => Ok((response, now_secs())),
            Err(e @ (AuthError::TokenRefreshRejected(_) | AuthError::AuthorizationRequired)) => {
                Err(Failure::Refused(match e {
                    AuthError::AuthorizationRequired => {
                        "there is no refresh token to use".to_string()
                    }
                    e => format!(
                        "the authorization server refused the refresh token ({})",
                        auth_error(&e)
                    ),
                }))
            }
            Err(e) => Err(Failure::Failed(auth_error(&e))),
        }
    }

    fn client_credentials(&self) -> Result<ClientCredentialsConfig, Failure> {
        let (Some(client_id), Some(client_secret)) =
            (self.spec.client_id.clone(), self.spec.client_secret.clone())
        else {
            return Err(Failure::Failed(
                "oauth.grant client_credentials needs oauth.client_id and oauth.client_secret"
                    .into(),
            ));
        };
        Ok(ClientCredentialsConfig::ClientSecret {
            client_id,
            client_secret,
            scopes: self.spec.scopes.clone(),
            resource: Some(self.url.clone()),
        })
    }

    /// An authorization manager for this server, its metadata discovered
    /// and its client configured from the token file.
    async fn manager(&self) -> Result<AuthorizationManager, Failure> {
        let mut manager = discover(&self.url, None)
            .await
            .map_err(|e| Failure::Failed(e.message))?;
        if self.spec.grant == Grant::ClientCredentials {
            let config = self.client_credentials()?;
            manager
                .configure_client_credentials(&config)
                .map_err(|e| Failure::Failed(auth_error(&e)))?;
            return Ok(manager);
        }
        let Some(file) = store::load(&self.server, &self.binding) else {
            return Err(Failure::Refused("its tokens are gone".into()));
        };
        let redirect = file
            .redirect_uri
            .clone()
            .unwrap_or_else(|| "http://127.0.0.1/callback".into());
        let mut config = OAuthClientConfig::new(file.client_id.clone(), redirect);
        if let Some(secret) = &file.client_secret {
            config = config.with_client_secret(secret.clone());
        }
        manager
            .configure_client(config)
            .map_err(|e| Failure::Failed(auth_error(&e)))?;
        manager.set_credential_store(store::FileCredentials {
            id: self.server.clone(),
            base: file,
        });
        Ok(manager)
    }
}

enum Failure {
    /// The grant is gone: a person must log in again.
    Refused(String),
    /// Worth trying again (the authorization server is down, ...).
    Failed(String),
}

/// An rmcp auth error as a person reads it.
pub fn auth_error(e: &AuthError) -> String {
    error_text::readable_error(e)
}

/// An authorization manager with the server's authorization server's
/// metadata discovered: RFC 9728 from the 401 challenge (or the well-known
/// path), then RFC 8414 / OpenID discovery.
pub async fn discover(
    url: &str,
    challenge: Option<&str>,
) -> Result<AuthorizationManager, DiscoveryError> {
    discover_with_metadata(url, challenge).await.map(|(m, _)| m)
}

/// [`discover`], with the metadata found.
pub async fn discover_with_metadata(
    url: &str,
    challenge: Option<&str>,
) -> Result<(AuthorizationManager, AuthorizationMetadata), DiscoveryError> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| DiscoveryError::unreachable(auth_error(&e)))?;
    let generic = match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) if resolution.source != AuthorizationMetadataSource::LegacyEndpointFallback => {
            manager.set_metadata(resolution.metadata.clone());
            return Ok((manager, resolution.metadata));
        }
        Ok(_) => "it publishes no OAuth metadata (RFC 9728 protected resource metadata or RFC 8414 authorization server metadata)".to_string(),
        Err(e) => format!("its OAuth metadata could not be read: {}", auth_error(&e)),
    };
    // Name the document that is broken, when one is.
    Err(match diagnose::diagnose(url, challenge).await {
        Some(message) => DiscoveryError {
            message,
            broken_document: true,
        },
        None => DiscoveryError::unreachable(generic),
    })
}

/// Why OAuth discovery failed.
#[derive(Debug)]
pub struct DiscoveryError {
    pub message: String,
    /// A metadata document was read and is broken (its URL and what is
    /// wrong are in the message): no retry helps until it is fixed.
    pub broken_document: bool,
}

impl DiscoveryError {
    fn unreachable(message: String) -> DiscoveryError {
        DiscoveryError {
            message,
            broken_document: false,
        }
    }

    /// What a person can do about it, for server `id`.
    pub fn advice(&self, id: &str) -> String {
        if self.broken_document {
            format!(
                "whoever runs server '{id}' must fix that document; then run `evoctl login {id}`"
            )
        } else {
            format!("check that its authorization server is up, then run `evoctl login {id}`")
        }
    }
}

impl std::fmt::Display for DiscoveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
