//! Who is calling: the bearer credential of an HTTP request (an API token
//! from the tokens file, or an OAuth access token), turned into an
//! [`Identity`] with its role and profile. Without `serve.http.auth` every
//! caller is the local owner.
//!
//! An identity is `token:NAME` or `oauth:SUB`, the kind in the name, so a token and a JWT subject
//! never share sessions or approvals. The local owner (`None` inside, `local` in `evoctl sessions`
//! and `approvals`) is every socket session and every HTTP client without `auth`. An identity whose
//! role the permissions file lacks is refused (403) at the door.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::auth::jwt::{JwtValidator, Refusal};
use crate::auth::tokens::{TOKEN_PREFIX, TokenTable};

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// `token:NAME` or `oauth:SUB`; `None`: the local owner (no auth).
    pub key: Option<String>,
    /// The permissions role (`None`: `active_role`).
    pub role: Option<String>,
    pub profile: Option<String>,
}

impl Identity {
    pub fn owner() -> Identity {
        Identity {
            key: None,
            role: None,
            profile: None,
        }
    }

    /// How logs and messages name it.
    pub fn label(&self) -> &str {
        self.key.as_deref().unwrap_or("the local owner")
    }
}

/// Why a request gets no identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No credential: 401 with the challenge.
    Missing,
    /// A credential that is not valid here: 401 `invalid_token`.
    Invalid(String),
    /// Valid, but lacking scopes: 403 `insufficient_scope`.
    Scope(Vec<String>),
}

/// Checks credentials. Cheap to share; the token table is replaced whole
/// when the Supervisor changes it.
pub struct Authenticator {
    /// `serve.http.auth` is set: credentials are required.
    pub required: bool,
    tokens: ArcSwap<TokenTable>,
    /// The Supervisor has handed over its table (it may be busy at start,
    /// e.g. reading the shared store: a token presented before then waits
    /// for it rather than being refused as unknown).
    attached: tokio::sync::watch::Sender<bool>,
    pub jwt: Option<Arc<JwtValidator>>,
}

/// How long a token presented before the Supervisor handed over its table
/// waits for it.
const ATTACH_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Authenticator {
    pub fn new(required: bool, jwt: Option<Arc<JwtValidator>>) -> Authenticator {
        Authenticator {
            required,
            tokens: ArcSwap::from_pointee(TokenTable::default()),
            attached: tokio::sync::watch::Sender::new(false),
            jwt,
        }
    }

    pub fn set_tokens(&self, table: Arc<TokenTable>) {
        self.tokens.store(table);
        self.attached.send_replace(true);
    }

    /// The identity behind an `Authorization` header value.
    pub async fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Identity, Denied> {
        if !self.required {
            return Ok(Identity::owner());
        }
        let Some(raw) = authorization else {
            return Err(Denied::Missing);
        };
        let Some(token) = bearer(raw) else {
            return Err(Denied::Invalid(
                "the Authorization header must be `Bearer TOKEN`".into(),
            ));
        };
        if token.starts_with(TOKEN_PREFIX) {
            if !*self.attached.borrow() {
                let mut attached = self.attached.subscribe();
                let _ = tokio::time::timeout(ATTACH_WAIT, attached.wait_for(|a| *a)).await;
            }
            return match self.tokens.load().verify(token) {
                Some(entry) => Ok(Identity {
                    key: Some(format!("token:{}", entry.name)),
                    role: entry.role.clone(),
                    profile: entry.profile.clone(),
                }),
                None => Err(Denied::Invalid("unknown or revoked API token".into())),
            };
        }
        let Some(jwt) = &self.jwt else {
            return Err(Denied::Invalid(
                "not an evo API token (this endpoint takes no OAuth tokens)".into(),
            ));
        };
        match jwt.check(token).await {
            Ok(b) => Ok(Identity {
                key: Some(format!("oauth:{}", b.sub)),
                role: b.role,
                profile: b.profile,
            }),
            Err(Refusal::Invalid(why)) => Err(Denied::Invalid(why)),
            Err(Refusal::Scope(scopes)) => Err(Denied::Scope(scopes)),
        }
    }
}

/// The token of `Bearer TOKEN` (the scheme in any case), if that is what
/// the header holds.
fn bearer(raw: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(raw).ok()?.trim();
    let (scheme, token) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())).then_some(token)
}

/// A quoted-string for a `WWW-Authenticate` parameter (RFC 9110).
fn quoted(value: &str) -> String {
    let mut q = String::with_capacity(value.len() + 2);
    q.push('"');
    for c in value.chars() {
        match c {
            '"' | '\\' => {
                q.push('\\');
                q.push(c);
            }
            c if c.is_control() => q.push(' '),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// What a request without a credential is told (the 401's body, and its
/// challenge when there is no OAuth to discover).
pub const MISSING_CREDENTIAL: &str = "this endpoint needs `Authorization: Bearer TOKEN` (an API token from `evoctl token create`, or an OAuth access token)";

/// The `WWW-Authenticate` value for a refusal: always the URL of the
/// protected resource metadata (`metadata`, RFC 9728), and why. With OAuth
/// (`oauth`) a missing credential says nothing more: RFC 6750 asks for no
/// error code then, and clients start discovery from the metadata. With API
/// tokens only it carries RFC 6750's `error` and an `error_description`
/// naming `evoctl token create`, so a client shows evo's message (the
/// metadata names no authorization server to log in at).
pub fn challenge(denied: &Denied, metadata: &str, oauth: bool) -> String {
    let mut parts = vec![
        String::from("Bearer realm=\"evo\""),
        format!("resource_metadata={}", quoted(metadata)),
    ];
    match denied {
        // With OAuth the metadata URL is the answer: RFC 6750 asks for no
        // error code then, and clients start discovery from it.
        Denied::Missing if oauth => {}
        Denied::Missing => {
            parts.push("error=\"invalid_request\"".into());
            parts.push(format!("error_description={}", quoted(MISSING_CREDENTIAL)));
        }
        Denied::Invalid(why) => {
            parts.push("error=\"invalid_token\"".into());
            parts.push(format!("error_description={}", quoted(why)));
        }
        Denied::Scope(scopes) => {
            parts.push("error=\"insufficient_scope\"".into());
            parts.push(format!("scope={}", quoted(&scopes.join(" "))));
        }
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        assert_eq!(bearer(b"Bearer abc.def"), Some("abc.def"));
        assert_eq!(bearer(b"bearer   evo_x "), Some("evo_x"));
        assert_eq!(bearer(b"Basic dXNlcg=="), None);
        assert_eq!(bearer(b"Bearer"), None);
        assert_eq!(bearer(b"Bearer a b"), None);
        assert_eq!(bearer(&[0xff, 0xfe]), None);
    }

    #[tokio::test]
    async fn tokens_name_their_identity_and_bad_ones_say_why() {
        let auth = Authenticator::new(true, None);
        let mut table = TokenTable::default();
        let token = table
            .create(
                "ci",
                Some("readonly".into()),
                Some("coding".into()),
                String::new(),
            )
            .unwrap();
        auth.set_tokens(Arc::new(table));
        let header = format!("Bearer {token}");
        let who = auth.authenticate(Some(header.as_bytes())).await.unwrap();
        assert_eq!(who.key.as_deref(), Some("token:ci"));
        assert_eq!(who.role.as_deref(), Some("readonly"));
        assert_eq!(who.profile.as_deref(), Some("coding"));
        assert_eq!(auth.authenticate(None).await, Err(Denied::Missing));
        let wrong = auth
            .authenticate(Some(b"Bearer evo_0000"))
            .await
            .unwrap_err();
        assert!(matches!(&wrong, Denied::Invalid(why) if !why.contains("evo_0000")));
        assert!(matches!(
            auth.authenticate(Some(b"Bearer eyJ.x.y")).await,
            Err(Denied::Invalid(why)) if why.contains("no OAuth")
        ));
        let open = Authenticator::new(false, None);
        assert_eq!(open.authenticate(None).await, Ok(Identity::owner()));
    }

    #[test]
    fn challenges_carry_the_metadata_url_and_the_error() {
        let url = "http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp";
        let named = format!("Bearer realm=\"evo\", resource_metadata=\"{url}\"");
        assert_eq!(challenge(&Denied::Missing, url, true), named);
        let bad = challenge(
            &Denied::Invalid("the token has \"expired\"".into()),
            url,
            true,
        );
        assert!(bad.contains("error=\"invalid_token\""));
        assert!(bad.contains(r#"error_description="the token has \"expired\"""#));
        let tokens_only = challenge(&Denied::Missing, url, false);
        assert!(
            tokens_only.starts_with(&format!(
                "{named}, error=\"invalid_request\", error_description=\""
            )) && tokens_only.contains("evoctl token create"),
            "{tokens_only}"
        );
        let scope = challenge(
            &Denied::Scope(vec!["mcp".into(), "tools".into()]),
            url,
            true,
        );
        assert_eq!(
            scope,
            format!("{named}, error=\"insufficient_scope\", scope=\"mcp tools\"")
        );
    }
}
