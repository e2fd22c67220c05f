//! The `telemetry` section: where traces go (`otlp_endpoint`) and whether
//! argument values go with them (`record_arguments`). Read by evod once at
//! start (see `crate::telemetry`); `OTEL_EXPORTER_OTLP_ENDPOINT` is looked up
//! there, not here, so a config read says what the file holds.

use serde_json::Value;

use super::diagnostics::{Warnings, section};
use super::keys::TELEMETRY_KEYS;
use super::readers::{TypeError, boolean, present, string};

/// The `telemetry` section. The default: no endpoint (traces off unless the
/// environment names one), argument values never recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// OTLP/HTTP base URL of a collector (`http://collector:4318`).
    pub otlp_endpoint: Option<String>,
    /// Spans carry tools' argument and result values.
    pub record_arguments: bool,
}

/// Why `url` cannot be an OTLP endpoint for evo, if it cannot: evo posts
/// OTLP/HTTP protobuf to an `http(s)://host[:port]` base URL and does not
/// speak gRPC.
pub fn otlp_endpoint_error(url: &str) -> Option<String> {
    const GRPC: &str = "OTLP over gRPC is not sent by evo: give the collector's OTLP/HTTP \
                        address instead, usually port 4318 (http://collector:4318)";
    let uri: http::Uri = match url.parse() {
        Ok(u) => u,
        Err(_) => {
            return Some(format!(
                "'{url}' is not a URL; expected an OTLP/HTTP address like http://collector:4318"
            ));
        }
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(s) if s.starts_with("grpc") => return Some(GRPC.to_string()),
        _ => {
            return Some(format!(
                "'{url}' is not an http:// or https:// URL; expected an OTLP/HTTP address like http://collector:4318"
            ));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Some(format!("'{url}' names no host"));
    }
    (uri.port_u16() == Some(4317)).then(|| format!("port 4317 is OTLP/gRPC's; {GRPC}"))
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
        assert!(on.record_arguments);
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
                r#"{"telemetry": {"otlp_endpoint": "http://c:4317"}}"#,
                "4318",
            ),
            (
                r#"{"telemetry": {"otlp_endpoint": "grpc://c:9000"}}"#,
                "gRPC",
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
