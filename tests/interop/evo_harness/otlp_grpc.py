"""A real OTLP/gRPC receiver for the trace tests: gRPC's own server (grpcio) serving the
collector's trace service as opentelemetry-proto generates it, on a free loopback port. It keeps
every export it is sent, as the spans and as the raw bytes (to check that a value never left
evod)."""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2


@dataclass
class Span:
    """One received span, its ids as lowercase hex."""

    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    service: str

    @property
    def is_server(self) -> bool:
        return self.kind == trace_pb2.Span.SPAN_KIND_SERVER

    @property
    def is_client(self) -> bool:
        return self.kind == trace_pb2.Span.SPAN_KIND_CLIENT


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class GrpcCollector(trace_service_pb2_grpc.TraceServiceServicer):
    """Serves `Export` on 127.0.0.1 until `stop`; over TLS with `tls` (certificate and key,
    PEM)."""

    def __init__(self, tls: tuple[bytes, bytes] | None = None) -> None:
        self.scheme = "https" if tls else "http"
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self._raw: list[bytes] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        if tls is None:
            self.port = self._server.add_insecure_port("127.0.0.1:0")
        else:
            cert, key = tls
            credentials = grpc.ssl_server_credentials([(key, cert)])
            self.port = self._server.add_secure_port("127.0.0.1:0", credentials)
        self._server.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any) -> Any:  # noqa: N802 (gRPC's name)
        got: list[Span] = []
        for rs in request.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        Span(
                            name=s.name,
                            kind=s.kind,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            service=str(resource.get("service.name", "")),
                        )
                    )
        with self._lock:
            self._spans.extend(got)
            self._raw.append(request.SerializeToString())
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def sent_bytes_contain(self, needle: str) -> bool:
        with self._lock:
            return any(needle.encode() in raw for raw in self._raw)

    def stop(self) -> None:
        self._server.stop(0).wait(5)
