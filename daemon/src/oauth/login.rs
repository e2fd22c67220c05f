//! `evoctl login SERVER`, and the login a session offers its client by URL
//! elicitation (`session::login`): the authorization code flow with PKCE
//! (S256), run by evod. evod discovers the authorization server, picks how evo is
//! identified (a configured client, else a client ID metadata document
//! where the server supports them, else dynamic registration), listens on a
//! free loopback port for the redirect and hands evoctl the URL to open.
//! The redirect's `state` and `iss` are checked, the code is exchanged (with
//! the RFC 8707 `resource`) and the tokens go to the server's token file;
//! evoctl is told the outcome, never a token.
//!
//! Also `evoctl logout SERVER`: the tokens are revoked (RFC 7009) where the
//! authorization server has a revocation endpoint, then forgotten.
//!
//! The login runs in evod, not evoctl: evod has the server's resolved config, the HTTP client and
//! the token files, and a token never crosses the control socket. `evoctl login` sends `login
//! {server}`; the ChildServer (`BeginLogin`) discovers again, picks the client (configured, client
//! ID metadata document, dynamic registration), binds `127.0.0.1:0`, builds the PKCE authorization
//! URL (rmcp's `AuthorizationSession`) and answers with it; `login {server, wait}` (`AwaitLogin`)
//! answers when the redirect came back (state and `iss` checked, code exchanged, tokens saved) or 5
//! minutes passed. A successful login restarts the child.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use rmcp::transport::auth::{AuthorizationRequest, AuthorizationSession};
use tokio::sync::{Mutex, watch};

use super::{auth_error, store};
use crate::config::{OAuthSpec, binding};
use crate::error_text;

/// How long a login waits for the browser's redirect.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The outcome of a login, once known: what to tell the person.
pub type Outcome = Option<Result<String, String>>;

/// A login under way.
pub struct Started {
    pub url: String,
    pub outcome: watch::Receiver<Outcome>,
}

/// Where a login is for.
pub struct Target {
    pub id: String,
    pub url: String,
    pub spec: Option<OAuthSpec>,
    /// The server's last 401 challenge, if known.
    pub challenge: Option<String>,
}

/// Starts a login: see the module docs. `done` runs once it succeeded.
pub async fn begin(
    target: Target,
    done: impl FnOnce() + Send + 'static,
) -> Result<Started, String> {
    let Target {
        id,
        url,
        spec,
        challenge,
    } = target;
    let named = |e: String| format!("server '{id}': {e}");
    let (mut manager, metadata) = super::discover_with_metadata(&url, challenge.as_deref())
        .await
        .map_err(|e| named(format!("{e}; {}", e.advice(&id))))?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| {
            named(format!(
                "could not listen on a loopback port for the redirect: {e}"
            ))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| named(e.to_string()))?
        .port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let spec = spec.unwrap_or_default();
    let scopes: Vec<&str> = spec.scopes.iter().map(String::as_str).collect();

    let supports_cimd = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let mut request = AuthorizationRequest::new(redirect.clone()).with_client_name("evo");
    if !spec.scopes.is_empty() {
        request = request.with_scopes(spec.scopes.clone());
    }
    let (client_id, client_secret) = if let Some(client_id) = &spec.client_id {
        (client_id.clone(), spec.client_secret.clone())
    } else if let Some(doc) = spec.client_metadata_url.as_ref().filter(|_| supports_cimd) {
        (doc.clone(), None)
    } else if metadata.registration_endpoint.is_some() {
        let registered = manager
            .register_client("evo", &redirect, &scopes)
            .await
            .map_err(|e| {
                named(format!(
                    "dynamic client registration failed: {}",
                    auth_error(&e)
                ))
            })?;
        (registered.client_id, registered.client_secret)
    } else {
        return Err(named(
            "its authorization server offers neither client ID metadata documents nor dynamic registration; set oauth.client_id (and oauth.client_secret) in its config entry".into(),
        ));
    };
    request = request.with_preregistered_client(client_id.clone());
    if let Some(secret) = &client_secret {
        request = request.with_client_secret(secret.clone());
    }
    manager.set_credential_store(store::FileCredentials {
        id: id.clone(),
        base: store::TokenFile {
            binding: binding(&url, Some(&spec)),
            client_id,
            client_secret,
            redirect_uri: Some(redirect.clone()),
            credentials: None,
        },
    });
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| named(format!("the login could not start: {}", auth_error(&e))))?;
    let auth_url = session.get_authorization_url().to_string();
    let state = reqwest::Url::parse(&auth_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or_else(|| named("the authorization URL carries no state".into()))?;
    let (tx, outcome) = watch::channel(None);
    let flow = Arc::new(Flow {
        id,
        state,
        session,
        tx,
        done: Mutex::new(Some(Box::new(done))),
    });
    // rmcp's OAuth code logs too: its lines name the server.
    let span = tracing::info_span!("child", server = %flow.id);
    tokio::spawn(tracing::Instrument::instrument(
        serve_redirect(listener, flow),
        span,
    ));
    Ok(Started {
        url: auth_url,
        outcome,
    })
}

/// The login waiting for its redirect.
struct Flow {
    id: String,
    state: String,
    session: AuthorizationSession,
    tx: watch::Sender<Outcome>,
    done: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// Serves the loopback redirect until the login ends (or times out).
async fn serve_redirect(listener: tokio::net::TcpListener, flow: Arc<Flow>) {
    let deadline = tokio::time::sleep(LOGIN_TIMEOUT);
    tokio::pin!(deadline);
    loop {
        if flow.tx.borrow().is_some() {
            return;
        }
        let mut ended = flow.tx.subscribe();
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut deadline => {
                let _ = flow.tx.send(Some(Err(format!(
                    "server '{}': no redirect came back within {} minutes; run `evoctl login {}` again",
                    flow.id, LOGIN_TIMEOUT.as_secs() / 60, flow.id
                ))));
                return;
            }
            _ = ended.changed() => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let flow = flow.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let flow = flow.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(&flow, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One request on the redirect listener.
async fn answer(
    flow: &Flow,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let page = |status: u16, text: &str| {
        let body = format!(
            "<!doctype html><meta charset=utf-8><title>evo</title><p>{}</p>",
            html_escape(text)
        );
        hyper::Response::builder()
            .status(status)
            .header("content-type", "text/html; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    };
    if req.uri().path() != "/callback" {
        return page(404, "not found");
    }
    if flow.tx.borrow().is_some() {
        return page(409, "This login has already ended.");
    }
    let params: std::collections::HashMap<String, String> = req
        .uri()
        .query()
        .map(|q| {
            url_pairs(q)
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>()
        })
        .unwrap_or_default();
    let id = &flow.id;
    let result = if params.get("state") != Some(&flow.state) {
        Err(format!(
            "server '{id}': the redirect carried a wrong `state` (not the login evo started); run `evoctl login {id}` again"
        ))
    } else if let Some(error) = params.get("error") {
        let detail = params
            .get("error_description")
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        Err(format!(
            "server '{id}': the authorization server refused the login ({error}{detail})"
        ))
    } else if let Some(code) = params.get("code") {
        match flow
            .session
            .handle_callback_with_issuer(code, &flow.state, params.get("iss").map(String::as_str))
            .await
        {
            Ok(_) => Ok(format!("logged in to server '{id}'")),
            Err(e) => Err(format!(
                "server '{id}': the token exchange failed: {}; run `evoctl login {id}` again",
                auth_error(&e)
            )),
        }
    } else {
        Err(format!(
            "server '{id}': the redirect carried no authorization code"
        ))
    };
    let response = match &result {
        Ok(m) => page(200, &format!("{m}. You can close this tab.")),
        Err(e) => page(400, e),
    };
    if result.is_ok()
        && let Some(done) = flow.done.lock().await.take()
    {
        done();
    }
    let _ = flow.tx.send(Some(result));
    response
}

fn url_pairs(query: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(&format!("http://x/?{query}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `evoctl logout`: revokes the server's tokens where its authorization
/// server can (RFC 7009), then forgets them. Says what was done.
pub async fn logout(id: &str, url: &str, spec: Option<&OAuthSpec>) -> Result<String, String> {
    let binding = binding(url, spec);
    let Some(file) = store::load(id, &binding) else {
        store::delete(id);
        return Ok(format!("server '{id}' had no stored tokens"));
    };
    let mut revoked =
        "not revoked (its authorization server has no revocation endpoint)".to_string();
    match super::discover_with_metadata(url, None).await {
        Ok((_, metadata)) => {
            if let Some(endpoint) = metadata
                .additional_fields
                .get("revocation_endpoint")
                .and_then(|v| v.as_str())
            {
                match revoke(endpoint, &file).await {
                    Ok(()) => revoked = "revoked at its authorization server".into(),
                    Err(e) => revoked = format!("not revoked ({e})"),
                }
            }
        }
        Err(e) => revoked = format!("not revoked ({e})"),
    }
    store::delete(id);
    Ok(format!("server '{id}': tokens {revoked} and forgotten"))
}

/// RFC 7009: the refresh token (which ends the grant), then the access token.
async fn revoke(endpoint: &str, file: &store::TokenFile) -> Result<(), String> {
    use oauth2::TokenResponse;
    let Some(response) = file
        .credentials
        .as_ref()
        .and_then(|c| c.token_response.as_ref())
    else {
        return Ok(());
    };
    let mut tokens = Vec::new();
    if let Some(r) = response.refresh_token() {
        tokens.push((r.secret().clone(), "refresh_token"));
    }
    tokens.push((response.access_token().secret().clone(), "access_token"));
    let client = reqwest::Client::new();
    for (token, hint) in tokens {
        let mut form = vec![
            ("token", token),
            ("token_type_hint", hint.to_string()),
            ("client_id", file.client_id.clone()),
        ];
        if let Some(secret) = &file.client_secret {
            form.push(("client_secret", secret.clone()));
        }
        let body: String = form
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let answer = client
            .post(endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| error_text::readable_error(&e))?;
        let status = answer.status();
        if status.is_success() {
            continue;
        }
        let text = answer.text().await.unwrap_or_default();
        // Many servers cannot revoke self-contained (JWT) access tokens
        // (`unsupported_token_type`, RFC 7009 2.2.1); revoking the refresh
        // token ended the grant, and the access token expires by itself.
        if hint == "access_token" {
            tracing::debug!(status = %status, "the access token was not revoked; it expires by itself");
            continue;
        }
        return Err(format!(
            "the revocation endpoint answered {status}: {}",
            text.chars().take(200).collect::<String>()
        ));
    }
    Ok(())
}

fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
