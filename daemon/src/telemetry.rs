//! Traces in OpenTelemetry (`telemetry.otlp_endpoint`, or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`): a span per client request a session
//! handles ([`RequestSpan`]), a child span per call to a server
//! ([`ServerCallSpan`]), and the server-call span's `traceparent` handed to
//! the child in the call's `_meta`.
//!
//! Why it is built so:
//! - Off costs nothing: with no endpoint nothing is started and every hook is
//!   one load of an unset [`OnceLock`].
//! - The call path never waits for a collector. Ended spans go into the SDK's
//!   batch processor: a bounded queue (`try_send`, a span is dropped when it
//!   is full), drained by its own thread, which posts OTLP/HTTP protobuf with
//!   the blocking reqwest client (its own thread too) under an export
//!   timeout. A collector that is down or hangs loses spans, never calls.
//! - Read once at start: the exporter's thread and the global tracer are made
//!   before any session; a reload that changes `telemetry` says a restart is
//!   needed ([`restart_needed`]).
//! - Arguments and results never leave evod unless `record_arguments` is on;
//!   without it a span carries only names, outcome, duration and sizes.
//! - A caller's `_meta.traceparent` (W3C Trace Context) is the parent of the
//!   request span when it is valid; a malformed one is ignored, never an
//!   error. A caller that sampled its trace out (`-00`) gets no spans from
//!   evo either (parent-based sampling), but its trace id still reaches the
//!   child.
//! - Both OTLP transports: OTLP/HTTP protobuf, and OTLP/gRPC (tonic), chosen
//!   as [`destination`] says (port 4317 implies gRPC). gRPC's HTTP/2
//!   connection lives on a one-thread runtime of its own, started only when
//!   gRPC is in use, so an export never runs on a thread serving sessions.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::tonic_types::transport::ClientTlsConfig;
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracer};
use opentelemetry_sdk::trace::{SdkTracerProvider, Span};
use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, Extensions, JsonObject, RequestMetaObject};
use rmcp::service::{RequestContext, RoleServer};
use serde::Serialize;

use crate::VERSION;
use crate::config::{OtlpProtocol, TelemetrySettings};

/// The environment variable read when `telemetry.otlp_endpoint` is unset: a
/// base address, as the key is.
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// Read before [`ENDPOINT_VAR`]: the traces endpoint itself (an OTLP/HTTP
/// URL is taken as it is, `/v1/traces` not added).
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The protocol variables, the traces one first, read when
/// `telemetry.protocol` is unset.
pub const PROTOCOL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];
/// Spans waiting to be sent; past this, new ones are dropped.
const QUEUE: usize = 4096;
/// How often a batch goes out (sooner when one is full).
const BATCH_EVERY: Duration = Duration::from_secs(1);
/// Longest one export may take before it is given up (spans lost).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest an argument or result value is recorded (`record_arguments`).
const RECORDED_MAX: usize = 16 * 1024;

/// The tracer in force, set once at start when traces are on.
static TRACING: OnceLock<Tracing> = OnceLock::new();
/// The `telemetry` section evod started with (traces on or not).
static STARTED_WITH: OnceLock<TelemetrySettings> = OnceLock::new();

/// Traces as started: the provider (its batch thread), the tracer sessions
/// use, whether argument values may be recorded, and for gRPC the runtime
/// its connection lives on.
struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    record_arguments: bool,
    _grpc_runtime: Option<tokio::runtime::Runtime>,
}

/// Where and how spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// What the exporter is given: the traces URL for OTLP/HTTP, the
    /// collector's address for gRPC.
    pub url: String,
    pub protocol: OtlpProtocol,
}

/// Where and how traces go, `env` looking up the environment:
/// - the address: `telemetry.otlp_endpoint`, else
///   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (taken as it is), else
///   `OTEL_EXPORTER_OTLP_ENDPOINT`, else nowhere (`None`);
/// - the protocol: `telemetry.protocol`, else
///   `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`,
///   else the one the address's port implies (4317: gRPC).
///
/// A bad variable is an error naming it (traces stay off; it may be set for
/// other programs).
pub fn destination(
    settings: &TelemetrySettings,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Destination>, String> {
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let (address, as_is) = if let Some(url) = &settings.otlp_endpoint {
        (url.clone(), false)
    } else if let Some(url) = var(TRACES_ENDPOINT_VAR) {
        (checked(TRACES_ENDPOINT_VAR, url)?, true)
    } else if let Some(url) = var(ENDPOINT_VAR) {
        (checked(ENDPOINT_VAR, url)?, false)
    } else {
        return Ok(None);
    };
    let named = PROTOCOL_VARS
        .iter()
        .find_map(|name| var(name).map(|value| (*name, value)));
    let protocol = match (settings.protocol, named) {
        (Some(p), _) => p,
        (None, Some((name, value))) => {
            OtlpProtocol::parse(&value).map_err(|why| format!("{name}: {why}"))?
        }
        (None, None) => OtlpProtocol::implied_by(&address),
    };
    let url = match protocol {
        OtlpProtocol::HttpProtobuf if !as_is => traces_url(&address),
        _ => address,
    };
    Ok(Some(Destination { url, protocol }))
}

/// `url` from the variable `name` when it can be an OTLP address.
fn checked(name: &str, url: String) -> Result<String, String> {
    match crate::config::otlp_endpoint_error(&url) {
        Some(why) => Err(format!("{name}: {why}")),
        None => Ok(url),
    }
}

/// The URL spans are posted to over OTLP/HTTP: the endpoint as a base URL
/// (as `OTEL_EXPORTER_OTLP_ENDPOINT` is), `/v1/traces` added unless it is
/// there.
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

/// Starts traces for `settings` (the process environment consulted as
/// [`destination`] says). Called once, before any session; later calls do
/// nothing. Off when there is no endpoint.
pub fn start(settings: &TelemetrySettings) {
    if STARTED_WITH.set(settings.clone()).is_err() {
        return;
    }
    let to = match destination(settings, |k| std::env::var(k).ok()) {
        Ok(Some(to)) => to,
        Ok(None) => return,
        Err(why) => {
            tracing::warn!("traces are off: {why}");
            return;
        }
    };
    let (exporter, grpc_runtime) = match exporter(&to) {
        Ok(made) => made,
        Err(e) => {
            tracing::error!(
                "traces are off: the OTLP exporter ({}) for {} could not be made: {e}",
                to.protocol.name(),
                to.url
            );
            return;
        }
    };
    let batches = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(QUEUE)
                .with_scheduled_delay(BATCH_EVERY)
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(batches)
        .with_resource(
            Resource::builder()
                .with_service_name("evod")
                .with_attribute(KeyValue::new("service.version", VERSION))
                .build(),
        )
        .build();
    let tracer = provider.tracer("evo");
    let _ = TRACING.set(Tracing {
        provider,
        tracer,
        record_arguments: settings.record_arguments,
        _grpc_runtime: grpc_runtime,
    });
    tracing::info!(
        url = %to.url,
        protocol = to.protocol.name(),
        record_arguments = settings.record_arguments,
        "traces on (OTLP)"
    );
}

/// The exporter for `to`. OTLP/HTTP posts with reqwest's blocking client
/// (its own thread). gRPC's connection (tonic, HTTP/2) needs a Tokio
/// runtime: it gets a one-thread runtime of its own, so exports never run
/// on the threads that serve sessions; the batch thread hands each export
/// to it and waits.
fn exporter(to: &Destination) -> Result<(SpanExporter, Option<tokio::runtime::Runtime>), String> {
    match to.protocol {
        OtlpProtocol::HttpProtobuf => SpanExporter::builder()
            .with_http()
            .with_endpoint(to.url.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map(|e| (e, None))
            .map_err(|e| e.to_string()),
        OtlpProtocol::Grpc => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("evo-otlp-grpc")
                .enable_all()
                .build()
                .map_err(|e| format!("no thread for the gRPC connection: {e}"))?;
            let exporter = {
                let _inside = runtime.enter();
                let mut builder = SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(to.url.clone())
                    .with_timeout(EXPORT_TIMEOUT);
                if to.url.starts_with("https:") {
                    // The system's roots (SSL_CERT_FILE / SSL_CERT_DIR honoured).
                    builder = builder.with_tls_config(ClientTlsConfig::new().with_native_roots());
                }
                builder.build().map_err(|e| e.to_string())?
            };
            Ok((exporter, Some(runtime)))
        }
    }
}

/// Sends what is queued and stops the batch thread (evod is stopping). Waits
/// at most `within`: a collector that does not answer loses those spans.
pub fn stop(within: Duration) {
    if let Some(t) = TRACING.get() {
        let _ = t.provider.shutdown_with_timeout(within);
    }
}

/// Why a reload's `telemetry` section cannot take effect now, if it differs
/// from the one evod started with.
pub fn restart_needed(now: &TelemetrySettings) -> Option<&'static str> {
    let started = STARTED_WITH.get()?;
    (started != now).then_some(
        "telemetry changed: traces keep the endpoint and settings evod started with until evod restarts",
    )
}

/// The request span a server-call span hangs under, kept in the request's
/// context extensions (a script's calls get it through their clone of the
/// `run_code` request's context).
#[derive(Clone)]
struct RequestTrace(Context);

/// The span of one client request a session handles, ended when dropped.
pub struct RequestSpan {
    cx: Context,
}

impl RequestSpan {
    /// Starts the span of `method` for `ctx` (under the caller's trace when
    /// its `_meta.traceparent` is valid) and files it in `ctx` for the
    /// request's server calls. `None` when traces are off.
    pub fn start(
        method: &'static str,
        session: &str,
        ctx: &mut RequestContext<RoleServer>,
    ) -> Option<RequestSpan> {
        TRACING.get()?;
        Self::begin(
            method,
            session,
            ctx.id.to_string(),
            &ctx.meta,
            &mut ctx.extensions,
        )
    }

    /// [`RequestSpan::start`] from a request's parts (`evo-bench` times it
    /// in process).
    pub fn begin(
        method: &'static str,
        session: &str,
        request_id: String,
        meta: &RequestMetaObject,
        extensions: &mut Extensions,
    ) -> Option<RequestSpan> {
        let tracing = TRACING.get()?;
        let parent = caller_context(meta);
        let span = tracing
            .tracer
            .span_builder(method)
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("mcp.method.name", method),
                KeyValue::new("mcp.session.id", session.to_string()),
                KeyValue::new("jsonrpc.request.id", request_id),
            ])
            .start_with_context(&tracing.tracer, &parent);
        let cx = parent.with_span(span);
        extensions.insert(RequestTrace(cx.clone()));
        Some(RequestSpan { cx })
    }

    /// A `tools/call`'s tool name, and how it came back (`ok`, `tool_error`,
    /// `input_required`, `task`); with `record_arguments`, its arguments.
    pub fn called(&self, tool: &str, arguments: Option<&JsonObject>) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("gen_ai.tool.name", tool.to_string()));
        if let (Some(t), Some(args)) = (TRACING.get(), arguments)
            && t.record_arguments
        {
            span.set_attribute(KeyValue::new("evo.arguments", recorded(args)));
        }
    }

    /// Ends `span` (if traces are on) with how `result` came back, and
    /// hands `result` on.
    pub fn answered<T>(
        span: Option<RequestSpan>,
        result: Result<T, ErrorData>,
    ) -> Result<T, ErrorData> {
        if let Some(span) = span {
            span.outcome(if result.is_ok() { "ok" } else { "error" });
        }
        result
    }

    /// [`RequestSpan::answered`] for a `tools/call`: a result with `isError`
    /// is `tool_error`; one that asks for input or starts a task says so.
    pub fn call_answered(
        span: Option<RequestSpan>,
        result: Result<CallToolResponse, ErrorData>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(span) = span {
            span.outcome(match &result {
                Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => "tool_error",
                Ok(CallToolResponse::Complete(_)) => "ok",
                Ok(CallToolResponse::InputRequired(_)) => "input_required",
                Ok(_) => "task",
                Err(_) => "error",
            });
        }
        result
    }

    /// How the request came back.
    fn outcome(&self, outcome: &'static str) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("evo.outcome", outcome));
        if outcome != "ok" {
            span.set_status(Status::error(outcome));
        }
    }
}

impl Drop for RequestSpan {
    fn drop(&mut self) {
        self.cx.span().end();
    }
}

/// The span of one call to a server, under its request's span: what the
/// server is told in `_meta.traceparent`.
pub struct ServerCallSpan {
    span: Span,
    started: Instant,
    traceparent: String,
    record_arguments: bool,
}

impl ServerCallSpan {
    /// Starts the span of a call of `upstream` (exposed as `exposed`) on
    /// `server` with `arguments`. `None` when traces are off.
    pub fn start(
        ctx: &RequestContext<RoleServer>,
        server: &str,
        upstream: &str,
        exposed: &str,
        arguments: &JsonObject,
    ) -> Option<ServerCallSpan> {
        TRACING.get()?;
        Self::begin(
            &ctx.extensions,
            &ctx.meta,
            server,
            upstream,
            exposed,
            arguments,
        )
    }

    /// [`ServerCallSpan::start`] from a request's parts (`evo-bench` times
    /// it in process).
    pub fn begin(
        extensions: &Extensions,
        meta: &RequestMetaObject,
        server: &str,
        upstream: &str,
        exposed: &str,
        arguments: &JsonObject,
    ) -> Option<ServerCallSpan> {
        let tracing = TRACING.get()?;
        let parent = match extensions.get::<RequestTrace>() {
            Some(RequestTrace(cx)) => cx.clone(),
            None => caller_context(meta),
        };
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("evo.server", server.to_string()),
            KeyValue::new("evo.tool.upstream", upstream.to_string()),
            KeyValue::new("gen_ai.tool.name", exposed.to_string()),
            KeyValue::new("evo.bytes.sent", json_len(arguments) as i64),
        ];
        if tracing.record_arguments {
            attributes.push(KeyValue::new("evo.arguments", recorded(arguments)));
        }
        let span = tracing
            .tracer
            .span_builder(format!("tools/call {upstream}"))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&tracing.tracer, &parent);
        let traceparent = traceparent(span.span_context());
        Some(ServerCallSpan {
            span,
            started: Instant::now(),
            traceparent,
            record_arguments: tracing.record_arguments,
        })
    }

    /// The W3C `traceparent` naming this span, for the call's `_meta`.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// Ends the span: the outcome (`/metrics`' names: `ok`, `tool_error`,
    /// `timeout`, `unavailable`, `cancelled`), the time it took and the
    /// result's size as JSON (its value too with `record_arguments`).
    pub fn end(mut self, outcome: &'static str, response: &CallToolResponse) {
        let took = self.started.elapsed();
        let record = self.record_arguments;
        let (size, value) = match response {
            CallToolResponse::Complete(r) => measured(r, record),
            CallToolResponse::InputRequired(r) => measured(r, record),
            CallToolResponse::Task(r) => measured(r, record),
            _ => (0, None),
        };
        self.span.set_attributes([
            KeyValue::new("evo.outcome", outcome),
            KeyValue::new("evo.duration_ms", took.as_secs_f64() * 1000.0),
            KeyValue::new("evo.bytes.received", size as i64),
        ]);
        if let Some(value) = value {
            self.span.set_attribute(KeyValue::new("evo.result", value));
        }
        if outcome != "ok" {
            self.span.set_status(Status::error(outcome));
        }
        self.span.end();
    }
}

/// The caller's trace as the parent of a request span: its valid
/// `_meta.traceparent`, else a new trace.
fn caller_context(meta: &RequestMetaObject) -> Context {
    match meta.get_traceparent().and_then(parse_traceparent) {
        Some(remote) => Context::new().with_remote_span_context(remote),
        None => Context::new(),
    }
}

/// A W3C `traceparent` (`00-<32 hex trace id>-<16 hex span id>-<2 hex
/// flags>`), or `None` when it is not one. Later versions may append fields
/// (`-…`); version `ff` and all-zero ids are invalid.
pub fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if !(hex(version, 2) && hex(trace, 32) && hex(span, 16) && hex(flags, 2)) || version == "ff" {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    if trace == TraceId::INVALID || span == SpanId::INVALID {
        return None;
    }
    Some(SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags & 1),
        true,
        TraceState::default(),
    ))
}

/// The `traceparent` text of a span.
fn traceparent(span: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        span.trace_id(),
        span.span_id(),
        span.trace_flags().to_u8()
    )
}

/// The size of `value` as JSON, counted without building the text.
fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The size of `value` as JSON, and its text when it is to be recorded.
fn measured(value: &impl Serialize, record: bool) -> (usize, Option<String>) {
    (json_len(value), record.then(|| recorded(value)))
}

/// `value` as JSON text for a span, cut at [`RECORDED_MAX`] bytes.
fn recorded(value: &impl Serialize) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_default();
    if text.len() > RECORDED_MAX {
        let mut end = RECORDED_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("…(cut)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_is_a_remote_parent() {
        let sc = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01")
            .expect("valid");
        assert_eq!(
            sc.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_sampled() && sc.is_remote());
        assert_eq!(
            traceparent(&sc),
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        );
        // A later version may carry more fields.
        assert!(
            parse_traceparent("01-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00-x")
                .is_some()
        );
    }

    #[test]
    fn a_malformed_traceparent_is_ignored() {
        for bad in [
            "",
            "garbage",
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
            "00-0AF7651916CD43DD8448EB211C80319C-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-extra",
            "00-0af7651916cd43dd8448eb211c8031-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn the_endpoint_is_a_base_url_unless_it_names_the_traces_path() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }

    /// `destination` with `vars` as the environment.
    fn to(
        settings: &TelemetrySettings,
        vars: &[(&str, &str)],
    ) -> Result<Option<Destination>, String> {
        destination(settings, |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    fn dest(url: &str, protocol: OtlpProtocol) -> Result<Option<Destination>, String> {
        Ok(Some(Destination {
            url: url.into(),
            protocol,
        }))
    }

    #[test]
    fn the_key_wins_over_the_variables_and_a_bad_variable_is_refused() {
        use OtlpProtocol::{Grpc, HttpProtobuf};
        let unset = TelemetrySettings::default();
        let set = TelemetrySettings {
            otlp_endpoint: Some("http://a:4318".into()),
            ..TelemetrySettings::default()
        };
        assert_eq!(to(&unset, &[]), Ok(None));
        assert_eq!(
            to(&unset, &[(ENDPOINT_VAR, "http://b:4318")]),
            dest("http://b:4318/v1/traces", HttpProtobuf)
        );
        assert_eq!(
            to(&set, &[(ENDPOINT_VAR, "http://b:4318")]),
            dest("http://a:4318/v1/traces", HttpProtobuf)
        );
        // The traces variable first, and as it is.
        assert_eq!(
            to(
                &unset,
                &[
                    (ENDPOINT_VAR, "http://b:4318"),
                    (TRACES_ENDPOINT_VAR, "http://t:9/x")
                ]
            ),
            dest("http://t:9/x", HttpProtobuf)
        );
        let bad = to(&unset, &[(ENDPOINT_VAR, "collector")]).unwrap_err();
        assert!(bad.contains(ENDPOINT_VAR), "{bad}");
        let json = to(&set, &[(PROTOCOL_VARS[1], "http/json")]).unwrap_err();
        assert!(
            json.contains(PROTOCOL_VARS[1]) && json.contains("http/protobuf"),
            "{json}"
        );
        // gRPC: the address as it is.
        assert_eq!(
            to(&unset, &[(ENDPOINT_VAR, "http://b:4317")]),
            dest("http://b:4317", Grpc)
        );
    }

    #[test]
    fn the_protocol_comes_from_the_key_the_variables_or_the_port() {
        use OtlpProtocol::{Grpc, HttpProtobuf};
        let at = |url: &str, protocol| TelemetrySettings {
            otlp_endpoint: Some(url.into()),
            protocol,
            ..TelemetrySettings::default()
        };
        assert_eq!(
            to(&at("http://c:4317", None), &[]),
            dest("http://c:4317", Grpc)
        );
        assert_eq!(
            to(
                &at("http://c:4317", Some(HttpProtobuf)),
                &[(PROTOCOL_VARS[1], "grpc")]
            ),
            dest("http://c:4317/v1/traces", HttpProtobuf)
        );
        assert_eq!(
            to(&at("http://c:9000", None), &[(PROTOCOL_VARS[1], "grpc")]),
            dest("http://c:9000", Grpc)
        );
        // The traces variable wins over the general one.
        assert_eq!(
            to(
                &at("http://c:9000", None),
                &[
                    (PROTOCOL_VARS[0], "http/protobuf"),
                    (PROTOCOL_VARS[1], "grpc")
                ]
            ),
            dest("http://c:9000/v1/traces", HttpProtobuf)
        );
    }

    #[test]
    fn sizes_are_counted_as_json() {
        assert_eq!(json_len(&serde_json::json!({"a": "bc"})), 10);
        let long = "é".repeat(RECORDED_MAX);
        let cut = recorded(&long);
        assert!(cut.len() <= RECORDED_MAX + "…(cut)".len() && cut.ends_with("(cut)"));
    }
}
