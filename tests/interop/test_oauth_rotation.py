"""Two runs of one OAuth server alive at once share its refresh token: against an authorization
server that rotates refresh tokens (oidc-provider with `rotateRefreshToken`; a used refresh token
presented again revokes the whole grant), only one of them may spend it. The old run's timer is
refreshing (the authorization server holds each token request 2 s) when `evoctl refresh web`
starts a new run whose token is due too: the new run waits for the old run's refresh and takes
its token, so the authorization server sees one refresh, the grant survives and no login is
needed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from evo_harness import text, wait_for
from evo_harness.oauth import SCOPES, TIMEOUT_S, World, call, login, running_world

pytestmark = pytest.mark.anyio

TOKEN_DELAY_MS = 2000


def as_log(w: World) -> str:
    log: Path = w.auth.log
    return log.read_text(errors="replace")


def token_requests(w: World) -> int:
    return as_log(w).count("token request received")


def only_web(rs_url: str) -> dict[str, Any]:
    return {"mcpServers": {"web": {"type": "http", "url": rs_url, "oauth": {"scopes": SCOPES}}}}


async def test_two_runs_spend_a_rotating_refresh_token_once() -> None:
    as_env = {"ROTATE": "1", "TOKEN_DELAY_MS": str(TOKEN_DELAY_MS)}
    with running_world(as_env=as_env, servers=only_web) as w, anyio.fail_after(TIMEOUT_S):
        await anyio.to_thread.run_sync(
            lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
        )
        await anyio.to_thread.run_sync(login, w)
        await anyio.to_thread.run_sync(
            lambda: wait_for("web not ready after login", lambda: w.server("web")["state"] == "ready", 30, w.diagnostics)
        )
        before = token_requests(w)

        def overlap() -> None:
            # The old run's timer sends its refresh (held at the authorization server)...
            deadline = time.monotonic() + 15
            while token_requests(w) == before:
                assert time.monotonic() < deadline, f"no timed refresh\n{w.diagnostics()}"
                time.sleep(0.02)
            # ...and a new run starts meanwhile, its token due as well (`evoctl refresh` waits
            # for the new run's outcome; one that ends in `login required` is what the wait
            # below reports).
            try:
                w.ctl("refresh", "web", timeout=15)
            except subprocess.TimeoutExpired:
                pass

        await anyio.to_thread.run_sync(overlap)
        s = await anyio.to_thread.run_sync(
            lambda: wait_for(
                "the new run not ready",
                lambda: (x := w.server("web"))["state"] in ("ready", "login_required") and x,
                30,
                w.diagnostics,
            )
        )
        assert s["state"] == "ready" and s["auth"]["state"] == "ok", f"{s}\n{w.diagnostics()}"
        r = await call(w, "web_fx_echo", {"text": "one refresh"})
        assert not r.is_error and text(r) == "one refresh", f"{text(r)}\n{w.diagnostics()}"
        # One refresh for both runs (the next timed one is seconds away), no reuse detected.
        assert token_requests(w) == before + 1, w.diagnostics()
        assert "grant.error" not in as_log(w), w.diagnostics()
        assert "refresh refused" not in w.evo.log.read_text(errors="replace"), w.diagnostics()
        # The grant lives on: the next refresh works too.
        await anyio.sleep(TTL_WAIT)
        r = await call(w, "web_fx_echo", {"text": "still logged in"})
        assert not r.is_error and text(r) == "still logged in", f"{text(r)}\n{w.diagnostics()}"
        assert w.server("web")["auth"]["state"] == "ok", w.diagnostics()
        assert "grant.error" not in as_log(w), w.diagnostics()


# Long enough for the new token to near its expiry and be refreshed (TTL 6 s, held 2 s).
TTL_WAIT = 9
