"""A remote (Streamable HTTP) server that goes away: calls fail naming it, `evoctl status` stops
calling it ready (also when nothing calls it: evo pings it), and once it is back evo reconnects
by itself (no `evoctl refresh`)."""

from __future__ import annotations

import time

import anyio
import pytest
from harness import Evo, HttpEverything
from mcp.client.client import Client
from test_discovery import text
from test_interop import unwrapped

pytestmark = pytest.mark.anyio


def web_state(evo: Evo) -> str | None:
    status = evo.status() or {}
    return next((s.get("state") for s in status.get("servers", []) if s.get("id") == "web"), None)


async def test_a_remote_that_goes_away_is_reconnected(evo: Evo) -> None:
    async with unwrapped(), Client(evo.shim_params(), mode="legacy") as c:
        r = await c.call_tool("web_echo", {"message": "before"})
        assert not r.is_error, text(r)
        port = evo.http.port
        evo.http.stop()
        r = await c.call_tool("web_echo", {"message": "while down"})
        assert r.is_error and "'web'" in text(r), text(r)
        deadline = time.monotonic() + 10
        while web_state(evo) == "ready":
            assert time.monotonic() < deadline, "web still shown ready while it is down"
            await anyio.sleep(0.1)
        evo.http = HttpEverything.start(evo.tmp, port=port)
        deadline = time.monotonic() + 45
        attempt = 0
        while True:
            attempt += 1  # different arguments each time: identical failures would be refused
            r = await c.call_tool("web_echo", {"message": f"after {attempt}"})
            if not r.is_error:
                break
            assert time.monotonic() < deadline, f"never reconnected: {text(r)}\n{evo.diagnostics()}"
            await anyio.sleep(0.2)
        assert f"after {attempt}" in text(r)
        assert web_state(evo) == "ready"


async def test_a_silent_outage_is_noticed_without_calls(evo: Evo) -> None:
    async with unwrapped(), Client(evo.shim_params(), mode="legacy") as c:
        r = await c.call_tool("web_echo", {"message": "up"})
        assert not r.is_error, text(r)
        port = evo.http.port
        evo.http.stop()
        # No call goes to it: the ping (every 10 s) notices.
        deadline = time.monotonic() + 40
        while web_state(evo) == "ready":
            assert time.monotonic() < deadline, "a remote that went away still shows ready"
            await anyio.sleep(0.25)
        evo.http = HttpEverything.start(evo.tmp, port=port)
        deadline = time.monotonic() + 45
        while web_state(evo) != "ready":
            assert time.monotonic() < deadline, f"never reconnected\n{evo.diagnostics()}"
            await anyio.sleep(0.25)
        r = await c.call_tool("web_echo", {"message": "back"})
        assert not r.is_error and "back" in text(r), text(r)
