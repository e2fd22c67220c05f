"""Harness for evo's interop suite: locating binaries, the HTTP server-everything, evod.

Paths: binaries come from ``$EVO_BIN_DIR`` (default ``<repo>/target/debug``); the npm package
from ``tests/interop/node_modules`` (``tests/run`` installs it). See conftest.py for the fixtures.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import StdioServerParameters

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BIN_DIR = Path(os.environ.get("EVO_BIN_DIR") or REPO / "target" / "debug")
EVERYTHING_JS = HERE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"

# Ids of the children in evod's config, in config order.
SERVER_IDS = ("time", "everything", "web", "fx")

READY_TIMEOUT_S = 90.0  # cold node/python starts on a busy CI machine can be slow
HTTP_START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
LOG_TAIL_LINES = 150


def _exe(path: Path, hint: str) -> str:
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"missing executable {path}: {hint}", pytrace=False)
    return str(path)


def evod_bin() -> str:
    return _exe(BIN_DIR / "evod", "run `cargo build --workspace` (or set EVO_BIN_DIR)")


def evoctl_bin() -> str:
    return _exe(BIN_DIR / "evoctl", "run `cargo build --workspace` (or set EVO_BIN_DIR)")


def fixture_bin() -> str:
    return _exe(BIN_DIR / "evo-fixture", "run `cargo build --workspace` (or set EVO_BIN_DIR)")


def node_bin() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH (Node 20 is required for server-everything)", pytrace=False)
    return node


def everything_js() -> str:
    if not EVERYTHING_JS.is_file():
        pytest.fail(f"missing {EVERYTHING_JS}: run tests/run (or `npm ci` in {HERE})", pytrace=False)
    return str(EVERYTHING_JS)


def clean_env() -> dict[str, str]:
    """This process's environment without EVO_* variables, so a developer's settings
    (discovery mode, role, default-deny, socket, ...) cannot change what the suite sees."""
    return {k: v for k, v in os.environ.items() if not k.startswith("EVO_")}


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = ANSI_ESCAPE.sub("", path.read_text(errors="replace"))
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    kept = text.splitlines()[-lines:]
    return "\n".join(kept) if kept else "<empty>"


_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on now, and never one this process was given before:
    the kernel may hand the same free port to two `bind(0)` calls in a row, and the second
    taker (a test's own server, say) would then hold the port the first was given for evod."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def make_tmp() -> Path:
    """A private temp dir whose socket path stays well under the 108-byte sun_path limit."""
    tmp = Path(tempfile.mkdtemp(prefix="evo-interop-"))
    if len(str(tmp / "evod.sock")) > 100:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix="evo-interop-", dir="/tmp"))
    return tmp


def _stop_process(proc: subprocess.Popen[Any], first_signal: int, timeout: float, group: bool) -> None:
    """Signal, wait up to `timeout`, then SIGKILL (the whole group if it has its own)."""
    if proc.poll() is not None:
        return
    try:
        if group:
            os.killpg(proc.pid, first_signal)
        else:
            proc.send_signal(first_signal)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@dataclass
class HttpEverything:
    """server-everything in streamableHttp mode. It reads the port from $PORT and listens on
    all interfaces (it takes no host option); we reach it on 127.0.0.1."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    MODE = "streamableHttp"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @staticmethod
    def ready_line(port: int) -> str:
        # It prints this line once `listen` has succeeded; a taken port makes it exit 1.
        return f"listening on port {port}"

    @classmethod
    def start(cls, tmp: Path, attempts: int = 5, port: int | None = None) -> HttpEverything:
        """Starts on a free port, or on `port` (a server coming back where it was)."""
        errors = []
        wanted = port
        for attempt in range(attempts):
            port = wanted or free_port()
            log = tmp / f"everything-{cls.MODE}-{attempt}.log"
            env = clean_env() | {"PORT": str(port)}
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [node_bin(), everything_js(), cls.MODE],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=tmp,
                    start_new_session=True,  # its own group, so teardown can end the whole tree
                )
            server = cls(proc, port, log)
            ready_line = cls.ready_line(port)
            deadline = time.monotonic() + HTTP_START_TIMEOUT_S
            while time.monotonic() < deadline:
                if ready_line in log.read_text(errors="replace"):
                    return server
                if proc.poll() is not None:
                    break
                time.sleep(0.05)
            server.stop()
            errors.append(f"attempt {attempt} (port {port}):\n{tail(log, 30)}")
            if "already in use" not in log.read_text(errors="replace"):
                break  # not a lost race for the port: retrying will not help
        pytest.fail(f"server-everything ({cls.MODE}) did not start:\n" + "\n".join(errors), pytrace=False)

    def stop(self) -> None:
        # Its SIGINT handler closes transports and exits 0.
        _stop_process(self.proc, signal.SIGINT, STOP_TIMEOUT_S, group=True)


class SseEverything(HttpEverything):
    """server-everything in its legacy HTTP+SSE mode: GET /sse, POST /message."""

    MODE = "sse"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"

    @staticmethod
    def ready_line(port: int) -> str:
        return f"Server is running on port {port}"


@dataclass
class Evo:
    tmp: Path
    socket: Path
    config: Path
    log: Path
    http: HttpEverything
    proc: subprocess.Popen[bytes] | None = None
    evoctl: str = field(default_factory=evoctl_bin)

    def ctl(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.evoctl, "--socket", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
        )

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
        parts.append(f"--- server-everything http log ({self.http.log}) ---\n{tail(self.http.log, 40)}")
        return "\n".join(parts)

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    evod_bin(),
                    "--config",
                    str(self.config),
                    "--socket",
                    str(self.socket),
                    "--cache-dir",
                    str(self.tmp / "cache"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=clean_env() | {"NO_COLOR": "1"},  # plain text in evod.log
                cwd=self.tmp,
            )

    def wait_ready(self, ids: tuple[str, ...] = SERVER_IDS) -> dict[str, Any]:
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

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.ctl("stop", timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # Graceful stop failed: SIGTERM, then SIGKILL (children die with it: parent-death signal).
            _stop_process(self.proc, signal.SIGTERM, 5.0, group=False)


def write_config(path: Path, http_url: str) -> None:
    config = {
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
    path.write_text(json.dumps(config, indent=2))


