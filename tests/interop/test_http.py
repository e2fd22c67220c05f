"""evod's Streamable HTTP endpoint through the official Python SDK's HTTP client, in both eras
(``legacy``: initialize and an ``Mcp-Session-Id``; ``auto``: 2026-07-28, no session), with an API
token from ``evoctl token create``: list, discover, call, progress, cancellation, approvals by
elicitation and by ``evoctl approve``, list_changed, and how ``evoctl sessions`` shows them."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import anyio
import mcp.types as types
import pytest
from evo_harness import Evo, ListChanged, http_client, http_evo_fixture, text

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def evo_http() -> Iterator[Evo]:
    yield from http_evo_fixture(permissions="rules:\n  fx_cwd: require_approval\n")


@pytest.fixture(scope="module")
def token(evo_http: Evo) -> str:
    return evo_http.token("sdk")


def wait_for_log(evo: Evo, pattern: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not re.search(pattern, evo.log.read_text(errors="replace")):
        assert time.monotonic() < deadline, f"no {pattern!r} in the log\n{evo.diagnostics()}"
        time.sleep(0.05)


@pytest.mark.parametrize("mode", MODES)
async def test_list_discover_and_call(evo_http: Evo, token: str, mode: str) -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with http_client(evo_http, token, mode) as c:
            assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            tools = {t.name for t in (await c.list_tools()).tools}
            assert {"discover_tools", "fx_add", "fx_echo"} <= tools, tools
            r = await c.call_tool("fx_add", {"a": 2, "b": 40})
            assert not r.is_error and text(r) == "42", text(r)
            found = await c.call_tool("discover_tools", {"query": "add two numbers", "limit": 3})
            assert not found.is_error
            assert "fx_add" in text(found), text(found)
            # Repair works as on the socket: "2" is coerced to the number the schema wants.
            r = await c.call_tool("fx_add", {"a": "2", "b": 3})
            assert not r.is_error and text(r) == "5", text(r)


@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_caller(evo_http: Evo, token: str, mode: str) -> None:
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    with anyio.fail_after(TIMEOUT_S):
        async with http_client(evo_http, token, mode) as c:
            r = await c.call_tool("fx_progress", {"steps": 4}, progress_callback=progress)
            assert not r.is_error, text(r)
            assert seen == [1, 2, 3, 4], seen


@pytest.mark.parametrize("mode", MODES)
async def test_cancellation_reaches_the_child(evo_http: Evo, token: str, mode: str) -> None:
    ms = 30_000 + MODES.index(mode)  # one sleep per era, told apart in the log
    with anyio.fail_after(TIMEOUT_S):
        async with http_client(evo_http, token, mode) as c:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await c.call_tool("fx_sleep", {"ms": ms})

                tg.start_soon(call)
                await anyio.to_thread.run_sync(wait_for_log, evo_http, f"sleep {ms} started")
                tg.cancel_scope.cancel()
            await anyio.to_thread.run_sync(wait_for_log, evo_http, f"sleep {ms} cancelled")
            # The client goes on.
            r = await c.call_tool("fx_echo", {"text": "after"})
            assert text(r) == "after"


def answering(action: str, seen: list[str]) -> Any:
    async def callback(_context: Any, params: Any) -> types.ElicitResult:
        seen.append(getattr(params, "message", ""))
        return types.ElicitResult(action=action)

    return callback


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_approval_by_elicitation(evo_http: Evo, token: str, mode: str, action: str) -> None:
    seen: list[str] = []
    with anyio.fail_after(TIMEOUT_S):
        async with http_client(evo_http, token, mode, elicitation_callback=answering(action, seen)) as c:
            r = await c.call_tool("fx_cwd", {})
            assert len(seen) == 1 and "fx_cwd" in seen[0], seen
            if action == "accept":
                assert not r.is_error and text(r).startswith("/"), text(r)
            else:
                assert r.is_error and "declined" in text(r), text(r)


async def test_without_elicitation_a_person_approves_for_that_identity(evo_http: Evo, token: str) -> None:
    other = evo_http.token("sdk-other")
    with anyio.fail_after(TIMEOUT_S):
        async with http_client(evo_http, token, "auto") as c, http_client(evo_http, other, "auto") as o:
            r = await c.call_tool("fx_cwd", {})
            assert r.is_error and "evoctl approve" in text(r), text(r)
            approval = text(r).split("evoctl approve ")[1].split("`")[0]
            pending = evo_http.ctl_json("approvals")["approvals"]
            assert [(a["id"], a["identity"]) for a in pending if a["id"] == approval] == [(approval, "token:sdk")]
            done = evo_http.ctl("approve", approval)
            assert done.returncode == 0, done.stderr
            # Another identity's identical call is not the approved one.
            r = await o.call_tool("fx_cwd", {})
            assert r.is_error and approval not in text(r), text(r)
            r = await c.call_tool("fx_cwd", {})
            assert not r.is_error, text(r)
            r = await c.call_tool("fx_cwd", {})
            assert r.is_error, "an approval passes exactly one call"


@pytest.mark.parametrize("mode", MODES)
async def test_list_changed_reaches_the_client(evo_http: Evo, token: str, mode: str) -> None:
    seen = ListChanged()
    name = f"added_{mode}"
    with anyio.fail_after(TIMEOUT_S):
        async with http_client(evo_http, token, mode, message_handler=seen) as c:
            if mode == "auto":
                async with c.listen(tools_list_changed=True) as sub:
                    await c.call_tool("fx_add_tool", {"name": name})
                    with anyio.fail_after(10):
                        async for _event in sub:
                            break
            else:
                await c.call_tool("fx_add_tool", {"name": name})
                with anyio.fail_after(10):
                    await seen.event.wait()
            kwargs: dict[str, Any] = {"cache_mode": "refresh"} if mode == "auto" else {}
            tools = {t.name for t in (await c.list_tools(**kwargs)).tools}
            assert f"fx_{name}" in tools, tools


async def test_sessions_show_http_sessions_with_their_identity(evo_http: Evo, token: str) -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with http_client(evo_http, token, "legacy") as c:
            await c.call_tool("fx_echo", {"text": "here"})
            sessions = evo_http.ctl_json("sessions")["sessions"]
            mine = [s for s in sessions if s["identity"] == "token:sdk" and s["era"] == "initialize"]
            assert mine and all(s["io"] == "http" for s in mine), sessions
        # The SDK ends its session with DELETE when it closes.
        deadline = time.monotonic() + 10
        while any(s["id"] == mine[0]["id"] for s in evo_http.ctl_json("sessions")["sessions"]):
            assert time.monotonic() < deadline, "the closed session is still listed"
            await anyio.sleep(0.1)
