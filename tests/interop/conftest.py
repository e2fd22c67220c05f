"""Fixtures for evo's interop suite: one real evod with four real MCP children.

The module-scoped ``evo`` fixture starts, in a private temp dir:

* a ``@modelcontextprotocol/server-everything`` in Streamable HTTP mode on a free port
  (reached by evod as the remote server ``web``),
* ``evod`` with the children ``time`` (mcp-server-time, stdio), ``everything``
  (server-everything, stdio), ``web`` (the HTTP one) and ``fx`` (evo-fixture, stdio),

waits (polling ``evoctl status --json`` with a deadline) until every server is ``ready``, and
stops everything again in teardown. evod's stderr goes to ``evod.log`` in the temp dir; a failing
test gets the tail of that log (and of the HTTP server's) appended to its report.

Paths: binaries come from ``$EVO_BIN_DIR`` (default ``<repo>/target/debug``); the npm package
from ``tests/interop/node_modules`` (``tests/run`` installs it, and the Python packages in
``tests/interop/.venv``). ``EVO_INTEROP_KEEP=1`` keeps the temp dir.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest
from harness import Evo, HttpEverything, make_tmp, write_config


@pytest.fixture(scope="module")
def evo() -> Iterator[Evo]:
    tmp = make_tmp()
    http = HttpEverything.start(tmp)
    daemon = Evo(
        tmp=tmp,
        socket=tmp / "evod.sock",
        config=tmp / "mcp.config.json",
        log=tmp / "evod.log",
        http=http,
    )
    try:
        write_config(daemon.config, http.url)
        # One tool needs a person's approval (test_permissions.py).
        (daemon.config.parent / "permissions.yml").write_text("rules:\n  fx_cwd: require_approval\n")
        daemon.start()
        daemon.wait_ready()
        yield daemon
    finally:
        try:
            daemon.stop()
        finally:
            http.stop()
        stopped_cleanly = daemon.proc is None or daemon.proc.returncode == 0
        if os.environ.get("EVO_INTEROP_KEEP") or not stopped_cleanly:
            sys.stderr.write(f"\n[interop] kept {tmp} (evod exit {daemon.proc and daemon.proc.returncode})\n")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        daemon = getattr(item, "funcargs", {}).get("evo")
        if isinstance(daemon, Evo):
            report.sections.append(("evo diagnostics", daemon.diagnostics()))
