"""Harness for the HTTP interop tests: evod serving MCP over Streamable HTTP on a free loopback
port, with API tokens and OAuth access tokens, and an OAuth issuer's key set (JWKS) served over
local HTTP.

``EvoHttp.start`` writes a config with the fixture server ``fx`` and ``serve.http`` (auth: the
tokens file, and ``oauth`` against the ``Issuer`` it is given), starts evod and waits for
``/healthz``. ``Issuer`` holds real RSA and EC keys (``cryptography``), serves their public halves
as a JWKS document on its own port (counting fetches, keys can be added) and mints JWTs with
PyJWT. Binaries come from ``$EVO_BIN_DIR`` as in harness.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from harness import _stop_process, clean_env, evoctl_bin, evod_bin, fixture_bin, free_port, make_tmp, tail
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from test_interop import unwrapped

START_TIMEOUT_S = 30.0


class Issuer:
    """An OAuth issuer as far as a resource server sees one: signing keys, their JWKS document
    on http://127.0.0.1:PORT/jwks.json, and tokens signed with them."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[str, Any]] = {}
        self.published: list[str] = []
        self.fetches = 0
        self.add_key("rsa1", "RS256")
        self.add_key("ec1", "ES256")
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path != "/jwks.json":
                    self.send_error(404)
                    return
                issuer.fetches += 1
                body = json.dumps(issuer.jwks()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        # Bound here on a port the kernel picks: no window for another to take it.
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add_key(self, kid: str, alg: str, publish: bool = True) -> None:
        if alg.startswith("RS"):
            private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            private = ec.generate_private_key(ec.SECP256R1())
        self.keys[kid] = (alg, private)
        if publish:
            self.published.append(kid)

    def publish(self, kid: str) -> None:
        self.published.append(kid)

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            alg, private = self.keys[kid]
            algo = jwt.algorithms.RSAAlgorithm if alg.startswith("RS") else jwt.algorithms.ECAlgorithm
            jwk = json.loads(algo.to_jwk(private.public_key()))
            jwk.update({"kid": kid, "alg": alg, "use": "sig"})
            keys.append(jwk)
        return {"keys": keys}

    def token(self, audience: str, kid: str = "rsa1", **claims: Any) -> str:
        alg, private = self.keys[kid]
        now = int(time.time())
        body: dict[str, Any] = {"iss": self.url, "aud": audience, "sub": "alice", "iat": now, "exp": now + 300}
        body.update(claims)
        for k in [k for k, v in body.items() if v is None]:
            del body[k]
        return jwt.encode(body, private, algorithm=alg, headers={"kid": kid})

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class EvoHttp:
    tmp: Path
    port: int
    issuer: Issuer
    proc: subprocess.Popen[bytes] | None = None
    evoctl: str = field(default_factory=evoctl_bin)
    #: The CA file clients trust when evod serves HTTPS (serve.http.tls).
    ca: Path | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.ca else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/mcp"

    @property
    def log(self) -> Path:
        return self.tmp / "evod.log"

    @property
    def socket(self) -> Path:
        return self.tmp / "evod.sock"

    @classmethod
    def start(
        cls, permissions: str = "", required_scopes: list[str] | None = None, tls: tuple[bytes, bytes] | None = None
    ) -> EvoHttp:
        """`tls`: a PEM certificate and key to serve HTTPS with (written to cert.pem, key.pem)."""
        tmp = make_tmp()
        evo = cls(tmp=tmp, port=free_port(), issuer=Issuer())
        if tls is not None:
            (tmp / "cert.pem").write_bytes(tls[0])
            (tmp / "key.pem").write_bytes(tls[1])
            evo.ca = tmp / "cert.pem"
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
        config = {
            "mcpServers": {"fx": {"command": fixture_bin()}},
            "serve": {"http": http},
            # Identities' profiles must be defined (test_http_oauth.py carries one in a claim).
            "profiles": {"support": ["fx_echo"]},
        }
        (tmp / "mcp.config.json").write_text(json.dumps(config))
        if permissions:
            (tmp / "permissions.yml").write_text(permissions)
        with evo.log.open("wb") as log:
            evo.proc = subprocess.Popen(
                [
                    evod_bin(),
                    "--config",
                    str(tmp / "mcp.config.json"),
                    "--socket",
                    str(evo.socket),
                    "--cache-dir",
                    str(tmp / "cache"),
                    "--mode",
                    "legacy",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=clean_env() | {"EVO_LOG": "info,evo_daemon=debug"},
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not evo.healthy():
            if evo.proc.poll() is not None or time.monotonic() > deadline:
                evo.stop()
                pytest.fail(f"evod did not serve HTTP:\n{tail(evo.log)}", pytrace=False)
            time.sleep(0.05)
        # The key set is fetched at start; ready once it is.
        while evo.get("/readyz")[0] != 200:
            if time.monotonic() > deadline:
                pytest.fail(f"evod not ready: {evo.get('/readyz')}\n{tail(evo.log)}", pytrace=False)
            time.sleep(0.05)
        return evo

    def healthy(self) -> bool:
        try:
            return self.get("/healthz")[0] == 200
        except OSError:
            return False
        except Exception:  # an SSL error while the certificate is being read
            return False

    def _context(self) -> Any:
        if self.ca is None:
            return None
        import ssl

        return ssl.create_default_context(cafile=str(self.ca))

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(f"{self.scheme}://127.0.0.1:{self.port}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self._context()) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def post(self, body: dict[str, Any], token: str | None) -> tuple[int, dict[str, str], bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10, context=self._context()) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.evoctl, "--socket", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=30,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
        )

    def ctl_json(self, *args: str) -> Any:
        done = self.ctl(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def token(self, name: str, *args: str) -> str:
        done = self.ctl("token", "create", name, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def diagnostics(self) -> str:
        return f"evod log (tail):\n{tail(self.log)}"

    def stop(self) -> None:
        if self.proc is not None:
            import signal

            _stop_process(self.proc, signal.SIGTERM, 20, group=False)
        self.issuer.stop()

    def cleanup(self) -> None:
        stopped = self.proc is None or self.proc.returncode == 0
        if stopped:
            shutil.rmtree(self.tmp, ignore_errors=True)


def start_fixture(**kwargs: Any) -> Iterator[EvoHttp]:
    evo = EvoHttp.start(**kwargs)
    try:
        yield evo
    finally:
        evo.stop()
        evo.cleanup()


@asynccontextmanager
async def http_client(evo: EvoHttp, token: str | None, mode: str, **client_kwargs: Any):  # type: ignore[no-untyped-def]
    """The official SDK's Streamable HTTP client on evo's endpoint with `token`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    verify: Any = evo._context() if evo.ca else True
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0), verify=verify) as hc,
        unwrapped(),
        Client(streamable_http_client(evo.url, http_client=hc), mode=mode, **client_kwargs) as client,
    ):
        yield client
