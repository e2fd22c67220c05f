"""evod as the tests run it, started one way: `Evo` keeps an evod's directory (config, socket,
log, cache), starts and stops it, and speaks to it (evoctl, its HTTP endpoint, the shim's
parameters for the SDK). `start_http_evo` is the evod most HTTP tests share: the fixture child
`fx` and `serve.http` with API tokens and OAuth against an `Issuer`."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mcp.client.stdio import StdioServerParameters

from evo_harness.processes import (
    LOG_TAIL_LINES,
    clean_env,
    everything_js,
    evoctl_bin,
    evod_bin,
    fixture_bin,
    free_port,
    make_tmp,
    node_bin,
    spawn,
    stop,
    tail,
)
from evo_harness.servers import HttpEverything, Issuer

# Ids of the children in the shared evod's config (conftest.py), in config order.
SERVER_IDS = ("time", "everything", "web", "fx")

READY_TIMEOUT_S = 90.0  # cold node/python starts on a busy CI machine can be slow
HTTP_START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


@dataclass
class Evo:
    """One evod in `tmp` (mcp.config.json, evod.sock, evod.log, cache/ there; its working
    directory). `env` and `mode` (evod's --mode) are what it starts with; `port` is its
    serve.http port when it serves HTTP (`ca`: the CA file clients trust when it serves HTTPS).
    `http` is the server-everything beside it and `issuer` the OAuth issuer it trusts: both
    are stopped with it, whichever object a test left there."""

    tmp: Path
    http: HttpEverything | None = None
    env: dict[str, str] = field(default_factory=dict)
    mode: str | None = None
    port: int | None = None
    ca: Path | None = None
    issuer: Issuer | None = None
    proc: subprocess.Popen[bytes] | None = None
    evoctl: str = field(default_factory=evoctl_bin)

    @property
    def config(self) -> Path:
        return self.tmp / "mcp.config.json"

    @property
    def socket(self) -> Path:
        return self.tmp / "evod.sock"

    @property
    def log(self) -> Path:
        return self.tmp / "evod.log"

    @property
    def scheme(self) -> str:
        return "https" if self.ca else "http"

    @property
    def url(self) -> str:
        """Its MCP endpoint on serve.http."""
        return f"{self.scheme}://127.0.0.1:{self.port}/mcp"

    def write_config(self, config: dict[str, Any]) -> None:
        self.config.write_text(json.dumps(config, indent=2))

    def start(self) -> None:
        with self.log.open("wb") as out:
            argv = [evod_bin(), "--config", str(self.config), "--socket", str(self.socket), "--cache-dir", str(self.tmp / "cache")]
            self.proc = spawn(
                argv + (["--mode", self.mode] if self.mode else []),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=clean_env() | {"NO_COLOR": "1"} | self.env,  # plain text in evod.log
                cwd=self.tmp,
            )

    def stop(self) -> None:
        """SIGTERM (evod's graceful stop, as `evoctl stop`), then the servers beside it."""
        try:
            if self.proc is not None:
                stop(self.proc, timeout=STOP_TIMEOUT_S)
        finally:
            if self.http is not None:
                self.http.stop()
            if self.issuer is not None:
                self.issuer.stop()

    def ctl(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.evoctl, "--socket", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
        )

    def ctl_json(self, *args: str) -> Any:
        done = self.ctl(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def token(self, name: str, *args: str) -> str:
        """`evoctl token create NAME ARGS…`: the API token."""
        done = self.ctl("token", "create", name, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def status(self) -> dict[str, Any] | None:
        """`evoctl status --json`, or None while the daemon is not answering yet."""
        try:
            done = self.ctl("status", "--json", timeout=15)
        except subprocess.TimeoutExpired:
            return None
        if done.returncode != 0:
            return None
        try:
            return json.loads(done.stdout)
        except json.JSONDecodeError:
            return None

    def shim_params(self, discovery: str = "legacy", *extra: str) -> StdioServerParameters:
        # --no-autostart: if evod died, fail loudly instead of spawning a second daemon with a
        # default config that would answer with a different tool set.
        return StdioServerParameters(
            command=self.evoctl,
            args=["--socket", str(self.socket), "shim", "--mode", discovery, "--no-autostart", *extra],
        )

    def diagnostics(self) -> str:
        parts = []
        if self.proc is not None:
            rc = self.proc.poll()
            parts.append(f"evod pid {self.proc.pid}: " + ("running" if rc is None else f"exited with {rc}"))
        parts.append(f"--- evod log ({self.log}), last {LOG_TAIL_LINES} lines ---\n{tail(self.log)}")
        if self.http is not None:
            parts.append(f"--- server-everything http log ({self.http.log}) ---\n{tail(self.http.log, 40)}")
        return "\n".join(parts)

    def wait_ready(self, ids: tuple[str, ...] = SERVER_IDS) -> dict[str, Any]:
        """Until every server in `ids` is `ready` (evod exiting first fails the test)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"evod exited during startup\n{self.diagnostics()}", pytrace=False)
            last = self.status()
            if last is not None:
                states = {s.get("id"): s.get("state") for s in last.get("servers", [])}
                if all(states.get(i) == "ready" for i in ids):
                    return last
            time.sleep(0.1)
        pytest.fail(
            f"evod servers not all ready within {READY_TIMEOUT_S:.0f}s; last status:\n"
            f"{json.dumps(last, indent=2)}\n{self.diagnostics()}",
            pytrace=False,
        )

    def wait_answering(self) -> None:
        """Until evod answers on its control socket, whatever its servers' states."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.status() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"evod does not answer\n{self.diagnostics()}", pytrace=False)
            time.sleep(0.1)

    def wait_http_ready(self, timeout: float = HTTP_START_TIMEOUT_S) -> None:
        """Until serve.http answers /healthz, then /readyz (an OAuth key set is fetched at
        start: ready once it is)."""
        deadline = time.monotonic() + timeout
        while not self.healthy():
            assert self.proc is not None
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"evod did not serve HTTP:\n{tail(self.log)}", pytrace=False)
            time.sleep(0.05)
        while self.get("/readyz")[0] != 200:
            if time.monotonic() > deadline:
                pytest.fail(f"evod not ready: {self.get('/readyz')}\n{tail(self.log)}", pytrace=False)
            time.sleep(0.05)

    def healthy(self) -> bool:
        try:
            return self.get("/healthz")[0] == 200
        except OSError:
            return False
        except Exception:  # an SSL error while the certificate is being read
            return False

    def ssl_context(self) -> ssl.SSLContext | None:
        """What a client trusting `ca` connects with (None over plain HTTP)."""
        return None if self.ca is None else ssl.create_default_context(cafile=str(self.ca))

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(f"{self.scheme}://127.0.0.1:{self.port}{path}", headers=headers or {})
        return self._send(req)

    def post(self, body: dict[str, Any], token: str | None) -> tuple[int, dict[str, str], bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return self._send(urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST"))

    def _send(self, req: urllib.request.Request) -> tuple[int, dict[str, str], bytes]:
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.ssl_context()) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def cleanup(self) -> None:
        """Removes its directory unless evod ended badly (then it is kept to look at)."""
        if self.proc is None or self.proc.returncode == 0:
            shutil.rmtree(self.tmp, ignore_errors=True)


E = TypeVar("E", bound=Evo)


@contextmanager
def evo_with(
    config: dict[str, Any],
    ready: tuple[str, ...],
    tmp: Path | None = None,
    make: Callable[[Path], E] = Evo,  # type: ignore[assignment]
) -> Iterator[E]:
    """An evod of its own (`make` gives it its directory, `tmp` or a new one) with `config`,
    started and its servers `ready` ready; stopped and its directory removed after."""
    tmp = tmp or make_tmp()
    (tmp / "mcp.config.json").write_text(json.dumps(config))
    daemon = make(tmp)
    try:
        daemon.start()
        daemon.wait_ready(ready)
        yield daemon
    finally:
        daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def shared_config(http_url: str) -> dict[str, Any]:
    """The shared evod's config (conftest.py): four real children, two profiles."""
    return {
        "mcpServers": {
            "time": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            },
            "everything": {"command": node_bin(), "args": [everything_js(), "stdio"]},
            "web": {"type": "http", "url": http_url},
            "fx": {"command": fixture_bin(), "args": []},
        },
        # Sessions that ask for one list its tools in every mode (test_profiles.py).
        "profiles": {"clock": ["time_*"], "maths": ["fx_add"]},
    }


def start_http_evo(
    permissions: str = "", required_scopes: list[str] | None = None, tls: tuple[bytes, bytes] | None = None
) -> Evo:
    """An evod serving Streamable HTTP on a free loopback port: the fixture child `fx`, API
    tokens, and OAuth against a new `Issuer`; ready once /readyz says so. `tls`: a PEM
    certificate and key to serve HTTPS with (written to cert.pem, key.pem; the certificate is
    then the CA clients trust)."""
    evo = Evo(tmp=make_tmp(), port=free_port(), issuer=Issuer(), mode="legacy", env={"EVO_LOG": "info,evo_daemon=debug"})
    if tls is not None:
        (evo.tmp / "cert.pem").write_bytes(tls[0])
        (evo.tmp / "key.pem").write_bytes(tls[1])
        evo.ca = evo.tmp / "cert.pem"
    assert evo.issuer is not None
    oauth: dict[str, Any] = {
        "issuer": evo.issuer.url,
        "audience": evo.url,
        "jwks_url": f"{evo.issuer.url}/jwks.json",
        "role_claim": "evo_role",
        "profile_claim": "evo_profile",
    }
    if required_scopes:
        oauth["required_scopes"] = required_scopes
    http: dict[str, Any] = {"listen": f"127.0.0.1:{evo.port}", "auth": {"oauth": oauth}}
    if tls is not None:
        http["tls"] = {"cert": "cert.pem", "key": "key.pem"}
    evo.write_config(
        {
            "mcpServers": {"fx": {"command": fixture_bin()}},
            "serve": {"http": http},
            # Identities' profiles must be defined (test_http_oauth.py carries one in a claim).
            "profiles": {"support": ["fx_echo"]},
        }
    )
    if permissions:
        (evo.tmp / "permissions.yml").write_text(permissions)
    try:
        evo.start()
        evo.wait_http_ready()
    except BaseException:
        evo.stop()
        raise
    return evo


def http_evo_fixture(**kwargs: Any) -> Iterator[Evo]:
    """`start_http_evo(**kwargs)` for the length of a fixture (or a `for` loop)."""
    evo = start_http_evo(**kwargs)
    try:
        yield evo
    finally:
        evo.stop()
        evo.cleanup()
