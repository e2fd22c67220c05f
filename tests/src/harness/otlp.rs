//! A real OTLP trace receiver for the trace tests and the bench: a loopback
//! listener that takes exports (protobuf `ExportTraceServiceRequest`,
//! decoded with the OpenTelemetry project's own generated types), keeps them
//! raw as well (to search the exported bytes), and answers — or, hanging,
//! accepts and reads and never answers (a collector that is stuck). Over
//! OTLP/HTTP (`POST /v1/traces`, HTTP/1.1, answered `200`) or OTLP/gRPC
//! (hyper's HTTP/2 server without TLS, each length-prefixed message of the
//! `Export` call kept, answered with an empty `ExportTraceServiceResponse`
//! and `grpc-status: 0`). The interop suite checks gRPC against grpcio's own
//! server as well.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

/// One span as received: ids in lowercase hex (the parent empty for a root).
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    /// Attribute values as text (numbers and booleans written out).
    pub attributes: BTreeMap<String, String>,
    /// The span's status code: 0 unset, 1 ok, 2 error.
    pub status: i32,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// A receiver on a loopback port; it stops listening when dropped.
pub struct OtlpReceiver {
    port: u16,
    grpc: bool,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl OtlpReceiver {
    /// An OTLP/HTTP receiver that answers every export.
    pub fn start() -> OtlpReceiver {
        Self::listen(false)
    }

    /// An OTLP/HTTP receiver that accepts connections, reads the requests
    /// and never answers.
    pub fn hanging() -> OtlpReceiver {
        Self::listen(true)
    }

    /// An OTLP/gRPC receiver that answers every export.
    pub fn grpc() -> OtlpReceiver {
        Self::listen_grpc(false)
    }

    /// An OTLP/gRPC receiver that reads every export and never answers.
    pub fn grpc_hanging() -> OtlpReceiver {
        Self::listen_grpc(true)
    }

    /// The `telemetry` section that sends to this receiver.
    pub fn telemetry(&self, record_arguments: bool) -> serde_json::Value {
        serde_json::json!({
            "otlp_endpoint": self.url(),
            "protocol": if self.grpc { "grpc" } else { "http/protobuf" },
            "record_arguments": record_arguments,
        })
    }

    fn listen_grpc(hang: bool) -> OtlpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the OTLP/gRPC receiver");
        let port = listener.local_addr().expect("its address").port();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, stopping) = (bodies.clone(), stop.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the receiver's runtime");
            runtime.block_on(grpc::serve(listener, hang, kept, stopping));
        });
        OtlpReceiver {
            port,
            grpc: true,
            bodies,
            stop,
        }
    }

    fn listen(hang: bool) -> OtlpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the OTLP receiver");
        let port = listener.local_addr().expect("its address").port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, stopping) = (bodies.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (kept, stopping) = (kept.clone(), stopping.clone());
                std::thread::spawn(move || serve(conn, hang, &kept, &stopping));
            }
        });
        OtlpReceiver {
            port,
            grpc: false,
            bodies,
            stop,
        }
    }

    /// The base URL to configure (`telemetry.otlp_endpoint`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every export body received so far, as sent.
    pub fn raw(&self) -> Vec<Vec<u8>> {
        self.bodies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many exports arrived.
    pub fn exports(&self) -> usize {
        self.bodies.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Every span received so far, decoded.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        let mut spans = Vec::new();
        for body in self.raw() {
            let request = ExportTraceServiceRequest::decode(body.as_slice())
                .expect("an export body is an ExportTraceServiceRequest");
            for resource in request.resource_spans {
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        spans.push(ReceivedSpan {
                            name: span.name,
                            trace_id: hex(&span.trace_id),
                            span_id: hex(&span.span_id),
                            parent_span_id: hex(&span.parent_span_id),
                            attributes: span
                                .attributes
                                .into_iter()
                                .map(|kv| (kv.key, text(kv.value.and_then(|v| v.value))))
                                .collect(),
                            status: span.status.map_or(0, |s| s.code),
                        });
                    }
                }
            }
        }
        spans
    }

    /// Whether `needle` occurs in any byte of any export.
    pub fn sent_bytes_contain(&self, needle: &str) -> bool {
        let needle = needle.as_bytes();
        self.raw()
            .iter()
            .any(|body| body.windows(needle.len()).any(|w| w == needle))
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Serves one connection: HTTP/1.1 requests with a `Content-Length` body,
/// kept alive as the exporter's client keeps them, until the client closes
/// it (evod's exit closes them all).
fn serve(conn: TcpStream, hang: bool, kept: &Mutex<Vec<Vec<u8>>>, stop: &AtomicBool) {
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    loop {
        let mut length = None;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let mut body = vec![0; length.unwrap_or(0)];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        kept.lock().unwrap_or_else(|e| e.into_inner()).push(body);
        if hang {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
            return;
        }
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// The gRPC side: the trace service's one method over HTTP/2.
mod grpc {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
    use hyper::server::conn::http2;
    use hyper::service::service_fn;
    use hyper::{Request, Response};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    type Kept = Arc<Mutex<Vec<Vec<u8>>>>;

    pub(super) async fn serve(
        listener: std::net::TcpListener,
        hang: bool,
        kept: Kept,
        stop: Arc<AtomicBool>,
    ) {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        while let Ok((stream, _)) = listener.accept().await {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let kept = kept.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| export(req, hang, kept.clone()));
                let _ = http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    /// One `Export` call: its messages kept (each after gRPC's 5-byte
    /// prefix: a compression flag and a big-endian length), then an empty
    /// response message and `grpc-status: 0` — or, hanging, nothing ever.
    async fn export(
        req: Request<Incoming>,
        hang: bool,
        kept: Kept,
    ) -> Result<Response<BoxBody<Bytes, Infallible>>, Infallible> {
        let body = match req.into_body().collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let mut rest = &body[..];
        while rest.len() >= 5 {
            let length = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            let Some(message) = rest.get(5..5 + length) else {
                break;
            };
            kept.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(message.to_vec());
            rest = &rest[5 + length..];
        }
        if hang {
            std::future::pending::<()>().await;
        }
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        let message = Full::new(Bytes::from_static(&[0, 0, 0, 0, 0]))
            .with_trailers(async move { Some(Ok(trailers)) })
            .boxed();
        let mut response = Response::new(message);
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        Ok(response)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<AnyValue>) -> String {
    match value {
        Some(AnyValue::StringValue(s)) => s,
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
