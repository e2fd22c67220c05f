//! Traces (`telemetry`) through real processes: evod exporting OTLP/HTTP to a
//! receiver the test starts, the fixture (`--meta`) telling what `_meta` it
//! got. Parentage (caller → request span → server-call span → the child's
//! `traceparent`) on the direct stdio path, rmcp's path (a progress token
//! takes it) and a remote HTTP child; a script's calls under `run_code`;
//! argument values never exported unless `record_arguments`; a collector
//! that is down or hangs costs no call; a session over HTTP traced alike.
//! OTLP/gRPC is tested against gRPC's own server in
//! tests/interop/test_traces_grpc.py.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use evo_tests::harness::{
    daemon::Daemon,
    http::{HttpMcp, http_daemon},
    locations::fixture,
    mcp::{McpClient, text_of},
    otlp::{OtlpReceiver, ReceivedSpan},
    ports::free_port,
    servers::{HttpChild, fixture_server},
    wait::eventually,
};
use serde_json::{Value, json};

/// The caller's own trace and span.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
/// An argument value that must never leave evod unless asked.
const MARKER: &str = "s3cret-argument-7f3a9c";

fn caller_traceparent() -> String {
    format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")
}

fn traced(servers: Value, endpoint: &str, record_arguments: bool) -> Value {
    json!({
        "mcpServers": servers,
        "telemetry": {"otlp_endpoint": endpoint, "record_arguments": record_arguments}
    })
}

/// An evod tracing to `endpoint` with the fixture's `meta` tool as server
/// `fx`, ready, and a legacy session on it.
fn traced_fixture(endpoint: &str, record_arguments: bool) -> (Daemon, McpClient) {
    fixture_traced_as(json!({"otlp_endpoint": endpoint, "record_arguments": record_arguments}))
}

/// [`traced_fixture`] with the whole `telemetry` section given.
fn fixture_traced_as(telemetry: Value) -> (Daemon, McpClient) {
    let d = Daemon::start(&json!({
        "mcpServers": {"fx": fixture_server(&["--meta"])},
        "telemetry": telemetry
    }));
    d.wait_ready(&["fx"]);
    let c = d.legacy_session();
    (d, c)
}

/// `tools/call` with `meta` as the request's `_meta`; the result object.
fn call_with_meta(c: &mut McpClient, name: &str, args: Value, meta: Value) -> Value {
    let r = c.request(
        "tools/call",
        json!({"name": name, "arguments": args, "_meta": meta}),
    );
    r.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("tools/call {name} failed: {r}"))
}

/// The `traceparent` the child got (the fixture's `meta` answers with its
/// `_meta`): (trace id, span id).
fn child_traceparent(result: &Value) -> (String, String) {
    let (text, is_error) = text_of(result);
    assert!(!is_error, "{result}");
    let meta: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let tp = meta["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("the child got no traceparent: {meta}"));
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts.len(), 4, "{tp}");
    assert_eq!(parts[0], "00", "{tp}");
    (parts[1].to_string(), parts[2].to_string())
}

/// Waits for a span with `span_id` to be exported, and returns it.
fn exported(receiver: &OtlpReceiver, span_id: &str) -> ReceivedSpan {
    let mut found = None;
    eventually(
        format!("span {span_id} exported"),
        Duration::from_secs(20),
        || {
            found = receiver.spans().into_iter().find(|s| s.span_id == span_id);
            found.is_some()
        },
    );
    found.expect("found")
}

fn span(receiver: &OtlpReceiver, id: &str) -> ReceivedSpan {
    receiver
        .spans()
        .into_iter()
        .find(|s| s.span_id == id)
        .unwrap_or_else(|| panic!("no span {id} in {:#?}", receiver.spans()))
}

/// What a call of server `server`'s `meta` tool, made with the caller's
/// `traceparent` and [`MARKER`] as an argument, answered (`result`) and
/// exported: the child's call in the caller's trace, its server-call span
/// under a request span that is the caller's span's child, and no argument
/// value sent. The request span.
fn joined_the_callers_trace(receiver: &OtlpReceiver, result: &Value, server: &str) -> ReceivedSpan {
    let (trace, span_id) = child_traceparent(result);
    assert_eq!(
        trace, CALLER_TRACE,
        "the child's call is in the caller's trace"
    );
    let call = exported(receiver, &span_id);
    let request = check_call(receiver, &call, server, "meta", &format!("{server}_meta"));
    assert_eq!(request.parent_span_id, CALLER_SPAN, "{request:#?}");
    assert!(!receiver.sent_bytes_contain(MARKER));
    request
}

/// A server-call span under a request span, both checked: the request span
/// is `tools/call` of `exposed`, the server-call span carries the server,
/// both names, the outcome, a duration and sizes.
fn check_call(
    receiver: &OtlpReceiver,
    call: &ReceivedSpan,
    server: &str,
    upstream: &str,
    exposed: &str,
) -> ReceivedSpan {
    assert_eq!(call.name, format!("tools/call {upstream}"), "{call:#?}");
    assert_eq!(call.attr("evo.server"), Some(server), "{call:#?}");
    assert_eq!(call.attr("evo.tool.upstream"), Some(upstream), "{call:#?}");
    assert_eq!(call.attr("gen_ai.tool.name"), Some(exposed), "{call:#?}");
    assert_eq!(call.attr("evo.outcome"), Some("ok"), "{call:#?}");
    for sized in ["evo.duration_ms", "evo.bytes.sent", "evo.bytes.received"] {
        let v: f64 = call
            .attr(sized)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{sized} missing: {call:#?}"));
        assert!(v > 0.0, "{sized} = {v}: {call:#?}");
    }
    assert!(call.attr("evo.arguments").is_none(), "{call:#?}");
    let request = span(receiver, &call.parent_span_id);
    assert_eq!(request.name, "tools/call", "{request:#?}");
    assert_eq!(request.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(request.trace_id, call.trace_id);
    request
}

#[test]
fn spans_join_the_callers_trace_and_the_child_gets_the_server_calls_traceparent() {
    let receiver = OtlpReceiver::start();
    let (_daemon, mut c) = traced_fixture(&receiver.url(), false);

    // The direct stdio path, under the caller's trace.
    let direct = call_with_meta(
        &mut c,
        "fx_meta",
        json!({"text": MARKER}),
        json!({"traceparent": caller_traceparent()}),
    );
    let request = joined_the_callers_trace(&receiver, &direct, "fx");
    assert_eq!(request.trace_id, CALLER_TRACE);
    assert_eq!(request.attr("gen_ai.tool.name"), Some("fx_meta"));
    assert_eq!(request.attr("evo.outcome"), Some("ok"));

    // rmcp's path (a progress token takes it): the child gets its
    // traceparent there too; without a caller's trace the request span is a
    // root.
    let rmcp = call_with_meta(
        &mut c,
        "fx_meta",
        json!({"text": MARKER}),
        json!({"progressToken": "p1"}),
    );
    let (trace, span_id) = child_traceparent(&rmcp);
    assert_ne!(trace, CALLER_TRACE);
    let call = exported(&receiver, &span_id);
    let request = check_call(&receiver, &call, "fx", "meta", "fx_meta");
    assert_eq!(request.parent_span_id, "", "a new trace: {request:#?}");

    // A malformed traceparent is ignored, never the call's failure.
    let odd = call_with_meta(
        &mut c,
        "fx_meta",
        json!({}),
        json!({"traceparent": "00-not-a-trace-01"}),
    );
    let (trace, span_id) = child_traceparent(&odd);
    assert_eq!(trace.len(), 32);
    let call = exported(&receiver, &span_id);
    assert_eq!(span(&receiver, &call.parent_span_id).parent_span_id, "");

    // A failing tool: the outcome says so.
    let (_, is_error) = c.call_text("fx_fail", json!({"message": "no"}));
    assert!(is_error);
    let mut failed = None;
    eventually("the failed call's span", Duration::from_secs(20), || {
        failed = receiver
            .spans()
            .into_iter()
            .find(|s| s.name == "tools/call fail");
        failed.is_some()
    });
    let failed = failed.expect("found");
    assert_eq!(
        failed.attr("evo.outcome"),
        Some("tool_error"),
        "{failed:#?}"
    );
    assert_eq!(failed.status, 2, "an error status: {failed:#?}");

    // Other requests have spans of their own.
    c.tool_names();
    eventually("a tools/list span", Duration::from_secs(20), || {
        receiver.spans().iter().any(|s| s.name == "tools/list")
    });

    // No argument value left evod, in any byte of any export.
    assert!(receiver.exports() > 0);
    assert!(
        !receiver.sent_bytes_contain(MARKER),
        "an argument value was exported"
    );
}

#[test]
fn a_remote_child_gets_the_traceparent_too() {
    let mut child = Command::new(fixture())
        .args(["--http", "127.0.0.1:0", "--meta"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the HTTP fixture");
    let stderr = child.stderr.take().expect("its stderr");
    let mut first = String::new();
    std::io::BufReader::new(stderr)
        .read_line(&mut first)
        .expect("the fixture says where it listens");
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _child = Kill(child);
    let url = first
        .trim()
        .split("listening on ")
        .nth(1)
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let receiver = OtlpReceiver::start();
    let d = Daemon::start(&traced(
        json!({"web": {"type": "http", "url": url}}),
        &receiver.url(),
        false,
    ));
    d.wait_ready(&["web"]);
    let mut c = d.legacy_session();
    let r = call_with_meta(
        &mut c,
        "web_meta",
        json!({"text": MARKER}),
        json!({"traceparent": caller_traceparent()}),
    );
    joined_the_callers_trace(&receiver, &r, "web");
}

/// A session over the HTTP front is traced alike.
#[test]
fn a_session_over_http_joins_the_callers_trace() {
    let receiver = OtlpReceiver::start();
    let (d, port) = http_daemon(
        traced(
            json!({"fx": fixture_server(&["--meta"])}),
            &receiver.url(),
            false,
        ),
        json!({}),
        &["--mode", "legacy"],
    );
    d.wait_ready(&["fx"]);
    let mut c = HttpMcp::initialize(port, None);
    let reply = c.call_method(
        "tools/call",
        json!({"name": "fx_meta", "arguments": {"text": MARKER},
               "_meta": {"traceparent": caller_traceparent()}}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    let r = reply.answer()["result"].clone();
    joined_the_callers_trace(&receiver, &r, "fx");
}

#[test]
fn a_scripts_calls_hang_under_its_run_code_span() {
    let receiver = OtlpReceiver::start();
    let (_daemon, mut c) = traced_fixture(&receiver.url(), false);
    let r = c.call(
        "run_code",
        json!({"code": "const a = await tools.fx_meta({text: 'one'}); await tools.fx_echo({text: 'two'}); return a;"}),
    );
    let (text, is_error) = text_of(&r);
    assert!(!is_error, "{r}");
    let meta_text = r["structuredContent"]
        .get("result")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or(text);
    let tp = meta_text
        .split("00-")
        .nth(1)
        .unwrap_or_else(|| panic!("no traceparent in {meta_text}"));
    let span_id = tp[33..49].to_string();
    let call = exported(&receiver, &span_id);
    let run = span(&receiver, &call.parent_span_id);
    assert_eq!(run.name, "tools/call", "{run:#?}");
    assert_eq!(run.attr("gen_ai.tool.name"), Some("run_code"), "{run:#?}");
    eventually("the script's second call", Duration::from_secs(20), || {
        receiver
            .spans()
            .iter()
            .any(|s| s.name == "tools/call echo" && s.parent_span_id == run.span_id)
    });
}

#[test]
fn record_arguments_exports_argument_values() {
    let receiver = OtlpReceiver::start();
    let (_daemon, mut c) = traced_fixture(&receiver.url(), true);
    // rmcp's path (a progress token takes it).
    let r = call_with_meta(
        &mut c,
        "fx_meta",
        json!({"text": MARKER}),
        json!({"progressToken": 3}),
    );
    let (_, span_id) = child_traceparent(&r);
    let call = exported(&receiver, &span_id);
    assert!(
        call.attr("evo.arguments")
            .is_some_and(|a| a.contains(MARKER)),
        "{call:#?}"
    );
    assert!(call.attr("evo.result").is_some(), "{call:#?}");
    assert!(receiver.sent_bytes_contain(MARKER));
}

/// A collector that is down (a closed port) or that hangs (accepts, never
/// answers): every call is answered and the session goes on. Timings are
/// the bench's business (`evo-bench --tracing`).
#[test]
fn a_collector_down_or_hanging_costs_no_call() {
    let hanging = OtlpReceiver::hanging();
    let grpc_hanging = OtlpReceiver::grpc_hanging();
    let down = format!("http://127.0.0.1:{}", free_port());
    for telemetry in [
        json!({"otlp_endpoint": down}),
        json!({"otlp_endpoint": down, "protocol": "grpc"}),
        hanging.telemetry(false),
        grpc_hanging.telemetry(false),
    ] {
        let endpoint = telemetry.to_string();
        let (_daemon, mut c) = fixture_traced_as(telemetry);
        // More spans than one batch, over more than one export interval.
        for i in 0..600 {
            let text = format!("call {i}");
            assert_eq!(
                c.call_text("fx_echo", json!({"text": text})),
                (text.clone(), false),
                "{endpoint}"
            );
            if i % 200 == 0 {
                std::thread::sleep(Duration::from_millis(1200));
            }
        }
        assert!(c.tool_names().contains(&"fx_echo".to_string()));
        let r = call_with_meta(&mut c, "fx_meta", json!({}), json!({"progressToken": 1}));
        child_traceparent(&r);
    }
    // The hanging ones were really sent to (so traces were on).
    assert!(hanging.exports() > 0 && grpc_hanging.exports() > 0);
}

/// The same spans over OTLP/gRPC: the request span under the caller's, the
/// server-call span the one the child is told, no argument value.
#[test]
fn spans_go_over_grpc_alike() {
    let receiver = OtlpReceiver::grpc();
    let (_daemon, mut c) = fixture_traced_as(receiver.telemetry(false));
    let r = call_with_meta(
        &mut c,
        "fx_meta",
        json!({"text": MARKER}),
        json!({"traceparent": caller_traceparent()}),
    );
    let request = joined_the_callers_trace(&receiver, &r, "fx");
    assert_eq!(request.attr("evo.outcome"), Some("ok"));
}

/// Without traces evo is not in the trace: a caller's `traceparent` reaches
/// the child as it was sent.
#[test]
fn with_traces_off_the_callers_traceparent_goes_on_unchanged() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&["--meta"])}}));
    d.wait_ready(&["fx"]);
    let mut c = d.legacy_session();
    for meta in [
        json!({"traceparent": caller_traceparent()}),
        json!({"traceparent": caller_traceparent(), "progressToken": 5}),
    ] {
        let r = call_with_meta(&mut c, "fx_meta", json!({}), meta);
        assert_eq!(
            child_traceparent(&r),
            (CALLER_TRACE.to_string(), CALLER_SPAN.to_string())
        );
    }
}

/// A caller's `traceparent` reaches a Streamable HTTP child on each way a
/// call goes there: straight (evo's own request), through rmcp (a progress
/// token takes it), and sent again through rmcp's session after the child
/// forgot the one the straight request used (its 404).
#[test]
fn the_callers_traceparent_reaches_an_http_child_on_every_path() {
    let addr = format!("127.0.0.1:{}", free_port());
    let child_args = ["--legacy", "--meta"];
    let mut child = HttpChild::start_with(&addr, &child_args, &[]);
    let d = Daemon::start_with(
        &json!({"mcpServers": {"web": child.entry()}}),
        &["--mode", "legacy"],
        &[],
    );
    d.wait_ready(&["web"]);
    let mut c = d.legacy_session();
    let plain = json!({"traceparent": caller_traceparent()});
    let caller = (CALLER_TRACE.to_string(), CALLER_SPAN.to_string());
    for meta in [
        plain.clone(),
        json!({"traceparent": caller_traceparent(), "progressToken": 5}),
    ] {
        let r = call_with_meta(&mut c, "web_meta", json!({}), meta);
        assert_eq!(child_traceparent(&r), caller);
    }
    // Restarted between two calls: the next straight POST is answered 404
    // and the call goes again through rmcp, which opens a new session.
    child.kill();
    let _child = HttpChild::start_with(&addr, &child_args, &[]);
    std::thread::sleep(Duration::from_millis(200));
    let r = call_with_meta(&mut c, "web_meta", json!({}), plain);
    assert_eq!(child_traceparent(&r), caller);
}

#[test]
fn a_telemetry_change_on_reload_says_a_restart_is_needed() {
    let receiver = OtlpReceiver::start();
    let mut config = traced(json!({"fx": fixture_server(&[])}), &receiver.url(), false);
    let d = Daemon::start(&config);
    d.wait_ready(&["fx"]);
    config["telemetry"]["record_arguments"] = json!(true);
    std::fs::write(&d.config, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let (code, out, err) = d.ctl(&["reload"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("telemetry changed"),
        "{out}{err}"
    );
}

#[test]
fn a_protocol_evo_does_not_send_is_a_config_error_naming_the_key() {
    let d = Daemon::start(&json!({
        "mcpServers": {"fx": fixture_server(&[])},
        "telemetry": {"otlp_endpoint": "http://127.0.0.1:4318", "protocol": "http/json"}
    }));
    let status = d.ctl_json(&["status"]);
    let error = status["config"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("telemetry.protocol") && error.contains("http/protobuf"),
        "{status:#}"
    );
}

#[test]
fn otel_exporter_otlp_endpoint_is_honoured_when_the_key_is_unset() {
    let receiver = OtlpReceiver::start();
    let d = Daemon::start_with(
        &json!({"mcpServers": {"fx": fixture_server(&["--meta"])}}),
        &[],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url())],
    );
    d.wait_ready(&["fx"]);
    let mut c = d.legacy_session();
    let r = call_with_meta(&mut c, "fx_meta", json!({}), json!({"progressToken": 3}));
    let (_, span_id) = child_traceparent(&r);
    exported(&receiver, &span_id);
}
