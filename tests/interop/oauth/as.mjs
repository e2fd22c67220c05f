// A real OAuth 2.1 / OpenID authorization server for evo's OAuth tests: oidc-provider (a
// certified implementation), configured here. Authorization code + PKCE (S256), refresh tokens,
// client credentials, dynamic registration, revocation, resource indicators (RFC 8707) with JWT
// access tokens for the one protected resource, short access-token lifetimes so tests see
// expiry and refresh, and the dev login/consent forms a test completes with an HTTP client.
//
// Environment: PORT, RESOURCE (the protected MCP endpoints' URLs, comma-separated), TTL (access
// token seconds), CC_CLIENT_ID / CC_CLIENT_SECRET (a client for the client-credentials grant),
// CIMD=1 to accept client ID metadata documents (oidc-provider's own feature; its SSRF guard,
// which refuses loopback addresses, is left out so it can fetch the test's document from
// 127.0.0.1 over HTTPS, trusted through NODE_EXTRA_CA_CERTS). ROTATE=1 rotates refresh tokens on
// every use (a used one presented again revokes the whole grant, as rotating servers do);
// TOKEN_DELAY_MS holds each token request that long before answering it, so tests can overlap
// two refreshes. Every token request and every grant is logged.
import { generateKeyPairSync } from "node:crypto";
import Provider, { errors } from "oidc-provider";

const port = Number(process.env.PORT);
const resources = process.env.RESOURCE.split(",");
const cimd = process.env.CIMD === "1";
const ttl = Number(process.env.TTL || "60");
const rotate = process.env.ROTATE === "1";
const tokenDelay = Number(process.env.TOKEN_DELAY_MS || "0");
const issuer = `http://127.0.0.1:${port}`;
// Each start step says so: a start that stalls shows in the log where it stalled.
console.error("oidc-provider loaded; generating the signing key");
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: "jwk" }), kid: "evo-test", use: "sig", alg: "RS256" };

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: [
    {
      client_id: process.env.CC_CLIENT_ID || "headless",
      client_secret: process.env.CC_CLIENT_SECRET || "headless-secret",
      grant_types: ["client_credentials"],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: "client_secret_post",
    },
  ],
  scopes: ["openid", "offline_access", "mcp"],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    clientCredentials: { enabled: true },
    clientIdMetadataDocument: { enabled: cimd, ack: cimd ? "draft-02" : undefined },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resources[0],
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (!resources.includes(indicator)) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        return {
          scope: "mcp",
          audience: indicator,
          accessTokenTTL: ttl,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        };
      },
    },
  },
  // Refresh tokens for every code grant (not only with offline_access and a consent prompt).
  issueRefreshToken: () => true,
  ...(rotate ? { rotateRefreshToken: true } : {}),
  ttl: { AccessToken: ttl, ClientCredentials: ttl, RefreshToken: 3600, Grant: 3600, Session: 3600 },
  pkce: { required: () => true },
  ...(cimd ? { fetch: (url, { dispatcher, ...options }) => globalThis.fetch(url, options) } : {}),
  // Accept the loopback redirects native clients register (RFC 8252).
  clientDefaults: { grant_types: ["authorization_code", "refresh_token"], response_types: ["code"] },
});
provider.proxy = false;
provider.use(async (ctx, next) => {
  if (ctx.method === "POST" && ctx.path === "/token") {
    console.error("token request received");
    if (tokenDelay) await new Promise((done) => setTimeout(done, tokenDelay));
  }
  await next();
});
provider.on("grant.success", (ctx) => console.error("grant.success", ctx.oidc.params.grant_type));
provider.on("server_error", (ctx, err) => console.error("server_error", err));
provider.on("grant.error", (ctx, err) => console.error("grant.error", err.message, err.error_description || ""));
provider.on("authorization.error", (ctx, err) => console.error("authorization.error", err.message, err.error_description || ""));
provider.on("revocation.error", (ctx, err) => console.error("revocation.error", err.message));
console.error(`signing key ready; listening on 127.0.0.1:${port}`);
provider
  .listen(port, "127.0.0.1", () => console.error(`authorization server on ${issuer}`))
  .on("error", (err) => {
    console.error(`cannot listen on 127.0.0.1:${port}: ${err.message}`);
    process.exit(1);
  });
