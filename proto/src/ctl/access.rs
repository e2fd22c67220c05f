//! Access: the HTTP endpoint's API tokens, the web console's sign-in link,
//! and a remote server's login.

use serde::{Deserialize, Serialize};

/// `evoctl ui --json`: where the web console is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UiAddress {
    /// The address to open: signs the browser in once (the token in it
    /// works a single time), then the console.
    pub url: String,
    /// The console's own address, without a token.
    pub console: String,
    /// `http` (under `/ui` on the `serve.http` listener) or `loopback`
    /// (a listener evod started for the console alone).
    pub served: String,
    /// Seconds the sign-in token stays valid if unused.
    pub expires_s: u64,
}

/// Reply to `token create`: the token, shown this once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenCreated {
    pub name: String,
    /// The bearer token; evod keeps only its SHA-256.
    pub token: String,
    pub role: Option<String>,
    pub profile: Option<String>,
    /// RFC 3339, UTC.
    pub created: String,
    /// The tokens file it was recorded in.
    pub file: String,
    /// Why the endpoint does not check it yet (no HTTP endpoint, or one
    /// without `serve.http.auth`); absent when it is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchecked: Option<String>,
}

/// One API token as `token list` shows it (never the token).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub name: String,
    pub role: Option<String>,
    pub profile: Option<String>,
    pub created: String,
}

/// `evoctl token list --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
    pub file: String,
}

/// `evoctl login`: the URL to open (when starting), what happened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginReport {
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub message: String,
}
