"""Benchmark of the web console (not a test: prints a table; see docs/performance.md,
"The web console").

    EVO_BIN_DIR=$CARGO_TARGET_DIR/release tests/interop/.venv/bin/python tests/interop/bench_console.py [--rounds N]

Measures, against a real evod with one evo-fixture child:

* page weight: the bytes of the console page, its CSS and its JavaScript as served
  (uncompressed; nothing else is loaded);
* event → open page: headless Chromium shows the Profiles page; the bench changes a profile
  over the control socket (what `evoctl activate --profile` sends) and a MutationObserver in
  the page stamps the moment the tool's chip appears (or goes); the time counts from just
  before the request is written, so it includes evod's work, the event stream, the page's
  refetch and its rendering;
* memory: evod's resident set before and after 20 consoles are signed in and hold their event
  stream open (each its own one-time link, cookie and /ui/events connection), with a burst of
  events flowing to all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from evo_harness import Evo, fixture_bin, make_tmp  # noqa: E402


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Control:
    """One control-socket connection, as evoctl speaks it (a Hello line, then requests)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rwb")
        self.send({"evo": 1, "kind": "ctl"})

    def send(self, obj: dict) -> dict:
        self.file.write(json.dumps(obj).encode() + b"\n")
        self.file.flush()
        return json.loads(self.file.readline())

    def ask(self, obj: dict) -> dict:
        return self.send(obj)


def sign_in(url: str) -> str:
    """Follows a one-time link; returns the session cookie."""
    with urllib.request.urlopen(url, timeout=10) as r:
        header = r.headers.get("Set-Cookie", "")
    return header.split(";")[0].split("=", 1)[1]


def open_stream(base: str, cookie: str) -> socket.socket:
    host, port = base.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(f"GET /ui/events HTTP/1.1\r\nHost: {host}:{port}\r\nCookie: evo_console={cookie}\r\nAccept: text/event-stream\r\n\r\n".encode())
    s.settimeout(10)
    head = s.recv(65536)
    assert b" 200 " in head.split(b"\r\n")[0], head[:200]
    s.setblocking(False)
    return s


def drain(streams: list[socket.socket]) -> int:
    got = 0
    for s in streams:
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += len(chunk)
        except BlockingIOError:
            pass
    return got


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    tmp = make_tmp()
    evo = Evo(tmp=tmp)
    evo.write_config({"mcpServers": {"fx": {"command": fixture_bin(), "args": []}}, "profiles": {"maths": ["fx_add"]}})
    sock = evo.socket
    evo.start()
    assert evo.proc is not None
    evod = evo.proc
    driver = None
    streams: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        ctl = Control(sock)
        while time.monotonic() < deadline:
            status = ctl.ask({"cmd": "status"})
            if status["ok"] and all(s["state"] == "ready" for s in status["data"]["servers"]):
                break
            time.sleep(0.1)

        def ui() -> str:
            return ctl.ask({"cmd": "ui"})["data"]["url"]

        # Page weight.
        url = ui()
        base = url.split("/ui/")[0]
        cookie = sign_in(url)
        weight = {}
        for path in ["/ui/", "/ui/console.css", "/ui/console.js"]:
            req = urllib.request.Request(base + path, headers={"Cookie": f"evo_console={cookie}"})
            with urllib.request.urlopen(req, timeout=10) as r:
                weight[path] = len(r.read())

        # Event → open page.
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,800"]:
            options.add_argument(a)
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
        driver.get(ui())
        deadline = time.monotonic() + 20
        while "live" not in driver.find_element("id", "conn").text and time.monotonic() < deadline:
            time.sleep(0.05)
        driver.get(base + "/ui/#profiles")
        time.sleep(1.0)
        driver.execute_script(
            """
            window.__seen = [];
            var want = null;
            new MutationObserver(function () {
              if (want === null) return;
              var has = document.querySelector('#profiles .card[data-name="maths"]').textContent.indexOf("fx_echo") >= 0;
              if (has === want) { window.__seen.push(Date.now()); want = null; }
            }).observe(document.getElementById("profiles"), {childList: true, subtree: true, characterData: true});
            window.__expect = function (w) { want = w; };
            """
        )
        latencies = []
        for i in range(args.rounds):
            add = i % 2 == 0
            driver.execute_script("window.__expect(arguments[0])", add)
            sent = time.time() * 1000
            reply = ctl.ask({"cmd": "activate" if add else "deactivate", "tools": ["fx_echo"], "profile": "maths"})
            assert reply["ok"], reply
            deadline = time.monotonic() + 5
            while True:
                seen = driver.execute_script("return window.__seen.length ? window.__seen.shift() : null")
                if seen is not None:
                    latencies.append(seen - sent)
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"round {i}: the page did not show the change within 5 s")
                time.sleep(0.002)
            time.sleep(0.05)
        driver.quit()
        driver = None

        # Memory of 20 open consoles.
        time.sleep(0.5)
        before = rss_kib(evod.pid)
        for _ in range(20):
            streams.append(open_stream(base, sign_in(ui())))
        for i in range(50):
            ctl.ask({"cmd": "activate" if i % 2 == 0 else "deactivate", "tools": ["fx_echo"], "profile": "maths"})
        time.sleep(0.5)
        received = drain(streams)
        after = rss_kib(evod.pid)

        latencies.sort()
        p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
        total = sum(weight.values())
        rows = [
            ("page weight: /ui/ (HTML)", f"{weight['/ui/'] / 1024:.1f} KiB"),
            ("page weight: console.css", f"{weight['/ui/console.css'] / 1024:.1f} KiB"),
            ("page weight: console.js", f"{weight['/ui/console.js'] / 1024:.1f} KiB"),
            ("page weight: total (target <= 200 KB)", f"{total / 1024:.1f} KiB"),
            (f"event -> open page, median of {len(latencies)}", f"{statistics.median(latencies):.1f} ms"),
            ("event -> open page, p95 / max (target <= 200 ms)", f"{p95:.1f} / {latencies[-1]:.1f} ms"),
            ("evod RSS before consoles", f"{before / 1024:.1f} MiB"),
            ("evod RSS with 20 consoles streaming", f"{after / 1024:.1f} MiB"),
            ("cost of 20 open consoles (target <= 5 MiB)", f"{(after - before) / 1024:.2f} MiB"),
            ("events received by the 20 streams", f"{received} bytes"),
        ]
        width = max(len(r[0]) for r in rows)
        print(f"{'measure'.ljust(width)}  value")
        for name, value in rows:
            print(f"{name.ljust(width)}  {value}")
    finally:
        for s in streams:
            s.close()
        if driver is not None:
            driver.quit()
        evo.stop()
        if not os.environ.get("EVO_INTEROP_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
