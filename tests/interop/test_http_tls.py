"""serve.http.tls: evod serves HTTPS itself (rustls), the official SDK connects with a
certificate made here, and a renewed certificate file is served to the next connection without a
restart."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator

import anyio
import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from evo_harness import Evo, certificate, http_client, http_evo_fixture, text

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def evo_tls() -> Iterator[Evo]:
    yield from http_evo_fixture(tls=certificate("evo-first"))


def served_common_name(port: int) -> str:
    """The subject CN of the certificate evod presents to a new connection."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    cert = x509.load_der_x509_certificate(der)
    return cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_speaks_mcp_over_https(evo_tls: Evo, mode: str) -> None:
    token = evo_tls.token(f"tls-{mode}")
    with anyio.fail_after(60):
        async with http_client(evo_tls, token, mode) as c:
            r = await c.call_tool("fx_echo", {"text": "over tls"})
            assert not r.is_error and text(r) == "over tls"
    assert evo_tls.ctl_json("status")["http"]["tls"] is True


async def test_plain_http_on_the_tls_port_gets_no_mcp(evo_tls: Evo) -> None:
    with socket.create_connection(("127.0.0.1", evo_tls.port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        s.settimeout(5)
        try:
            answer = s.recv(100)
        except (ConnectionResetError, TimeoutError):
            answer = b""
    assert not answer.startswith(b"HTTP/1.1 200"), answer


async def test_a_renewed_certificate_is_served_without_a_restart(evo_tls: Evo) -> None:
    assert served_common_name(evo_tls.port) == "evo-first"
    cert, key = certificate("evo-renewed")
    # Written as a renewal tool writes them: key first, then the certificate.
    (evo_tls.tmp / "key.pem.new").write_bytes(key)
    (evo_tls.tmp / "cert.pem.new").write_bytes(cert)
    (evo_tls.tmp / "key.pem.new").rename(evo_tls.tmp / "key.pem")
    (evo_tls.tmp / "cert.pem.new").rename(evo_tls.tmp / "cert.pem")
    deadline = time.monotonic() + 10
    while served_common_name(evo_tls.port) != "evo-renewed":
        assert time.monotonic() < deadline, evo_tls.diagnostics()
        time.sleep(0.1)
    # Clients trusting the new certificate get MCP over it.
    evo_tls.ca = evo_tls.tmp / "cert.pem"
    assert evo_tls.get("/healthz")[0] == 200
    assert "TLS certificate reloaded" in evo_tls.log.read_text(errors="replace")
