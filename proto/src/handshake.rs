//! The one-line handshake that opens every control-socket connection.

use serde::{Deserialize, Serialize};

use crate::ctl::DiscoveryMode;

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnKind {
    /// An MCP session: after the handshake the bytes are MCP JSON-RPC lines.
    Mcp,
    /// A control connection: after the handshake, `CtlRequest` / `CtlReply` lines.
    Ctl,
}

/// What the daemon writes on a handed-over session's control socket (its
/// lifeline) when it ends the session itself: the client left or evod is
/// stopping. A lifeline that closes without it means evod died.
pub const SESSION_END: &[u8] = b"{\"bye\":\"session ended\"}\n";

/// The first line a client sends: `{"evo":1,"kind":"mcp","mode":"legacy","session":"work"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// Protocol version the client speaks ([`crate::PROTOCOL_VERSION`]).
    pub evo: u32,
    pub kind: ConnKind,
    /// Discovery mode requested for an MCP session (`legacy` or `dynamic`); the
    /// strongest source of the mode, so it overrides the daemon's. Text, not
    /// a [`DiscoveryMode`], like `env_mode`: the daemon refuses a bad one
    /// with an error that names where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `EVO_DISCOVERY_MODE` in the shim's environment (an MCP client's `env`
    /// for evo): weaker than either `--mode`, stronger than the daemon's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_mode: Option<String>,
    /// Name of a named session, whose activations persist across reconnects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The profile whose tools the session lists (`--profile`, else
    /// `EVO_PROFILE` in the shim's environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The shim offers its stdin and stdout (pipes or sockets) for the daemon
    /// to serve directly ([`crate::fdpass`], Unix only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdio: bool,
}

impl Hello {
    pub fn mcp(mode: Option<String>, session: Option<String>) -> Self {
        Hello {
            evo: crate::PROTOCOL_VERSION,
            kind: ConnKind::Mcp,
            mode,
            env_mode: None,
            session,
            profile: None,
            stdio: false,
        }
    }

    pub fn ctl() -> Self {
        Hello {
            evo: crate::PROTOCOL_VERSION,
            kind: ConnKind::Ctl,
            mode: None,
            env_mode: None,
            session: None,
            profile: None,
            stdio: false,
        }
    }

    /// Parses a handshake line, with an error message meant for a person.
    pub fn parse(line: &[u8]) -> Result<Hello, String> {
        let hello: Hello = serde_json::from_slice(line).map_err(|e| {
            format!("invalid handshake ({e}); expected one JSON line like {{\"evo\":1,\"kind\":\"mcp\"}}")
        })?;
        if hello.evo != crate::PROTOCOL_VERSION {
            return Err(format!(
                "handshake version {} is not supported by this daemon (it speaks {}); use evoctl and evod from the same release",
                hello.evo,
                crate::PROTOCOL_VERSION
            ));
        }
        Ok(hello)
    }
}

/// The daemon's answer to a [`Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub ok: bool,
    /// Session id given to an MCP connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The discovery mode the session was fixed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<DiscoveryMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The refusal is about how the client was started (an unknown
    /// `--profile`): the shim exits 2, a usage error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage: bool,
    /// The daemon's version, for diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<String>,
    /// The daemon takes the stdio the [`Hello`] offered: the client sends the
    /// descriptors next ([`crate::fdpass`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdio: bool,
}

impl Welcome {
    pub fn refused(error: impl Into<String>) -> Self {
        Welcome {
            ok: false,
            session_id: None,
            mode: None,
            error: Some(error.into()),
            usage: false,
            daemon: None,
            stdio: false,
        }
    }

    /// Refused because of how the client was started: exit 2.
    pub fn usage(error: impl Into<String>) -> Self {
        Welcome {
            usage: true,
            ..Welcome::refused(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_minimal_and_full_hello() {
        let h = Hello::parse(br#"{"evo":1,"kind":"ctl"}"#).unwrap();
        assert_eq!(h, Hello::ctl());
        let h = Hello::parse(br#"{"evo":1,"kind":"mcp","mode":"legacy","session":"w"}"#).unwrap();
        assert_eq!(h.mode.as_deref(), Some("legacy"));
        assert_eq!(h.session.as_deref(), Some("w"));
        assert!(!h.stdio);
    }

    #[test]
    fn stdio_offer_is_sent_only_when_made() {
        let mut h = Hello::mcp(None, None);
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            r#"{"evo":1,"kind":"mcp"}"#
        );
        h.stdio = true;
        let line = serde_json::to_vec(&h).unwrap();
        assert!(Hello::parse(&line).unwrap().stdio);
        let w = Welcome::refused("no");
        assert!(!serde_json::to_string(&w).unwrap().contains("stdio"));
        let w: Welcome = serde_json::from_str(r#"{"ok":true,"stdio":true}"#).unwrap();
        assert!(w.ok && w.stdio);
    }

    #[test]
    fn rejects_garbage_wrong_version_and_unknown_fields() {
        for bad in [
            &b"hello"[..],
            br#"{"evo":2,"kind":"mcp"}"#,
            br#"{"evo":1,"kind":"tcp"}"#,
            br#"{"evo":1,"kind":"mcp","x":1}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#,
            b"\xff\xfe",
        ] {
            assert!(
                Hello::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let e = Hello::parse(br#"{"evo":7,"kind":"mcp"}"#).unwrap_err();
        assert!(e.contains('7') && e.contains('1'), "{e}");
    }
}
