// Reference signer for the hubu.dev/platform-invocation envelope, version 2 (Node.js 18+, no packages).
//
// As a module:
//   import { signInvocation } from "./sign.mjs";
//   const envelope = signInvocation({ privateKeyPem, keyId: "k1", platform: "acme",
//     invocationId: "inv-7f3a9c2e5b1d4a60", audience: "<the router's installation id>",
//     tool: "generate_image", args: { prompt: "an origami fox", model: "flux-dev", width: 1024, height: 1024 } });
//   // then send tools/call with name: tool, arguments: args,
//   // and _meta: { "hubu.dev/platform-invocation": envelope }
// From a shell: node sign.mjs < request.json, where request.json holds the same fields as JSON
// (issuedAt, unix seconds, is optional); it prints the envelope.
import { createHash, createPrivateKey, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

// RFC 8785 canonical JSON. ECMAScript's JSON.stringify already writes strings and numbers the way
// RFC 8785 requires; object members are sorted by UTF-16 code units, which is what sort() compares.
export function canonicalJSON(value) {
  if (typeof value === "number" && !Number.isFinite(value)) throw new Error("not a JSON number");
  if (Array.isArray(value)) return "[" + value.map(canonicalJSON).join(",") + "]";
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonicalJSON(value[k])).join(",") + "}";
  }
  return JSON.stringify(value);
}

// The router's request hash: sha256(tool || 0x00 || canonical JSON of the arguments), lower-case hex.
export function requestHash(tool, args) {
  return createHash("sha256").update(tool, "utf8").update(Buffer.of(0)).update(canonicalJSON(args), "utf8").digest("hex");
}

// signInvocation returns the signed envelope for one delivery of one call. Sign every delivery
// afresh (the router refuses an issued_at more than max_age_seconds from its clock), with the same
// invocationId on every redelivery and a new one for every new call. privateKeyPem is a PKCS #8
// Ed25519 key, e.g. from `openssl genpkey -algorithm ed25519`.
export function signInvocation({ privateKeyPem, keyId, platform, invocationId, audience, tool, args,
  issuedAt = Math.floor(Date.now() / 1000) }) {
  const envelope = {
    version: 2,
    platform,
    invocation_id: invocationId,
    issued_at: issuedAt,
    audience,
    request_hash: requestHash(tool, args),
  };
  const signature = sign(null, Buffer.from(canonicalJSON(envelope), "utf8"), createPrivateKey(privateKeyPem));
  return { ...envelope, signature: { alg: "ed25519", key_id: keyId, value: signature.toString("base64url") } };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const request = JSON.parse(readFileSync(0, "utf8"));
  process.stdout.write(JSON.stringify(signInvocation(request)) + "\n");
}
