"""OAuth to remote servers, end to end, against a real authorization server: oidc-provider
(npm, configured by oauth/as.mjs: code + PKCE, refresh tokens, client credentials, dynamic
registration, revocation, resource indicators with JWT access tokens, short lifetimes) in front
of an evod serving Streamable HTTP that checks those JWTs (the protected server). The evod
under test has that server as an HTTP child:

- before any login it is `login required` (discovered from the 401's RFC 9728 metadata), and a
  call says to run `evoctl login web`;
- `evoctl login web --no-browser` prints the URL; the test completes the browser step with an
  HTTP client (oidc-provider's login and consent forms); the tools then answer;
- the access token expires and is refreshed (status shows the new expiry), the refresh token is
  revoked at the authorization server and the next refresh sends the server back to
  `login required`;
- `oauth.grant: client_credentials` gets and renews its tokens with no person;
- bad input: a wrong `state` on the redirect, the authorization server down, a malformed
  metadata document, a token response without `access_token`: each a clear error naming the
  server;
- no token ever appears in evod's log, `evoctl status --json` or the cache directory; token files
  are 0600 in a 0700 directory."""

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
from evo_harness import (
    HERE,
    Evo,
    LoggedProcess,
    clean_env,
    evoctl_bin,
    fixture_bin,
    free_port,
    make_tmp,
    node_bin,
    spawn,
    tail,
    text,
    unwrapped,
    wait_for,
    write_certificate,
)
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from evo_harness.oauth import (
    _ready,
    assert_no_secret_leaks,
    begin_login,
    browser,
    call,
    evo_config,
    login,
    running_world,
    SCOPES,
    secrets_of,
    start_as,
    start_evod,
    TIMEOUT_S,
    TTL_S,
    World,
)

pytestmark = pytest.mark.anyio

@pytest.fixture
def world() -> Iterator[World]:
    with running_world() as w:
        yield w


async def test_login_call_refresh_revoke(world: World) -> None:
    w = world
    with anyio.fail_after(TIMEOUT_S):
        # Before any login: recognised from the 401 and its metadata, and said so.
        s = await anyio.to_thread.run_sync(
            lambda: wait_for("web never became login_required", lambda: (x := w.server("web"))["state"] == "login_required" and x, 30, w.diagnostics)
        )
        assert s["auth"]["state"] == "login_required", s
        r = await call(w, "web_fx_echo", {"text": "hi"})
        assert r.is_error and "evoctl login web" in text(r), text(r)
        human = w.ctl("status").stdout
        assert "web auth: login required" in human, human
        # Search answers name it too, since it has no tools to find yet.
        found = json.loads(w.ctl("search", "echo", "--json").stdout)
        assert any("evoctl login web" in u for u in found.get("unavailable", [])), found
        async with unwrapped(), Client(w.shim(), mode="legacy") as c:
            r = await c.call_tool("discover_tools", {"query": "echo some text"})
            assert "evoctl login web" in text(r), text(r)

        await anyio.to_thread.run_sync(login, w)
        s = await anyio.to_thread.run_sync(
            lambda: wait_for("web not ready after login", lambda: (x := w.server("web"))["state"] == "ready" and x, 30, w.diagnostics)
        )
        assert s["auth"]["state"] == "ok" and s["auth"]["expires_at"], s
        r = await call(w, "web_fx_echo", {"text": "through oauth"})
        assert not r.is_error and text(r) == "through oauth", text(r)
        assert re.search(r"web auth: ok \(expires in \d+s\)", w.ctl("status").stdout), w.ctl("status").stdout
        file = w.token_file("web")
        assert file["client_id"], "dynamic registration gave evo a client id"
        first_expiry = s["auth"]["expires_at"]
        first_token = file["credentials"]["token_response"]["access_token"]

        # The access token nears its expiry and is refreshed once (by the timer, ahead of it);
        # five calls at the same time after that all carry the new token.
        refreshes = w.evo.log.read_text(errors="replace").count("access token refreshed server=web")
        await anyio.sleep(TTL_S + 1)
        results: list[Any] = []
        async with unwrapped(), Client(w.shim(), mode="legacy") as c:

            async def one(i: int) -> None:
                results.append(await c.call_tool("web_fx_echo", {"text": f"after expiry {i}"}))

            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(one, i)
        assert all(not x.is_error for x in results), [text(x) for x in results]
        r = await call(w, "web_fx_echo", {"text": "after expiry"})
        assert not r.is_error and text(r) == "after expiry", f"{text(r)}\n{w.diagnostics()}"
        after = w.evo.log.read_text(errors="replace").count("access token refreshed server=web")
        assert after == refreshes + 1, f"{after - refreshes} refreshes"
        assert w.token_file("web")["credentials"]["token_response"]["access_token"] != first_token
        assert w.server("web")["auth"]["expires_at"] > first_expiry
        assert "access token refreshed" in w.evo.log.read_text(errors="replace")
        assert_no_secret_leaks(w, ["web"])

        # The refresh token is revoked at the authorization server: once the access token
        # expires the refresh is refused and the server needs a login again.
        file = w.token_file("web")
        refresh = file["credentials"]["token_response"]["refresh_token"]
        revoked = httpx2.post(
            f"{w.issuer}/token/revocation",
            data={"token": refresh, "token_type_hint": "refresh_token", "client_id": file["client_id"]},
        )
        assert revoked.status_code == 200, revoked.text
        await anyio.sleep(TTL_S + 1)
        r = await call(w, "web_fx_echo", {"text": "after revocation"})
        assert r.is_error and "evoctl login web" in text(r), text(r)
        s = await anyio.to_thread.run_sync(
            lambda: wait_for("not login_required after revocation", lambda: (x := w.server("web"))["auth"]["state"] == "login_required" and x, 20, w.diagnostics)
        )
        assert s["state"] == "login_required", s

        # Log in again, then out: revoked at the server and forgotten.
        await anyio.to_thread.run_sync(login, w)
        await anyio.to_thread.run_sync(
            lambda: wait_for("web not ready after the second login", lambda: w.server("web")["state"] == "ready", 30, w.diagnostics)
        )
        refresh = w.token_file("web")["credentials"]["token_response"]["refresh_token"]
        out = w.ctl("logout", "web")
        assert out.returncode == 0 and "revoked at its authorization server and forgotten" in out.stdout, out
        assert not list((w.state_dir / "oauth").glob("web-*.json"))
        # The refresh token no longer works at the authorization server.
        reuse = httpx2.post(
            f"{w.issuer}/token",
            data={"grant_type": "refresh_token", "refresh_token": refresh, "client_id": file["client_id"]},
        )
        assert reuse.status_code == 400 and "invalid_grant" in reuse.text, reuse.text
        await anyio.to_thread.run_sync(
            lambda: wait_for("web not login_required after logout", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
        )


async def test_client_credentials_need_no_person(world: World) -> None:
    w = world
    with anyio.fail_after(TIMEOUT_S):
        s = await anyio.to_thread.run_sync(
            lambda: wait_for("cc never ready", lambda: (x := w.server("cc"))["state"] == "ready" and x, 30, w.diagnostics)
        )
        assert s["auth"]["state"] == "ok", s
        r = await call(w, "cc_fx_echo", {"text": "headless"})
        assert not r.is_error and text(r) == "headless", text(r)
        first = w.token_file("cc")["credentials"]["token_response"]["access_token"]
        await anyio.sleep(TTL_S + 1)
        r = await call(w, "cc_fx_echo", {"text": "renewed"})
        assert not r.is_error and text(r) == "renewed", text(r)
        assert w.token_file("cc")["credentials"]["token_response"]["access_token"] != first
        assert_no_secret_leaks(w, ["cc"])
        assert "headless-secret" not in w.evo.log.read_text(errors="replace")
        assert "headless-secret" not in json.dumps(w.status())
        # A login is for people; this server needs none.
        out = w.ctl("login", "cc", "--no-browser")
        assert out.returncode == 1 and "client_credentials" in out.stderr, out


async def test_a_redirect_with_a_wrong_state_is_refused(world: World) -> None:
    w = world
    await anyio.to_thread.run_sync(
        lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
    )
    proc, url = begin_login(w, "web")
    redirect = urlparse(url)
    callback = parse_qs(redirect.query)["redirect_uri"][0]
    last = browser(url, stop_at=callback)
    location = urljoin(str(last.url), last.headers["location"])
    parts = urlparse(location)
    query = parse_qs(parts.query)
    assert query.get("iss") == [w.issuer], query  # RFC 9207
    query["state"] = ["not-the-state-evo-sent"]
    forged = urlunparse(parts._replace(query=urlencode({k: v[0] for k, v in query.items()})))
    page = httpx2.get(forged, timeout=10)
    assert page.status_code == 400 and "wrong" in page.text, page.text
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, (out, err)
    assert "server 'web'" in err and "wrong `state`" in err and "evoctl login web" in err, err
    assert w.server("web")["state"] == "login_required"


async def test_an_authorization_server_that_is_down_is_named(world: World) -> None:
    w = world
    await anyio.to_thread.run_sync(
        lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
    )
    w.auth.stop()
    out = w.ctl("login", "web", "--no-browser")
    assert out.returncode == 1, out
    assert "server 'web'" in out.stderr and "authorization server is up" in out.stderr, out.stderr
    assert "evoctl login web" in out.stderr, out.stderr
    # Nothing else is affected.
    assert w.ctl("status").returncode == 0


class BadAuthorizationServer(BaseHTTPRequestHandler):
    """A protected resource whose metadata is broken in one of two ways: `/broken/...` serves a
    resource metadata document that is not JSON; `/notoken/...` points at an authorization server
    (this one) whose token endpoint answers without an `access_token`."""

    base = ""

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        if self.path == "/fail/mcp":
            self.send_response(500)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", "4")
            self.end_headers()
            self.wfile.write(b"oops")
        elif self.path in ("/broken/mcp", "/notoken/mcp", "/noas/mcp", "/asjunk/mcp", "/astoken/mcp"):
            kind = self.path.split("/")[1]
            self._json(
                401,
                {"error": "unauthorized"},
                {"www-authenticate": f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/{kind}/mcp"'},
            )
        elif self.path == "/register":
            req = json.loads(body)
            self._json(201, {"client_id": "c1", "redirect_uris": req["redirect_uris"]})
        elif self.path == "/token":
            self._json(200, {"token_type": "Bearer", "expires_in": 60})
        else:
            self._json(404, {})

    def do_GET(self) -> None:  # noqa: N802
        base = self.base
        if self.path == "/.well-known/oauth-protected-resource/broken/mcp":
            self._json(200, b"{this is not json")
        elif self.path == "/.well-known/oauth-protected-resource/noas/mcp":
            self._json(200, {"resource": f"{base}/noas/mcp"})
        elif self.path in ("/.well-known/oauth-protected-resource/asjunk/mcp", "/.well-known/oauth-protected-resource/astoken/mcp"):
            kind = self.path.split("/")[3]
            self._json(200, {"resource": f"{base}/{kind}/mcp", "authorization_servers": [f"{base}/{kind}-as"]})
        elif self.path in ("/.well-known/oauth-authorization-server/asjunk-as", "/asjunk-as/.well-known/openid-configuration"):
            self._json(200, b"<html>not metadata</html>")
        elif self.path in ("/.well-known/oauth-authorization-server/astoken-as", "/astoken-as/.well-known/openid-configuration"):
            self._json(
                200,
                {
                    "issuer": f"{base}/astoken-as",
                    "authorization_endpoint": f"{base}/authorize",
                    "response_types_supported": ["code"],
                },
            )
        elif self.path == "/.well-known/oauth-protected-resource/notoken/mcp":
            self._json(200, {"resource": f"{base}/notoken/mcp", "authorization_servers": [f"{base}/as"]})
        elif self.path in ("/.well-known/oauth-authorization-server/as", "/as/.well-known/openid-configuration"):
            self._json(
                200,
                {
                    "issuer": f"{base}/as",
                    "authorization_endpoint": f"{base}/authorize",
                    "token_endpoint": f"{base}/token",
                    "registration_endpoint": f"{base}/register",
                    "code_challenge_methods_supported": ["S256"],
                    "response_types_supported": ["code"],
                },
            )
        elif self.path.startswith("/authorize"):
            q = parse_qs(urlparse(self.path).query)
            target = f"{q['redirect_uri'][0]}?code=abc&state={q['state'][0]}"
            self.send_response(302)
            self.send_header("location", target)
            self.end_headers()
        else:
            self._json(404, {})

    def log_message(self, *args: Any) -> None:
        pass


async def test_malformed_metadata_and_a_token_without_access_token_are_named() -> None:
    tmp = make_tmp()
    bad = ThreadingHTTPServer(("127.0.0.1", 0), BadAuthorizationServer)
    BadAuthorizationServer.base = f"http://127.0.0.1:{bad.server_address[1]}"
    threading.Thread(target=bad.serve_forever, daemon=True).start()
    base = BadAuthorizationServer.base
    evo = start_evod(
        tmp,
        "evo",
        {"mcpServers": {sid: {"type": "http", "url": f"{base}/{sid}/mcp"} for sid in ("broken", "notoken", "noas", "asjunk", "astoken")}},
        {"EVO_STATE_DIR": str(tmp / "state")},
    )
    w = World(tmp, evo, 0, evo, 0, evo, tmp / "state")
    try:
        def server(sid: str) -> dict[str, Any]:
            return w.server(sid) if w.ctl("status").returncode == 0 else {}

        s = await anyio.to_thread.run_sync(
            lambda: wait_for("broken never login_required", lambda: (x := server("broken")).get("state") == "login_required" and x, 30, w.diagnostics)
        )
        assert "server 'broken'" in s["error"] and "metadata" in s["error"], s
        assert "must fix that document" in s["error"], s
        out = w.ctl("login", "broken", "--no-browser")
        assert out.returncode == 1 and "server 'broken'" in out.stderr and "metadata" in out.stderr, out.stderr

        # Each broken document is named by its URL and what is wrong with it, in `evoctl status`
        # and in `evoctl login`.
        expected = {
            "broken": f"the protected resource metadata at {base}/.well-known/oauth-protected-resource/broken/mcp is not valid JSON",
            "noas": f"the protected resource metadata at {base}/.well-known/oauth-protected-resource/noas/mcp lacks `authorization_servers`",
            "asjunk": f"the authorization server metadata at {base}/.well-known/oauth-authorization-server/asjunk-as is not valid JSON",
            "astoken": f"the authorization server metadata at {base}/.well-known/oauth-authorization-server/astoken-as lacks the required field `token_endpoint`",
        }
        for sid, words in expected.items():
            s = await anyio.to_thread.run_sync(
                lambda sid=sid: wait_for(f"{sid} never login_required", lambda: (x := server(sid)).get("state") == "login_required" and x, 30, w.diagnostics)
            )
            assert f"server '{sid}'" in s["error"] and words in s["error"], (sid, s["error"])
            assert f"whoever runs server '{sid}' must fix that document" in s["error"], s["error"]
            assert words in w.ctl("status").stdout, w.ctl("status").stdout
            out = w.ctl("login", sid, "--no-browser")
            assert out.returncode == 1 and f"server '{sid}'" in out.stderr and words in out.stderr, (sid, out.stderr)

        await anyio.to_thread.run_sync(
            lambda: wait_for("notoken never login_required", lambda: server("notoken").get("state") == "login_required", 30, w.diagnostics)
        )
        proc, url = begin_login(w, "notoken")
        page = httpx2.get(url, follow_redirects=True, timeout=10)
        assert page.status_code == 400, page.text
        out_, err = proc.communicate(timeout=30)
        assert proc.returncode == 1, (out_, err)
        assert "server 'notoken'" in err and "access_token" in err, err
    finally:
        evo.stop()
        bad.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


async def test_rmcp_log_lines_about_a_remote_server_name_it() -> None:
    """A remote child that fails (HTTP 500 to its initialize): rmcp's own lines about it, its
    transport worker's "worker quit with fatal" included (a task rmcp spawns without a span),
    carry `server=ID`; so does every other rmcp line while two servers fail side by side."""
    tmp = make_tmp()
    bad = ThreadingHTTPServer(("127.0.0.1", 0), BadAuthorizationServer)
    BadAuthorizationServer.base = f"http://127.0.0.1:{bad.server_address[1]}"
    threading.Thread(target=bad.serve_forever, daemon=True).start()
    base = BadAuthorizationServer.base
    evo = start_evod(
        tmp,
        "evo",
        {"mcpServers": {"fail": {"type": "http", "url": f"{base}/fail/mcp"}, "broken": {"type": "http", "url": f"{base}/broken/mcp"}}},
        {"EVO_STATE_DIR": str(tmp / "state")},
    )
    w = World(tmp, evo, 0, evo, 0, evo, tmp / "state")
    try:
        def rmcp_lines() -> list[str]:
            return [line for line in evo.log.read_text(errors="replace").splitlines() if " rmcp::" in line]

        quit_lines = await anyio.to_thread.run_sync(
            lambda: wait_for(
                "rmcp logged no worker quit for 'fail'",
                lambda: [line for line in rmcp_lines() if "worker quit with fatal" in line and "server=fail" in line],
                30,
                w.diagnostics,
            )
        )
        assert quit_lines
        lines = rmcp_lines()
        assert lines
        unnamed = [line for line in lines if "server=" not in line]
        assert not unnamed, "rmcp lines without a server:\n" + "\n".join(unnamed[:10])
        assert any("server=broken" in line for line in lines), "\n".join(lines[:20])
    finally:
        evo.stop()
        bad.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


async def test_reload_keeps_tokens_on_rename_and_forgets_them_on_new_oauth_settings(world: World) -> None:
    w = world
    config_path = w.tmp / "evo" / "mcp.config.json"
    with anyio.fail_after(TIMEOUT_S):
        await anyio.to_thread.run_sync(
            lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
        )
        await anyio.to_thread.run_sync(login, w)
        await anyio.to_thread.run_sync(
            lambda: wait_for("web not ready after login", lambda: w.server("web")["state"] == "ready", 30, w.diagnostics)
        )
        # Renamed: the same server under a new id keeps its tokens (no login).
        config = json.loads(config_path.read_text())
        config["mcpServers"]["remote"] = config["mcpServers"].pop("web")
        config_path.write_text(json.dumps(config))
        await anyio.to_thread.run_sync(
            lambda: wait_for("renamed server not ready", lambda: w.server("remote").get("state") == "ready", 30, w.diagnostics)
        )
        assert w.server("remote")["auth"]["state"] == "ok"
        r = await call(w, "remote_fx_echo", {"text": "renamed"})
        assert not r.is_error and text(r) == "renamed", text(r)
        # New OAuth settings: the tokens were issued for the old ones and are forgotten.
        config["mcpServers"]["remote"]["oauth"]["scopes"] = ["openid", "mcp"]
        config_path.write_text(json.dumps(config))
        await anyio.to_thread.run_sync(
            lambda: wait_for("not login_required after new oauth settings", lambda: w.server("remote").get("state") == "login_required", 30, w.diagnostics)
        )
        assert not list((w.state_dir / "oauth").glob("remote-*.json"))


def refreshes(w: World, sid: str, trigger: str) -> int:
    return w.evo.log.read_text(errors="replace").count(f'access token refreshed server={sid} trigger="{trigger}"')


async def test_a_client_with_url_elicitation_is_offered_the_login(world: World) -> None:
    """A call to a tool of a server in `login required`, from a client that declared URL-mode
    elicitation, offers the login page (`elicitation/create` mode `url`): declined, the call says
    so; accepted and completed in the browser, the call runs on the logged-in server and the
    client hears `notifications/elicitation/complete` for that elicitation."""
    w = world
    with anyio.fail_after(TIMEOUT_S):
        await anyio.to_thread.run_sync(
            lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
        )
        offers: list[Any] = []
        notes: list[Any] = []

        def answering(action: str) -> Any:
            async def callback(_ctx: Any, params: Any) -> types.ElicitResult:
                offers.append(params)
                if action == "accept":
                    # What the client's user does: opens the page and logs in.
                    page = await anyio.to_thread.run_sync(browser, params.url)
                    assert page.status_code == 200 and "logged in" in page.text, page.text
                return types.ElicitResult(action=action)

            return callback

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ElicitCompleteNotification):
                notes.append(message.params.elicitation_id)

        async with unwrapped(), Client(w.shim(), mode="legacy", elicitation_callback=answering("decline")) as c:
            r = await c.call_tool("web_fx_echo", {"text": "declined"})
        assert r.is_error and "did not open" in text(r) and "evoctl login web" in text(r), text(r)
        assert len(offers) == 1 and offers[0].mode == "url", offers
        assert offers[0].url.startswith(f"{w.issuer}/auth?"), offers[0].url
        assert w.server("web")["state"] == "login_required"

        async with unwrapped(), Client(
            w.shim(), mode="legacy", elicitation_callback=answering("accept"), message_handler=on_message
        ) as c:
            r = await c.call_tool("web_fx_echo", {"text": "after the offered login"})
            assert not r.is_error and text(r) == "after the offered login", f"{text(r)}\n{w.diagnostics()}"
            # The same login flow as `evoctl login`: one redirect listener, state and iss checked.
            assert parse_qs(urlparse(offers[1].url).query)["redirect_uri"][0].startswith("http://127.0.0.1:")
            await anyio.to_thread.run_sync(lambda: wait_for("no elicitation/complete", lambda: notes, 10, w.diagnostics))
            assert notes == [offers[1].elicitation_id], (notes, offers)
            tools = [t.name for t in (await c.list_tools()).tools]
            assert "web_fx_echo" in tools, tools
        s = w.server("web")
        assert s["state"] == "ready" and s["auth"]["state"] == "ok", s
        assert w.token_file("web")["client_id"]
        assert_no_secret_leaks(w, ["web"])


async def test_the_token_is_refreshed_ahead_of_expiry_by_a_timer(world: World) -> None:
    """No request between the login and the refresh: the timer refreshes a token nearing expiry
    (a tenth of its life, at most a minute, before it), and calls then carry the new one."""
    w = world
    with anyio.fail_after(TIMEOUT_S):
        await anyio.to_thread.run_sync(
            lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
        )
        await anyio.to_thread.run_sync(login, w)
        first = await anyio.to_thread.run_sync(
            lambda: wait_for("web not ready after login", lambda: (x := w.server("web"))["state"] == "ready" and x, 30, w.diagnostics)
        )
        token = w.token_file("web")["credentials"]["token_response"]["access_token"]
        before = refreshes(w, "web", "timer")
        # The ping (every 10 s) is the only traffic; the token lives TTL_S (6 s).
        await anyio.to_thread.run_sync(
            lambda: wait_for("no timed refresh", lambda: refreshes(w, "web", "timer") > before, TTL_S + 3, w.diagnostics)
        )
        assert refreshes(w, "web", "request") == 0, w.diagnostics()
        assert w.token_file("web")["credentials"]["token_response"]["access_token"] != token
        assert w.server("web")["auth"]["expires_at"] > first["auth"]["expires_at"]
        r = await call(w, "web_fx_echo", {"text": "fresh"})
        assert not r.is_error and text(r) == "fresh", text(r)
        assert refreshes(w, "web", "request") == 0, w.diagnostics()


async def reaches(w: World, sid: str, state: str, within: float, diag: Any) -> None:
    """Waits until server `sid` is in `state`."""
    await anyio.to_thread.run_sync(
        lambda: wait_for(f"{sid} never {state}", lambda: w.server(sid).get("state") == state, within, diag)
    )


async def five_calls_refresh_a_refused_token_once(w: World, sid: str, reject: Path, diag: Any) -> None:
    """The server refuses the token evo holds (as after a key rotation): five calls of
    `{sid}_echo` at the same time wait for one refresh of it and each is answered, sent again
    with the new token."""
    held = w.token_file(sid)["credentials"]["token_response"]["access_token"]
    reject.write_text(held + "\n")
    results: list[Any] = []
    async with unwrapped(), Client(w.shim(), mode="legacy") as c:

        async def one(i: int) -> None:
            results.append(await c.call_tool(f"{sid}_echo", {"text": f"after a 401 {i}"}))

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(one, i)
    assert sorted(text(x) for x in results) == [f"after a 401 {i}" for i in range(5)], [text(x) for x in results]
    assert refreshes(w, sid, "401") == 1, diag()
    assert w.token_file(sid)["credentials"]["token_response"]["access_token"] != held


def start_protected_sse(tmp: Path, port: int, issuer: str, reject: Path, transport: str = "sse") -> LoggedProcess:
    log = tmp / f"{transport}-server.log"
    env = clean_env() | {"PORT": str(port), "ISSUER": issuer, "REJECT_FILE": str(reject), "TRANSPORT": transport}
    sse = LoggedProcess.start([sys.executable, str(HERE / "oauth" / "sse_server.py")], log, env=env, cwd=HERE)
    sse.wait_started(f"the protected {transport} server (oauth/sse_server.py)", " server on ")
    return sse


async def test_an_sse_child_behind_oauth() -> None:
    """A legacy HTTP+SSE child (the Python SDK's SSE server with its resource-server support,
    checking oidc-provider's JWTs): 401 -> login required -> login -> calls; a 401 to the token
    evo holds refreshes it once and the call goes through; a refused refresh is login required."""
    tmp = make_tmp()
    sse_port = free_port()
    sse_url = f"http://127.0.0.1:{sse_port}/sse"
    reject = tmp / "rejected-tokens"
    sse: LoggedProcess | None = None
    servers = lambda _rs: {"mcpServers": {"sse": {"type": "sse", "url": sse_url, "oauth": {"scopes": SCOPES}}}}
    try:
        with running_world(servers=servers, more_resources=(sse_url,), tmp=tmp) as w:
            sse = start_protected_sse(tmp, sse_port, w.issuer, reject)
            with anyio.fail_after(TIMEOUT_S):
                diag = lambda: f"{w.diagnostics()}\n--- SSE server ---\n{tail(sse.log, 30)}"
                await reaches(w, "sse", "login_required", 40, diag)
                r = await call(w, "sse_echo", {"text": "hi"})
                assert r.is_error and "evoctl login sse" in text(r), text(r)

                await anyio.to_thread.run_sync(login, w, "sse")
                await reaches(w, "sse", "ready", 30, diag)
                r = await call(w, "sse_echo", {"text": "over sse with oauth"})
                assert not r.is_error and text(r) == "over sse with oauth", f"{text(r)}\n{diag()}"

                # The server refuses the token evo holds (as after a key rotation): the POSTs' 401s
                # refresh it once, five calls at the same time waiting for that one refresh, and
                # each call is sent again with the new token.
                await five_calls_refresh_a_refused_token_once(w, "sse", reject, diag)
                assert "refused a listed token" in sse.log.read_text(errors="replace")

                # The refresh token is revoked and the token refused: login required, with the reason.
                file = w.token_file("sse")
                creds = file["credentials"]["token_response"]
                revoked = httpx2.post(
                    f"{w.issuer}/token/revocation",
                    data={"token": creds["refresh_token"], "token_type_hint": "refresh_token", "client_id": file["client_id"]},
                )
                assert revoked.status_code == 200, revoked.text
                reject.write_text(creds["access_token"] + "\n")
                r = await call(w, "sse_echo", {"text": "after revocation"})
                assert r.is_error, text(r)
                s = await anyio.to_thread.run_sync(
                    lambda: wait_for("sse not login_required after revocation", lambda: (x := w.server("sse"))["state"] == "login_required" and x, 30, diag)
                )
                assert "refused the refresh token" in (s.get("error") or ""), s
    finally:
        if sse:
            sse.stop()


async def test_a_streamable_http_childs_direct_calls_refresh_on_a_401() -> None:
    """A Streamable HTTP child behind OAuth answering with event streams (the Python SDK's app):
    evo's direct calls (its own request ids, `evo-N`) carry the token; when the server refuses the
    token evo holds, the 401 refreshes it once, five calls at the same time waiting for that one
    refresh, and each call is sent again, directly, with the new token."""
    tmp = make_tmp()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    reject = tmp / "rejected-tokens"
    child: LoggedProcess | None = None
    servers = lambda _rs: {"mcpServers": {"h": {"type": "http", "url": url, "oauth": {"scopes": SCOPES}}}}
    try:
        with running_world(servers=servers, more_resources=(url,), tmp=tmp) as w:
            child = start_protected_sse(tmp, port, w.issuer, reject, "http")
            with anyio.fail_after(TIMEOUT_S):
                diag = lambda: f"{w.diagnostics()}\n--- the child ---\n{tail(child.log, 30)}"
                await reaches(w, "h", "login_required", 40, diag)
                await anyio.to_thread.run_sync(login, w, "h")
                await reaches(w, "h", "ready", 30, diag)
                r = await call(w, "h_echo", {"text": "with oauth"})
                assert not r.is_error and text(r) == "with oauth", f"{text(r)}\n{diag()}"

                seen = child.log.read_text(errors="replace").count("echo id")
                await five_calls_refresh_a_refused_token_once(w, "h", reject, diag)
                log = child.log.read_text(errors="replace")
                assert "refused a listed token" in log
                ids = re.findall(r"echo id '([^']*)'", log)[seen:]
                assert len(ids) == 5 and all(i.startswith("evo-") for i in ids), ids
    finally:
        if child:
            child.stop()


async def test_a_client_id_metadata_document_identifies_evo() -> None:
    """oidc-provider with its client ID metadata document feature (draft-02) advertises
    `client_id_metadata_document_supported`; evo's `oauth.client_metadata_url` is then its
    client_id (no registration). The authorization server fetches the document over HTTPS
    (served here) and checks the loopback redirect against its redirect_uris."""
    import ssl

    tmp = make_tmp()
    # Its own CA: the authorization server trusts the certificate itself.
    cert, key = write_certificate(tmp, "127.0.0.1")
    ca = cert
    fetched: list[str] = []

    class Document(BaseHTTPRequestHandler):
        url = ""

        def do_GET(self) -> None:  # noqa: N802
            fetched.append(self.path)
            body = json.dumps(
                {
                    "client_id": Document.url,
                    "client_name": "evo",
                    "application_type": "native",
                    "redirect_uris": ["http://127.0.0.1/callback"],
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    docs = ThreadingHTTPServer(("127.0.0.1", 0), Document)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    docs.socket = context.wrap_socket(docs.socket, server_side=True)
    Document.url = f"https://127.0.0.1:{docs.server_address[1]}/evo/client.json"
    threading.Thread(target=docs.serve_forever, daemon=True).start()
    servers = lambda rs: {"mcpServers": {"web": {"type": "http", "url": rs, "oauth": {"scopes": SCOPES, "client_metadata_url": Document.url}}}}
    try:
        with running_world(as_env={"CIMD": "1", "NODE_EXTRA_CA_CERTS": str(ca)}, servers=servers, tmp=tmp) as w:
            meta = httpx2.get(f"{w.issuer}/.well-known/openid-configuration").json()
            assert meta.get("client_id_metadata_document_supported") is True, meta
            with anyio.fail_after(TIMEOUT_S):
                await anyio.to_thread.run_sync(
                    lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
                )
                proc, url = begin_login(w, "web")
                assert parse_qs(urlparse(url).query)["client_id"] == [Document.url], url
                page = browser(url)
                assert page.status_code == 200 and "logged in" in page.text, f"{page.text}\n{w.diagnostics()}"
                out, err = proc.communicate(timeout=30)
                assert proc.returncode == 0, f"{out}\n{err}\n{w.diagnostics()}"
                assert fetched == ["/evo/client.json"] or set(fetched) == {"/evo/client.json"}, fetched
                assert w.token_file("web")["client_id"] == Document.url
                await anyio.to_thread.run_sync(
                    lambda: wait_for("web not ready after login", lambda: w.server("web")["state"] == "ready", 30, w.diagnostics)
                )
                r = await call(w, "web_fx_echo", {"text": "identified by a document"})
                assert not r.is_error and text(r) == "identified by a document", text(r)
                assert "/reg" not in w.auth.log.read_text(errors="replace")
    finally:
        docs.shutdown()


async def test_an_offered_login_finished_after_the_call_gave_up() -> None:
    """The user accepts the offer but takes longer than the server's `timeout_s`: the call
    answers (never hangs) that the login was offered and to call again; the login finished later
    still sends `notifications/elicitation/complete`, and the next call runs."""

    def servers(rs: str) -> dict[str, Any]:
        return {"mcpServers": {"web": {"type": "http", "url": rs, "oauth": {"scopes": SCOPES}, "timeout_s": 2}}}

    with running_world(servers=servers) as w, anyio.fail_after(TIMEOUT_S):
        await anyio.to_thread.run_sync(
            lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
        )
        offers: list[Any] = []
        notes: list[str] = []

        async def later(_ctx: Any, params: Any) -> types.ElicitResult:
            offers.append(params)
            return types.ElicitResult(action="accept")  # opened, not finished yet

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ElicitCompleteNotification):
                notes.append(message.params.elicitation_id)

        async with unwrapped(), Client(w.shim(), mode="legacy", elicitation_callback=later, message_handler=on_message) as c:
            started = time.monotonic()
            r = await c.call_tool("web_fx_echo", {"text": "too soon"})
            assert r.is_error and "was offered" in text(r) and "within 2s" in text(r), text(r)
            assert time.monotonic() - started < 15
            assert notes == []
            # A second call while the login is under way is offered the same login.
            r = await c.call_tool("web_fx_echo", {"text": "still too soon"})
            assert r.is_error and "was offered" in text(r), text(r)
            assert len(offers) == 2 and offers[0].url == offers[1].url, offers
            assert offers[0].elicitation_id != offers[1].elicitation_id
            page = await anyio.to_thread.run_sync(browser, offers[0].url)
            assert page.status_code == 200 and "logged in" in page.text, page.text
            await anyio.to_thread.run_sync(lambda: wait_for("no elicitation/complete", lambda: len(notes) == 2, 10, w.diagnostics))
            assert sorted(notes) == sorted(o.elicitation_id for o in offers), (notes, offers)
            await anyio.to_thread.run_sync(
                lambda: wait_for("web not ready after the login", lambda: w.server("web")["state"] == "ready", 30, w.diagnostics)
            )
            r = await c.call_tool("web_fx_echo", {"text": "now"})
            assert not r.is_error and text(r) == "now", text(r)


async def test_an_http_identity_is_not_offered_the_login() -> None:
    """The server's tokens serve every session, so a client on the HTTP front with an API token
    (`token:bob`) is never offered the login, even with URL elicitation: it gets the text naming
    `evoctl login`, and no login starts."""
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()

    def servers(rs: str) -> dict[str, Any]:
        return evo_config(rs) | {"serve": {"http": {"listen": f"127.0.0.1:{port}", "auth": {}}}}

    with running_world(servers=servers) as w, anyio.fail_after(TIMEOUT_S):
        await anyio.to_thread.run_sync(
            lambda: wait_for("web never login_required", lambda: w.server("web")["state"] == "login_required", 30, w.diagnostics)
        )
        made = w.ctl("token", "create", "bob")
        assert made.returncode == 0, made.stderr
        offers: list[Any] = []

        async def accept(_ctx: Any, params: Any) -> types.ElicitResult:
            offers.append(params)
            return types.ElicitResult(action="accept")

        headers = {"Authorization": f"Bearer {made.stdout.strip()}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0)) as hc,
            unwrapped(),
            Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=hc), mode="legacy", elicitation_callback=accept) as c,
        ):
            r = await c.call_tool("web_fx_echo", {"text": "hi"})
        assert r.is_error and "evoctl login web" in text(r), text(r)
        assert offers == []
        assert "login offered" not in w.evo.log.read_text(errors="replace")
