"""evod as an OAuth 2.1 resource server: JWT access tokens minted here with a real JOSE library
(PyJWT, keys from ``cryptography``), checked by evod against the issuer's key set served over
local HTTP. Valid RS256 and ES256 tokens work through the SDK in both eras; expired, not yet
valid, wrong-audience, wrong-issuer, unknown-key and revoked credentials are refused with 401 and
the RFC 9728 challenge; a missing scope gets 403 ``insufficient_scope``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import anyio
import pytest
from evo_harness import Evo, http_client, http_evo_fixture, text

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
TIMEOUT_S = 60.0
LIST = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}

PERMISSIONS = """roles:
  dev: { default_permission: allow }
  readonly: { default_permission: deny, overrides: { fx_echo: allow } }
"""


@pytest.fixture(scope="module")
def evo_http() -> Iterator[Evo]:
    yield from http_evo_fixture(permissions=PERMISSIONS)


def challenge(headers: dict[str, str]) -> str:
    return next((v for k, v in headers.items() if k.lower() == "www-authenticate"), "")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kid", ["rsa1", "ec1"])
async def test_valid_tokens_work_and_name_the_identity(evo_http: Evo, mode: str, kid: str) -> None:
    sub = f"user-{kid}-{mode}"
    token = evo_http.issuer.token(evo_http.url, kid=kid, sub=sub, evo_role="readonly", evo_profile="support")
    with anyio.fail_after(TIMEOUT_S):
        async with http_client(evo_http, token, mode) as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            # The role claim chose permissions.yml's readonly role for this identity.
            assert "fx_echo" in tools and "fx_add" not in tools, tools
            r = await c.call_tool("fx_echo", {"text": kid})
            assert not r.is_error and text(r) == kid
            r = await c.call_tool("fx_add", {"a": 1, "b": 1})
            assert r.is_error and "denied" in text(r), text(r)
            sessions = [s for s in evo_http.ctl_json("sessions")["sessions"] if s["identity"] == f"oauth:{sub}"]
            assert sessions, evo_http.ctl_json("sessions")
            assert {(s["io"], s["profile"], s["role"]) for s in sessions} == {("http", "support", "readonly")}


async def test_a_request_without_a_credential_is_told_where_to_get_one(evo_http: Evo) -> None:
    status, headers, body = evo_http.post(LIST, None)
    assert status == 401, body
    www = challenge(headers)
    assert www.startswith("Bearer "), headers
    metadata_url = f"http://127.0.0.1:{evo_http.port}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata_url}"' in www, www
    status, _, body = evo_http.get("/.well-known/oauth-protected-resource/mcp")
    assert status == 200, body
    doc = json.loads(body)
    assert doc["resource"] == evo_http.url, doc
    assert doc["authorization_servers"] == [evo_http.issuer.url], doc
    assert doc["bearer_methods_supported"] == ["header"], doc
    # The root form of the well-known URL answers too.
    assert evo_http.get("/.well-known/oauth-protected-resource")[0] == 200


@pytest.mark.parametrize(
    ("case", "claims", "says"),
    [
        ("expired", {"exp": -120}, "expired"),
        ("not yet valid", {"nbf": 600}, "not valid yet"),
        ("another audience", {"aud": "https://other.example/mcp"}, "another audience"),
        ("another issuer", {"iss": "https://evil.example"}, "another issuer"),
        ("no subject", {"sub": None}, "claim"),
    ],
)
async def test_bad_tokens_are_refused_with_the_challenge(
    evo_http: Evo, case: str, claims: dict[str, object], says: str
) -> None:
    now = int(time.time())
    fixed = {k: (now + v if k in ("exp", "nbf") and isinstance(v, int) else v) for k, v in claims.items()}
    audience = str(fixed.pop("aud", evo_http.url))
    token = evo_http.issuer.token(audience, **fixed)
    status, headers, body = evo_http.post(LIST, token)
    assert status == 401, (case, body)
    www = challenge(headers)
    assert 'error="invalid_token"' in www and "resource_metadata=" in www, (case, www)
    assert says in www, (case, www)
    assert token not in evo_http.log.read_text(errors="replace"), "a token reached the log"


async def test_a_token_signed_by_a_key_outside_the_set_is_refused(evo_http: Evo) -> None:
    issuer = evo_http.issuer
    issuer.add_key("stranger", "RS256", publish=False)
    fetches = issuer.fetches
    token = issuer.token(evo_http.url, kid="stranger")
    status, headers, _ = evo_http.post(LIST, token)
    assert status == 401 and "key id" in challenge(headers), challenge(headers)
    # A known kid with another key's signature: refused as a bad signature.
    forged = issuer.token(evo_http.url, kid="stranger").split(".")
    real = issuer.token(evo_http.url, kid="rsa1").split(".")
    status, headers, _ = evo_http.post(LIST, ".".join([real[0], forged[1], forged[2]]))
    assert status == 401 and "signature" in challenge(headers), challenge(headers)
    # Many unknown kids within a minute of the last fetch fetch nothing more.
    for _ in range(20):
        assert evo_http.post(LIST, token)[0] == 401
    assert issuer.fetches <= fetches + 1, (fetches, issuer.fetches)


async def test_a_revoked_api_token_is_refused_beside_oauth(evo_http: Evo) -> None:
    token = evo_http.token("temp")
    assert evo_http.post(LIST, token)[0] == 200
    done = evo_http.ctl("token", "revoke", "temp")
    assert done.returncode == 0, done.stderr
    status, headers, _ = evo_http.post(LIST, token)
    assert status == 401 and 'error="invalid_token"' in challenge(headers)


async def test_a_role_permissions_yml_lacks_is_refused(evo_http: Evo) -> None:
    token = evo_http.issuer.token(evo_http.url, sub="mallory", evo_role="root")
    status, _, body = evo_http.post(LIST, token)
    assert status == 403 and b"root" in body, body


async def test_scopes_are_required_when_configured() -> None:
    for evo in http_evo_fixture(required_scopes=["mcp:tools"]):
        without = evo.issuer.token(evo.url, scope="profile")
        status, headers, _ = evo.post(LIST, without)
        assert status == 403, headers
        www = challenge(headers)
        assert 'error="insufficient_scope"' in www and 'scope="mcp:tools"' in www, www
        with_scope = evo.issuer.token(evo.url, scope="profile mcp:tools")
        assert evo.post(LIST, with_scope)[0] == 200
        as_list = evo.issuer.token(evo.url, scp=["mcp:tools"])
        assert evo.post(LIST, as_list)[0] == 200
        doc = json.loads(evo.get("/.well-known/oauth-protected-resource")[2])
        assert doc["scopes_supported"] == ["mcp:tools"], doc


async def test_a_new_signing_key_is_fetched_at_most_once_a_minute(evo_http: Evo) -> None:
    """Last in the module: it waits out the minute since the key set was last fetched. A key that
    leaves the set takes the tokens it signed with it, though evod had verified them before."""
    issuer = evo_http.issuer
    # A token evod has verified (and remembers) whose key then leaves the set.
    retiring = issuer.token(evo_http.url, kid="ec1", sub="retiring")
    assert evo_http.post(LIST, retiring)[0] == 200
    issuer.published.remove("ec1")
    issuer.add_key("rsa2", "RS256")  # published now; evod fetched the set before
    before = issuer.fetches
    token = issuer.token(evo_http.url, kid="rsa2", sub="rotated")
    deadline = time.monotonic() + 75
    status = evo_http.post(LIST, token)[0]
    while status != 200:
        assert status == 401
        assert time.monotonic() < deadline, "the new key was never fetched"
        await anyio.sleep(1)
        status = evo_http.post(LIST, token)[0]
    # One fetch brought it (not one per request).
    assert issuer.fetches <= before + 1, (before, issuer.fetches)
    # The new set no longer has ec1: what ec1 signed is refused, remembered or not.
    status, headers, _ = evo_http.post(LIST, retiring)
    assert status == 401 and "key id" in challenge(headers), challenge(headers)
