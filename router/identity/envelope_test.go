package identity

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// The test vector for platform integrators: test key "k1" (seed below), this envelope, this
// signature. It was reproduced outside Go with Python's cryptography package signing
// json.dumps(env, sort_keys=True, separators=(",", ":")).
const (
	vectorSeed      = "4gvGraIHGsl35OsQog1QU5IjPrv7XZ1iHLm8Z/1nwvY="
	vectorPublicKey = "04DH4/RtnzaxAMteIbXjw7VrsrFUz5K64SMHZZVvK1M="
	vectorSigning   = `{"invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1767225600,"platform":"acme","version":1}`
	vectorEnvelope  = `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1767225600,"signature":{"alg":"ed25519","key_id":"k1","value":"rSDemiAhRJzJfUmS999Bk6mXTwQ47-fTCL7IxZqg2t1w5pUYVNka88IEGap2mk4IVvnEcd4Ft_g_eAy7KBb4Dg"}}`
)

// TestSignTestVectors reproduces both vectors (version 2 in binding_test.go) and has the router
// accept them.
func TestSignTestVectors(t *testing.T) {
	t.Parallel()
	seed, _ := base64.StdEncoding.DecodeString(vectorSeed)
	priv := ed25519.NewKeyFromSeed(seed)
	if got := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)); got != vectorPublicKey {
		t.Fatalf("public key = %s, want %s", got, vectorPublicKey)
	}
	_, testPriv := testKey("k1")
	if !priv.Equal(testPriv) {
		t.Fatal(`the vector's key is no longer testKey("k1"): signed fuzz seeds would stop verifying`)
	}
	key, _ := base64.StdEncoding.DecodeString(vectorPublicKey)
	for _, tc := range []struct {
		env               Envelope
		signing, envelope string
		platform          PlatformConfig // of "acme", which gets the vector's key
		binding           Binding
	}{
		{Envelope{Version: 1, Platform: "acme", InvocationID: "inv-7f3a9c2e5b1d4a60"}, vectorSigning, vectorEnvelope, PlatformConfig{RequireSignature: true}, Binding{}},
		{v2("acme", "inv-7f3a9c2e5b1d4a60"), vectorV2Signing, vectorV2Envelope, PlatformConfig{MinVersion: 2},
			Binding{Audience: testAudience, RequestHash: testRequestHash}},
	} {
		tc.env.IssuedAt = new(testNow.Unix())
		sb, err := SigningBytes(tc.env)
		if err != nil || string(sb) != tc.signing {
			t.Fatalf("SigningBytes = %s, %v; want %s", sb, err, tc.signing)
		}
		s, err := Sign(tc.env, "k1", priv)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(s)
		if string(b) != tc.envelope {
			t.Fatalf("signed envelope:\n got %s\nwant %s", b, tc.envelope)
		}
		// The signature must cover the signing bytes, checked without SigningBytes.
		sig, _ := base64.RawURLEncoding.DecodeString(s.Signature.Value)
		if !ed25519.Verify(priv.Public().(ed25519.PublicKey), []byte(tc.signing), sig) {
			t.Fatal("signature does not verify over the canonical bytes")
		}
		// And the router accepts it for a platform configured with that key.
		tc.platform.Keys = map[string]ed25519.PublicKey{"k1": key}
		cfg := &Config{Now: testConfig().Now, Platforms: map[string]PlatformConfig{"acme": tc.platform}}
		id, err := Normalize(map[string]any{KeyPlatformInvocation: decode[any](t, tc.envelope)}, cfg)
		want := Identity{Platform: "acme", CallID: "inv-7f3a9c2e5b1d4a60", Source: KeyPlatformInvocation, Binding: tc.binding}
		if err != nil || id != want {
			t.Fatalf("Normalize(vector) = %+v, %v", id, err)
		}
		if err := id.Binding.Check(testAudience, testRequestHash); err != nil {
			t.Fatalf("Check: %v", err)
		}
	}
}

func TestSigningBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  Envelope
		want string
	}{
		{Envelope{Version: 1, Platform: "acme", InvocationID: "inv-0123456789ab"}, `{"invocation_id":"inv-0123456789ab","platform":"acme","version":1}`},
		{Envelope{Version: 1, Platform: "acme", InvocationID: "inv-0123456789ab", IssuedAt: new(int64(0))}, `{"invocation_id":"inv-0123456789ab","issued_at":0,"platform":"acme","version":1}`},
		{Envelope{Version: 1, Platform: "p-2", InvocationID: "A._:-z0123456789", IssuedAt: new(testNow.Unix()),
			Signature: &Signature{Alg: "ed25519", KeyID: "k", Value: "ignored"}}, `{"invocation_id":"A._:-z0123456789","issued_at":1767225600,"platform":"p-2","version":1}`},
	} {
		got, err := SigningBytes(tc.env)
		if err != nil || string(got) != tc.want {
			t.Errorf("SigningBytes(%+v) = %s, %v; want %s", tc.env, got, err, tc.want)
		}
	}
	const id = "inv-0123456789ab" // valid, so that each envelope below breaks one rule only
	for _, env := range []Envelope{
		{Version: 2, Platform: "acme", InvocationID: id},
		{Version: 1, Platform: "codex", InvocationID: id},
		{Version: 1, Platform: "Acme", InvocationID: id},
		{Version: 1, Platform: "acme", InvocationID: ""},
		{Version: 1, Platform: "acme", InvocationID: "inv-0123456789a"}, // 15 characters
		{Version: 1, Platform: "acme", InvocationID: id + "\u2028"},     // Go and RFC 8785 would disagree on this
		{Version: 1, Platform: "acme", InvocationID: id, IssuedAt: new(int64(-1))},
		{Version: 1, Platform: "acme", InvocationID: id, IssuedAt: new(int64(MaxIssuedAt + 1))},
	} {
		if b, err := SigningBytes(env); err == nil {
			t.Errorf("SigningBytes(%+v) = %s, want an error", env, b)
		}
	}
}

func TestSignRefuses(t *testing.T) {
	t.Parallel()
	_, priv := testKey("k1")
	ok := Envelope{Version: 1, Platform: "acme", InvocationID: "inv-0123456789ab", IssuedAt: new(testNow.Unix())}
	for _, tc := range []struct {
		name  string
		env   Envelope
		keyID string
		priv  ed25519.PrivateKey
		want  string
	}{
		{"no issued_at", Envelope{Version: 1, Platform: "acme", InvocationID: "inv-0123456789ab"}, "k1", priv, "issued_at"},
		{"short invocation_id", Envelope{Version: 1, Platform: "acme", InvocationID: "inv-0123456789a", IssuedAt: new(testNow.Unix())}, "k1", priv, "invocation_id is shorter than 16 characters"},
		{"bad key id", ok, "k 1", priv, "key id"},
		{"empty key id", ok, "", priv, "key id"},
		{"short private key", ok, "k1", priv[:32], "private key"},
		{"reserved platform", Envelope{Version: 1, Platform: "claude-code", InvocationID: "inv-0123456789ab", IssuedAt: new(testNow.Unix())}, "k1", priv, "platform"},
		{"no audience", Envelope{Version: 2, Platform: "acme", InvocationID: invocationID, IssuedAt: new(testNow.Unix()), RequestHash: testRequestHash}, "k1", priv, "audience"},
		{"no request hash", Envelope{Version: 2, Platform: "acme", InvocationID: invocationID, IssuedAt: new(testNow.Unix()), Audience: testAudience}, "k1", priv, "request_hash"},
		{"prefixed request hash", Envelope{Version: 2, Platform: "acme", InvocationID: invocationID, IssuedAt: new(testNow.Unix()), Audience: testAudience, RequestHash: "sha256:" + testRequestHash}, "k1", priv, "request_hash"},
		{"version 1 with a binding", Envelope{Version: 1, Platform: "acme", InvocationID: invocationID, IssuedAt: new(testNow.Unix()), Audience: testAudience, RequestHash: testRequestHash}, "k1", priv, "version 2"},
		{"version 3", Envelope{Version: 3, Platform: "acme", InvocationID: invocationID, IssuedAt: new(testNow.Unix()), Audience: testAudience, RequestHash: testRequestHash}, "k1", priv, "unsupported envelope version"},
	} {
		if _, err := Sign(tc.env, tc.keyID, tc.priv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Sign error = %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, err := SigningBytes(v2("acme", invocationID)); err == nil || !strings.Contains(err.Error(), "issued_at") {
		t.Errorf("SigningBytes(version 2 without issued_at) = %v", err)
	}
}

func TestParseEnvelope(t *testing.T) {
	t.Parallel()
	env, err := ParseEnvelope(decode[any](t, vectorEnvelope))
	if err != nil {
		t.Fatal(err)
	}
	if env.Version != 1 || env.Platform != "acme" || env.InvocationID != "inv-7f3a9c2e5b1d4a60" || env.IssuedAt == nil || *env.IssuedAt != testNow.Unix() ||
		env.Signature == nil || env.Signature.KeyID != "k1" || env.Signature.Alg != "ed25519" {
		t.Fatalf("ParseEnvelope = %+v", env)
	}
	// Values built in Go rather than decoded (json.Number, ints) parse alike.
	env2, err := ParseEnvelope(map[string]any{"version": json.Number("1"), "platform": "acme", "invocation_id": "inv-7f3a9c2e5b1d4a60", "issued_at": json.Number("1767225600")})
	if err != nil || env2.IssuedAt == nil || *env2.IssuedAt != testNow.Unix() {
		t.Fatalf("ParseEnvelope(json.Number) = %+v, %v", env2, err)
	}
	if _, err := ParseEnvelope(map[string]any{"version": 1, "platform": "acme", "invocation_id": "inv-7f3a9c2e5b1d4a60", "issued_at": int64(5)}); err != nil {
		t.Fatalf("ParseEnvelope(Go ints) = %v", err)
	}
	if _, err := ParseEnvelope(map[string]any{"version": json.Number("1.5"), "platform": "acme", "invocation_id": "inv-7f3a9c2e5b1d4a60"}); err == nil {
		t.Fatal("ParseEnvelope accepted version json.Number(1.5)")
	}
}

func TestSignatureValueMatchesPattern(t *testing.T) {
	t.Parallel()
	good := strings.Repeat("A", 85)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=."
	inputs := []string{"", good, good + "AA", good[:84] + "A", good + "A=", strings.Repeat("A", 86) + "=="}
	for _, c := range alphabet {
		inputs = append(inputs, good+string(c), string(c)+good)
	}
	agrees(t, "decodeSignatureValue", func(s string) bool {
		_, err := decodeSignatureValue(s)
		return err == nil
	}, signatureValueRe, inputs)
}
