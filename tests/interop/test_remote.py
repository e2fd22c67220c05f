"""A remote (Streamable HTTP) server that goes away: calls fail naming it, `evoctl status` stops
calling it ready (also when nothing calls it: evo pings it), and once it is back evo reconnects
by itself (no `evoctl refresh`)."""

from __future__ import annotations

import time

import anyio
import pytest
from evo_harness import Evo, HttpEverything, text, unwrapped
from mcp.client.client import Client

pytestmark = pytest.mark.anyio


def web_state(evo: Evo) -> str | None:
    status = evo.status() or {}
    return next((s.get("state") for s in status.get("servers", []) if s.get("id") == "web"), None)


async def wait_for_web(evo: Evo, ready: bool, within: float, what: str) -> None:
    """Polls `evoctl status` until the remote's state is (or is no longer) `ready`."""
    deadline = time.monotonic() + within
    while (web_state(evo) == "ready") != ready:
        assert time.monotonic() < deadline, f"{what}\n{evo.diagnostics()}"
        await anyio.sleep(0.1)


async def test_a_remote_that_goes_away_is_reconnected(evo: Evo) -> None:
    async with unwrapped(), Client(evo.shim_params(), mode="legacy") as c:
        r = await c.call_tool("web_echo", {"message": "before"})
        assert not r.is_error, text(r)
        port = evo.http.port
        evo.http.stop()
        r = await c.call_tool("web_echo", {"message": "again"})
        assert r.is_error and "'web'" in text(r), text(r)
        await wait_for_web(evo, False, 10, "web still shown ready while it is down")
        evo.http = HttpEverything.start(evo.tmp, port=port)
        # The very call that failed while the server was down works once it is back: failures
        # of an unreachable server do not count toward the retry-loop breaker.
        deadline = time.monotonic() + 45
        while (r := await c.call_tool("web_echo", {"message": "again"})).is_error:
            assert "Refused" not in text(r), text(r)
            assert time.monotonic() < deadline, f"never reconnected: {text(r)}\n{evo.diagnostics()}"
            await anyio.sleep(0.2)
        assert "again" in text(r)
        assert web_state(evo) == "ready"


async def test_a_silent_outage_is_noticed_without_calls(evo: Evo) -> None:
    async with unwrapped(), Client(evo.shim_params(), mode="legacy") as c:
        r = await c.call_tool("web_echo", {"message": "up"})
        assert not r.is_error, text(r)
        port = evo.http.port
        evo.http.stop()
        # No call goes to it: the ping (every 10 s) notices.
        await wait_for_web(evo, False, 40, "a remote that went away still shows ready")
        evo.http = HttpEverything.start(evo.tmp, port=port)
        await wait_for_web(evo, True, 45, "never reconnected")
        r = await c.call_tool("web_echo", {"message": "back"})
        assert not r.is_error and "back" in text(r), text(r)


async def test_progress_of_a_remote_call_arrives_in_order_before_its_result(evo: Evo) -> None:
    # Through Streamable HTTP too, every progress notification reaches the session, in order,
    # before the result (rmcp's own per-notification tasks could let the last one trail it).
    async with unwrapped(), Client(evo.shim_params(), mode="legacy") as c:
        for attempt in range(3):
            seen: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append(value)

            r = await c.call_tool(
                "web_trigger-long-running-operation", {"duration": 0.3, "steps": 5}, progress_callback=progress
            )
            assert not r.is_error, text(r)
            assert seen == [1, 2, 3, 4, 5], f"attempt {attempt}: {seen}"
