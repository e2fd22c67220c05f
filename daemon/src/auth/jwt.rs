//! OAuth 2.1 access tokens (JWTs) checked as a resource server: the
//! signature against the issuer's key set (JWKS, fetched from `jwks_url`),
//! then `iss`, `aud`, `exp` and `nbf` (30 s leeway), `sub`, and the
//! configured scopes. Keys are fetched at start and again when a token names
//! a key id the set lacks, at most once a minute. Only asymmetric algorithms
//! are accepted, and only with a key of their own family, so a public key can
//! never be used as an HMAC secret.
//!
//! The JWK's own `alg`, when it names one, must match as well. Key fetches are single flight, and a
//! failed fetch keeps the keys already known. The protected resource metadata's `resource` is
//! `public_url`, else the audience when it is a URL (tokens are bound to it), else the request's
//! own URL; it is served at the RFC 9728 path insertion of that URL and at the root well-known
//! path. Verified JWTs are remembered by their SHA-256 until `exp` (cleared when the key set
//! changes): a client sends the same access token on every request, and an ES256 signature costs
//! about 100 µs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use crate::config::serve::OAuthSettings;

/// How long a token may be past `exp` (or before `nbf`): clocks differ.
const LEEWAY_S: u64 = 30;
/// The least time between two fetches of the key set.
const REFETCH_EVERY: Duration = Duration::from_secs(60);
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest key set read.
const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// Tokens remembered as verified; past this many the memory is cleared.
const MAX_VERIFIED: usize = 4096;

/// The algorithms a token may be signed with.
const ACCEPTED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// One usable key of the set.
struct Key {
    kid: Option<String>,
    /// The JWK's own `alg`, when it names one.
    alg: Option<Algorithm>,
    key: DecodingKey,
}

#[derive(Default)]
struct KeySet {
    keys: Vec<Key>,
    /// The last fetch's failure, for `/readyz` and the log.
    error: Option<String>,
    fetched: bool,
}

/// Why a token was refused. The text goes to the client (in
/// `error_description`) and to the log; it never holds the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 401: not a valid token for this endpoint.
    Invalid(String),
    /// 403: valid, but without every scope `required_scopes` names.
    Scope(Vec<String>),
}

/// What a valid token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bearer {
    pub sub: String,
    pub role: Option<String>,
    pub profile: Option<String>,
}

/// The JWT checker of one `serve.http.auth.oauth`. See the module docs.
pub struct JwtValidator {
    settings: OAuthSettings,
    keys: ArcSwap<KeySet>,
    /// When the key set was last asked for (success or not), held while a
    /// fetch runs so concurrent requests wait for it instead of fetching too.
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
    client: reqwest::Client,
    /// Tokens already verified (by their SHA-256) with what they said and
    /// when they expire: a client presents the same token on every request,
    /// and its signature need not be checked again until then. Cleared when
    /// the key set changes.
    verified: std::sync::Mutex<std::collections::HashMap<[u8; 32], (Bearer, u64)>>,
}

impl JwtValidator {
    pub fn new(settings: OAuthSettings) -> Result<Arc<JwtValidator>, String> {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .map_err(|e| format!("cannot make the HTTP client for jwks_url: {e}"))?;
        Ok(Arc::new(JwtValidator {
            settings,
            keys: ArcSwap::from_pointee(KeySet::default()),
            last_fetch: tokio::sync::Mutex::new(None),
            client,
            verified: Default::default(),
        }))
    }

    /// Why the key set is not usable, if it is not (for `/readyz`).
    pub fn problem(&self) -> Option<String> {
        let keys = self.keys.load();
        match (&keys.error, keys.fetched) {
            (Some(e), _) => Some(format!("the OAuth key set cannot be fetched: {e}")),
            (None, false) => Some("the OAuth key set has not been fetched yet".into()),
            (None, true) => None,
        }
    }

    /// Fetches the key set now unless it was asked for within the last
    /// minute (`force` skips that wait: the first fetch at start).
    pub async fn refresh(&self, force: bool) {
        let mut last = self.last_fetch.lock().await;
        if !force && last.is_some_and(|t| t.elapsed() < REFETCH_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        let fetched = self.fetch().await;
        let mut set = KeySet {
            fetched: true,
            ..KeySet::default()
        };
        match fetched {
            Ok(keys) => {
                tracing::info!(jwks_url = %self.settings.jwks_url, keys = keys.len(), "OAuth key set fetched");
                set.keys = keys;
                // A key may be gone: what it verified is verified no more.
                self.verified
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
            }
            Err(e) => {
                tracing::warn!(jwks_url = %self.settings.jwks_url, "cannot fetch the OAuth key set: {e}");
                // Keep the keys we had: an outage of the issuer should not
                // lock out tokens signed with keys we already know.
                let old = self.keys.load();
                set.fetched = old.fetched;
                set.keys = old
                    .keys
                    .iter()
                    .map(|k| Key {
                        kid: k.kid.clone(),
                        alg: k.alg,
                        key: k.key.clone(),
                    })
                    .collect();
                set.error = Some(e);
            }
        }
        self.keys.store(Arc::new(set));
    }

    async fn fetch(&self) -> Result<Vec<Key>, String> {
        let response = self
            .client
            .get(&self.settings.jwks_url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("{e}"))?;
        if !response.status().is_success() {
            return Err(format!("it answered {}", response.status()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
        {
            return Err(format!("it is larger than {MAX_JWKS_BYTES} bytes"));
        }
        let body = response.bytes().await.map_err(|e| format!("{e}"))?;
        if body.len() > MAX_JWKS_BYTES {
            return Err(format!("it is larger than {MAX_JWKS_BYTES} bytes"));
        }
        parse_key_set(&body)
    }

    /// Checks a bearer token. An unknown key id fetches the key set again
    /// (at most once a minute) before the token is refused.
    pub async fn check(&self, token: &str) -> Result<Bearer, Refusal> {
        use sha2::Digest;
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let now = jsonwebtoken::get_current_timestamp();
        if let Some((bearer, exp)) = self
            .verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&digest)
            && now <= exp.saturating_add(LEEWAY_S)
        {
            return Ok(bearer.clone());
        }
        let (bearer, exp) = self.check_signed(token).await?;
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if verified.len() >= MAX_VERIFIED {
            verified.clear();
        }
        verified.insert(digest, (bearer.clone(), exp));
        Ok(bearer)
    }

    /// [`JwtValidator::check`] without the memory of verified tokens:
    /// what the token says, and its `exp`.
    async fn check_signed(&self, token: &str) -> Result<(Bearer, u64), Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Refusal::Invalid("the token is not a JWT".into()))?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "tokens signed with {:?} are not accepted (use RS256, ES256, PS256, EdDSA or another asymmetric algorithm)",
                header.alg
            )));
        }
        let claims = match self.verify(token, &header) {
            Some(result) => result?,
            None => {
                self.refresh(false).await;
                self.verify(token, &header).ok_or_else(|| {
                    Refusal::Invalid(match &header.kid {
                        Some(_) => "the token's key id (kid) is not in the issuer's key set".into(),
                        None => "no key of the issuer's key set verifies the token".into(),
                    })
                })??
            }
        };
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        Ok((self.bearer(claims)?, exp))
    }

    /// Verifies with the keys at hand: `None` when none could apply (the
    /// key id is unknown), else the outcome.
    fn verify(
        &self,
        token: &str,
        header: &jsonwebtoken::Header,
    ) -> Option<Result<Map<String, Value>, Refusal>> {
        let set = self.keys.load();
        let family = header.alg.family();
        let mut candidates = set.keys.iter().filter(|k| {
            k.key.family() == family
                && k.alg.is_none_or(|a| a == header.alg)
                && match (&header.kid, &k.kid) {
                    (Some(want), Some(have)) => want == have,
                    (Some(_), None) => false,
                    (None, _) => true,
                }
        });
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_S;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let first = candidates.next()?;
        let mut outcome = decode(token, &first.key, &validation);
        // Without a kid, any key of the family may be the one.
        if header.kid.is_none() {
            for k in candidates {
                if !matches!(&outcome, Err(Refusal::Invalid(why)) if why == BAD_SIGNATURE) {
                    break;
                }
                outcome = decode(token, &k.key, &validation);
            }
        }
        Some(outcome)
    }

    fn bearer(&self, claims: Map<String, Value>) -> Result<Bearer, Refusal> {
        let required = &self.settings.required_scopes;
        if !required.is_empty() {
            let mut granted: Vec<&str> = Vec::new();
            if let Some(Value::String(s)) = claims.get("scope") {
                granted.extend(s.split_ascii_whitespace());
            }
            if let Some(Value::Array(a)) = claims.get("scp") {
                granted.extend(a.iter().filter_map(Value::as_str));
            }
            if !required.iter().all(|r| granted.contains(&r.as_str())) {
                return Err(Refusal::Scope(required.clone()));
            }
        }
        let text = |claim: &Option<String>| -> Result<Option<String>, Refusal> {
            let Some(name) = claim else { return Ok(None) };
            match claims.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(_) => Err(Refusal::Invalid(format!(
                    "the token's '{name}' claim must be a non-empty string"
                ))),
            }
        };
        let sub = match claims.get("sub") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(Refusal::Invalid("the token has no 'sub'".into())),
        };
        Ok(Bearer {
            sub,
            role: text(&self.settings.role_claim)?,
            profile: text(&self.settings.profile_claim)?,
        })
    }
}

const BAD_SIGNATURE: &str = "the token's signature does not verify";

fn decode(
    token: &str,
    key: &DecodingKey,
    validation: &Validation,
) -> Result<Map<String, Value>, Refusal> {
    use jsonwebtoken::errors::ErrorKind as E;
    jsonwebtoken::decode::<Map<String, Value>>(token, key, validation)
        .map(|data| data.claims)
        .map_err(|e| {
            Refusal::Invalid(
                match e.kind() {
                    E::InvalidSignature | E::InvalidEcdsaKey | E::InvalidRsaKey(_) => BAD_SIGNATURE,
                    E::ExpiredSignature => "the token has expired",
                    E::ImmatureSignature => "the token is not valid yet (nbf)",
                    E::InvalidIssuer => "the token was issued by another issuer",
                    E::InvalidAudience => {
                        "the token is for another audience (resource); ask for one for this endpoint"
                    }
                    E::MissingRequiredClaim(_) => {
                        "the token lacks a required claim (exp, iss, aud, sub)"
                    }
                    E::InvalidAlgorithm => "the token's algorithm does not match its key",
                    _ => "the token is malformed",
                }
                .to_string(),
            )
        })
}

/// The usable keys of a JWKS document; keys it cannot use (symmetric, an
/// unknown type) are skipped with a warning.
fn parse_key_set(body: &[u8]) -> Result<Vec<Key>, String> {
    #[derive(serde::Deserialize)]
    struct Doc {
        keys: Vec<Value>,
    }
    let doc: Doc =
        serde_json::from_slice(body).map_err(|e| format!("it is not a JWKS document ({e})"))?;
    let mut keys = Vec::new();
    for raw in doc.keys {
        let kid = raw.get("kid").and_then(Value::as_str).map(str::to_owned);
        let usable = serde_json::from_value::<Jwk>(raw)
            .map_err(|e| e.to_string())
            .and_then(|jwk| {
                let alg = jwk
                    .common
                    .key_algorithm
                    .and_then(|a| a.to_string().parse::<Algorithm>().ok());
                let key = DecodingKey::from_jwk(&jwk).map_err(|e| e.to_string())?;
                if key.family() == jsonwebtoken::AlgorithmFamily::Hmac {
                    return Err("symmetric keys are never used".into());
                }
                Ok(Key {
                    kid: kid.clone(),
                    alg,
                    key,
                })
            });
        match usable {
            Ok(key) => keys.push(key),
            Err(e) => tracing::warn!(kid = ?kid, "skipping a key of the OAuth key set: {e}"),
        }
    }
    if keys.is_empty() {
        return Err("it holds no usable signing key".into());
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_set_keeps_usable_keys_only() {
        let doc = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "EC", "crv": "P-256", "kid": "ec1", "alg": "ES256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "weird"}
        ]});
        let keys = parse_key_set(doc.to_string().as_bytes()).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("ec1"));
        assert_eq!(keys[0].alg, Some(Algorithm::ES256));
        assert!(parse_key_set(br#"{"keys": []}"#).is_err());
        assert!(parse_key_set(b"<html>").is_err());
    }

    #[tokio::test]
    async fn hmac_and_none_tokens_are_refused_before_any_key_is_tried() {
        let v = JwtValidator::new(OAuthSettings {
            issuer: "https://id.example".into(),
            audience: "https://evo.example/mcp".into(),
            jwks_url: "https://id.example/jwks".into(),
            ..Default::default()
        })
        .unwrap();
        // {"alg":"HS256","typ":"JWT"} . {"sub":"x"} . sig
        let hs = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0.c2ln";
        assert!(matches!(v.check(hs).await, Err(Refusal::Invalid(why)) if why.contains("HS256")));
        assert!(matches!(
            v.check("not-a-jwt").await,
            Err(Refusal::Invalid(_))
        ));
    }
}
