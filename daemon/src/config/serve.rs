//! The `serve` section: the Streamable HTTP endpoint (`serve.http`). Part of
//! the one config loader; its values are checked here, the listener itself
//! lives in `crate::http`.
//!
//! ```json
//! "serve": { "http": { "listen": "127.0.0.1:8787", "path": "/mcp",
//!                      "allowed_origins": ["https://app.example"],
//!                      "auth": { "tokens_file": "tokens.json",
//!                                "oauth": { "issuer": "https://id.example",
//!                                           "audience": "https://evo.example/mcp",
//!                                           "jwks_url": "https://id.example/.well-known/jwks.json",
//!                                           "role_claim": "evo_role", "profile_claim": "evo_profile",
//!                                           "required_scopes": ["mcp"] } },
//!                      "tls": { "cert": "cert.pem", "key": "key.pem" },
//!                      "metrics_public": false, "trust_forwarded": false } }
//! ```

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::diagnostics::{Warnings, section, warn_unknown_keys};
use super::readers::{TypeError, boolean, count, describe, positive, present, string, string_list};
use crate::auth::origin::{AllowedOrigin, is_loopback_host};

/// `serve.http.listen` when unset.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";
/// `serve.http.path` when unset.
pub const DEFAULT_PATH: &str = "/mcp";
/// `serve.http.session_timeout_s` when unset: an initialize-era session
/// nobody has used for this long ends (the client re-initializes).
pub const DEFAULT_SESSION_TIMEOUT_S: u64 = 30 * 60;
/// `serve.http.max_connections` when unset: past it, new connections wait.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

const SERVE_KEYS: &[&str] = &["http"];
const HTTP_KEYS: &[&str] = &[
    "listen",
    "path",
    "allowed_origins",
    "allowed_hosts",
    "auth",
    "tls",
    "metrics_public",
    "trust_forwarded",
    "public_url",
    "session_timeout_s",
    "max_connections",
];
const AUTH_KEYS: &[&str] = &["tokens_file", "oauth"];
const OAUTH_KEYS: &[&str] = &[
    "issuer",
    "audience",
    "jwks_url",
    "role_claim",
    "profile_claim",
    "required_scopes",
    "authorization_servers",
];
const TLS_KEYS: &[&str] = &["cert", "key"];

/// The keys of the `serve` sections, for documentation checks.
pub fn known_keys() -> [(&'static str, &'static [&'static str]); 5] {
    [
        ("serve", SERVE_KEYS),
        ("serve.http", HTTP_KEYS),
        ("serve.http.auth", AUTH_KEYS),
        ("serve.http.auth.oauth", OAUTH_KEYS),
        ("serve.http.tls", TLS_KEYS),
    ]
}

/// The `serve` section. `Default`: no HTTP endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServeSettings {
    pub http: Option<HttpSettings>,
}

/// `serve.http`: where and how evod serves MCP over Streamable HTTP.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// `host:port` to listen on (`evod --http` overrides it).
    pub listen: String,
    /// The MCP endpoint's path.
    pub path: String,
    /// Browser origins allowed besides loopback ones (`https://app.example`,
    /// `https://app.example:8443`, `http://host:*`).
    pub allowed_origins: Vec<String>,
    /// `Host` names accepted besides loopback ones; empty: any Host when
    /// listening beyond loopback, loopback names only on loopback.
    pub allowed_hosts: Vec<String>,
    /// `None`: no authentication (refused at start beyond loopback, unless
    /// `--insecure-no-auth`).
    pub auth: Option<AuthSettings>,
    pub tls: Option<TlsSettings>,
    /// `/metrics` answers without a credential.
    pub metrics_public: bool,
    /// Behind a reverse proxy: take the scheme and host clients used from
    /// `X-Forwarded-Proto` / `X-Forwarded-Host` (for the URLs evod hands
    /// out) and the client address from `X-Forwarded-For` (for logs).
    pub trust_forwarded: bool,
    /// The endpoint's canonical URL as clients reach it (RFC 9728
    /// `resource`); `None`: built from each request's scheme and Host.
    pub public_url: Option<String>,
    /// An initialize-era session idle this long ends.
    pub session_timeout_s: u64,
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            listen: DEFAULT_LISTEN.to_owned(),
            path: DEFAULT_PATH.to_owned(),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            auth: None,
            tls: None,
            metrics_public: false,
            trust_forwarded: false,
            public_url: None,
            session_timeout_s: DEFAULT_SESSION_TIMEOUT_S,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// `serve.http.auth`: API tokens (always, from `tokens_file`) and, when
/// `oauth` is set, OAuth 2.1 access tokens (JWTs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthSettings {
    /// `None`: `tokens.json` beside the config. Relative paths are taken
    /// from the config file's directory.
    pub tokens_file: Option<PathBuf>,
    pub oauth: Option<OAuthSettings>,
}

/// `serve.http.auth.oauth`: evod as an OAuth 2.1 resource server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OAuthSettings {
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` every token must carry (evo's canonical URL, usually).
    pub audience: String,
    /// Where the issuer publishes its signing keys.
    pub jwks_url: String,
    /// The claim holding the identity's permissions role.
    pub role_claim: Option<String>,
    /// The claim holding the identity's profile.
    pub profile_claim: Option<String>,
    /// Scopes a token must all carry (`scope` or `scp`); else 403.
    pub required_scopes: Vec<String>,
    /// For the protected resource metadata; default `[issuer]`.
    pub authorization_servers: Vec<String>,
}

/// `serve.http.tls`: PEM files, reloaded when they change.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsSettings {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// `serve.http.auth.tokens_file` resolved, or its default beside the config.
pub fn tokens_path(config_path: &Path, serve: &ServeSettings) -> PathBuf {
    let dir = config_path.parent().unwrap_or(Path::new("."));
    match serve
        .http
        .as_ref()
        .and_then(|h| h.auth.as_ref())
        .and_then(|a| a.tokens_file.as_ref())
    {
        Some(file) => dir.join(file),
        None => dir.join("tokens.json"),
    }
}

pub(super) fn parse_serve(
    value: &Value,
    config_dir: &Path,
    warnings: &mut Warnings<'_>,
) -> Result<ServeSettings, String> {
    let object = section("serve", value, SERVE_KEYS, warnings)?;
    let mut serve = ServeSettings::default();
    if let Some(http) = present(object, "http") {
        serve.http = Some(parse_http(http, config_dir, warnings)?);
    }
    Ok(serve)
}

fn object<'a>(
    value: &'a Value,
    at: &[&str],
    known: &[&str],
    warnings: &mut Warnings<'_>,
) -> Result<&'a Map<String, Value>, String> {
    let name = at.join(".");
    let Value::Object(object) = value else {
        return Err(format!(
            "'{name}' must be an object, found {}",
            describe(value)
        ));
    };
    warn_unknown_keys(object, known, at, &name, warnings);
    Ok(object)
}

fn at(section: &str, key: &str) -> impl Fn(TypeError) -> String {
    let place = format!("{section}.{key}");
    move |err| format!("{place}{}: {}", err.path, err.message)
}

fn parse_http(
    value: &Value,
    config_dir: &Path,
    warnings: &mut Warnings<'_>,
) -> Result<HttpSettings, String> {
    let section = "serve.http";
    let fields = object(value, &["serve", "http"], HTTP_KEYS, warnings)?;
    let mut http = HttpSettings::default();
    let get = |key: &str| present(fields, key);
    if let Some(v) = get("listen") {
        let listen = string(v).map_err(at(section, "listen"))?.trim();
        if listen.is_empty() {
            return Err("serve.http.listen: must be host:port, like 127.0.0.1:8787".into());
        }
        http.listen = listen.to_owned();
    }
    if let Some(v) = get("path") {
        let path = string(v).map_err(at(section, "path"))?;
        if !path.starts_with('/') || path.contains(['?', '#', ' ']) {
            return Err(format!(
                "serve.http.path: must be a URL path starting with '/', like /mcp, found {path:?}"
            ));
        }
        http.path = path.to_owned();
    }
    if let Some(v) = get("allowed_origins") {
        http.allowed_origins = string_list(v).map_err(at(section, "allowed_origins"))?;
        for origin in &http.allowed_origins {
            if AllowedOrigin::parse(origin).is_none() {
                return Err(format!(
                    "serve.http.allowed_origins: {origin:?} is not an origin; write scheme://host, scheme://host:port or scheme://host:*"
                ));
            }
        }
    }
    if let Some(v) = get("allowed_hosts") {
        http.allowed_hosts = string_list(v).map_err(at(section, "allowed_hosts"))?;
    }
    if let Some(v) = get("metrics_public") {
        http.metrics_public = boolean(v).map_err(at(section, "metrics_public"))?;
    }
    if let Some(v) = get("trust_forwarded") {
        http.trust_forwarded = boolean(v).map_err(at(section, "trust_forwarded"))?;
    }
    if let Some(v) = get("public_url") {
        let url = string(v).map_err(at(section, "public_url"))?;
        if !evo_proto::entry::has_http_scheme(url) {
            return Err(format!(
                "serve.http.public_url: must be an http:// or https:// URL, found {url:?}"
            ));
        }
        http.public_url = Some(url.trim_end_matches('/').to_owned());
    }
    if let Some(v) = get("session_timeout_s") {
        http.session_timeout_s = count(v)
            .and_then(positive)
            .map_err(at(section, "session_timeout_s"))? as u64;
    }
    if let Some(v) = get("max_connections") {
        http.max_connections = count(v)
            .and_then(positive)
            .map_err(at(section, "max_connections"))?;
    }
    if let Some(v) = get("tls") {
        let tls = object(v, &["serve", "http", "tls"], TLS_KEYS, warnings)?;
        let file = |key: &str| -> Result<PathBuf, String> {
            let v = present(tls, key)
                .ok_or_else(|| format!("serve.http.tls.{key}: missing (a PEM file)"))?;
            Ok(config_dir.join(string(v).map_err(at("serve.http.tls", key))?))
        };
        http.tls = Some(TlsSettings {
            cert: file("cert")?,
            key: file("key")?,
        });
    }
    if let Some(v) = get("auth") {
        http.auth = Some(parse_auth(v, warnings)?);
    }
    Ok(http)
}

fn parse_auth(value: &Value, warnings: &mut Warnings<'_>) -> Result<AuthSettings, String> {
    let section = "serve.http.auth";
    let fields = object(value, &["serve", "http", "auth"], AUTH_KEYS, warnings)?;
    let mut auth = AuthSettings::default();
    if let Some(v) = present(fields, "tokens_file") {
        auth.tokens_file = Some(PathBuf::from(
            string(v).map_err(at(section, "tokens_file"))?,
        ));
    }
    if let Some(v) = present(fields, "oauth") {
        auth.oauth = Some(parse_oauth(v, warnings)?);
    }
    Ok(auth)
}

fn parse_oauth(value: &Value, warnings: &mut Warnings<'_>) -> Result<OAuthSettings, String> {
    let section = "serve.http.auth.oauth";
    let fields = object(
        value,
        &["serve", "http", "auth", "oauth"],
        OAUTH_KEYS,
        warnings,
    )?;
    let required = |key: &str| -> Result<String, String> {
        let v = present(fields, key).ok_or_else(|| format!("{section}.{key}: missing"))?;
        let s = string(v).map_err(at(section, key))?.trim();
        if s.is_empty() {
            return Err(format!("{section}.{key}: must not be empty"));
        }
        Ok(s.to_owned())
    };
    let optional = |key: &str| -> Result<Option<String>, String> {
        present(fields, key)
            .map(|v| string(v).map(str::to_owned).map_err(at(section, key)))
            .transpose()
    };
    let oauth = OAuthSettings {
        issuer: required("issuer")?,
        audience: required("audience")?,
        jwks_url: required("jwks_url")?,
        role_claim: optional("role_claim")?,
        profile_claim: optional("profile_claim")?,
        required_scopes: match present(fields, "required_scopes") {
            Some(v) => string_list(v).map_err(at(section, "required_scopes"))?,
            None => Vec::new(),
        },
        authorization_servers: match present(fields, "authorization_servers") {
            Some(v) => string_list(v).map_err(at(section, "authorization_servers"))?,
            None => Vec::new(),
        },
    };
    for (key, url) in [("issuer", &oauth.issuer), ("jwks_url", &oauth.jwks_url)] {
        if !https_or_loopback(url) {
            return Err(format!(
                "{section}.{key}: must be an https:// URL (http:// only on a loopback address), found {url:?}"
            ));
        }
    }
    Ok(oauth)
}

/// `https://…`, or `http://` to a loopback host (a test or a local IdP).
pub(crate) fn https_or_loopback(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    match (uri.scheme_str(), uri.host()) {
        (Some("https"), Some(_)) => true,
        (Some("http"), Some(host)) => is_loopback_host(host),
        _ => false,
    }
}
