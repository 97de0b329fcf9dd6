// A person's MCP client signing in to the hosted router with the official TypeScript SDK's OAuth
// support, as a native client (Claude Desktop, the MCP Inspector's CLI) does: discovery from the
// router's 401, registration (RFC 7591), PKCE, and a loopback redirect (RFC 8252).
//
// Usage: node client.mjs MCP_URL CLIENT_NAME
//
// It prints one JSON object a line on stdout and reads one a line on stdin. First it prints
// {"event":"authorize","url":…}: the test opens that URL in a browser, which signs in, allows
// the client, and lands on this script's loopback redirect; the script then finishes the
// sign-in, connects and prints {"event":"connected","client_id":…}. Then each command it reads
// answers one line:
//   {"op":"call","name":…,"arguments":…,"_meta":…}  → {"event":"result","result":…}
//                                                   or {"event":"error","message":…,"unauthorized":…}
//   {"op":"tokens"}                                 → {"event":"tokens","tokens":…}
//   {"op":"close"}                                  → exits
import http from "node:http";
import readline from "node:readline";
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [mcpURL, clientName] = process.argv.slice(2);
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");

// The loopback redirect: the browser lands here with the code (or an error) and the state.
let arrived;
const redirected = new Promise((resolve) => (arrived = resolve));
const loopback = http.createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  if (u.pathname !== "/callback") {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
  res.end('<!doctype html><title>Signed in</title><p id="done">You are signed in: you can close this window.</p>');
  arrived(u.searchParams);
});
await new Promise((resolve) => loopback.listen(0, "127.0.0.1", resolve));
const redirectUrl = `http://127.0.0.1:${loopback.address().port}/callback`;

// What a native client keeps about its one server, in memory (a real one keeps it on disk).
class Provider {
  signingIn = true;
  reauthorizationAsked = false;
  #state = randomBytes(16).toString("base64url");
  #client;
  #tokens;
  #verifier;
  #discovery;
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return {
      client_name: clientName, redirect_uris: [redirectUrl], grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"], token_endpoint_auth_method: "none",
    };
  }
  state() { return this.#state; }
  clientInformation() { return this.#client; }
  saveClientInformation(info) { this.#client = info; }
  tokens() { return this.#tokens; }
  saveTokens(tokens) { this.#tokens = tokens; }
  saveCodeVerifier(v) { this.#verifier = v; }
  codeVerifier() { return this.#verifier; }
  saveDiscoveryState(s) { this.#discovery = s; }
  discoveryState() { return this.#discovery; }
  invalidateCredentials(scope) {
    if (scope === "all" || scope === "client") this.#client = undefined;
    if (scope === "all" || scope === "tokens") this.#tokens = undefined;
    if (scope === "all" || scope === "verifier") this.#verifier = undefined;
    if (scope === "all" || scope === "discovery") this.#discovery = undefined;
  }
  redirectToAuthorization(url) {
    if (this.signingIn) {
      say({ event: "authorize", url: url.href });
    } else {
      // Signed in already: the server refused the tokens and the refresh; a person would be
      // asked to sign in again. The test expects exactly that after a revocation.
      this.reauthorizationAsked = true;
    }
  }
}

const provider = new Provider();
try {
  await new Client({ name: "hubu-e2e-oauth", version: "1.0.0" }).connect(new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider }));
  throw new Error("the router let a client without a token connect");
} catch (err) {
  if (!(err instanceof UnauthorizedError)) throw err;
}
// The SDK has discovered the authorization server from the 401, registered, and asked for the
// browser (the authorize event). The browser comes back to the loopback redirect.
const params = await redirected;
if (params.get("state") !== provider.state()) throw new Error("the redirect's state is not the one sent");
if (params.get("error")) throw new Error(`authorization refused: ${params.get("error")}`);
const issuer = provider.discoveryState()?.authorizationServerUrl;
if (!params.get("iss") || !issuer || params.get("iss").replace(/\/$/, "") !== issuer.replace(/\/$/, "")) {
  throw new Error(`the redirect's iss ${params.get("iss")} is not the authorization server ${issuer}`);
}
const transport = new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider });
await transport.finishAuth(params.get("code"));
loopback.close();
provider.signingIn = false;
const client = new Client({ name: "hubu-e2e-oauth", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider }));
say({ event: "connected", client_id: provider.clientInformation().client_id });

for await (const line of readline.createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  switch (cmd.op) {
    case "call":
      try {
        const result = await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {}, _meta: cmd._meta });
        say({ event: "result", result });
      } catch (err) {
        say({
          event: "error", message: String(err?.message ?? err),
          unauthorized: err instanceof UnauthorizedError || err?.code === 401, reauthorize: provider.reauthorizationAsked,
        });
      }
      break;
    case "tokens":
      say({ event: "tokens", tokens: provider.tokens() ?? null });
      break;
    case "close":
      await client.close().catch(() => {});
      process.exit(0);
  }
}
