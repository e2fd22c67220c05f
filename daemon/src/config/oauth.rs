//! A remote server's OAuth entries (`auth`, `oauth`): which grant evo uses, the client it
//! registers as, and what the server's tokens are bound to. The login flows that use them
//! live in `crate::oauth`.

use std::fmt;

use evo_proto::json_kind;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::diagnostics::ServerConfigError;
use super::hash::{hex, short_hash};
use super::readers::present;

/// Which grant evo uses for a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grant {
    /// A person logs in with `evoctl login` (authorization code + PKCE).
    #[default]
    AuthorizationCode,
    /// Headless: the configured client id and secret get tokens.
    ClientCredentials,
}

/// A server entry's `oauth` settings (`auth: "oauth"` alone gives the
/// defaults). `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct OAuthSpec {
    pub grant: Grant,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
    /// An https URL of evo's client ID metadata document, used when the
    /// authorization server supports them.
    pub client_metadata_url: Option<String>,
}

impl fmt::Debug for OAuthSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthSpec")
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("scopes", &self.scopes)
            .field("client_metadata_url", &self.client_metadata_url)
            .finish()
    }
}

/// What a server's tokens are bound to: its URL and OAuth settings. A
/// change of either makes them stale; a new id does not.
pub fn binding(url: &str, spec: Option<&OAuthSpec>) -> String {
    let mut text = format!("url={url}\n");
    if let Some(s) = spec.filter(|s| **s != OAuthSpec::default()) {
        text.push_str(&format!(
            "grant={:?}\nclient_id={:?}\nsecret={}\nscopes={:?}\ncimd={:?}\n",
            s.grant,
            s.client_id,
            s.client_secret
                .as_deref()
                .map(|x| short_hash(x.as_bytes()))
                .unwrap_or_default(),
            s.scopes,
            s.client_metadata_url
        ));
    }
    hex(&Sha256::digest(text.as_bytes()))
}

/// A remote server's `auth` and `oauth` keys: `auth: "oauth"` alone takes
/// the defaults (a person logs in; evo registers itself); `oauth` says more
/// (`grant`, `client_id`, `client_secret`, `scopes`, `client_metadata_url`;
/// `${VAR}` expands in the id and secret).
pub(super) fn parse_oauth(
    object: &Map<String, Value>,
    expand: &dyn Fn(&str, &str) -> Result<String, ServerConfigError>,
    fail: &dyn Fn(&str, String) -> ServerConfigError,
) -> Result<Option<OAuthSpec>, ServerConfigError> {
    let auth = match present(object, "auth") {
        None => None,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("oauth") => Some(()),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("none") => None,
        Some(other) => {
            return Err(fail(
                "auth",
                format!(
                    "expected \"oauth\" (or \"none\"), found {}",
                    json_kind(other)
                ),
            ));
        }
    };
    let Some(value) = present(object, "oauth") else {
        return Ok(auth.map(|()| OAuthSpec::default()));
    };
    let Value::Object(o) = value else {
        return Err(fail(
            "oauth",
            format!("expected an object, found {}", json_kind(value)),
        ));
    };
    let text = |key: &str| -> Result<Option<String>, ServerConfigError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => expand(&format!("oauth.{key}"), s).map(Some),
            Some(other) => Err(fail(
                &format!("oauth.{key}"),
                format!("expected a string, found {}", json_kind(other)),
            )),
        }
    };
    let grant = match text("grant")?.as_deref() {
        None | Some("authorization_code") => Grant::AuthorizationCode,
        Some("client_credentials") => Grant::ClientCredentials,
        Some(other) => {
            return Err(fail(
                "oauth.grant",
                format!(
                    "'{other}' is not a grant evo uses; use \"authorization_code\" (evoctl login) or \"client_credentials\""
                ),
            ));
        }
    };
    let scopes = match o.get("scopes") {
        None => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| fail("oauth.scopes", "expected strings".to_owned()))?,
        Some(other) => {
            return Err(fail(
                "oauth.scopes",
                format!("expected a list of strings, found {}", json_kind(other)),
            ));
        }
    };
    let spec = OAuthSpec {
        grant,
        client_id: text("client_id")?,
        client_secret: text("client_secret")?,
        scopes,
        client_metadata_url: text("client_metadata_url")?,
    };
    if grant == Grant::ClientCredentials
        && (spec.client_id.is_none() || spec.client_secret.is_none())
    {
        return Err(fail(
            "oauth",
            "grant client_credentials needs client_id and client_secret (e.g. \"${CLIENT_SECRET}\")".to_owned(),
        ));
    }
    Ok(Some(spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bound_to_the_url_and_settings_not_the_id() {
        let url = "https://mcp.example/mcp";
        let spec = OAuthSpec {
            scopes: vec!["mcp".into()],
            ..Default::default()
        };
        // No id in the binding: a renamed server keeps its tokens.
        assert_eq!(binding(url, Some(&spec)), binding(url, Some(&spec.clone())));
        // `auth: "oauth"` alone is the same as no settings.
        assert_eq!(
            binding(url, None),
            binding(url, Some(&OAuthSpec::default()))
        );
        assert_ne!(
            binding(url, Some(&spec)),
            binding("https://other/mcp", Some(&spec))
        );
        let secret = |s: &str| OAuthSpec {
            client_secret: Some(s.into()),
            ..spec.clone()
        };
        assert_ne!(
            binding(url, Some(&secret("a"))),
            binding(url, Some(&secret("b")))
        );
        assert_ne!(binding(url, Some(&spec)), binding(url, None));
    }

    #[test]
    fn the_secret_is_not_in_debug_output() {
        let spec = OAuthSpec {
            client_secret: Some("hunter2".into()),
            ..Default::default()
        };
        assert!(!format!("{spec:?}").contains("hunter2"));
    }
}
