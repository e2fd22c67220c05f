"""Legacy HTTP+SSE children (`"type": "sse"`): server-everything in its SSE mode behind evo,
reached by the official Python SDK through the shim. Calls and progress pass through; a
stream that drops fails the calls in flight at once and is reconnected with backoff (shown
down meanwhile, never failed); servers that are not HTTP+SSE servers get errors that say so."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest
from evo_harness import Evo, SseEverything, fixture_bin, make_tmp, text, unwrapped
from mcp.client.client import Client

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 90.0


class Impostors(BaseHTTPRequestHandler):
    """Endpoints that are not HTTP+SSE servers: one that never sends `endpoint`, one that
    answers HTML, one whose stream is garbage and ends."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/silent":
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.wfile.flush()
            time.sleep(30)
        elif self.path == "/html":
            body = b"<html>not here</html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b"data: {not json\n\nevent: message\ndata: garbage\n\n")
            self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def sse_evo() -> Iterator[Evo]:
    tmp = make_tmp()
    sse = SseEverything.start(tmp)
    impostors = ThreadingHTTPServer(("127.0.0.1", 0), Impostors)
    impostors.daemon_threads = True
    threading.Thread(target=impostors.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{impostors.server_address[1]}"
    evo = Evo(tmp=tmp, http=sse)
    evo.config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "ev": {"type": "sse", "url": sse.url, "headers": {"X-Evo-Test": "yes"}},
                    "fx": {"command": fixture_bin(), "args": []},
                    "mute": {"type": "sse", "url": f"{base}/silent"},
                    "page": {"type": "sse", "url": f"{base}/html"},
                    "noise": {"type": "sse", "url": f"{base}/garbage"},
                }
            }
        )
    )
    try:
        evo.start()
        evo.wait_ready(("ev", "fx"))
        yield evo
    finally:
        try:
            evo.stop()  # and the SSE server it holds, the one a test put there included
        finally:
            impostors.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def server(evo: Evo, sid: str) -> dict[str, Any]:
    status = evo.status() or {}
    return next((s for s in status.get("servers", []) if s.get("id") == sid), {})


async def test_calls_and_progress_pass_through_sse(sse_evo: Evo) -> None:
    evo = sse_evo
    assert server(evo, "ev")["transport"] == "sse"
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with unwrapped(), Client(evo.shim_params(), mode="legacy") as c:
            r = await c.call_tool("ev_echo", {"message": "over sse"})
            assert not r.is_error and "over sse" in text(r), text(r)
            for attempt in range(3):
                seen: list[float] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    seen.append(value)

                r = await c.call_tool(
                    "ev_trigger-long-running-operation",
                    {"duration": 0.3, "steps": 5},
                    progress_callback=progress,
                )
                assert not r.is_error, text(r)
                assert seen == [1, 2, 3, 4, 5], f"attempt {attempt}: {seen}"


async def test_servers_that_are_not_sse_servers_are_named(sse_evo: Evo) -> None:
    evo = sse_evo
    deadline = time.monotonic() + 40
    want = {
        "mute": "sent no `endpoint` event within 10 s",
        "page": "not an SSE stream",
        "noise": "ended before its `endpoint` event",
    }
    while True:
        states = {sid: server(evo, sid) for sid in want}
        if all(want[sid] in (s.get("error") or "") for sid, s in states.items()):
            break
        assert time.monotonic() < deadline, f"{json.dumps(states, indent=2)}\n{evo.diagnostics()}"
        await anyio.sleep(0.2)
    for sid, s in states.items():
        # A remote that is not (yet) what it should be is retried, never marked failed.
        assert s["state"] != "failed", s
    # The others are unaffected.
    async with unwrapped(), Client(evo.shim_params(), mode="legacy") as c:
        r = await c.call_tool("ev_echo", {"message": "still fine"})
        assert not r.is_error, text(r)


async def test_a_dropped_stream_fails_calls_in_flight_and_reconnects(sse_evo: Evo) -> None:
    evo = sse_evo
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with unwrapped(), Client(evo.shim_params(), mode="legacy") as c:
            r = await c.call_tool("ev_echo", {"message": "before"})
            assert not r.is_error, text(r)
            port = evo.http.port
            outcome: dict[str, Any] = {}

            async def long_call() -> None:
                started = time.monotonic()
                outcome["result"] = await c.call_tool(
                    "ev_trigger-long-running-operation", {"duration": 20, "steps": 4}
                )
                outcome["took"] = time.monotonic() - started

            async with anyio.create_task_group() as tg:
                tg.start_soon(long_call)
                await anyio.sleep(1.0)
                evo.http.stop()
            r = outcome["result"]
            # Failed with the reason as soon as the stream dropped, not after the 20 s
            # operation or the 60 s call timeout.
            assert r.is_error and "'ev'" in text(r), text(r)
            assert outcome["took"] < 10, outcome
            deadline = time.monotonic() + 10
            while server(evo, "ev").get("state") == "ready":
                assert time.monotonic() < deadline, "still ready while its stream is gone"
                await anyio.sleep(0.1)
            assert server(evo, "ev")["state"] != "failed"
            evo.http = SseEverything.start(evo.tmp, port=port)
            deadline = time.monotonic() + 45
            while (r := await c.call_tool("ev_echo", {"message": "back"})).is_error:
                assert server(evo, "ev").get("state") != "failed", server(evo, "ev")
                assert time.monotonic() < deadline, f"never reconnected: {text(r)}\n{evo.diagnostics()}"
                await anyio.sleep(0.3)
            assert "back" in text(r)
