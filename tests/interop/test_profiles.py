"""Profiles and 2026-07-28 conformance, driven by the official Python SDK in both eras.

A profile's tools are listed in every mode, like hot tools. On 2026-07-28 sessions (the SDK's
``server/discover`` mode) the list is a function of the catalog, the permissions and the
session's profile only: no sequence of searches and calls changes it. What does change it is a
person (``evoctl activate --profile``), and that reaches the session's ``subscriptions/listen``
stream on 2026-07-28 and a plain ``notifications/tools/list_changed`` before.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from evo_harness import NATIVE_TOOLS as NATIVE
from evo_harness import Evo, ListChanged, text, unwrapped
from mcp.client.client import Client

pytestmark = pytest.mark.anyio

CLOCK = {"time_get_current_time", "time_convert_time"}


@asynccontextmanager
async def profiled(evo: Evo, mode: str, profile: str, on_message: ListChanged | None = None) -> AsyncIterator[Client]:
    params = evo.shim_params("dynamic", "--profile", profile)
    async with unwrapped(), Client(params, mode=mode, message_handler=on_message) as client:
        yield client


async def listing(client: Client) -> Any:
    kwargs: dict[str, Any] = {}
    if client.protocol_version >= "2026-07-28":
        kwargs["cache_mode"] = "refresh"  # the SDK caches lists on modern sessions
    return await client.list_tools(**kwargs)


async def ordered_names(client: Client) -> list[str]:
    return [t.name for t in (await listing(client)).tools]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_profile_tools_are_listed_from_the_start(evo: Evo, mode: str) -> None:
    async with profiled(evo, mode, "clock") as c:
        assert set(await ordered_names(c)) == NATIVE | CLOCK


async def test_a_modern_list_is_the_same_through_a_long_mixed_sequence(evo: Evo) -> None:
    async with profiled(evo, "auto", "clock") as c:
        assert c.protocol_version >= "2026-07-28"
        first = await listing(c)
        assert first.ttl_ms == 60_000 and first.cache_scope == "private"
        before = [t.model_dump(mode="json") for t in first.tools]
        steps: list[tuple[str, dict[str, Any]]] = [
            ("discover_tools", {"query": "add two numbers"}),
            ("discover_tools", {"query": "echo a message back", "activate": True}),
            ("fx_add", {"a": 2, "b": 3}),
            ("call_tool", {"name": "everything_echo", "arguments": {"message": "hi"}}),
            ("describe_tool", {"name": "fx_echo"}),
            ("describe_capability", {}),
            ("time_get_current_time", {"timezone": "UTC"}),
            ("fx_echo", {"text": "x"}),
            ("discover_tools", {"query": "process id of the server", "schemas": True, "limit": 3}),
            ("call_tool", {"name": "fx_pid", "arguments": {}}),
        ]
        for name, arguments in steps:
            result = await c.call_tool(name, arguments)
            if name in ("fx_add", "call_tool", "fx_echo", "time_get_current_time"):
                assert not result.is_error, f"{name}: {text(result)}"
            if name == "discover_tools":
                lines = text(result).splitlines()
                matches = [line for line in lines if " — " in line]
                cards = [line for line in lines if line.startswith("  input: ")]
                assert matches and len(cards) == len(matches), text(result)
                json.loads(cards[0].removeprefix("  input: ").split(" (abridged")[0])
                if arguments.get("activate"):
                    assert "Not activated" in text(result)
            now = [t.model_dump(mode="json") for t in (await listing(c)).tools]
            assert now == before, f"the list changed after {name} {arguments}"


async def test_a_persons_profile_change_reaches_both_eras(evo: Evo) -> None:
    seen = ListChanged()
    async with profiled(evo, "auto", "maths") as modern, profiled(evo, "legacy", "maths", seen) as old:
        assert set(await ordered_names(modern)) == NATIVE | {"fx_add"}
        assert set(await ordered_names(old)) == NATIVE | {"fx_add"}
        try:
            async with modern.listen(tools_list_changed=True) as sub:
                done = evo.ctl("activate", "--profile", "maths", "fx_pid", "--json")
                assert done.returncode == 0, done.stderr
                report = json.loads(done.stdout)
                assert report["changed"] == ["fx_pid"] and report["sessions"] == 2
                with anyio.fail_after(5):
                    async for _event in sub:
                        break
            with anyio.fail_after(5):
                await seen.event.wait()
            assert "fx_pid" in await ordered_names(modern)
            assert "fx_pid" in await ordered_names(old)
        finally:
            evo.ctl("deactivate", "--profile", "maths", "fx_pid")


async def test_a_person_cannot_activate_a_tool_in_one_modern_connection(evo: Evo) -> None:
    async with profiled(evo, "auto", "clock") as c:
        await ordered_names(c)  # a request, so the session's era is known
        sessions = json.loads(evo.ctl("sessions", "--json").stdout)["sessions"]
        modern = [s for s in sessions if s["era"] == "2026-07-28" and s["profile"] == "clock"]
        assert modern, sessions
        done = evo.ctl("activate", "fx_pid", "--session", modern[0]["id"])
        assert done.returncode == 1
        assert "evoctl activate --profile" in done.stderr
        assert "fx_pid" not in await ordered_names(c)


async def test_an_unknown_profile_is_refused_with_the_known_ones(evo: Evo) -> None:
    done = evo.ctl("shim", "--profile", "nope", "--no-autostart")
    assert done.returncode == 2
    assert "known profiles: clock, maths" in done.stderr
