"""The HTTP peers bench's self-check (``bench/http_peers.py --self-test``, no installs): its
direct Streamable HTTP server and its stdio child behind evod, 50 calls each through its raw
client. The bench times a gateway only when every answer carries the right sum, so the check is
that it catches a child lying on every 10th call through evod: exactly 5 wrong answers, none
through the direct server."""

from __future__ import annotations

import subprocess
import sys

from evo_harness.processes import REPO, clean_env, evod_bin

SCRIPT = REPO / "bench" / "http_peers.py"


def test_the_peers_bench_counts_every_wrong_answer() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--self-test", "--evod", evod_bin()],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "direct: 50 right, 0 wrong, 0 failed" in out, out
    assert "evo, a child lying every 10th call: 45 right, 5 wrong, 0 failed" in out, out
