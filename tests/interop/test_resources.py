"""Resources, resource templates, prompts and completions through evo, driven by the official
Python SDK in both eras, against published servers: ``@modelcontextprotocol/server-everything``
over stdio and over Streamable HTTP (both list the same URIs: the first in config order owns
them), ``@modelcontextprotocol/server-filesystem`` (which offers neither, so evo never asks it)
and evo's fixture (``--offers``).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from evo_harness import FILESYSTEM_JS, Evo, HttpEverything, everything_js, fixture_bin, make_tmp, node_bin, unwrapped
from mcp.client.client import Client

pytestmark = pytest.mark.anyio

DOC = "demo://resource/static/document/architecture.md"


@pytest.fixture(scope="module")
def offers() -> Iterator[Evo]:
    tmp = make_tmp()
    http = HttpEverything.start(tmp)
    shared = tmp / "shared"
    shared.mkdir()
    (shared / "a.txt").write_text("hello from the filesystem")
    daemon = Evo(tmp=tmp, http=http)
    config = {
        "mcpServers": {
            "everything": {"command": node_bin(), "args": [everything_js(), "stdio"]},
            "web": {"type": "http", "url": http.url},
            "fs": {"command": node_bin(), "args": [str(FILESYSTEM_JS), str(shared)]},
            "fx": {"command": fixture_bin(), "args": ["--offers", "--name", "fx"]},
        }
    }
    daemon.config.write_text(json.dumps(config, indent=2))
    try:
        daemon.start()
        daemon.wait_ready(("everything", "web", "fs", "fx"))
        yield daemon
    finally:
        daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


class Seen:
    """Every server notification a handshake-era client received, by method."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.params: list[Any] = []
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if isinstance(method, str):
            self.methods.append(method)
            self.params.append(getattr(root, "params", None))
            if method == "notifications/resources/updated":
                self.event.set()


@asynccontextmanager
async def session(evo: Evo, mode: str, seen: Seen | None = None) -> AsyncIterator[Client]:
    async with unwrapped(), Client(evo.shim_params("dynamic"), mode=mode, message_handler=seen) as client:
        yield client


def text_of(contents: Any) -> str:
    return "".join(getattr(c, "text", "") or "" for c in contents)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_lists_merge_every_server_first_in_config_order_winning(offers: Evo, mode: str) -> None:
    async with session(offers, mode) as c:
        resources = await c.list_resources()
        uris = [r.uri for r in resources.resources]
        assert DOC in uris and "fx://readme" in uris
        assert len(uris) == len(set(uris)), "a URI two servers list is listed once"
        templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        assert "demo://resource/dynamic/text/{resourceId}" in templates and "fx://echo/{text}" in templates
        assert len(templates) == len(set(templates))
        prompts = {p.name for p in (await c.list_prompts()).prompts}
        assert {"everything_simple-prompt", "web_simple-prompt", "everything_args-prompt", "fx_greet"} <= prompts
    status = offers.status()
    assert status is not None
    dup = next(d for d in status["duplicates"] if d["name"] == DOC)
    assert dup["kept"] == "everything" and dup["skipped"] == ["web"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_reads_gets_and_completions_route_to_the_owner(offers: Evo, mode: str) -> None:
    async with session(offers, mode) as c:
        doc = await c.read_resource(DOC)
        assert "architecture" in text_of(doc.contents).lower()
        # A URI no server lists, matched by a template: routed to its server.
        dynamic = await c.read_resource("demo://resource/dynamic/text/3")
        assert text_of(dynamic.contents)
        blob = await c.read_resource("demo://resource/dynamic/blob/3")
        assert getattr(blob.contents[0], "blob", None)
        mine = await c.read_resource("fx://echo/routed")
        assert text_of(mine.contents) == "routed"
        prompt = await c.get_prompt("everything_args-prompt", {"city": "Lisbon", "state": "Estremadura"})
        assert any("Lisbon" in getattr(m.content, "text", "") for m in prompt.messages)
        done = await c.complete(
            types.PromptReference(type="ref/prompt", name="everything_completable-prompt"),
            {"name": "department", "value": "Eng"},
        )
        assert "Engineering" in done.completion.values
        with pytest.raises(Exception, match="evoctl resources"):
            await c.read_resource("nowhere://at/all")


async def test_updates_reach_only_subscribed_sessions_in_both_eras(offers: Evo) -> None:
    """A handshake-era session subscribes with resources/subscribe, a 2026-07-28 one through its
    listen stream; server-everything's toggle-subscriber-updates makes it send updates of the
    subscribed URIs; a third session that did not subscribe hears none."""
    subscribed, bystander = Seen(), Seen()
    async with (
        session(offers, "legacy", subscribed) as old,
        session(offers, "legacy", bystander) as other,
        session(offers, "auto") as modern,
    ):
        await old.subscribe_resource(DOC)
        async with modern.listen(resource_subscriptions=[DOC]) as sub:
            toggled = await other.call_tool("everything_toggle-subscriber-updates", {})
            try:
                assert not toggled.is_error, toggled
                with anyio.fail_after(10):
                    await subscribed.event.wait()
                with anyio.fail_after(10):
                    async for _event in sub:
                        break
            finally:
                await other.call_tool("everything_toggle-subscriber-updates", {})
        assert any(getattr(p, "uri", None) == DOC for p in subscribed.params)
        assert "notifications/resources/updated" not in bystander.methods
        await old.unsubscribe_resource(DOC)


async def test_a_server_without_resources_or_prompts_is_never_asked(offers: Evo) -> None:
    status = offers.status()
    assert status is not None
    fs = next(s for s in status["servers"] if s["id"] == "fs")
    assert fs["state"] == "ready"
    log = offers.log.read_text(errors="replace")
    for method in ("resources/list", "prompts/list"):
        assert not any(method in line and "server=fs" in line for line in log.splitlines()), method
    # Its tools work as ever.
    async with session(offers, "legacy") as c:
        r = await c.call_tool("call_tool", {"name": "fs_list_allowed_directories", "arguments": {}})
        assert not r.is_error


async def test_evoctl_reads_and_lists(offers: Evo) -> None:
    done = offers.ctl("read", "fx://echo/cli")
    assert done.returncode == 0 and done.stdout == "cli\n", done.stderr
    listed = json.loads(offers.ctl("prompts", "--json").stdout)
    assert any(p["name"] == "everything_args-prompt" and p["server"] == "everything" for p in listed["prompts"])
    blob = offers.ctl("read", "demo://resource/dynamic/blob/1")
    assert blob.returncode == 0 and "--out FILE" in blob.stdout, blob.stdout


async def test_a_childs_resource_list_change_reaches_sessions_in_both_eras(offers: Evo) -> None:
    """server-everything registers a resource at run time (gzip-file-as-resource) and says so with
    notifications/resources/list_changed: evo re-lists it, and sessions hear it (a plain
    notification before 2026-07-28, their listen stream on it) and list the new URI."""
    seen = Seen()
    name = "evo-interop.txt.gz"
    uri = f"demo://resource/session/{name}"
    async with session(offers, "legacy", seen) as old, session(offers, "auto") as modern:
        assert uri not in [r.uri for r in (await old.list_resources()).resources]
        async with modern.listen(resources_list_changed=True) as sub:
            done = await old.call_tool(
                "everything_gzip-file-as-resource",
                {"name": name, "data": "data:text/plain;base64,aGVsbG8gZXZv", "outputType": "resourceLink"},
            )
            assert not done.is_error, done
            with anyio.fail_after(10):
                async for _event in sub:
                    break
        with anyio.fail_after(10):
            while "notifications/resources/list_changed" not in seen.methods:
                await anyio.sleep(0.05)
        assert uri in [r.uri for r in (await old.list_resources()).resources]
        assert uri in [r.uri for r in (await modern.list_resources(cache_mode="refresh")).resources]
