"""The official SDK's clients as the tests use them: on an evod's shim or its HTTP endpoint,
with the SDK's exception groups unwrapped, and the small readers of what they get back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from evo_harness.daemon import Evo

# The tools evo itself offers every session.
NATIVE_TOOLS = {"discover_tools", "describe_capability", "describe_tool", "call_tool", "run_code"}


@asynccontextmanager
async def unwrapped() -> AsyncIterator[None]:
    """The SDK's task groups wrap a failing assertion in an ExceptionGroup; re-raise a lone
    exception as itself so pytest shows the plain assertion message."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = []

        def collect(e: BaseException) -> None:
            if isinstance(e, BaseExceptionGroup):
                for inner in e.exceptions:
                    collect(inner)
            else:
                leaves.append(e)

        collect(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


class ListChanged:
    """Counts tools/list_changed notifications seen by a handshake-era client."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method == "notifications/tools/list_changed" or type(root).__name__ == "ToolListChangedNotification":
            self.count += 1
            self.event.set()


@asynccontextmanager
async def dynamic(evo: Evo, mode: str, on_message: ListChanged | None = None) -> AsyncIterator[Client]:
    """An SDK client on a dynamic-discovery session through the shim."""
    async with unwrapped(), Client(evo.shim_params("dynamic"), mode=mode, message_handler=on_message) as client:
        yield client


@asynccontextmanager
async def http_client(evo: Evo, token: str | None, mode: str, **client_kwargs: Any) -> AsyncIterator[Client]:
    """The official SDK's Streamable HTTP client on evo's endpoint with `token`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    verify: Any = evo.ssl_context() if evo.ca else True
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0), verify=verify) as hc,
        unwrapped(),
        Client(streamable_http_client(evo.url, http_client=hc), mode=mode, **client_kwargs) as client,
    ):
        yield client


async def names(client: Client) -> set[str]:
    """The names in a fresh tools/list."""
    kwargs: dict[str, Any] = {}
    if client.protocol_version >= "2026-07-28":
        kwargs["cache_mode"] = "refresh"  # the SDK caches lists on modern sessions
    page = await client.list_tools(**kwargs)
    return {t.name for t in page.tools}


def text(result: Any) -> str:
    """A result's text parts, one a line."""
    return "\n".join(getattr(c, "text", "") for c in result.content)
