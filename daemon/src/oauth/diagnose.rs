//! Why OAuth discovery failed, in words a person can act on. rmcp's
//! discovery reports a broken document as "no metadata" or a parse error
//! without saying which document; when it fails evo reads the documents
//! itself, in the same order (RFC 9728 protected resource metadata from the
//! challenge or the well-known path, then the first authorization server's
//! RFC 8414 / OpenID metadata), and names the first one that is not valid
//! JSON or lacks a field evo needs, with its URL.
//!
//! This also runs when rmcp's discovery finds nothing. The fields checked are `resource`,
//! `authorization_servers`, `issuer`, `authorization_endpoint` and `token_endpoint`; the text found
//! is the server's error in `evoctl status` and `evoctl login`.

use std::time::Duration;

use reqwest::{StatusCode, Url};
use serde_json::Value;

/// Each document fetch gets this long.
const FETCH: Duration = Duration::from_secs(10);

/// What is wrong with the server's OAuth metadata, if a document can be
/// named; `None` when every document evo can find reads well (the failure
/// was elsewhere, and rmcp's own error stands).
pub async fn diagnose(url: &str, challenge: Option<&str>) -> Option<String> {
    let resource = Url::parse(url).ok()?;
    let client = reqwest::Client::builder().timeout(FETCH).build().ok()?;
    let from_challenge = challenge.and_then(|c| param(c, "resource_metadata"));
    let prm_urls = match &from_challenge {
        Some(u) => vec![resource.join(u).ok()?],
        None => well_known(&resource, "oauth-protected-resource"),
    };
    let mut prm = None;
    for at in &prm_urls {
        match fetch(&client, at).await {
            Fetched::Json(doc) => {
                prm = Some((at.clone(), doc));
                break;
            }
            Fetched::Broken(e) => {
                return Some(format!(
                    "the protected resource metadata at {at} {e} (RFC 9728)"
                ));
            }
            Fetched::Missing(status) if from_challenge.is_some() => {
                return Some(format!(
                    "the protected resource metadata at {at} (named by its 401 challenge) answered {status}"
                ));
            }
            Fetched::Missing(_) | Fetched::Unreachable => {}
        }
    }
    let (prm_url, prm) = prm?;
    let Some(obj) = prm.as_object() else {
        return Some(format!(
            "the protected resource metadata at {prm_url} is not a JSON object (RFC 9728)"
        ));
    };
    if !obj.get("resource").is_some_and(Value::is_string) {
        return Some(format!(
            "the protected resource metadata at {prm_url} lacks the required field `resource` (RFC 9728)"
        ));
    }
    let Some(issuer) = obj
        .get("authorization_servers")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
    else {
        return Some(format!(
            "the protected resource metadata at {prm_url} lacks `authorization_servers` (a list of issuer URLs), so evo cannot tell where to log in"
        ));
    };
    let Ok(issuer_url) = Url::parse(issuer) else {
        return Some(format!(
            "the protected resource metadata at {prm_url} names an authorization server that is not a URL ('{issuer}')"
        ));
    };
    let mut candidates = well_known(&issuer_url, "oauth-authorization-server");
    candidates.extend(well_known(&issuer_url, "openid-configuration"));
    if let Ok(appended) = Url::parse(&format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )) && !candidates.contains(&appended)
    {
        candidates.push(appended);
    }
    let mut answered = false;
    for at in &candidates {
        match fetch(&client, at).await {
            Fetched::Json(doc) => return check_as(at, &doc),
            Fetched::Broken(e) => {
                return Some(format!(
                    "the authorization server metadata at {at} {e} (RFC 8414)"
                ));
            }
            Fetched::Missing(_) => answered = true,
            Fetched::Unreachable => {}
        }
    }
    if !answered {
        // Down, not broken: rmcp's own error says so.
        return None;
    }
    Some(format!(
        "the authorization server {issuer} named by {prm_url} publishes no metadata (tried {})",
        candidates
            .iter()
            .map(Url::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The fields evo's flows need of an authorization server's metadata.
fn check_as(at: &Url, doc: &Value) -> Option<String> {
    let Some(obj) = doc.as_object() else {
        return Some(format!(
            "the authorization server metadata at {at} is not a JSON object (RFC 8414)"
        ));
    };
    for field in ["issuer", "authorization_endpoint", "token_endpoint"] {
        if !obj.get(field).is_some_and(Value::is_string) {
            return Some(format!(
                "the authorization server metadata at {at} lacks the required field `{field}` (RFC 8414)"
            ));
        }
    }
    None
}

enum Fetched {
    Json(Value),
    /// Answered, but not a document evo can read: why.
    Broken(String),
    /// Not there: the status it answered.
    Missing(String),
    /// No answer (refused, timed out).
    Unreachable,
}

async fn fetch(client: &reqwest::Client, at: &Url) -> Fetched {
    let response = match client
        .get(at.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
    {
        Ok(r) => r,
        Err(_) => return Fetched::Unreachable,
    };
    let status = response.status();
    if status != StatusCode::OK {
        return Fetched::Missing(status.to_string());
    }
    let body = match response.bytes().await {
        Ok(b) => b,
        Err(_) => return Fetched::Unreachable,
    };
    match serde_json::from_slice::<Value>(&body) {
        Ok(doc) => Fetched::Json(doc),
        Err(e) => Fetched::Broken(format!("is not valid JSON ({e})")),
    }
}

/// RFC 8414 / 9728 well-known URLs of `base`: the name inserted before the
/// path, and at the root when there is a path.
fn well_known(base: &Url, name: &str) -> Vec<Url> {
    let path = base.path().trim_end_matches('/');
    let mut out = Vec::new();
    let mut at = base.clone();
    at.set_query(None);
    at.set_fragment(None);
    at.set_path(&format!("/.well-known/{name}{path}"));
    out.push(at.clone());
    if !path.is_empty() {
        at.set_path(&format!("/.well-known/{name}"));
        out.push(at);
    }
    out
}

/// A parameter of a `WWW-Authenticate` challenge (`name="value"` or bare).
fn param(challenge: &str, name: &str) -> Option<String> {
    let lower = challenge.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name) {
        let start = from + i;
        from = start + name.len();
        let before = lower[..start].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = challenge[from..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        let rest = rest.trim_start();
        return Some(match rest.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or_default().to_string(),
            None => rest
                .split([',', ' '])
                .next()
                .unwrap_or_default()
                .to_string(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters_are_read_quoted_or_bare() {
        let c = r#"Bearer error="invalid_token", resource_metadata="http://a/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(
            param(c, "resource_metadata").as_deref(),
            Some("http://a/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            param(
                "Bearer resource_metadata=http://x/y, scope=a",
                "resource_metadata"
            )
            .as_deref(),
            Some("http://x/y")
        );
        assert_eq!(param("Bearer realm=x", "resource_metadata"), None);
    }

    #[test]
    fn well_known_urls_insert_the_name_before_the_path() {
        let u = Url::parse("http://h:1/tenant/mcp").unwrap();
        let got: Vec<String> = well_known(&u, "oauth-protected-resource")
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(
            got,
            [
                "http://h:1/.well-known/oauth-protected-resource/tenant/mcp",
                "http://h:1/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(well_known(&Url::parse("http://h/").unwrap(), "x").len(), 1);
    }

    #[test]
    fn missing_authorization_server_fields_are_named() {
        let at = Url::parse("http://as/.well-known/oauth-authorization-server").unwrap();
        let doc =
            serde_json::json!({"issuer": "http://as", "authorization_endpoint": "http://as/a"});
        let e = check_as(&at, &doc).unwrap();
        assert!(
            e.contains("`token_endpoint`") && e.contains(at.as_str()),
            "{e}"
        );
        let full = serde_json::json!({"issuer": "http://as", "authorization_endpoint": "a", "token_endpoint": "t"});
        assert_eq!(check_as(&at, &full), None);
    }
}
