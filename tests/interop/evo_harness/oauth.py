"""The OAuth world the OAuth interop tests share: a real authorization server (oidc-provider,
configured by oauth/as.mjs), the protected server behind it, the evod under test, and the
login, call and leak-check steps."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlparse, urlunparse

import anyio
import httpx2
import pytest
import mcp.types as types
from evo_harness.clients import text, unwrapped
from evo_harness.daemon import Evo
from evo_harness.processes import (
    HERE,
    LoggedProcess,
    clean_env,
    evoctl_bin,
    fixture_bin,
    free_port,
    make_tmp,
    node_bin,
    spawn,
    tail,
    wait_for,
)
from evo_harness.servers import write_certificate
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters


TTL_S = 6  # access-token lifetime at the authorization server
SCOPES = ["openid", "offline_access", "mcp"]
TIMEOUT_S = 120.0


def start_as(tmp: Path, resource: str, port: int | None = None, env: dict[str, str] | None = None) -> tuple[LoggedProcess, int]:
    """oidc-provider for `resource` (comma-separated for several), with `env` added."""
    port = port or free_port()
    log = tmp / f"as-{port}.log"
    env = clean_env() | {
        "PORT": str(port),
        "RESOURCE": resource,
        "TTL": str(TTL_S),
        "CC_CLIENT_ID": "headless",
        "CC_CLIENT_SECRET": "headless-secret",
    } | (env or {})
    auth = LoggedProcess.start([node_bin(), str(HERE / "oauth" / "as.mjs")], log, env=env, cwd=HERE)
    auth.wait_started("oidc-provider (oauth/as.mjs)", "authorization server on")
    return auth, port


def start_evod(tmp: Path, name: str, config: dict[str, Any], env: dict[str, str] | None = None) -> Evo:
    """An evod in TMP/NAME with `config`, logging at debug, `env` added."""
    evo = Evo(tmp=tmp / name, mode="legacy", env={"EVO_LOG": "debug"} | (env or {}))
    evo.tmp.mkdir(exist_ok=True)
    evo.write_config(config)
    evo.start()
    return evo


@dataclass
class World:
    tmp: Path
    auth: LoggedProcess | Evo
    as_port: int
    protected: Evo
    rs_port: int
    evo: Evo
    state_dir: Path

    @property
    def rs_url(self) -> str:
        return f"http://127.0.0.1:{self.rs_port}/mcp"

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.as_port}"

    @property
    def socket(self) -> Path:
        return self.evo.socket

    def ctl(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return self.evo.ctl(*args, timeout=timeout)

    def status(self) -> dict[str, Any]:
        done = self.ctl("status", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def server(self, sid: str) -> dict[str, Any]:
        return next((s for s in self.status()["servers"] if s["id"] == sid), {})

    def shim(self) -> StdioServerParameters:
        return self.evo.shim_params("legacy")

    def diagnostics(self) -> str:
        return (
            f"--- evod under test ---\n{tail(self.evo.log, 60)}\n--- protected evod ---\n"
            f"{tail(self.protected.log, 20)}\n--- authorization server ---\n{tail(self.auth.log, 30)}"
        )

    def token_file(self, sid: str) -> dict[str, Any]:
        files = [p for p in (self.state_dir / "oauth").glob(f"{sid}-*.json")]
        assert len(files) == 1, files
        return json.loads(files[0].read_text())


def evo_config(w_rs_url: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    servers: dict[str, Any] = {
        "web": {"type": "http", "url": w_rs_url, "oauth": {"scopes": SCOPES}},
        "cc": {
            "type": "http",
            "url": w_rs_url,
            "oauth": {
                "grant": "client_credentials",
                "client_id": "headless",
                "client_secret": "${CC_SECRET}",
                "scopes": ["mcp"],
            },
        },
    }
    servers.update(extra or {})
    return {"mcpServers": servers}


@contextmanager
def running_world(
    as_env: dict[str, str] | None = None,
    servers: Any = lambda rs_url: evo_config(rs_url),
    more_resources: tuple[str, ...] = (),
    tmp: Path | None = None,
) -> Iterator[World]:
    """The authorization server, the protected evod and the evod under test, whose config
    `servers(rs_url)` gives."""
    tmp = tmp or make_tmp()
    rs_port = free_port()
    rs_url = f"http://127.0.0.1:{rs_port}/mcp"
    procs: list[LoggedProcess | Evo] = []
    try:
        auth, as_port = start_as(tmp, ",".join((rs_url, *more_resources)), env=as_env)
        procs.append(auth)
        issuer = f"http://127.0.0.1:{as_port}"
        protected = start_evod(
            tmp,
            "protected",
            {
                "mcpServers": {"fx": {"command": fixture_bin()}},
                "serve": {
                    "http": {
                        "listen": f"127.0.0.1:{rs_port}",
                        "auth": {"oauth": {"issuer": issuer, "audience": rs_url, "jwks_url": f"{issuer}/jwks"}},
                    }
                },
            },
        )
        procs.append(protected)
        wait_for(
            "the protected evod did not get ready",
            lambda: _ready(rs_port),
            30,
            lambda: tail(protected.log),
        )
        state_dir = tmp / "state"
        evo = start_evod(tmp, "evo", servers(rs_url), {"EVO_STATE_DIR": str(state_dir), "CC_SECRET": "headless-secret"})
        procs.append(evo)
        w = World(tmp, auth, as_port, protected, rs_port, evo, state_dir)
        wait_for("evod under test did not answer", lambda: w.ctl("status").returncode == 0, 30, w.diagnostics)
        yield w
    finally:
        for p in reversed(procs):
            p.stop()
        if not os.environ.get("EVO_INTEROP_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


def _ready(port: int) -> bool:
    try:
        return httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx2.HTTPError:
        return False


def begin_login(w: World, sid: str) -> tuple[subprocess.Popen[str], str]:
    """`evoctl login SID --no-browser --json`: the process and the URL it printed."""
    proc = spawn(
        [evoctl_bin(), "--socket", str(w.socket), "login", sid, "--no-browser", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"evoctl login printed no URL (exit {proc.returncode}): {err}\n{w.diagnostics()}")
    first = json.loads(line)
    assert first["browser"] is False and first["server"] == sid, first
    return proc, first["url"]


def browser(url: str, stop_at: str | None = None) -> httpx2.Response:
    """Does what a person's browser would: follows redirects, fills in oidc-provider's dev login
    form (any login and password) and its consent form. With `stop_at`, stops before requesting
    a URL that starts with it and returns that redirect."""
    with httpx2.Client(follow_redirects=False, timeout=15) as h:
        r = h.get(url)
        for _ in range(30):
            if r.status_code in (301, 302, 303, 307, 308):
                location = urljoin(str(r.url), r.headers["location"])
                if stop_at and location.startswith(stop_at):
                    return r
                r = h.get(location)
                continue
            form = re.search(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', r.text, re.S)
            if r.status_code == 200 and form:
                fields = dict(re.findall(r'<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"', form.group(2)))
                if 'name="login"' in form.group(2):
                    fields |= {"login": "alice", "password": "any"}
                r = h.post(urljoin(str(r.url), form.group(1)), data=fields)
                continue
            return r
    raise AssertionError("too many steps in the browser flow")


def login(w: World, sid: str = "web") -> None:
    proc, url = begin_login(w, sid)
    page = browser(url)
    assert page.status_code == 200 and "logged in" in page.text, (page.status_code, page.text)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, f"{out}\n{err}\n{w.diagnostics()}"
    assert json.loads(out.strip().splitlines()[-1])["message"] == f"logged in to server '{sid}'"


def secrets_of(w: World, sid: str) -> list[str]:
    creds = w.token_file(sid)["credentials"]["token_response"]
    return [v for k, v in creds.items() if k in ("access_token", "refresh_token") and v]


def assert_no_secret_leaks(w: World, sids: list[str]) -> None:
    secrets = [s for sid in sids for s in secrets_of(w, sid)]
    assert secrets
    places = {
        "evod log": w.evo.log.read_text(errors="replace"),
        "status --json": json.dumps(w.status()),
    }
    for path in (w.tmp / "evo" / "cache").rglob("*"):
        if path.is_file():
            places[str(path)] = path.read_text(errors="replace")
    for where, content in places.items():
        for s in secrets:
            assert s not in content, f"a token appears in {where}"
    oauth_dir = w.state_dir / "oauth"
    assert stat.S_IMODE(oauth_dir.stat().st_mode) == 0o700
    for f in oauth_dir.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


async def call(w: World, name: str, args: dict[str, Any]) -> Any:
    async with unwrapped(), Client(w.shim(), mode="legacy") as c:
        return await c.call_tool(name, args)
