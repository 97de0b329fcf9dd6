package identity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

// secret marks every identity value the tests send: no error message may ever contain it.
const secret = "s3cr3t"

// Valid call ids, each holding secret: the first two of the lengths Codex and Claude Code send
// (29 and 30 characters), so that a case meant to break another rule breaks only that one.
const (
	codexCallID  = "call_" + secret + "Wz3kZ9b1XyQ4rT7uVp"
	claudeCallID = "toolu_01" + secret + "A09q90qw90lq9178"
	invocationID = "inv-" + secret + "-7f3a9c2e5b1d" // as in the JSON literals of the envelope tests
)

// testNow is the router clock of the tests and of the fuzz seeds with signed envelopes.
var testNow = time.Unix(1767225600, 0) // 2026-01-01T00:00:00Z

var (
	callIDRe         = regexp.MustCompile(CallIDPattern)
	platformRe       = regexp.MustCompile(PlatformPattern)
	keyIDRe          = regexp.MustCompile(KeyIDPattern)
	signatureValueRe = regexp.MustCompile(SignatureValuePattern)
)

// agrees checks that a hand-written check (ok: it has no reason to refuse) accepts exactly the
// inputs that the pattern it stands for matches.
func agrees(t *testing.T, check string, ok func(string) bool, re *regexp.Regexp, inputs []string) {
	t.Helper()
	for _, s := range inputs {
		if ok(s) != re.MatchString(s) {
			t.Errorf("%s(%q) ok=%v, %s says %v", check, s, ok(s), re, !ok(s))
		}
	}
}

// testKey is a deterministic Ed25519 key pair, so signed fuzz seeds stay valid.
func testKey(name string) (ed25519.PublicKey, ed25519.PrivateKey) {
	seed := sha256.Sum256([]byte("hubu identity test key " + name))
	priv := ed25519.NewKeyFromSeed(seed[:])
	return priv.Public().(ed25519.PublicKey), priv
}

// testConfig accepts four envelope platforms:
//   - "acme": no keys, unsigned envelopes accepted;
//   - "signed": requires signatures by key "k1";
//   - "optional": key "k2", signatures verified when present but not required;
//   - "bound": version 2 envelopes only (min_version 2), signed by key "k1".
func testConfig() *Config {
	k1, _ := testKey("k1")
	k2, _ := testKey("k2")
	return &Config{
		Platforms: map[string]PlatformConfig{
			"acme":     {},
			"signed":   {RequireSignature: true, Keys: map[string]ed25519.PublicKey{"k1": k1}},
			"optional": {Keys: map[string]ed25519.PublicKey{"k2": k2}},
			"bound":    {MinVersion: 2, Keys: map[string]ed25519.PublicKey{"k1": k1}},
		},
		Now: func() time.Time { return testNow },
	}
}

// decode unmarshals JSON text the way the MCP SDK does (numbers as float64).
func decode[T any](t testing.TB, text string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", text, err)
	}
	return v
}

// asJSONValue turns a Go value into what it decodes to after a trip over the wire.
func asJSONValue(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decode[any](t, string(b))
}

// The binding of the version 2 envelopes in the tests: an installation id as the registry makes
// them, and the request hash of generate_image with the arguments
// {"prompt":"an origami fox","model":"flux-dev","width":1024,"height":1024}.
const (
	testAudience    = "3f6c1a52-9d0e-4b7a-8c21-5e4f0a9b7d13"
	testRequestHash = "ca189a5e0f69e8f146fe2655a7d606ba403ab1d2727c7e0eb883cac3c498b7fe"
)

// v2 is a version 2 envelope with the test binding.
func v2(platform, invocationID string) Envelope {
	return Envelope{Version: EnvelopeVersion2, Platform: platform, InvocationID: invocationID, Audience: testAudience, RequestHash: testRequestHash}
}

// signed returns env with issued_at = at, signed by the test key signer under keyID, as decoded JSON.
func signed(t testing.TB, env Envelope, at time.Time, signer, keyID string) map[string]any {
	t.Helper()
	_, priv := testKey(signer)
	env.IssuedAt = new(at.Unix())
	s, err := Sign(env, keyID, priv)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return asJSONValue(t, s).(map[string]any)
}
