//! Host and Origin checks against DNS rebinding and cross-site requests: a
//! web page the user visits must not be able to drive a local evod. Pure
//! functions over header values.
//!
//! - `Host`: on a loopback listener only loopback names (`localhost`,
//!   `127.0.0.1`, `[::1]`, any port) or `serve.http.allowed_hosts`; beyond
//!   loopback, any name unless `allowed_hosts` is set.
//! - `Origin`: absent passes (not a browser); a loopback origin passes; any
//!   other needs an entry in `serve.http.allowed_origins`.

/// Whether `host` (a name or an address, brackets allowed) is this machine.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// One `allowed_origins` entry: scheme, host and port (`None`: `:*`, any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedOrigin {
    scheme: String,
    host: String,
    port: Option<u16>,
    /// The literal `null` origin (sandboxed frames, file: pages).
    null: bool,
}

/// An origin as a browser sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

fn parse_origin(value: &str) -> Option<Origin> {
    let uri: http::Uri = value.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    if uri.path() != "/" && !uri.path().is_empty() {
        return None;
    }
    let port = authority.port_u16().or_else(|| default_port(&scheme))?;
    Some(Origin {
        host: authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
        scheme,
        port,
    })
}

impl AllowedOrigin {
    /// `https://app.example` (the scheme's default port), `https://app.example:8443`,
    /// `http://app.example:*` (any port), or `null`.
    pub fn parse(entry: &str) -> Option<AllowedOrigin> {
        let entry = entry.trim();
        if entry.eq_ignore_ascii_case("null") {
            return Some(AllowedOrigin {
                scheme: String::new(),
                host: String::new(),
                port: None,
                null: true,
            });
        }
        if let Some(base) = entry.strip_suffix(":*") {
            let o = parse_origin(base)?;
            return Some(AllowedOrigin {
                scheme: o.scheme,
                host: o.host,
                port: None,
                null: false,
            });
        }
        let o = parse_origin(entry)?;
        Some(AllowedOrigin {
            scheme: o.scheme,
            host: o.host,
            port: Some(o.port),
            null: false,
        })
    }

    fn matches(&self, o: &Origin) -> bool {
        !self.null
            && self.scheme == o.scheme
            && self.host == o.host
            && self.port.is_none_or(|p| p == o.port)
    }
}

/// What a listener accepts as `Host`.
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    /// The listener is on loopback: only loopback names, unless listed.
    pub loopback_only: bool,
    /// `serve.http.allowed_hosts`, lowercased (`name` or `name:port`).
    pub allowed: Vec<String>,
}

impl HostPolicy {
    /// Checks a request's `Host` (or its URI authority, HTTP/2 style).
    pub fn check(&self, host: Option<&str>) -> Result<(), &'static str> {
        let Some(host) = host else {
            return Err("the request has no Host header");
        };
        let authority: http::uri::Authority = host
            .parse()
            .map_err(|_| "the Host header is not host[:port]")?;
        let name = authority.host();
        if is_loopback_host(name) {
            return Ok(());
        }
        let lower = host.to_ascii_lowercase();
        let name_lower = name.to_ascii_lowercase();
        if self.allowed.iter().any(|a| *a == lower || *a == name_lower) {
            return Ok(());
        }
        if self.loopback_only || !self.allowed.is_empty() {
            return Err(
                "the Host header names a host this endpoint does not serve (add it to serve.http.allowed_hosts)",
            );
        }
        Ok(())
    }
}

/// Checks a request's `Origin`: absent or loopback passes, else it must be
/// listed.
pub fn check_origin(origin: Option<&[u8]>, allowed: &[AllowedOrigin]) -> Result<(), String> {
    let Some(raw) = origin else { return Ok(()) };
    let Ok(text) = std::str::from_utf8(raw) else {
        return Err("the Origin header is not text".into());
    };
    if text.trim().eq_ignore_ascii_case("null") {
        return if allowed.iter().any(|a| a.null) {
            Ok(())
        } else {
            Err("requests from an opaque (null) origin are refused; add \"null\" to serve.http.allowed_origins to allow them".into())
        };
    }
    let Some(o) = parse_origin(text) else {
        return Err("the Origin header is not scheme://host[:port]".into());
    };
    if is_loopback_host(&o.host) || allowed.iter().any(|a| a.matches(&o)) {
        return Ok(());
    }
    Err(format!(
        "origin {text} is not allowed; add it to serve.http.allowed_origins if web pages there may use this endpoint"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_origins_pass_and_others_need_a_listing() {
        let allowed: Vec<AllowedOrigin> = ["https://app.example", "http://dev.example:*"]
            .iter()
            .map(|e| AllowedOrigin::parse(e).unwrap())
            .collect();
        let check = |o: &str| check_origin(Some(o.as_bytes()), &allowed);
        assert!(check_origin(None, &allowed).is_ok());
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1:8787",
            "http://[::1]:9",
            "https://app.example",
            "https://app.example:443",
            "http://dev.example:1234",
        ] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://evil.example",
            "https://app.example:8443",
            "http://app.example",
            "null",
            "not an origin",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
        assert!(
            check("https://evil.example")
                .unwrap_err()
                .contains("allowed_origins")
        );
        let with_null = [AllowedOrigin::parse("null").unwrap()];
        assert!(check_origin(Some(b"null"), &with_null).is_ok());
        assert!(AllowedOrigin::parse("app.example").is_none());
    }

    #[test]
    fn hosts_follow_the_listener() {
        let loopback = HostPolicy {
            loopback_only: true,
            allowed: vec![],
        };
        assert!(loopback.check(Some("127.0.0.1:8787")).is_ok());
        assert!(loopback.check(Some("localhost")).is_ok());
        assert!(loopback.check(Some("[::1]:80")).is_ok());
        assert!(loopback.check(Some("attacker.example:8787")).is_err());
        assert!(loopback.check(None).is_err());
        let open = HostPolicy::default();
        assert!(open.check(Some("evo.example")).is_ok());
        let listed = HostPolicy {
            loopback_only: false,
            allowed: vec!["evo.example".into()],
        };
        assert!(listed.check(Some("evo.example:443")).is_ok());
        assert!(listed.check(Some("other.example")).is_err());
    }
}
