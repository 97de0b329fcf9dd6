package mcpserver_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/router/identity"
)

// The reference signer for integrators: the file is run here, and docs/unified-mcp-reference.md
// shows it verbatim.
const (
	signerPath   = "../testdata/signer/sign.mjs"
	referenceDoc = "../../docs/unified-mcp-reference.md"
)

func TestReferenceSignerIsInTheDocs(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile(signerPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	const open = "```js\n// Reference signer for the hubu.dev/platform-invocation envelope"
	_, block, ok := strings.Cut(string(doc), open)
	if !ok {
		t.Fatalf("%s has no code block starting %q", referenceDoc, open)
	}
	block, _, ok = strings.Cut("// Reference signer for the hubu.dev/platform-invocation envelope"+block, "\n```\n")
	if !ok || block+"\n" != string(script) {
		t.Fatalf("the signer in %s differs from %s: copy the file into the doc", referenceDoc, signerPath)
	}
}

// runSigner runs sign.mjs with request on stdin and returns the envelope it prints.
func runSigner(t *testing.T, request map[string]any) map[string]any {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed; the reference signer test needs Node.js 18 or later")
	}
	script, err := filepath.Abs(signerPath)
	if err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(node, script)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sign.mjs: %v\n%s", err, stderr.String())
	}
	var env map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &env); err != nil {
		t.Fatalf("sign.mjs printed %q: %v", stdout.String(), err)
	}
	return env
}

func pkcs8PEM(t *testing.T, priv ed25519.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// The script signs what identity.Sign signs, byte for byte: the version 2 test vector of
// router/identity (key "k1" of its tests, the fox arguments, 2026-01-01T00:00:00Z).
func TestReferenceSignerMatchesTheVector(t *testing.T) {
	t.Parallel()
	seed, _ := base64.StdEncoding.DecodeString("4gvGraIHGsl35OsQog1QU5IjPrv7XZ1iHLm8Z/1nwvY=")
	priv := ed25519.NewKeyFromSeed(seed)
	const audience, issuedAt = "3f6c1a52-9d0e-4b7a-8c21-5e4f0a9b7d13", int64(1767225600)
	got := runSigner(t, map[string]any{
		"privateKeyPem": pkcs8PEM(t, priv), "keyId": "k1", "platform": "acme", "invocationId": "inv-7f3a9c2e5b1d4a60",
		"audience": audience, "tool": "generate_image", "args": json.RawMessage(fox), "issuedAt": issuedAt,
	})
	at := issuedAt
	want, err := identity.Sign(identity.Envelope{
		Version: identity.EnvelopeVersion2, Platform: "acme", InvocationID: "inv-7f3a9c2e5b1d4a60", IssuedAt: &at,
		Audience: audience, RequestHash: requestHash(t, fox),
	}, "k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := envelopeMeta(t, got), envelopeMeta(t, want); !reflect.DeepEqual(got, want) {
		t.Fatalf("sign.mjs:\n got %v\nwant %v", got, want)
	}
	if h := got["request_hash"]; h != "ca189a5e0f69e8f146fe2655a7d606ba403ab1d2727c7e0eb883cac3c498b7fe" {
		t.Fatalf("request_hash = %v, not the vector's", h)
	}
	// The docs print the vector for signers in other languages.
	doc, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	if v := want.Signature.Value; !strings.Contains(string(doc), "`"+v+"`") {
		t.Fatalf("%s does not show the vector's signature value %s", referenceDoc, v)
	}
}

// An envelope from the script is accepted by the router it names, for the arguments it was
// signed for however they are spelled, and refused at another installation and for other
// arguments, before anything is recorded or any backend reached.
func TestReferenceSigner(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(nil)
	cfg := boundConfig(pub, 2)
	e, state := setupAt(t, cfg)
	keyPEM := pkcs8PEM(t, priv)
	sign := func(invocationID, audience, args string) map[string]any {
		env := runSigner(t, map[string]any{
			"privateKeyPem": keyPEM, "keyId": "k1", "platform": "acme", "invocationId": invocationID,
			"audience": audience, "tool": "generate_image", "args": json.RawMessage(args),
		})
		if at, _ := env["issued_at"].(float64); time.Since(time.Unix(int64(at), 0)).Abs() > time.Minute {
			t.Fatalf("issued_at %v is not now", env["issued_at"])
		}
		return map[string]any{identity.KeyPlatformInvocation: env}
	}

	// What the platform signs, and what it sends: the same arguments, spelled differently (key
	// order, spacing, escapes, number forms), so the two canonical forms must agree.
	signedArgs := `{"prompt":"Fuchs ü\u2028🦊 \"q\" \\ \t <&> é","model":"flux-dev","width":1024,"height":768,"seed":9007199254740991}`
	sentArgs := ` { "seed": 9007199254740991, "height": 7.68e2, "width": 1024.0, "model": "flux-dev",
		"prompt": "Fuchs \u00fc\u2028\ud83e\udd8a \"q\" \\ \t <&> \u00e9" } `
	if requestHash(t, signedArgs) != requestHash(t, sentArgs) {
		t.Fatal("the test's two spellings of the arguments are not the same request")
	}
	meta := sign("inv-signer-0001-7f3a9c2e5b1d", e.registry.InstallationID(), signedArgs)
	if h := meta[identity.KeyPlatformInvocation].(map[string]any)["request_hash"]; h != requestHash(t, sentArgs) {
		t.Fatalf("sign.mjs request_hash %v, the router's %s", h, requestHash(t, sentArgs))
	}
	if o := toolResult(t, e.call(t, "generate_image", sentArgs, meta)); o.Status != "succeeded" {
		t.Fatalf("signed by sign.mjs: %+v", o)
	}
	other := `{"prompt":"Fuchs ü\u2028🦊 \"q\" \\ \t <&> é","model":"flux-dev","width":1024,"height":768,"seed":9007199254740990}`
	refusedUnrecorded(t, e, state, other, sign("inv-signer-0002-7f3a9c2e5b1d", e.registry.InstallationID(), signedArgs), "request_hash")

	e2, state2 := setupAt(t, cfg)
	refusedUnrecorded(t, e2, state2, sentArgs, meta, "audience")
}
