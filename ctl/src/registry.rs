//! The MCP registry as `evoctl add` reads it: its REST API (`GET /v0.1/servers?search=…`,
//! `GET /v0.1/servers/{name}/versions/{version|latest}`, each server as `{"server": server.json,
//! "_meta": …}`) at `registry.url` in evo's config (default the official registry), and the
//! records checked against the registry's published `server.json` schema before evo builds
//! anything from them.
//!
//! The schema is vendored (`ctl/schema/server.schema.json`, the 2025-12-11 release, as the
//! registry validates with it) rather than fetched: a record is judged by the rules evoctl was
//! built against, and `evoctl add` works with only the registry reachable. The registry answers
//! with evoctl's HTTP client (reqwest, already in the tree for `model pull`).

use std::sync::OnceLock;
use std::time::Duration;

use jsonschema::Validator;
use serde_json::{Value, json};
use tokio::runtime::Builder;

/// The official registry's API.
pub const DEFAULT_REGISTRY: &str = "https://registry.modelcontextprotocol.io";
/// The API version evoctl speaks (the registry's frozen v0.1).
const API: &str = "v0.1";
/// The schema release vendored in `ctl/schema/server.schema.json`.
pub const SCHEMA_RELEASE: &str = "2025-12-11";
const SCHEMA: &str = include_str!("../schema/server.schema.json");
/// Matches listed by `evoctl add QUERY`.
const SEARCH_LIMIT: usize = 30;

/// One server in a registry answer.
pub struct Record {
    /// Its `server.json`.
    pub server: Value,
}

impl Record {
    pub fn name(&self) -> &str {
        self.server["name"].as_str().unwrap_or("")
    }

    pub fn version(&self) -> &str {
        self.server["version"].as_str().unwrap_or("")
    }

    pub fn description(&self) -> &str {
        self.server["description"].as_str().unwrap_or("")
    }

    /// How it can be run, for a listing: `npm`, `pypi`, `oci` (each with its transport when not
    /// stdio), `remote streamable-http`.
    pub fn transports(&self) -> Vec<String> {
        let mut found = Vec::new();
        for package in self.server["packages"].as_array().into_iter().flatten() {
            let kind = package["registryType"].as_str().unwrap_or("?");
            match package["transport"]["type"].as_str() {
                Some("stdio") | None => found.push(kind.to_string()),
                Some(t) => found.push(format!("{kind} {t}")),
            }
        }
        for remote in self.server["remotes"].as_array().into_iter().flatten() {
            found.push(format!("remote {}", remote["type"].as_str().unwrap_or("?")));
        }
        found
    }

    pub fn summary(&self) -> Value {
        json!({
            "name": self.name(),
            "description": self.description(),
            "version": self.version(),
            "transport": self.transports(),
        })
    }
}

/// A registry at `base` (no trailing slash).
pub struct Registry {
    base: String,
}

impl Registry {
    pub fn new(base: &str) -> Registry {
        Registry {
            base: base.trim_end_matches('/').to_string(),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Latest versions whose name contains `query` (the registry's own substring search).
    pub fn search(&self, query: &str) -> Result<Vec<Record>, String> {
        let url = format!(
            "{}/{API}/servers?search={}&version=latest&limit={SEARCH_LIMIT}",
            self.base,
            encode(query)
        );
        let answer = get(&url)?.ok_or_else(|| {
            format!(
                "the registry at {} has no server list ({url} was not found): is registry.url the registry's base address?",
                self.base
            )
        })?;
        let servers = answer["servers"].as_array().ok_or_else(|| {
            format!("{url} answered without a \"servers\" list: is registry.url an MCP registry?")
        })?;
        Ok(servers
            .iter()
            .filter(|s| s["server"].is_object())
            .map(|s| Record {
                server: s["server"].clone(),
            })
            .collect())
    }

    /// Server `name` at `version` (`latest` when None), checked against the schema.
    pub fn record(&self, name: &str, version: Option<&str>) -> Result<Record, String> {
        let wanted = version.unwrap_or("latest");
        let url = format!(
            "{}/{API}/servers/{}/versions/{}",
            self.base,
            encode(name),
            encode(wanted)
        );
        let Some(answer) = get(&url)? else {
            let which = version.map(|v| format!(" version {v}")).unwrap_or_default();
            return Err(format!(
                "the registry at {} has no server {name}{which}; list matches with `evoctl add WORD`",
                self.base
            ));
        };
        let server = match answer.get("server") {
            Some(server) => server.clone(),
            None => {
                return Err(format!(
                    "{url} answered without a \"server\" record: is registry.url an MCP registry?"
                ));
            }
        };
        check(&server).map_err(|problems| {
            format!(
                "the registry's record for {name} is not a valid server.json (schema {SCHEMA_RELEASE}), so evo will not run it: {problems}"
            )
        })?;
        Ok(Record { server })
    }
}

/// The vendored schema, compiled once.
fn validator() -> &'static Result<Validator, String> {
    static VALIDATOR: OnceLock<Result<Validator, String>> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let schema: Value = serde_json::from_str(SCHEMA)
            .map_err(|e| format!("evoctl's server.json schema is not JSON: {e}"))?;
        jsonschema::validator_for(&schema)
            .map_err(|e| format!("evoctl's server.json schema does not compile: {e}"))
    })
}

/// Whether `server` is a valid `server.json`; else its first few problems, each at its place.
pub fn check(server: &Value) -> Result<(), String> {
    let validator = validator().as_ref().map_err(Clone::clone)?;
    let problems: Vec<String> = validator
        .iter_errors(server)
        .take(3)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            format!("{at}: {}", e.masked())
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// GETs `url` as JSON: None when it is not found (404), an error naming the URL otherwise.
fn get(url: &str) -> Result<Option<Value>, String> {
    let runtime = Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start: {e}"))?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .user_agent(concat!("evoctl/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("cannot start an HTTP client: {e}"))?;
        let unreachable = |e: reqwest::Error| {
            // reqwest's Display leaves out the cause (refused, no such host): it is the useful part.
            let e = e.without_url();
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why = format!("{why}: {s}");
                source = s.source();
            }
            format!(
                "cannot reach the MCP registry at {url}: {why}; check your network, or set registry.url in evo's config"
            )
        };
        let response = client
            .get(url)
            .header("Accept", "application/json")
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(format!(
                "the MCP registry answered {url} with HTTP {status}; try again later, or check registry.url in evo's config"
            ));
        }
        let body = response.bytes().await.map_err(unreachable)?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| format!("{url} did not answer JSON ({e}): is registry.url an MCP registry?"))
    })
}

/// Percent-encodes everything but RFC 3986's unreserved characters (a server name's `/`
/// becomes `%2F`, as the API wants it in a path segment).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_path_segment() {
        assert_eq!(
            encode("io.github.a/b-c_d"),
            "io.github.a%2Fb-c_d".to_string()
        );
        assert_eq!(encode("a b+é"), "a%20b%2B%C3%A9");
    }

    /// The vendored schema compiles and judges: the registry's own valid and invalid examples.
    #[test]
    fn the_vendored_schema_accepts_a_record_and_names_what_is_wrong() {
        let good = json!({
            "name": "io.github.user/local-weather", "description": "d", "version": "1.0.0",
            "packages": [{"registryType": "npm", "identifier": "x", "version": "1.0.0",
                          "transport": {"type": "stdio"}}]
        });
        assert_eq!(check(&good), Ok(()));
        let mut latest = good.clone();
        latest["packages"][0]["version"] = json!("latest");
        let why = check(&latest).unwrap_err();
        assert!(why.contains("/packages/0/version"), "{why}");
        let why =
            check(&json!({"name": "no-slash", "description": "d", "version": "1"})).unwrap_err();
        assert!(why.contains("/name"), "{why}");
    }
}
