"""Traces sent over OTLP/gRPC to a real gRPC receiver (grpcio serving opentelemetry-proto's trace
service), with the official Python SDK as the caller through `evoctl shim`: the request span
joins the caller's `_meta.traceparent`, the server-call span hangs under it and is what the
child is told, no argument value is exported, the protocol comes from `telemetry.protocol` or
from the `OTEL_EXPORTER_OTLP_*` variables, https goes over TLS, and a gRPC collector that is down
costs no call.
(The OTLP/HTTP side is tested in tests/tests/it/telemetry.rs.)"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
from evo_harness import Evo, evo_with, fixture_bin, free_port, make_tmp, text, unwrapped, wait_for
from evo_harness.otlp_grpc import GrpcCollector, Span
from evo_harness.servers import issued_certificate
from mcp.client.client import Client

pytestmark = pytest.mark.anyio

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CALLER = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
MARKER = "s3cret-argument-41c7"


@contextmanager
def traced_evo(telemetry: dict[str, Any] | None, env: dict[str, str] | None = None) -> Iterator[Evo]:
    """An evod with the fixture (its `meta` tool tells the `_meta` it got) as `fx`."""
    config: dict[str, Any] = {"mcpServers": {"fx": {"command": fixture_bin(), "args": ["--meta"]}}}
    if telemetry is not None:
        config["telemetry"] = telemetry
    with evo_with(config, ("fx",), make=lambda tmp: Evo(tmp=tmp, env=env or {})) as evo:
        yield evo


async def child_traceparent(c: Client, meta: dict[str, Any]) -> tuple[str, str]:
    """(trace id, span id) of the traceparent the child got for a call made with `meta`."""
    r = await c.call_tool("fx_meta", {}, meta=meta)
    assert not r.is_error, text(r)
    got = json.loads(text(r))
    parts = got["traceparent"].split("-")
    assert len(parts) == 4 and parts[0] == "00", got
    return parts[1], parts[2]


def spans_of_trace(collector: GrpcCollector, trace: str, evo: Evo, at_least: int) -> list[Span]:
    def enough() -> list[Span] | None:
        got = [x for x in collector.spans() if x.trace_id == trace]
        return got if len(got) >= at_least else None

    return wait_for("the gRPC collector got too few spans of the trace", enough, 20, evo.diagnostics)


async def test_spans_reach_a_grpc_collector_joined_to_the_callers_trace() -> None:
    collector = GrpcCollector()
    try:
        with traced_evo({"otlp_endpoint": collector.url, "protocol": "grpc"}) as evo:
            async with unwrapped(), Client(evo.shim_params("legacy")) as c:
                trace, span = await child_traceparent(c, {"traceparent": CALLER})
                assert trace == CALLER_TRACE and span != CALLER_SPAN
                echoed = await c.call_tool("fx_echo", {"text": MARKER}, meta={"traceparent": CALLER})
                assert not echoed.is_error and text(echoed) == MARKER, text(echoed)
            spans = await anyio.to_thread.run_sync(spans_of_trace, collector, CALLER_TRACE, evo, 4)
            # The server-call span is the one the child was told, under a request span
            # that is the caller's child.
            call = next((s for s in spans if s.span_id == span), None)
            assert call is not None and call.is_client, spans
            assert call.name == "tools/call meta", call
            assert call.attributes["evo.server"] == "fx" and call.attributes["gen_ai.tool.name"] == "fx_meta", call
            assert call.attributes["evo.outcome"] == "ok" and call.attributes["evo.bytes.received"] > 0, call
            request = next((s for s in spans if s.span_id == call.parent_span_id), None)
            assert request is not None and request.is_server and request.name == "tools/call", spans
            assert request.parent_span_id == CALLER_SPAN, request
            assert request.service == "evod", request
            # Names, sizes and outcomes went; the argument's value did not.
            assert any(s.attributes.get("gen_ai.tool.name") == "fx_echo" for s in spans), spans
            assert not collector.sent_bytes_contain(MARKER)
    finally:
        collector.stop()


async def test_the_protocol_variables_choose_grpc() -> None:
    """No `telemetry` section: the standard variables name the collector and gRPC."""
    collector = GrpcCollector()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    try:
        with traced_evo(None, env) as evo:
            async with unwrapped(), Client(evo.shim_params("legacy")) as c:
                trace, _ = await child_traceparent(c, {"traceparent": CALLER})
                assert trace == CALLER_TRACE
            await anyio.to_thread.run_sync(spans_of_trace, collector, CALLER_TRACE, evo, 2)
    finally:
        collector.stop()


async def test_a_grpc_collector_over_tls() -> None:
    """An https:// address: TLS, the collector's certificate checked against the system's roots
    (here SSL_CERT_FILE naming the test's own CA)."""
    ca_pem, cert, key = issued_certificate("collector")
    collector = GrpcCollector(tls=(cert, key))
    tmp = make_tmp()
    try:
        ca = tmp / "collector-ca.pem"
        ca.write_bytes(ca_pem)
        env = {"SSL_CERT_FILE": str(ca)}
        with traced_evo({"otlp_endpoint": collector.url, "protocol": "grpc"}, env) as evo:
            async with unwrapped(), Client(evo.shim_params("legacy")) as c:
                trace, _ = await child_traceparent(c, {"traceparent": CALLER})
            await anyio.to_thread.run_sync(spans_of_trace, collector, trace, evo, 2)
    finally:
        collector.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def test_a_grpc_collector_that_is_down_or_goes_away_costs_no_call() -> None:
    """Spans to a closed port, then to a collector stopped mid-way: every call is answered."""
    down = f"http://127.0.0.1:{free_port()}"
    collector = GrpcCollector()
    try:
        for endpoint, stop_after in ((down, None), (collector.url, 100)):
            with traced_evo({"otlp_endpoint": endpoint, "protocol": "grpc"}) as evo:
                async with unwrapped(), Client(evo.shim_params("legacy")) as c:
                    for i in range(300):
                        if i == stop_after:
                            await anyio.to_thread.run_sync(
                                lambda: wait_for("nothing reached the collector before it was stopped", collector.spans, 20, evo.diagnostics)
                            )
                            collector.stop()
                        with anyio.fail_after(10):
                            r = await c.call_tool("fx_echo", {"text": f"call {i}"})
                        assert not r.is_error and text(r) == f"call {i}", (endpoint, i, text(r))
                        if i % 100 == 99:
                            await anyio.sleep(1.2)  # past one export interval
                    trace, _ = await child_traceparent(c, {"traceparent": CALLER})
                    assert trace == CALLER_TRACE
                assert evo.status() is not None, evo.diagnostics()
    finally:
        collector.stop()
