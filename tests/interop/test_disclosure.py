"""Tiered disclosure and self-correcting calls, seen by the official Python SDK in both eras."""

from __future__ import annotations

import pytest
from evo_harness import Evo, dynamic, names, text

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_instructions_list_the_rest_and_describe_tool_teaches(evo: Evo, mode: str) -> None:
    async with dynamic(evo, mode) as c:
        instructions = c.instructions or ""
        assert len(instructions.encode()) <= 8192
        # Tools not listed in full appear as one line each, grouped by domain.
        assert "## time" in instructions
        assert "time_convert_time — " in instructions
        listed = await names(c)
        assert "time_convert_time" not in listed
        r = await c.call_tool("describe_tool", {"name": "time_convert_time"})
        assert not r.is_error
        body = text(r)
        assert '"source_timezone"' in body and "Example call" in body
        r = await c.call_tool("describe_capability", {})
        assert "time — " in text(r)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_repair_and_teaching_errors(evo: Evo, mode: str) -> None:
    async with dynamic(evo, mode) as c:
        # snake/camel and string→number are repaired silently.
        r = await c.call_tool("fx_add", {"A": "2", "b": 3})
        assert not r.is_error and text(r) == "5"
        assert r.meta and r.meta.get("evo/repaired")
        # Hopeless arguments are not forwarded; the error teaches.
        r = await c.call_tool("fx_add", {"a": "two", "b": 3})
        assert r.is_error
        assert "'a'" in text(r) and "Corrected example call" in text(r)
