"""require_approval through the official SDK: a client that supports elicitation asks its user
(accept forwards the call, decline refuses it), on both eras of the protocol; a client that cannot is told to have a person
run `evoctl approve ID`, after which the identical call passes once."""

from __future__ import annotations

from typing import Any

import mcp.types as types
import pytest
from evo_harness import Evo, text, unwrapped
from mcp.client.client import Client

pytestmark = pytest.mark.anyio


def answering(action: str, seen: list[str]) -> Any:
    async def callback(_context: Any, params: Any) -> types.ElicitResult:
        seen.append(getattr(params, "message", ""))
        return types.ElicitResult(action=action)

    return callback


# "legacy": the initialize handshake, evo sends elicitation/create; "auto": 2026-07-28, evo
# answers input_required and the SDK retries with the user's answer.
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_elicitation_asks_the_user(evo: Evo, action: str, mode: str) -> None:
    seen: list[str] = []
    async with unwrapped(), Client(evo.shim_params(), mode=mode, elicitation_callback=answering(action, seen)) as c:
        r = await c.call_tool("fx_cwd", {})
        assert len(seen) == 1 and "fx_cwd" in seen[0]
        if action == "accept":
            assert not r.is_error, text(r)
            assert text(r).startswith("/")
        else:
            assert r.is_error and "declined" in text(r)


async def test_without_elicitation_a_person_approves_with_evoctl(evo: Evo) -> None:
    async with unwrapped(), Client(evo.shim_params(), mode="auto") as c:
        r = await c.call_tool("fx_cwd", {})
        assert r.is_error and "evoctl approve" in text(r)
        approval_id = text(r).split("evoctl approve ")[1].split("`")[0]
        done = evo.ctl("approve", approval_id)
        assert done.returncode == 0, done.stderr
        r = await c.call_tool("fx_cwd", {})
        assert not r.is_error, text(r)
        r = await c.call_tool("fx_cwd", {})
        assert r.is_error, "an approval passes exactly one call"
