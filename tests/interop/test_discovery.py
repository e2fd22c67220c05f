"""Dynamic discovery driven by the official Python SDK, in both protocol eras.

A dynamic session starts with the native tools only. Before 2026-07-28, ``discover_tools``
activates matches for that session alone, the session is told with
``notifications/tools/list_changed`` and its next ``tools/list`` shows them. On 2026-07-28 the
list never changes with what a session does: matches come back as tool cards and are called by
their exact name or through ``call_tool`` (test_profiles.py covers what does change it there).
"""

from __future__ import annotations

import anyio
import pytest
from evo_harness import NATIVE_TOOLS, Evo, ListChanged, dynamic, names, text

pytestmark = pytest.mark.anyio

NATIVE = NATIVE_TOOLS


async def test_discover_activates_and_notifies(evo: Evo) -> None:
    """Initialize-era sessions: matches are activated and the session told."""
    seen = ListChanged()
    async with dynamic(evo, "legacy", seen) as c:
        assert await names(c) == NATIVE
        result = await c.call_tool("discover_tools", {"query": "convert a time between timezones", "limit": 2})
        with anyio.fail_after(5):
            await seen.event.wait()
        assert not result.is_error
        assert text(result).splitlines()[0].startswith("time_convert_time — ")
        visible = await names(c)
        assert "time_convert_time" in visible and NATIVE < visible
        # The activated tool works by name.
        r = await c.call_tool("time_convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
        assert not r.is_error and "Asia/Tokyo" in text(r)


async def test_modern_discover_returns_cards_and_leaves_the_list_alone(evo: Evo) -> None:
    """2026-07-28 sessions (the SDK's `server/discover` mode): matches come back as cards with
    compact schemas, nothing is activated, no list_changed is sent, and a match is called by
    its exact name."""
    seen = ListChanged()
    async with dynamic(evo, "auto", seen) as c:
        assert c.protocol_version >= "2026-07-28"
        async with c.listen(tools_list_changed=True) as sub:
            result = await c.call_tool("discover_tools", {"query": "convert a time between timezones", "limit": 2})
            assert not result.is_error
            lines = text(result).splitlines()
            assert lines[0].startswith("time_convert_time — ")
            assert lines[1].startswith("  input: {") and "target_timezone" in lines[1]
            assert await names(c) == NATIVE
            with anyio.move_on_after(0.5) as waited:
                async for _event in sub:
                    break
            assert waited.cancelled_caught, "a 2026-07-28 session was told its list changed"
        r = await c.call_tool("time_convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
        assert not r.is_error and "Asia/Tokyo" in text(r)
        assert await names(c) == NATIVE
        assert seen.count == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sessions_are_isolated_and_exact_names_route(evo: Evo, mode: str) -> None:
    modern = mode == "auto"
    async with dynamic(evo, mode) as a, dynamic(evo, mode) as b:
        await a.call_tool("discover_tools", {"query": "add two numbers", "limit": 1})
        assert ("fx_add" in await names(a)) != modern
        assert "fx_add" not in await names(b)
        # An exact-name call routes without activation; before 2026-07-28 it activates the
        # tool for that session only, on 2026-07-28 it changes no list.
        r = await b.call_tool("fx_echo", {"text": "direct"})
        assert text(r) == "direct"
        assert ("fx_echo" in await names(b)) != modern
        assert "fx_echo" not in await names(a)
        # call_tool reaches any tool.
        r = await a.call_tool("call_tool", {"name": "everything_echo", "arguments": {"message": "hi"}})
        assert "hi" in text(r) and not r.is_error


@pytest.mark.parametrize(
    ("query", "first"),
    [
        # A tool name inside a sentence finds that tool.
        ("what does `get_current_time` need?", "time_get_current_time"),
        # A negated clause and a quoted value do not choose the tool.
        ("I don't want to convert anything, just the current time in 'Asia/Tokyo'", "time_get_current_time"),
    ],
)
async def test_discover_reads_names_values_and_negation(evo: Evo, query: str, first: str) -> None:
    async with dynamic(evo, "legacy") as c:
        result = await c.call_tool("discover_tools", {"query": query, "limit": 3, "activate": False})
        assert not result.is_error
        assert text(result).splitlines()[0].startswith(f"{first} — "), text(result)
