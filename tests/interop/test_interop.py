"""Interop: the official Python MCP SDK, through `evoctl shim`, against real MCP servers.

Each test runs in both protocol eras the SDK speaks: ``legacy`` (initialize handshake,
2025-11-25) and ``auto`` (``server/discover``, 2026-07-28). What evo shows and returns is
compared with what the same SDK gets from each child directly.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from evo_harness import NATIVE_TOOLS, SERVER_IDS, Evo, everything_js, fixture_bin, node_bin, unwrapped
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, Tool
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
TEST_TIMEOUT_S = 90.0  # per test: a hang fails with a message instead of stalling CI
LIST_PAGE_CAP = 100

# Fixed arguments for the compared calls. convert_time has no date input (it uses today), so
# the comparison tolerates a date rollover between the calls (see test_calls_match_children).
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "time": ("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    "everything": ("echo", {"message": "hello from evo interop"}),
    "web": ("echo", {"message": "hello over streamable http"}),
    "fx": ("add", {"a": 2, "b": 3}),
}


def expected_version(mode: str) -> tuple[str, ...]:
    return HANDSHAKE_PROTOCOL_VERSIONS if mode == "legacy" else MODERN_PROTOCOL_VERSIONS


@asynccontextmanager
async def shim(evo: Evo, mode: str) -> AsyncIterator[Client]:
    """An SDK client on a legacy-discovery evo session, negotiated in `mode`'s era."""
    async with unwrapped(), Client(evo.shim_params(), mode=mode) as client:
        version = client.protocol_version
        assert version in expected_version(mode), (
            f"mode={mode!r} through evo negotiated {version!r}, expected one of {expected_version(mode)}"
        )
        if mode == "legacy":
            assert version == "2025-11-25", f"legacy handshake should reach the newest handshake era, got {version}"
        else:
            assert version == "2026-07-28", f"auto should reach the 2026-07-28 era through evo, got {version}"
        yield client


def direct_target(evo: Evo, server_id: str) -> StdioServerParameters | str:
    """How the SDK reaches the same child without evo (same command line as in evod's config)."""
    if server_id == "time":
        return StdioServerParameters(command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"])
    if server_id == "everything":
        return StdioServerParameters(command=node_bin(), args=[everything_js(), "stdio"])
    if server_id == "web":
        return evo.http.url
    if server_id == "fx":
        return StdioServerParameters(command=fixture_bin())
    raise AssertionError(server_id)


@asynccontextmanager
async def direct(evo: Evo, server_id: str, mode: str) -> AsyncIterator[Client]:
    async with unwrapped(), Client(direct_target(evo, server_id), mode=mode) as client:
        yield client


async def list_all(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(LIST_PAGE_CAP):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise AssertionError(f"tools/list did not end within {LIST_PAGE_CAP} pages")


def dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


def texts(result: CallToolResult) -> list[str]:
    return [c.text for c in result.content if c.type == "text"]


def outcome(result: CallToolResult) -> dict[str, Any]:
    """The parts of a result a proxy must pass on unchanged."""
    return {
        "isError": bool(result.is_error),
        "content": [dump(c) for c in result.content],
        "structuredContent": result.structured_content,
    }


def by_server(tools: list[Tool]) -> dict[str, dict[str, Tool]]:
    """Proxied tools grouped by server id, keyed by the upstream (unprefixed) name."""
    groups: dict[str, dict[str, Tool]] = {}
    for tool in tools:
        for server_id in SERVER_IDS:
            prefix = f"{server_id}_"
            if tool.name.startswith(prefix):
                groups.setdefault(server_id, {})[tool.name[len(prefix) :]] = tool
                break
    return groups


@pytest.mark.parametrize("mode", MODES)
async def test_list_matches_children(evo: Evo, mode: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with shim(evo, mode) as client:
            through_evo = await list_all(client)
        names = [t.name for t in through_evo]
        assert len(names) == len(set(names)), f"duplicate names in evo's tools/list: {sorted(names)}"
        missing_native = NATIVE_TOOLS - set(names)
        assert not missing_native, f"native tools missing from evo's list: {missing_native}"
        groups = by_server(through_evo)

        for server_id in SERVER_IDS:
            async with direct(evo, server_id, mode) as child:
                upstream = {t.name: t for t in await list_all(child)}
            proxied = groups.get(server_id, {})
            assert upstream, f"{server_id} listed no tools directly"
            assert set(proxied) == set(upstream), (
                f"{server_id}: names differ (evo minus prefix vs direct)\n"
                f"  only through evo: {sorted(set(proxied) - set(upstream))}\n"
                f"  only direct:      {sorted(set(upstream) - set(proxied))}"
            )
            for name, tool in upstream.items():
                assert proxied[name].input_schema == tool.input_schema, (
                    f"{server_id}_{name}: inputSchema differs\n"
                    f"  through evo: {proxied[name].input_schema}\n  direct:      {tool.input_schema}"
                )

        # Nothing but native tools and the four servers' tools.
        stray = set(names) - NATIVE_TOOLS - {f"{s}_{n}" for s, g in groups.items() for n in g}
        assert not stray, f"unexpected tools in evo's list: {sorted(stray)}"


@pytest.mark.parametrize("mode", MODES)
async def test_calls_match_children(evo: Evo, mode: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with shim(evo, mode) as client:
            for server_id, (tool, args) in CALLS.items():
                async with direct(evo, server_id, mode) as child:
                    before = await child.call_tool(tool, args)
                    proxied = await client.call_tool(f"{server_id}_{tool}", args)
                    after = await child.call_tool(tool, args)
                assert not before.is_error, f"direct {server_id}.{tool} failed: {dump(before)}"
                # `before` and `after` bracket the proxied call, so a result that depends on the
                # clock (convert_time uses today's date) matches at least one of them.
                assert outcome(proxied) in (outcome(before), outcome(after)), (
                    f"{server_id}_{tool} through evo differs from the direct call\n"
                    f"  through evo: {outcome(proxied)}\n  direct:      {outcome(before)}"
                )
                assert texts(proxied), f"{server_id}_{tool} returned no text: {dump(proxied)}"

            # Spot-check the values themselves, not only the equality.
            fx = await client.call_tool("fx_add", {"a": 2, "b": 3})
            assert (fx.is_error, texts(fx)) == (False, ["5"]), dump(fx)
            echo = await client.call_tool("web_echo", {"message": "ping"})
            assert (echo.is_error, texts(echo)) == (False, ["Echo: ping"]), dump(echo)
            tokyo = await client.call_tool("time_convert_time", CALLS["time"][1])
            assert not tokyo.is_error and tokyo.structured_content is not None, dump(tokyo)
            assert "T21:00:00+09:00" in tokyo.structured_content["target"]["datetime"], dump(tokyo)


@pytest.mark.parametrize("mode", MODES)
async def test_native_call_tool_routes(evo: Evo, mode: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with shim(evo, mode) as client:
            result = await client.call_tool("call_tool", {"name": "fx_echo", "arguments": {"text": "hi"}})
            assert not result.is_error, dump(result)
            assert texts(result) == ["hi"], dump(result)

            added = await client.call_tool("call_tool", {"name": "fx_add", "arguments": {"a": 2, "b": 3}})
            assert (added.is_error, texts(added)) == (False, ["5"]), dump(added)


@pytest.mark.parametrize("mode", MODES)
async def test_shim_hands_the_sdk_pipes_to_the_daemon(evo: Evo, mode: str) -> None:
    # The SDK launches the shim on pipes: the shim hands them to evod, which
    # then reads and writes the client's stdio itself (sessions show io=stdio).
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with shim(evo, mode) as client:
            result = await client.call_tool("fx_echo", {"text": "handed over"})
            assert (result.is_error, texts(result)) == (False, ["handed over"]), dump(result)
            done = await anyio.to_thread.run_sync(lambda: evo.ctl("sessions", "--json"))
            assert done.returncode == 0, done.stderr
            ios = [s["io"] for s in json.loads(done.stdout)["sessions"]]
            # Sessions of earlier tests may still be closing: all are handed over.
            assert ios and set(ios) == {"stdio"}, ios


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_is_tool_error(evo: Evo, mode: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with shim(evo, mode) as client:
            # A JSON-RPC error would raise MCPError here; the contract is an isError result.
            result = await client.call_tool("fx_no_such_tool", {"x": 1})
            assert result.is_error, f"unknown tool did not give isError: {dump(result)}"
            message = " ".join(texts(result))
            assert "fx_no_such_tool" in message, f"error does not name the tool: {dump(result)}"

            # The session goes on: listing and calling still work.
            assert "fx_add" in {t.name for t in await list_all(client)}
            after = await client.call_tool("fx_add", {"a": 2, "b": 3})
            assert (after.is_error, texts(after)) == (False, ["5"]), dump(after)


@pytest.mark.parametrize("mode", MODES)
async def test_child_tool_error_passes_through(evo: Evo, mode: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        message = f"deliberate failure ({mode})"
        async with shim(evo, mode) as client:
            result = await client.call_tool("fx_fail", {"message": message})
            assert result.is_error, f"fx_fail did not give isError: {dump(result)}"
            assert message in " ".join(texts(result)), dump(result)
            async with direct(evo, "fx", mode) as child:
                upstream = await child.call_tool("fail", {"message": message})
            assert outcome(result) == outcome(upstream), (
                f"tool error through evo differs from the direct one\n"
                f"  through evo: {outcome(result)}\n  direct:      {outcome(upstream)}"
            )
            # The same session goes on after a tool error.
            ok = await client.call_tool("fx_echo", {"text": "still here"})
            assert (ok.is_error, texts(ok)) == (False, ["still here"]), dump(ok)


@pytest.mark.parametrize("mode", MODES)
async def test_every_progress_notification_arrives_before_the_result(evo: Evo, mode: str) -> None:
    # server-everything's long-running operation reports each step; through evo the SDK sees
    # all of them, in order, by the time the result arrives (the last one used to be lost).
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with shim(evo, mode) as client:
            for attempt in range(3):
                seen: list[float] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    seen.append(value)

                result = await client.call_tool(
                    "everything_trigger-long-running-operation",
                    {"duration": 0.3, "steps": 5},
                    progress_callback=progress,
                )
                assert not result.is_error, dump(result)
                assert seen == [1, 2, 3, 4, 5], f"attempt {attempt}: {seen}"


async def test_child_log_messages_reach_a_client_that_asked(evo: Evo) -> None:
    # The handshake era (logging is deprecated from 2026-07-28 on): after logging/setLevel the
    # SDK's logging callback sees the child's messages at that level and above, named by server.
    seen: list[tuple[str, str | None, Any]] = []

    async def on_log(params: Any) -> None:
        seen.append((params.level, params.logger, params.data))

    with anyio.fail_after(TEST_TIMEOUT_S):
        async with unwrapped(), Client(evo.shim_params(), mode="legacy", logging_callback=on_log) as client:
            await client.set_logging_level("error")
            await client.call_tool("fx_echo", {"text": "quiet", "log_level": "info"})
            await client.call_tool("fx_echo", {"text": "loud", "log_level": "critical"})
            with anyio.fail_after(5):
                while not seen:
                    await anyio.sleep(0.05)
            assert seen == [("critical", "fx/fixture", "loud")], seen


@pytest.mark.parametrize("mode", MODES)
async def test_results_over_the_limit_are_cut_with_a_note(evo: Evo, mode: str) -> None:
    """limits.max_result_bytes (1 MiB by default): a larger result reaches the SDK cut at a
    character boundary, with a closing note and `_meta["evo/truncated"]`; a smaller one is
    passed on exactly as the child sent it."""
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with shim(evo, mode) as client:
            big = await client.call_tool("fx_big", {"bytes": 3 * 1024 * 1024 // 2})
            assert not big.is_error, dump(big)
            parts = texts(big)
            assert len(parts) == 2, [p[:80] for p in parts]
            kept, note = parts
            assert 900_000 < len(kept) < 1024 * 1024 and set(kept) == {"x"}, len(kept)
            assert note.startswith("[evo: this result was cut"), note
            assert "A narrower call" in note, note
            cut = dump(big)["_meta"]["evo/truncated"]
            assert cut["limit_bytes"] == 1024 * 1024, cut
            assert cut["original_bytes"] > 3 * 1024 * 1024 // 2, cut
            assert cut["text_bytes_left_out"] == 3 * 1024 * 1024 // 2 - len(kept), cut
            small = await client.call_tool("fx_big", {"bytes": 1000})
            async with direct(evo, "fx", mode) as child:
                upstream = await child.call_tool("big", {"bytes": 1000})
            assert outcome(small) == outcome(upstream)
