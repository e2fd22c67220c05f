//! Binding the HTTP endpoint's listeners before anything else of evod
//! starts, and refusing an address beyond loopback without authentication.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::tls;
use crate::auth::jwt;
use crate::config::serve::HttpSettings;

/// What `main` hands the front.
pub struct HttpOptions {
    pub settings: HttpSettings,
    /// `--insecure-no-auth`.
    pub insecure_no_auth: bool,
    /// `limits.max_message_bytes`: the largest request body.
    pub max_message_bytes: usize,
    /// Listeners systemd passed (a second `ListenStream`), used instead of
    /// binding `settings.listen`.
    pub inherited: Vec<std::net::TcpListener>,
}

/// Resolves and binds `listen` (every address a name resolves to).
async fn bind_all(listen: &str) -> Result<Vec<TcpListener>, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| format!("serve.http.listen {listen:?}: not an address to listen on ({e}); write host:port, like 127.0.0.1:8787"))?
        .collect();
    let mut bound = Vec::new();
    let mut failed = Vec::new();
    for addr in addrs {
        if bound
            .iter()
            .any(|l: &TcpListener| l.local_addr().ok() == Some(addr))
        {
            continue;
        }
        match TcpListener::bind(addr).await {
            Ok(l) => bound.push(l),
            Err(e) => failed.push(format!("{addr}: {e}")),
        }
    }
    if bound.is_empty() {
        return Err(format!(
            "cannot listen for HTTP on {listen}: {}",
            failed.join("; ")
        ));
    }
    for f in failed {
        tracing::warn!("HTTP: not listening on {f}");
    }
    Ok(bound)
}

/// The refusal to serve MCP beyond loopback without authentication.
fn exposed_without_auth(listen: &str) -> String {
    format!(
        "serve.http listens on {listen}, which other machines can reach, and serve.http.auth is not set: anyone who reaches it could call every tool as you. Set serve.http.auth (API tokens from `evoctl token create NAME`, or OAuth), listen on 127.0.0.1, or start evod with --insecure-no-auth to accept that"
    )
}

/// The listeners, bound and checked, before anything else of evod starts.
pub struct Bound {
    pub(super) settings: HttpSettings,
    pub(super) listeners: Vec<TcpListener>,
    pub(super) insecure_no_auth: bool,
    pub(super) max_message_bytes: usize,
    pub(super) tls: Option<tls::Tls>,
    pub(super) jwt: Option<Arc<jwt::JwtValidator>>,
}

/// Binds the listener(s) and loads what serving needs (TLS files, the OAuth
/// settings). Refuses (with the message to print) an address beyond
/// loopback without `auth` unless `--insecure-no-auth`.
pub async fn bind(opts: HttpOptions) -> Result<Bound, String> {
    let settings = opts.settings;
    let listeners = if opts.inherited.is_empty() {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(&settings.listen)
            .await
            .map_err(|e| format!("serve.http.listen {:?}: not an address to listen on ({e}); write host:port, like 127.0.0.1:8787", settings.listen))?
            .collect();
        let loopback = !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback());
        if !loopback && settings.auth.is_none() && !opts.insecure_no_auth {
            return Err(exposed_without_auth(&settings.listen));
        }
        bind_all(&settings.listen).await?
    } else {
        let mut ls = Vec::new();
        for l in opts.inherited {
            l.set_nonblocking(true)
                .map_err(|e| format!("the HTTP socket systemd passed: {e}"))?;
            ls.push(
                TcpListener::from_std(l)
                    .map_err(|e| format!("the HTTP socket systemd passed: {e}"))?,
            );
        }
        ls
    };
    let tls = settings.tls.as_ref().map(tls::Tls::load).transpose()?;
    let jwt = match settings.auth.as_ref().and_then(|a| a.oauth.clone()) {
        Some(oauth) => Some(jwt::JwtValidator::new(oauth)?),
        None => None,
    };
    let bound = Bound {
        settings,
        listeners,
        insecure_no_auth: opts.insecure_no_auth,
        max_message_bytes: opts.max_message_bytes,
        tls,
        jwt,
    };
    let shown = bound.shown();
    if !bound.loopback() && bound.settings.auth.is_none() {
        if !bound.insecure_no_auth {
            return Err(exposed_without_auth(&shown));
        }
        tracing::warn!(
            "HTTP endpoint on {shown} WITHOUT AUTHENTICATION (--insecure-no-auth): anyone who can reach it can call every tool"
        );
    }
    Ok(bound)
}

impl Bound {
    pub(super) fn addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    pub(super) fn loopback(&self) -> bool {
        self.addrs().iter().all(|a| a.ip().is_loopback())
    }

    pub(super) fn shown(&self) -> String {
        self.addrs()
            .iter()
            .map(SocketAddr::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}
