//! The `telemetry` section: where traces go (`otlp_endpoint`), how
//! (`protocol`: OTLP/gRPC or OTLP/HTTP protobuf) and whether argument values
//! go with them (`record_arguments`). Read by evod once at start (see
//! `crate::telemetry`); the `OTEL_EXPORTER_OTLP_*` variables are looked up
//! there, not here, so a config read says what the file holds.
//!
//! The protocol, when neither the key nor a variable names it, is the one the
//! endpoint's port implies: 4317 is OTLP/gRPC's port and nothing else speaks
//! there, so a collector given as `http://collector:4317` gets gRPC; any other
//! address gets OTLP/HTTP, the default of the OpenTelemetry specification.
//! OTLP/HTTP JSON is not sent (`http/json` is refused, naming the two kinds
//! that are).

use serde_json::Value;

use super::diagnostics::{Warnings, section};
use super::keys::TELEMETRY_KEYS;
use super::readers::{TypeError, boolean, present, string};

/// The `telemetry` section. The default: no endpoint (traces off unless the
/// environment names one), the protocol left to the environment or the
/// endpoint, argument values never recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// A collector's OTLP address (`http://collector:4318`, or
    /// `http://collector:4317` for gRPC).
    pub otlp_endpoint: Option<String>,
    /// `protocol`, when written.
    pub protocol: Option<OtlpProtocol>,
    /// Spans carry tools' argument and result values.
    pub record_arguments: bool,
}

/// How spans are sent to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (`grpc`): the trace service on an HTTP/2 connection.
    Grpc,
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`), posted to `/v1/traces`.
    HttpProtobuf,
}

impl OtlpProtocol {
    /// OTLP/gRPC's well-known port.
    pub const GRPC_PORT: u16 = 4317;

    /// The protocol named as `OTEL_EXPORTER_OTLP_PROTOCOL` names it.
    pub fn parse(name: &str) -> Result<OtlpProtocol, String> {
        match name.trim() {
            "grpc" => Ok(OtlpProtocol::Grpc),
            "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
            "http/json" => Err(
                "OTLP/HTTP JSON is not sent by evo; use \"http/protobuf\" or \"grpc\"".to_string(),
            ),
            other => Err(format!(
                "unknown OTLP protocol '{other}'; use \"grpc\" or \"http/protobuf\""
            )),
        }
    }

    /// Its name, as [`OtlpProtocol::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }

    /// The protocol a collector address implies: gRPC on port 4317,
    /// OTLP/HTTP anywhere else.
    pub fn implied_by(url: &str) -> OtlpProtocol {
        match url.parse::<http::Uri>().ok().and_then(|u| u.port_u16()) {
            Some(OtlpProtocol::GRPC_PORT) => OtlpProtocol::Grpc,
            _ => OtlpProtocol::HttpProtobuf,
        }
    }
}

/// Why `url` cannot be an OTLP endpoint for evo, if it cannot: evo sends
/// to an `http(s)://host[:port]` address.
pub fn otlp_endpoint_error(url: &str) -> Option<String> {
    let uri: http::Uri = match url.parse() {
        Ok(u) => u,
        Err(_) => {
            return Some(format!(
                "'{url}' is not a URL; expected a collector's address like http://collector:4318 (OTLP/HTTP) or http://collector:4317 (OTLP/gRPC)"
            ));
        }
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(s) if s.starts_with("grpc") => {
            return Some(format!(
                "'{url}': a gRPC collector is addressed with http:// or https:// (http://collector:4317); port 4317 or telemetry.protocol \"grpc\" sends gRPC"
            ));
        }
        _ => {
            return Some(format!(
                "'{url}' is not an http:// or https:// URL; expected a collector's address like http://collector:4318"
            ));
        }
    }
    uri.host()
        .is_none_or(str::is_empty)
        .then(|| format!("'{url}' names no host"))
}

pub(super) fn parse_telemetry(
    value: &Value,
    warnings: &mut Warnings<'_>,
) -> Result<TelemetrySettings, String> {
    let object = section("telemetry", value, TELEMETRY_KEYS, warnings)?;
    let at = |key: &str, err: TypeError| format!("telemetry.{key}{}: {}", err.path, err.message);
    let mut settings = TelemetrySettings::default();
    if let Some(value) = present(object, "otlp_endpoint") {
        let url = string(value)
            .map_err(|err| at("otlp_endpoint", err))?
            .trim();
        if !url.is_empty() {
            if let Some(why) = otlp_endpoint_error(url) {
                return Err(format!("telemetry.otlp_endpoint: {why}"));
            }
            settings.otlp_endpoint = Some(url.to_string());
        }
    }
    if let Some(value) = present(object, "protocol") {
        let name = string(value).map_err(|err| at("protocol", err))?;
        settings.protocol =
            Some(OtlpProtocol::parse(name).map_err(|why| format!("telemetry.protocol: {why}"))?);
    }
    if let Some(value) = present(object, "record_arguments") {
        settings.record_arguments = boolean(value).map_err(|err| at("record_arguments", err))?;
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::parse;
    use super::super::test_support::{ENV, env_of, parse_ok};

    fn parse_err(text: &str) -> String {
        parse(text, Path::new("test.json"), &env_of(ENV))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn telemetry_is_off_and_keeps_arguments_unless_written_otherwise() {
        let off = parse_ok("{}").telemetry;
        assert_eq!(off.otlp_endpoint, None);
        assert!(!off.record_arguments);
        let on = parse_ok(
            r#"{"telemetry": {"otlp_endpoint": "http://127.0.0.1:4318", "record_arguments": true}}"#,
        )
        .telemetry;
        assert_eq!(on.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(on.protocol, None);
        assert!(on.record_arguments);
        let grpc =
            parse_ok(r#"{"telemetry": {"otlp_endpoint": "http://c:9000", "protocol": "grpc"}}"#)
                .telemetry;
        assert_eq!(grpc.protocol, Some(super::OtlpProtocol::Grpc));
    }

    #[test]
    fn port_4317_implies_grpc() {
        use super::OtlpProtocol::{Grpc, HttpProtobuf};
        assert_eq!(super::OtlpProtocol::implied_by("http://c:4317"), Grpc);
        assert_eq!(super::OtlpProtocol::implied_by("https://c:4317/"), Grpc);
        assert_eq!(
            super::OtlpProtocol::implied_by("http://c:4318"),
            HttpProtobuf
        );
        assert_eq!(
            super::OtlpProtocol::implied_by("https://collector"),
            HttpProtobuf
        );
    }

    #[test]
    fn a_bad_telemetry_value_names_the_key() {
        for (text, wanted) in [
            (
                r#"{"telemetry": {"otlp_endpoint": 4318}}"#,
                "telemetry.otlp_endpoint: expected",
            ),
            (
                r#"{"telemetry": {"otlp_endpoint": "collector:4318"}}"#,
                "telemetry.otlp_endpoint",
            ),
            (
                r#"{"telemetry": {"otlp_endpoint": "ftp://c:4318"}}"#,
                "telemetry.otlp_endpoint",
            ),
            (
                r#"{"telemetry": {"otlp_endpoint": "grpc://c:9000"}}"#,
                "http://collector:4317",
            ),
            (
                r#"{"telemetry": {"protocol": "http/json"}}"#,
                "telemetry.protocol: OTLP/HTTP JSON is not sent",
            ),
            (
                r#"{"telemetry": {"protocol": "thrift"}}"#,
                "telemetry.protocol: unknown OTLP protocol 'thrift'",
            ),
            (
                r#"{"telemetry": {"protocol": 4317}}"#,
                "telemetry.protocol: expected",
            ),
            (
                r#"{"telemetry": {"record_arguments": "yes"}}"#,
                "telemetry.record_arguments: expected",
            ),
            (r#"{"telemetry": true}"#, "telemetry"),
        ] {
            let err = parse_err(text);
            assert!(err.contains(wanted), "{text}: {err}");
        }
    }
}
