"""Per-tool overrides through the official Python SDK, in both protocol eras: a tool renamed and
redescribed by the config (``tools``) is listed, found and called under its new name, a hidden one
is neither listed nor callable, and a fixed argument is absent from the schema the client sees
and reaches the child with the configured value.

Each test runs its own evod with one evo-fixture child, not the shared ``evo`` of conftest.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from evo_harness import Evo, evo_with, fixture_bin, text, unwrapped
from mcp.client.client import Client

pytestmark = pytest.mark.anyio

PARROT = "Speak a phrase back verbatim, like a parrot."


@pytest.fixture
def fx_evo() -> Iterator[Evo]:
    tools = {
        "record": {"name": "note", "description": PARROT, "args": {"count": 7}},
        "fail": {"hidden": True},
    }
    config = {"mcpServers": {"fx": {"command": fixture_bin(), "tools": tools}}}
    with evo_with(config, ("fx",)) as daemon:
        yield daemon


async def listed(c: Client) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if c.protocol_version >= "2026-07-28":
        kwargs["cache_mode"] = "refresh"  # the SDK caches lists on modern sessions
    return {t.name: t for t in (await c.list_tools(**kwargs)).tools}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_renamed_tool_with_a_fixed_argument(fx_evo: Evo, mode: str) -> None:
    async with unwrapped(), Client(fx_evo.shim_params("legacy"), mode=mode) as c:
        tools = await listed(c)
        assert "fx_note" in tools and "fx_record" not in tools and "fx_fail" not in tools, sorted(tools)
        note = tools["fx_note"]
        assert note.description == PARROT
        assert "count" not in note.input_schema.get("properties", {}), note.input_schema
        assert "count" not in note.input_schema.get("required", []), note.input_schema

        result = await c.call_tool("fx_note", {"tags": ["sdk"]})
        assert not result.is_error, text(result)
        assert json.loads(text(result)) == {"count": 7, "tags": ["sdk"]}

        passed = await c.call_tool("fx_note", {"count": 1})
        assert passed.is_error and "'count' is fixed" in text(passed), text(passed)

        hidden = await c.call_tool("fx_fail", {"message": "x"})
        assert hidden.is_error and text(hidden).startswith("No tool named 'fx_fail'"), text(hidden)

        found = await c.call_tool("discover_tools", {"query": "repeat a phrase like a parrot", "activate": False})
        assert "fx_note" in text(found), text(found)
