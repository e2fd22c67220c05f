"""An MCP server protected by OAuth, for evo's SSE + OAuth and Streamable HTTP + OAuth tests: the
official Python SDK's legacy HTTP+SSE app (or, with TRANSPORT=http, its Streamable HTTP app, whose
answers are event streams) with its resource-server support (`AuthSettings` + a `TokenVerifier`: the
401 with `resource_metadata`, the RFC 9728 document, bearer checks on the stream and on every
POST), verifying oidc-provider's JWT access tokens (signature from its JWKS, issuer, audience =
this server's URL, scope `mcp`) with PyJWT.

Environment: PORT, ISSUER, TRANSPORT (sse or http). A token listed in the file REJECT_FILE (one a
line) is refused although valid, so a test can make the server answer 401 to the token evo holds
now. Each echo says on stderr under which request id it came."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import jwt
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer

PORT = int(os.environ["PORT"])
ISSUER = os.environ["ISSUER"]
HTTP = os.environ.get("TRANSPORT") == "http"
RESOURCE = f"http://127.0.0.1:{PORT}/{'mcp' if HTTP else 'sse'}"
REJECT = Path(os.environ["REJECT_FILE"]) if os.environ.get("REJECT_FILE") else None
keys = jwt.PyJWKClient(f"{ISSUER}/jwks")


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        if REJECT and REJECT.exists() and token in REJECT.read_text().split():
            print("refused a listed token", file=sys.stderr, flush=True)
            return None
        try:
            key = await anyio.to_thread.run_sync(keys.get_signing_key_from_jwt, token)
            claims = jwt.decode(token, key.key, algorithms=["RS256"], audience=RESOURCE, issuer=ISSUER)
        except jwt.PyJWTError as e:
            print(f"refused a token: {e}", file=sys.stderr, flush=True)
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=claims.get("exp"),
            resource=RESOURCE,
            subject=claims.get("sub"),
        )


server = MCPServer(
    "protected-sse",
    token_verifier=Verifier(),
    auth=AuthSettings(
        issuer_url=ISSUER, resource_server_url=RESOURCE, required_scopes=["mcp"], validate_token_resource=True
    ),
)


@server.tool()
def echo(text: str, ctx: Context) -> str:
    """Echoes the text back."""
    print(f"echo id {ctx.request_id!r}", file=sys.stderr, flush=True)
    return text


if __name__ == "__main__":
    print(f"protected {'Streamable HTTP' if HTTP else 'SSE'} server on {RESOURCE}", file=sys.stderr, flush=True)
    app = server.streamable_http_app() if HTTP else server.sse_app()
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
