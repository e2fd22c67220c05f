"""The servers tests put beside evod: server-everything over Streamable HTTP and over HTTP+SSE,
redis-server, an OAuth issuer's key set (JWKS) served from this process, and the TLS certificate
they all use (made here with `cryptography`, the one way the suite makes one)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from evo_harness.processes import (
    LOOPBACK_JS,
    assert_loopback_only,
    clean_env,
    everything_js,
    free_port,
    node_bin,
    spawn,
    stop,
    tail,
    wait_for,
)

HTTP_START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


@dataclass
class HttpEverything:
    """server-everything in streamableHttp mode. It reads the port from $PORT and takes no host
    option: loopback.cjs, preloaded, makes it listen on 127.0.0.1."""

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
            with log.open("wb") as out:
                proc = spawn(
                    [node_bin(), "--require", str(LOOPBACK_JS), everything_js(), cls.MODE],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=clean_env() | {"PORT": str(port)},
                    cwd=tmp,
                )
            server = cls(proc, port, log)
            ready_line = cls.ready_line(port)
            deadline = time.monotonic() + HTTP_START_TIMEOUT_S
            while time.monotonic() < deadline:
                if ready_line in log.read_text(errors="replace"):
                    assert_loopback_only(port, f"server-everything ({cls.MODE})")
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
        stop(self.proc, signal.SIGINT, STOP_TIMEOUT_S, group=True)


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
class Redis:
    """A redis-server on a free loopback port, keeping nothing on disk."""

    proc: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, tmp: Path) -> Redis:
        port = free_port()
        proc = spawn(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp), "--save", ""],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        redis = cls(proc, port)
        wait_for("redis-server did not start", redis.answers, 10)
        assert_loopback_only(port, "redis-server")
        return redis

    def answers(self) -> bool:
        ping = ["redis-cli", "-p", str(self.port), "PING"]
        return subprocess.run(ping, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout.strip() == "PONG"

    def stop(self) -> None:
        stop(self.proc, signal.SIGKILL, 10.0)


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


def _named(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _signed(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    ca: x509.BasicConstraints,
    loopback: bool,
) -> x509.Certificate:
    """A certificate for `subject` and `key`, signed by `issuer_key`, valid from five minutes ago
    for a day; for 127.0.0.1 and localhost when `loopback`."""
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if loopback:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.add_extension(ca, critical=True).sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def certificate(common_name: str) -> tuple[bytes, bytes]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key (PEM). It is its own
    CA: a client trusts it by taking the certificate file as its CA file."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _named(common_name)
    cert = _signed(name, key, name, key, x509.BasicConstraints(ca=True, path_length=None), loopback=True)
    return _pem(cert), _key_pem(key)


def issued_certificate(common_name: str) -> tuple[bytes, bytes, bytes]:
    """A CA, and a certificate for 127.0.0.1 and localhost it issued, with that certificate's key
    (PEM: CA, certificate, key). For clients (rustls) that refuse a self-signed certificate
    that is its own CA."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _named(f"{common_name} CA")
    ca = _signed(ca_name, ca_key, ca_name, ca_key, x509.BasicConstraints(ca=True, path_length=0), loopback=False)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _signed(_named(common_name), key, ca_name, ca_key, x509.BasicConstraints(ca=False, path_length=None), loopback=True)
    return _pem(ca), _pem(cert), _key_pem(key)


def write_certificate(directory: Path, common_name: str) -> tuple[Path, Path]:
    """`certificate(common_name)` written to DIRECTORY/cert.pem and DIRECTORY/key.pem."""
    cert, key = certificate(common_name)
    paths = (directory / "cert.pem", directory / "key.pem")
    paths[0].write_bytes(cert)
    paths[1].write_bytes(key)
    return paths
