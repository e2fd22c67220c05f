"""The official Python SDK's Streamable HTTP client against two evod instances sharing a real
redis-server, through a small round-robin HTTP proxy (each request goes to the next instance,
as a load balancer without sticky sessions sends them): the session opened on one instance goes
on on the other. Skipped without redis-server on PATH.
"""

from __future__ import annotations

import http.client
import shutil
import threading
from collections.abc import Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from evo_harness import Evo, Redis, fixture_bin, free_port, make_tmp, text, unwrapped
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

TIMEOUT_S = 60.0

pytestmark = pytest.mark.anyio


class RoundRobin:
    """An HTTP/1.1 proxy sending each request to the next backend, streaming answers back."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.turn = 0
        self.served: list[int] = []
        self.lock = threading.Lock()
        # Cut the next tools/call's answer after its first SSE event (a load
        # balancer's idle timeout, an instance going away): the port it was on.
        self.cut = False
        self.cut_on: int | None = None
        # GETs resuming a stream: (port, Last-Event-ID).
        self.resumed_on: list[tuple[int, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self) -> None:
                with proxy.lock:
                    port = proxy.backends[proxy.turn % len(proxy.backends)]
                    proxy.turn += 1
                    proxy.served.append(port)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                cut = False
                with proxy.lock:
                    if proxy.cut and body and b'"tools/call"' in body:
                        proxy.cut, proxy.cut_on, cut = False, port, True
                    if self.command == "GET" and self.headers.get("Last-Event-ID"):
                        proxy.resumed_on.append((port, self.headers["Last-Event-ID"]))
                up = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                up.request(self.command, self.path, body=body, headers=headers)
                r = up.getresponse()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                seen = b""
                while True:
                    chunk = r.read1(65536)
                    if not chunk:
                        break
                    if cut:
                        seen += chunk
                        end = seen.find(b"\n\n")
                        if end >= 0:
                            # The first event only, then the connection drops.
                            first = seen[: end + 2]
                            self.wfile.write(f"{len(first):x}\r\n".encode() + first + b"\r\n")
                            self.wfile.flush()
                            self.close_connection = True
                            up.close()
                            return
                        continue
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                up.close()

            do_GET = do_POST = do_DELETE = forward  # noqa: N815 (http.server's names)

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_evod(tmp: Path, redis: Redis) -> Evo:
    """One instance: the fixture child, Streamable HTTP on a free port, sessions in `redis`."""
    evo = Evo(tmp=tmp, port=free_port())
    evo.write_config(
        {
            "mcpServers": {"fx": {"command": fixture_bin()}},
            "serve": {"http": {"listen": f"127.0.0.1:{evo.port}"}},
            "store": {"redis_url": redis.url},
        }
    )
    evo.start()
    evo.wait_http_ready()
    return evo


@pytest.fixture(scope="module")
def balanced() -> Iterator[RoundRobin]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("skipped: redis-server / redis-cli not on PATH (apt-get install redis-server)")
    base = make_tmp()
    (base / "redis").mkdir()
    redis = Redis.start(base / "redis")
    instances: list[Evo] = []
    proxy: RoundRobin | None = None
    try:
        for name in ("a", "b"):
            (base / name).mkdir()
            instances.append(start_evod(base / name, redis))
        proxy = RoundRobin([evo.port for evo in instances if evo.port is not None])
        yield proxy
    finally:
        if proxy is not None:
            proxy.stop()
        for evo in instances:
            evo.stop()
        redis.stop()
        shutil.rmtree(base, ignore_errors=True)


@asynccontextmanager
async def client(proxy: RoundRobin):  # type: ignore[no-untyped-def]
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=60.0)) as hc,
        unwrapped(),
        Client(streamable_http_client(f"http://127.0.0.1:{proxy.port}/mcp", http_client=hc), mode="legacy") as c,
    ):
        yield c


async def test_a_session_is_served_by_both_instances(balanced: RoundRobin) -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with client(balanced) as c:
            before = len(balanced.served)
            for i in range(10):
                r = await c.call_tool("fx_add", {"a": i, "b": 1})
                assert not r.is_error and text(r) == str(i + 1), text(r)
            tools = {t.name for t in (await c.list_tools()).tools}
            assert "fx_add" in tools, "the activation made by the calls shows on whichever instance lists"
            assert set(balanced.served[before:]) == set(balanced.backends), balanced.served


async def test_a_call_cut_off_mid_stream_is_resumed_on_the_other_instance(balanced: RoundRobin) -> None:
    """The SDK reconnects with Last-Event-ID after the answer's stream is cut; the round-robin
    sends the reconnection to the other instance, which replays the answer from Redis."""
    with anyio.fail_after(TIMEOUT_S):
        async with client(balanced) as c:
            before = len(balanced.resumed_on)
            balanced.cut = True
            r = await c.call_tool("fx_sleep", {"ms": 1500})
            assert not r.is_error and text(r) == "slept 1500", text(r)
            assert balanced.cut_on is not None, "the answer was cut"
            # The answer's own stream (not the session's standalone one), resumed elsewhere.
            resumed = [(p, last) for p, last in balanced.resumed_on[before:] if ":common/" not in last]
            assert resumed, f"the SDK resumed the answer's stream: {balanced.resumed_on}"
            assert any(p != balanced.cut_on for p, _ in resumed), (balanced.cut_on, resumed)
