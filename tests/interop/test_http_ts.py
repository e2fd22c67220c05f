"""evod's Streamable HTTP endpoint through the official TypeScript SDK's client
(``@modelcontextprotocol/sdk``, which speaks the initialize era only): ``ts/http_client.mjs``
lists, discovers, calls, follows progress, cancels, answers an approval by elicitation and hears
list_changed, with an API token and with an OAuth access token minted here (PyJWT)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from evo_harness import HERE, Evo, clean_env, http_evo_fixture, node_bin

SCRIPT = HERE / "ts" / "http_client.mjs"
SDK = HERE / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"


@pytest.fixture(scope="module")
def evo_http() -> Iterator[Evo]:
    if not SDK.is_file():
        pytest.fail(f"missing {SDK}: run tests/run (or `npm ci` in {HERE})", pytrace=False)
    yield from http_evo_fixture(permissions="rules:\n  fx_cwd: require_approval\n")


def run_ts(evo: Evo, token: str, tag: int) -> dict:
    done = subprocess.run(
        [node_bin(), str(SCRIPT), evo.url, token, str(tag)],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
        cwd=Path(SCRIPT).parent,
    )
    assert done.returncode == 0, f"{done.stderr}\n{done.stdout}\n{evo.diagnostics()}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def check(evo: Evo, report: dict, tag: int) -> None:
    assert report["protocolVersion"] == "2025-11-25", report
    assert report["sessionId"], "an initialize-era session has an id"
    assert {"discover_tools", "fx_add", "fx_echo"} <= set(report["tools"]), report["tools"]
    assert report["add"] == "42", report
    assert "fx_add" in report["discover"], report["discover"]
    assert report["progress"] == [1, 2, 3] and not report["progressError"], report
    assert report["cancelled"], report
    log = evo.log.read_text(errors="replace")
    ms = 40000 + tag
    assert f"sleep {ms} started" in log and f"sleep {ms} cancelled" in log, evo.diagnostics()
    assert len(report["elicited"]) == 1 and "fx_cwd" in report["elicited"][0], report
    assert not report["approved"]["isError"] and report["approved"]["text"].startswith("/"), report
    assert report["listChanged"] >= 1, report
    assert f"fx_from_ts_{tag}" in report["toolsAfter"], report["toolsAfter"]


def test_typescript_client_with_an_api_token(evo_http: Evo) -> None:
    report = run_ts(evo_http, evo_http.token("ts"), 1)
    check(evo_http, report, 1)


def test_typescript_client_with_an_oauth_access_token(evo_http: Evo) -> None:
    token = evo_http.issuer.token(evo_http.url, kid="ec1", sub="ts-user")
    report = run_ts(evo_http, token, 2)
    check(evo_http, report, 2)
    # terminateSession ended it: no session of that identity is left.
    left = [s for s in evo_http.ctl_json("sessions")["sessions"] if s["identity"] == "oauth:ts-user"]
    assert left == [], left
