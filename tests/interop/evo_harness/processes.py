"""What the interop suite runs on this machine: the binaries it finds, the temp dirs and ports it
hands out, and every process it starts.

Every process goes through `spawn`, which starts it in a process group of its own and records it,
so that `stop` can end the whole group and `leftover_processes` (run by conftest.py when the session
ends) can name any process of the run still alive: a tracked group with a live member, a live
descendant of pytest (the SDK starts the shims and the direct children itself), or a process whose
command line or working directory lies in one of the run's temp dirs (evod's own children, which
evod puts in groups of their own)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

HERE = Path(__file__).resolve().parents[1]
REPO = HERE.parents[1]
BIN_DIR = Path(os.environ.get("EVO_BIN_DIR") or REPO / "target" / "debug")
EVERYTHING_JS = HERE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM_JS = HERE / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
# Preloaded into node servers that take no host option, so they listen on loopback only.
LOOPBACK_JS = Path(__file__).resolve().parent / "loopback.cjs"

LOG_TAIL_LINES = 150

T = TypeVar("T")


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


# Every temp dir of the run: a process working or named in one of them belongs to the run.
_temp_dirs: list[Path] = []


def make_tmp() -> Path:
    """A private temp dir whose socket path stays well under the 108-byte sun_path limit."""
    tmp = Path(tempfile.mkdtemp(prefix="evo-interop-"))
    if len(str(tmp / "evod.sock")) > 100:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix="evo-interop-", dir="/tmp"))
    _temp_dirs.append(tmp)
    return tmp


def wait_for(what: str, check: Callable[[], T], within: float = 30.0, diagnostics: Callable[[], str] = lambda: "") -> T:
    """Polls `check` until it gives something true and returns that; fails with `what` (and the
    diagnostics) after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}\n{diagnostics()}"
        time.sleep(0.1)


@dataclass
class Started:
    """A process the harness started: its group (its own) and the test that was running."""

    proc: subprocess.Popen[Any]
    argv: list[str]
    during: str


_started: list[Started] = []


def spawn(argv: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **popen)` in a new session (so its group is its own and `stop` can
    end all of it), recorded for the end-of-run check. stdin is /dev/null unless given."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.Popen(argv, start_new_session=True, **popen)
    during = os.environ.get("PYTEST_CURRENT_TEST", "outside a test")
    _started.append(Started(proc, [str(a) for a in argv], during))
    return proc


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _end_group_of(proc: subprocess.Popen[Any]) -> None:
    """Kills whatever is left in the group of `proc` (its own, see `spawn`). Once `proc` is
    reaped its pid may be reused, but not while its group has members: a live process with that
    pid means the group is gone and the pid belongs to someone else."""
    if proc.poll() is None or not Path(f"/proc/{proc.pid}").exists():
        _kill_group(proc.pid)


def stop(proc: subprocess.Popen[Any], first_signal: int = signal.SIGTERM, timeout: float = 20.0, group: bool = False) -> None:
    """Sends `first_signal` (to the whole group with `group`, else to the process alone, which
    then ends its own children), waits up to `timeout`, then SIGKILLs the group. Whatever is
    left in the group once the process is gone is killed too."""
    if proc.poll() is None:
        try:
            if group:
                os.killpg(proc.pid, first_signal)
            else:
                proc.send_signal(first_signal)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait(timeout=10)
    _end_group_of(proc)


@dataclass
class LoggedProcess:
    """A process the harness started with its output going to `log`."""

    proc: subprocess.Popen[bytes]
    log: Path
    first_signal: int = signal.SIGTERM

    @classmethod
    def start(cls, argv: list[str], log: Path, **popen: Any) -> LoggedProcess:
        with log.open("wb") as out:
            proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT, **popen)
        return cls(proc, log)

    def stop(self) -> None:
        stop(self.proc, self.first_signal, 10.0)

    def wait_started(self, what: str, marker: str, within: float = 60.0) -> None:
        """Waits for `marker` in the log; if it does not come (the process exited, or stalled
        `within` seconds), stops the process and fails naming `what`, with the process's state
        and the log's tail, so a failed start neither leaks the process nor hides why."""
        def state() -> str:
            got = _stat(self.proc.pid)
            return "exited" if got is None else f"alive, state {got[2]}"

        try:
            wait_for(
                f"{what} did not start within {within:.0f} s",
                lambda: marker in self.log.read_text(errors="replace") or self.proc.poll() is not None,
                within,
                lambda: f"process {self.proc.pid}: {state()}\n--- its log ---\n{tail(self.log)}",
            )
            assert self.proc.poll() is None, f"{what} exited with {self.proc.returncode}\n--- its log ---\n{tail(self.log)}"
        except BaseException:
            self.stop()
            raise


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, process group, state) of a live process, None if it is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
    return None if state in ("Z", "X") else (ppid, pgrp, state)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def leftover_processes() -> dict[int, str]:
    """Live processes of this run other than pytest itself, each with why it counts as one."""
    me = os.getpid()
    live = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me and (st := _stat(int(entry))) is not None:
            live[int(entry)] = st
    groups = {s.proc.pid: s for s in _started}
    dirs = [str(d) for d in _temp_dirs]
    found: dict[int, str] = {}
    for pid, (ppid, pgrp, _state) in live.items():
        why = []
        if pgrp in groups:
            started = groups[pgrp]
            why.append(f"in the group of `{' '.join(started.argv[:3])} …` started during {started.during}")
        parent, hops = ppid, 0
        while parent in live and hops < 64:
            parent, hops = live[parent][0], hops + 1
        if parent == me or ppid == me:
            why.append("a descendant of pytest")
        cmdline, cwd = _cmdline(pid), _cwd(pid)
        if any(d in cmdline or cwd.startswith(d) for d in dirs):
            why.append("working or named in a temp dir of the run")
        if why:
            found[pid] = f"pid {pid} ({cmdline[:240]}): " + "; ".join(why)
    return found


def end_leftovers(pids: dict[int, str]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for started in _started:
        _end_group_of(started.proc)


def _listeners(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net shows them) listening on TCP `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:
                found.append(address)
    return found


# 127.0.0.1 and ::1 as /proc/net/tcp{,6} print them (host byte order, little-endian here), and
# ::ffff:127.0.0.1.
_LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def assert_loopback_only(port: int, what: str) -> None:
    """Test servers listen on loopback only: nothing on `port` listens on another address."""
    wide = [a for a in _listeners(port) if a not in _LOOPBACK]
    assert not wide, f"{what} listens on port {port} beyond loopback: {wide}"
