"""Fixtures for evo's interop suite, and its end-of-run check.

The module-scoped ``evo`` fixture starts, in a private temp dir:

* a ``@modelcontextprotocol/server-everything`` in Streamable HTTP mode on a free port
  (reached by evod as the remote server ``web``),
* ``evod`` with the children ``time`` (mcp-server-time, stdio), ``everything``
  (server-everything, stdio), ``web`` (the HTTP one) and ``fx`` (evo-fixture, stdio),

waits (polling ``evoctl status --json`` with a deadline) until every server is ``ready``, and
stops everything again in teardown (the server-everything the ``Evo`` holds then, also when a
test replaced it). evod's log goes to ``evod.log`` in the temp dir; a failing test gets the tail
of that log (and of the HTTP server's) appended to its report.

When the session ends, ``no_process_left_behind`` fails the run if any process it started is
still alive (see evo_harness/processes.py for what counts), and ends those processes.

Paths: binaries come from ``$EVO_BIN_DIR`` (default ``<repo>/target/debug``); the npm package
from ``tests/interop/node_modules`` (``tests/run`` installs it, and the Python packages in
``tests/interop/.venv``). ``EVO_INTEROP_KEEP=1`` keeps the temp dir.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator

import pytest
from evo_harness import Evo, HttpEverything, make_tmp, shared_config
from evo_harness.processes import end_leftovers, leftover_processes

# How long processes ending as the run ends (a browser's helpers, say) get before they count.
LEFTOVER_GRACE_S = 5.0


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind() -> Iterator[None]:
    yield
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (left := leftover_processes()) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        end_leftovers(left)
        pytest.fail("processes of this run were still alive when it ended (now killed):\n" + "\n".join(left.values()), pytrace=False)


@pytest.fixture(scope="module")
def evo() -> Iterator[Evo]:
    tmp = make_tmp()
    daemon = Evo(tmp=tmp)
    try:
        daemon.http = HttpEverything.start(tmp)
        daemon.write_config(shared_config(daemon.http.url))
        # One tool needs a person's approval (test_permissions.py).
        (tmp / "permissions.yml").write_text("rules:\n  fx_cwd: require_approval\n")
        daemon.start()
        daemon.wait_ready()
        yield daemon
    finally:
        daemon.stop()
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
