"""The first connection of a fresh start, as a new user makes it (issue 36, point 1): no evod
running and no cache, a client through ``evoctl shim`` (which starts evod, as desktop clients
do) asks at once, while the children are still starting. Its first answers wait for servers
that are starting, up to ``discovery.startup_wait_ms``: ``initialize`` advertises resources and
prompts, the instructions list the tools, the first lists are complete, a call by exact name
works, and ``resources/list`` answers (never -32601 while a server has not said what it offers).
With a cache nothing waits. Driven by the official Python SDK in both eras, the TypeScript SDK
and the MCP Inspector's CLI, against ``mcp-server-time`` (PyPI) and
``@modelcontextprotocol/server-everything`` (npm, which has resources and prompts).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from evo_harness import HERE, clean_env, everything_js, evoctl_bin, fixture_bin, make_tmp, node_bin, text, unwrapped, wait_for
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.anyio

DOC = "demo://resource/static/document/architecture.md"
TS_SCRIPT = HERE / "ts" / "first_start.mjs"
INSPECTOR = HERE / "node_modules" / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "cli.js"


@dataclass
class FreshStart:
    """A directory with a config and nothing else: no evod, no cache. Clients reach it through
    ``evoctl shim``, whose autostarted evod finds the config, cache and log through the
    environment it inherits (as a desktop client's shim does)."""

    tmp: Path

    @property
    def socket(self) -> Path:
        return self.tmp / "evod.sock"

    @property
    def env(self) -> dict[str, str]:
        return clean_env() | {
            "EVO_CONFIG": str(self.tmp / "mcp.config.json"),
            "EVO_CACHE_DIR": str(self.tmp / "cache"),
            "XDG_STATE_HOME": str(self.tmp / "state"),
            "NO_COLOR": "1",
        }

    def write_config(self, servers: dict[str, Any], startup_wait_ms: int | None = None) -> None:
        config: dict[str, Any] = {"mcpServers": servers}
        if startup_wait_ms is not None:
            config["discovery"] = {"startup_wait_ms": startup_wait_ms}
        (self.tmp / "mcp.config.json").write_text(json.dumps(config, indent=2))

    def shim(self, discovery: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=evoctl_bin(),
            args=["--socket", str(self.socket), "shim", "--mode", discovery],
            env=self.env,
        )

    def shim_argv(self, discovery: str) -> list[str]:
        return [evoctl_bin(), "--socket", str(self.socket), "shim", "--mode", discovery]

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [evoctl_bin(), "--socket", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=30,
            env=self.env,
            stdin=subprocess.DEVNULL,
        )

    def running(self) -> bool:
        return self.ctl("status", "--json").returncode == 0

    def ready(self, *ids: str) -> None:
        def all_ready() -> bool:
            done = self.ctl("status", "--json")
            if done.returncode != 0:
                return False
            states = {s["id"]: s["state"] for s in json.loads(done.stdout)["servers"]}
            return all(states.get(i) == "ready" for i in ids)

        wait_for(f"servers {ids} ready", all_ready, within=90, diagnostics=self.log)

    def stop(self) -> None:
        """``evoctl stop``, then until the socket no longer answers."""
        if self.running():
            self.ctl("stop")
            wait_for("evod to stop", lambda: not self.running(), within=30, diagnostics=self.log)

    def log(self) -> str:
        path = self.tmp / "state" / "evo" / "evod.log"
        return path.read_text(errors="replace")[-8000:] if path.exists() else "(no evod.log)"


@pytest.fixture
def fresh() -> Iterator[FreshStart]:
    start = FreshStart(make_tmp())
    start.write_config(
        {
            "time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
            "everything": {"command": node_bin(), "args": [everything_js(), "stdio"]},
        }
    )
    try:
        yield start
    finally:
        start.stop()
        shutil.rmtree(start.tmp, ignore_errors=True)


@asynccontextmanager
async def first_client(start: FreshStart, discovery: str, mode: str) -> AsyncIterator[Client]:
    """The SDK client through a shim that starts evod: nothing runs before it."""
    assert not start.running(), "evod already runs: this would not be a first start"
    async with unwrapped(), Client(start.shim(discovery), mode=mode) as client:
        yield client


def advertises_offers(client: Client, completions: bool = True) -> None:
    """Resources and prompts with listChanged, and completions while a server may offer them."""
    caps = client.server_capabilities
    assert caps.resources is not None and caps.resources.list_changed, caps
    assert caps.prompts is not None and caps.prompts.list_changed, caps
    if completions:
        assert caps.completions is not None, caps


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_first_answers_of_a_fresh_start_are_complete(fresh: FreshStart, mode: str) -> None:
    """Legacy discovery lists every tool: the first tools/list has the time tools, a call by
    exact name works, and resources/list has server-everything's resources."""
    async with first_client(fresh, "legacy", mode) as c:
        if mode == "legacy":
            advertises_offers(c)
        tools = {t.name for t in (await c.list_tools()).tools}
        assert {"time_get_current_time", "time_convert_time", "everything_echo"} <= tools, tools
        resources = [r.uri for r in (await c.list_resources()).resources]
        assert DOC in resources, resources
        prompts = {p.name for p in (await c.list_prompts()).prompts}
        assert "everything_simple-prompt" in prompts, prompts
        now = await c.call_tool("time_get_current_time", {"timezone": "UTC"})
        assert not now.is_error, text(now)
        assert "UTC" in text(now)


async def test_the_first_instructions_list_the_tools_and_a_call_by_name_waits(fresh: FreshStart) -> None:
    """Dynamic discovery: the instructions of the first initialize list the time tools, and a
    call by exact name works before any list."""
    async with first_client(fresh, "dynamic", "legacy") as c:
        advertises_offers(c)
        instructions = c.instructions or ""
        assert "time_get_current_time" in instructions, instructions
        assert "still starting" not in instructions, instructions
        now = await c.call_tool("time_get_current_time", {"timezone": "UTC"})
        assert not now.is_error, text(now)


async def test_a_call_by_name_as_the_first_request_waits_for_its_server(fresh: FreshStart) -> None:
    """The first request of a 2026-07-28 session is a call by exact name of a server still
    starting: it waits for it instead of answering tool_not_found."""
    async with first_client(fresh, "dynamic", "auto") as c:
        now = await c.call_tool("time_get_current_time", {"timezone": "UTC"})
        assert not now.is_error, text(now)


async def test_with_a_cache_nothing_waits(fresh: FreshStart) -> None:
    """A server slow to start (5 s) with a startup wait longer than that: the first start
    waits for it; once its tools are cached, the next first connection is answered at once
    (its tools known from the cache) while it is still starting."""
    fresh.write_config(
        {"fx": {"command": fixture_bin(), "args": ["--offers", "--delay-start-ms", "5000"]}},
        startup_wait_ms=30000,
    )
    began = time.monotonic()
    async with first_client(fresh, "dynamic", "legacy") as c:
        waited = time.monotonic() - began
        assert "fx_add" in (c.instructions or "")
        assert waited >= 4.0, f"answered after {waited:.1f} s, before fx had started"
    fresh.ready("fx")
    fresh.stop()
    began = time.monotonic()
    async with first_client(fresh, "dynamic", "legacy") as c:
        waited = time.monotonic() - began
        assert "fx_add" in (c.instructions or "")
        assert waited < 4.0, f"answered after {waited:.1f} s with a cache"
        # What the cache says fx offers: resources and prompts, no completions.
        advertises_offers(c, completions=False)


async def test_past_the_bound_the_instructions_say_what_is_still_starting(fresh: FreshStart) -> None:
    """A server that takes longer than discovery.startup_wait_ms: initialize answers at the
    bound, its instructions name the server still starting, resources/list answers what is
    known so far (empty, not -32601), and its tools arrive later."""
    fresh.write_config(
        {"slow": {"command": fixture_bin(), "args": ["--offers", "--delay-start-ms", "8000"]}},
        startup_wait_ms=500,
    )
    began = time.monotonic()
    async with first_client(fresh, "dynamic", "legacy") as c:
        waited = time.monotonic() - began
        assert waited < 6.0, f"initialize waited {waited:.1f} s past a 0.5 s bound"
        instructions = c.instructions or ""
        assert "still starting" in instructions and "slow" in instructions, instructions
        advertises_offers(c)
        assert (await c.list_resources()).resources == []
        assert (await c.list_prompts()).prompts == []
        fresh.ready("slow")
        resources = [r.uri for r in (await c.list_resources()).resources]
        assert "fx://readme" in resources, resources


def run_node(argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def test_the_typescript_sdk_sees_resources_on_a_fresh_start(fresh: FreshStart) -> None:
    """The official TypeScript SDK's stdio client through the shim, on a fresh start."""
    assert not fresh.running()
    done = run_node([node_bin(), str(TS_SCRIPT), *fresh.shim_argv("dynamic")], fresh.env)
    assert done.returncode == 0, done.stderr + fresh.log()
    report = json.loads(done.stdout)
    assert report["capabilities"].get("resources", {}).get("listChanged") is True, report
    assert report["capabilities"].get("prompts", {}).get("listChanged") is True, report
    assert "time_get_current_time" in report["instructions"], report
    assert DOC in report["resources"], report
    assert "UTC" in report["now"], report


def test_the_inspector_cli_calls_a_tool_on_a_fresh_start(fresh: FreshStart) -> None:
    """The MCP Inspector's CLI (``--cli``), as the issue's user ran it: ``tools/call
    time_get_current_time`` through a shim that starts evod."""
    if not INSPECTOR.is_file():
        pytest.skip(f"the MCP Inspector is not installed ({INSPECTOR}); `npm ci` in tests/interop installs it")
    assert not fresh.running()
    # Its config file names the shim as a desktop client's does, with the environment it
    # passes on (config, cache and log of this fresh start).
    config = fresh.tmp / "inspector.json"
    shim = fresh.shim_argv("dynamic")
    env = {k: v for k, v in fresh.env.items() if k.startswith(("EVO_", "XDG_"))}
    config.write_text(json.dumps({"mcpServers": {"evo": {"command": shim[0], "args": shim[1:], "env": env}}}))
    argv = [node_bin(), str(INSPECTOR), "--cli", "--config", str(config), "--server", "evo"]
    argv += ["--method", "tools/call", "--tool-name", "time_get_current_time", "--tool-arg", "timezone=UTC"]
    done = run_node(argv, fresh.env)
    assert done.returncode == 0, done.stdout + done.stderr + fresh.log()
    assert "tool_not_found" not in done.stdout and "UTC" in done.stdout, done.stdout
