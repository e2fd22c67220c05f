"""The gateways of the HTTP peers bench (`bench/http_peers.py`): installing each peer, pinned,
into `bench/.peers/`, starting it in front of the stdio child, and finding its processes in /proc
(its own, told apart from the stdio children every gateway runs alike)."""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peers.wire import CallFailed, Client, Endpoint, Tally

BENCH = Path(__file__).resolve().parents[1]
PEERS_DIR = BENCH / ".peers"
# The script the stdio child runs (`http_peers.py --serve-stdio`): its command line is how its
# processes are told apart from the gateway's own when CPU and memory are counted.
SELF = str(BENCH / "http_peers.py")
CHILD_FLAG = "--serve-stdio"


def proc_table() -> dict[int, tuple[int, list[str]]]:
    """Every live process: pid -> (parent pid, argv)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        table[int(entry)] = (int(stat[stat.rfind(")") + 2 :].split()[1]), argv)
    return table


def is_stdio_child(argv: list[str]) -> bool:
    """The child (`python THIS_FILE --serve-stdio`), or a shell a gateway runs it with. A gateway
    naming the child among its own arguments is not one."""
    if argv[1:3] == [SELF, CHILD_FLAG]:
        return True
    shell = Path(argv[0]).name in ("sh", "bash", "dash") and "-c" in argv[1:2]
    return shell and any(SELF in a and CHILD_FLAG in a for a in argv[2:])


def gateway_tree(root: int) -> tuple[list[int], int]:
    """The gateway's own processes (root and descendants, minus the stdio children and theirs),
    and how many stdio children it runs (a shell running one counts with it)."""
    table = proc_table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    own, children, todo = [], 0, [root]
    while todo:
        pid = todo.pop()
        if pid not in table:
            continue
        if pid != root and is_stdio_child(table[pid][1]):
            children += 1
            continue
        own.append(pid)
        todo += kids.get(pid, [])
    return own, children


def cpu_ticks(pids: list[int]) -> dict[int, int]:
    ticks = {}
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        ticks[pid] = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], within: float, log: Path) -> None:
    deadline = time.monotonic() + within
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} at start: {tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not listening on {port} after {within:.0f} s: {tail(log)}") from None
            time.sleep(0.1)


def tail(log: Path, chars: int = 400) -> str:
    try:
        return " ".join(log.read_text(errors="replace")[-chars:].split())
    except OSError:
        return "(no log)"


def run(argv: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)


def child_argv(lie_every: int = 0) -> list[str]:
    return [sys.executable, SELF, CHILD_FLAG] + (["--lie-every", str(lie_every)] if lie_every else [])


@dataclass
class Gateway:
    """One row: a started gateway (or the direct server), its process and its endpoints."""

    name: str
    version: str
    proc: subprocess.Popen[bytes] | None = None
    endpoint: Endpoint | None = None
    # Processes that are part of the gateway besides `proc` (ContextForge's stdio bridge).
    bridges: list[subprocess.Popen[bytes]] = field(default_factory=list)
    skipped: str = ""
    notes: list[str] = field(default_factory=list)
    seq: Tally = field(default_factory=Tally)
    load: Tally = field(default_factory=Tally)
    load_seconds: float = 0.0
    cpu_ticks: int = 0
    rss_first_kib: int = 0  # after the sequential calls
    rss_kib: int = 0  # at the end: after the idle sessions and the load
    idle_growth: str = "–"

    def own(self) -> tuple[list[int], int]:
        """`gateway_tree` over all of its processes."""
        pids, children = [], 0
        for proc in ([self.proc] if self.proc else []) + self.bridges:
            p, c = gateway_tree(proc.pid)
            pids, children = pids + p, children + c
        return pids, children

    def stop(self) -> None:
        for proc in ([self.proc] if self.proc else []) + self.bridges:
            end_group(proc)


def end_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group (its own: see `spawn`), SIGKILL after 15 s, and to
    whatever of the group is left once it has gone."""
    try:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def listening(gw: Gateway, port: int, log: Path, within: float = 60.0) -> Gateway:
    """`gw` once its process listens on `port`; stopped (not left running) if it does not."""
    assert gw.proc is not None
    try:
        wait_listening(port, gw.proc, within, log)
    except BaseException:
        gw.stop()
        raise
    return gw


def spawn(argv: list[str], log: Path, **kw: Any) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kw)


# ---------------------------------------------------------------- installing and starting the peers


class Skip(Exception):
    """A peer that cannot be installed or started: the reason is its row."""


def short(text: str, chars: int = 240) -> str:
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " ".join(" ".join(lines[-3:]).split())[:chars] or "(no output)"


def npm_package(name: str, version: str) -> Path:
    """The package's folder under bench/.peers/NAME, installed at VERSION unless it is."""
    prefix = PEERS_DIR / name
    pkg = prefix / "node_modules" / name
    if installed_npm_version(pkg) != version:
        if shutil.which("npm") is None or shutil.which("node") is None:
            raise Skip("node and npm are not on PATH")
        done = run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", f"{name}@{version}"], 900)
        if done.returncode != 0:
            raise Skip(f"npm install {name}@{version} failed: {short(done.stderr)}")
    if installed_npm_version(pkg) != version:
        raise Skip(f"npm installed {installed_npm_version(pkg)} of {name}, not {version}")
    return pkg


def installed_npm_version(pkg: Path) -> str | None:
    try:
        return str(json.loads((pkg / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def pip_venv(name: str, package: str, version: str) -> Path:
    """A venv under bench/.peers/NAME with PACKAGE==VERSION; its bin folder."""
    venv = PEERS_DIR / name
    python = venv / "bin" / "python"
    if installed_pip_version(python, package) != version:
        if not python.exists():
            done = run([sys.executable, "-m", "venv", str(venv)], 300)
            if done.returncode != 0:
                raise Skip(f"python -m venv failed: {short(done.stderr)}")
        done = run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{package}=={version}"], 1800)
        if done.returncode != 0:
            raise Skip(f"pip install {package}=={version} failed: {short(done.stderr)}")
    got = installed_pip_version(python, package)
    if got != version:
        raise Skip(f"pip installed {got} of {package}, not {version}")
    return venv / "bin"


def installed_pip_version(python: Path, package: str) -> str | None:
    if not python.exists():
        return None
    done = run([str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"], 60)
    return done.stdout.strip() if done.returncode == 0 else None


def clean_env() -> dict[str, str]:
    """This environment without EVO_* (a developer's settings must not change what is measured)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("EVO_")}


def find_add(gw: Gateway, within: float = 60.0) -> None:
    """Waits until the gateway lists the child's `add` (under its own name for it) and points
    its endpoint at that name."""
    assert gw.endpoint is not None
    deadline, last = time.monotonic() + within, "no tools"
    while time.monotonic() < deadline:
        if gw.proc is not None and gw.proc.poll() is not None:
            raise Skip(f"exited with {gw.proc.returncode}")
        client = None
        try:
            client = Client(gw.endpoint, timeout=20).open()
            names = client.tool_names()
            found = [n for n in names if n == "add" or n.endswith(("_add", "-add", "__add", ".add"))]
            if found:
                gw.endpoint = Endpoint(gw.endpoint.url, gw.endpoint.kind, gw.endpoint.token, found[0])
                return
            last = f"tools: {names}"
        except (CallFailed, OSError, http.client.HTTPException) as e:
            last = f"{type(e).__name__}: {e}"
        finally:
            if client is not None:
                client.close()
        time.sleep(0.5)
    raise Skip(f"no add tool within {within:.0f} s ({short(last)})")


def start_direct(work: Path) -> Gateway:
    port, log = free_port(), work / "direct.log"
    proc = spawn([sys.executable, SELF, "--serve-http", str(port)], log)
    gw = Gateway("direct (stdlib HTTP server)", f"Python {sys.version.split()[0]}", proc, Endpoint(f"http://127.0.0.1:{port}/mcp"))
    return listening(gw, port, log, 30)


def start_evo(work: Path, evod: Path, with_token: bool, lie_every: int = 0) -> Gateway:
    name = "evo (API token)" if with_token else "evo (no auth)"
    if not evod.is_file():
        raise Skip(f"no evod at {evod}: build it with `cargo build --release -p evo-daemon -p evo-ctl`, or pass --evod")
    home = work / ("evo-token" if with_token else "evo")
    home.mkdir()
    port = free_port()
    http_conf: dict[str, Any] = {"listen": f"127.0.0.1:{port}"}
    if with_token:
        http_conf["auth"] = {}
    config = {"mcpServers": {"py": {"command": sys.executable, "args": child_argv(lie_every)[1:]}}, "serve": {"http": http_conf}}
    (home / "mcp.config.json").write_text(json.dumps(config, indent=2))
    version = run([str(evod), "--version"], 30).stdout.strip().removeprefix("evod ")
    sock = home / "evod.sock"
    argv = [str(evod), "--config", str(home / "mcp.config.json"), "--socket", str(sock), "--cache-dir", str(home / "cache"), "--mode", "legacy"]
    gw = Gateway(name, version, spawn(argv, home / "evod.log", env=clean_env() | {"NO_COLOR": "1"}, cwd=home))
    listening(gw, port, home / "evod.log")
    token = None
    if with_token:
        evoctl = evod.with_name("evoctl")
        done = run([str(evoctl), "--socket", str(sock), "token", "create", "bench"], 60, env=clean_env())
        if done.returncode != 0:
            gw.stop()
            raise Skip(f"evoctl token create failed (build evo-ctl beside evod): {short(done.stderr)}")
        token = done.stdout.strip()
    gw.endpoint = Endpoint(f"http://127.0.0.1:{port}/mcp", token=token)
    gw.notes.append("`--mode legacy` (every tool listed), " + ("`serve.http.auth: {}` with an `evoctl token create` token" if with_token else "no `serve.http.auth`"))
    return gw


def start_mcp_hub(work: Path) -> Gateway:
    pkg = npm_package("mcp-hub", "4.2.1")
    port, log = free_port(), work / "mcp-hub.log"
    (work / "mcp-hub.json").write_text(json.dumps({"mcpServers": {"py": {"command": sys.executable, "args": [SELF, CHILD_FLAG]}}}))
    argv = [shutil.which("node") or "node", str(pkg / "dist" / "cli.js"), "--port", str(port), "--config", str(work / "mcp-hub.json")]
    gw = Gateway("mcp-hub", installed_npm_version(pkg) or "?", spawn(argv, log, cwd=work), Endpoint(f"http://127.0.0.1:{port}/mcp", kind="sse"))
    gw.notes.append("HTTP+SSE on `/mcp` (GET the stream, POST to `/messages?sessionId=`): it serves no Streamable HTTP; listens on every address")
    return listening(gw, port, log)


def start_supergateway(work: Path) -> Gateway:
    pkg = npm_package("supergateway", "4.0.0")
    port, log = free_port(), work / "supergateway.log"
    argv = [shutil.which("node") or "node", str(pkg / "dist" / "index.js"), "--stdio", shlex.join(child_argv()),
            "--outputTransport", "streamableHttp", "--stateful", "--port", str(port), "--logLevel", "none"]
    gw = Gateway("supergateway", installed_npm_version(pkg) or "?", spawn(argv, log, cwd=work), Endpoint(f"http://127.0.0.1:{port}/mcp"))
    gw.notes.append("`--outputTransport streamableHttp --stateful --logLevel none` (stateless mode starts a child per request)")
    return listening(gw, port, log)


def start_mcp_proxy(work: Path) -> Gateway:
    bin_dir = pip_venv("mcp-proxy", "mcp-proxy", "0.13.0")
    port, log = free_port(), work / "mcp-proxy.log"
    argv = [str(bin_dir / "mcp-proxy"), "--host", "127.0.0.1", "--port", str(port), "--log-level", "WARNING", "--", *child_argv()]
    version = installed_pip_version(bin_dir / "python", "mcp-proxy") or "?"
    gw = Gateway("mcp-proxy", version, spawn(argv, log, cwd=work), Endpoint(f"http://127.0.0.1:{port}/mcp"))
    gw.notes.append("PyPI `mcp-proxy` (sparfenyuk), `--log-level WARNING`, stateful Streamable HTTP on `/mcp`")
    return listening(gw, port, log)


def start_contextforge(work: Path) -> Gateway:
    """IBM ContextForge runs no stdio server itself: its bridge (`mcpgateway.translate`) serves
    the child over SSE, the bridge is registered as a gateway through the admin API, and clients
    call the tools (`py-add`) on its `/mcp`. Both processes count as the gateway."""
    bin_dir = pip_venv("contextforge", "mcp-contextforge-gateway", "1.0.7")
    home = work / "contextforge"
    home.mkdir()
    port, bridge_port = free_port(), free_port()
    password = "Aa1!" + secrets.token_urlsafe(16)
    env = clean_env() | {
        "JWT_SECRET_KEY": secrets.token_urlsafe(32),
        "AUTH_ENCRYPTION_SECRET": secrets.token_urlsafe(32),
        "BASIC_AUTH_PASSWORD": password,
        "PLATFORM_ADMIN_PASSWORD": password,
        "PLATFORM_ADMIN_EMAIL": "admin@example.com",
        "DATABASE_URL": f"sqlite:///{home / 'contextforge.db'}",
        "MCPGATEWAY_UI_ENABLED": "false",
        "MCPGATEWAY_ADMIN_API_ENABLED": "true",
        "SSRF_ALLOW_LOCALHOST": "true",  # the bridge listens on loopback
        "EXPOSE_ERROR_DETAILS": "true",
        "RATE_LIMITING_ENABLED": "false",  # 100 tool calls a minute by default, then a lockout
        "LOG_LEVEL": "ERROR",
    }
    version = installed_pip_version(bin_dir / "python", "mcp-contextforge-gateway") or "?"
    log = home / "gateway.log"
    gw = Gateway("IBM ContextForge", version, spawn([str(bin_dir / "mcpgateway"), "--host", "127.0.0.1", "--port", str(port)], log, env=env, cwd=home))
    bridge = [str(bin_dir / "python"), "-m", "mcpgateway.translate", "--stdio", shlex.join(child_argv()), "--port", str(bridge_port), "--expose-sse"]
    gw.bridges.append(spawn(bridge, home / "bridge.log", env=env, cwd=home))
    try:
        wait_listening(bridge_port, gw.bridges[0], 60, home / "bridge.log")
        wait_listening(port, gw.proc, 180, log)  # type: ignore[arg-type]  # migrations on a fresh database
        made = run([str(bin_dir / "python"), "-m", "mcpgateway.utils.create_jwt_token", "-u", "admin@example.com", "--admin", "-e", "600"], 120, env=env, cwd=home)
        token = made.stdout.strip().splitlines()[-1] if made.returncode == 0 and made.stdout.strip() else ""
        if not token:
            raise Skip(f"create_jwt_token failed: {short(made.stderr)}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        body = json.dumps({"name": "py", "url": f"http://127.0.0.1:{bridge_port}/sse", "transport": "SSE"})
        conn.request("POST", "/gateways", body=body, headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        resp = conn.getresponse()
        answer = resp.read()
        conn.close()
        if resp.status >= 300:
            raise Skip(f"registering the bridge: HTTP {resp.status} {short(answer.decode(errors='replace'))}")
    except BaseException:
        gw.stop()
        raise
    gw.endpoint = Endpoint(f"http://127.0.0.1:{port}/mcp", token=token)
    gw.notes.append(
        "PyPI `mcp-contextforge-gateway`: SQLite, generated secrets, `SSRF_ALLOW_LOCALHOST=true`, `RATE_LIMITING_ENABLED=false`, an admin JWT from "
        "`mcpgateway.utils.create_jwt_token`; the child behind its own bridge `mcpgateway.translate --expose-sse`, "
        "registered with `POST /gateways`; calls on `/mcp` (bridge and gateway counted together)"
    )
    return gw
