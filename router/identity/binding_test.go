package identity

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The version 2 test vector for platform integrators (docs/unified-mcp-reference.md shows it): test
// key "k1" (vectorSeed), the request hash of the fox arguments (testRequestHash), this envelope, this
// signature. router/testdata/signer/sign.mjs, the reference signer in the docs, reproduces it
// (router/mcpserver's TestReferenceSignerMatchesTheVector).
const (
	vectorV2Signing  = `{"audience":"3f6c1a52-9d0e-4b7a-8c21-5e4f0a9b7d13","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1767225600,"platform":"acme","request_hash":"ca189a5e0f69e8f146fe2655a7d606ba403ab1d2727c7e0eb883cac3c498b7fe","version":2}`
	vectorV2Envelope = `{"version":2,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1767225600,"audience":"3f6c1a52-9d0e-4b7a-8c21-5e4f0a9b7d13","request_hash":"ca189a5e0f69e8f146fe2655a7d606ba403ab1d2727c7e0eb883cac3c498b7fe","signature":{"alg":"ed25519","key_id":"k1","value":"26P0ylweM6AZsackNwwBRMNbK77IF2kZUAaCQBjmW2Qhy8_0m86gAN3YYA2scDBP1tEU3ZjFzhcKLeXqnfwiDQ"}}`
)

func TestSignTestVectorV2(t *testing.T) {
	t.Parallel()
	seed, _ := base64.StdEncoding.DecodeString(vectorSeed)
	priv := ed25519.NewKeyFromSeed(seed)
	env := v2("acme", "inv-7f3a9c2e5b1d4a60")
	env.IssuedAt = unixPtr(testNow)
	sb, err := SigningBytes(env)
	if err != nil || string(sb) != vectorV2Signing {
		t.Fatalf("SigningBytes = %s, %v; want %s", sb, err, vectorV2Signing)
	}
	s, err := Sign(env, "k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := base64.RawURLEncoding.DecodeString(s.Signature.Value)
	if !ed25519.Verify(priv.Public().(ed25519.PublicKey), []byte(vectorV2Signing), sig) {
		t.Fatal("signature does not verify over the canonical bytes")
	}
	b, _ := json.Marshal(s)
	if string(b) != vectorV2Envelope {
		t.Fatalf("signed envelope:\n got %s\nwant %s", b, vectorV2Envelope)
	}
	key, _ := base64.StdEncoding.DecodeString(vectorPublicKey)
	cfg := &Config{Now: testConfig().Now, Platforms: map[string]PlatformConfig{"acme": {MinVersion: 2, Keys: map[string]ed25519.PublicKey{"k1": key}}}}
	id, err := Normalize(map[string]any{KeyPlatformInvocation: decode[any](t, string(b))}, cfg)
	want := Identity{Platform: "acme", CallID: "inv-7f3a9c2e5b1d4a60", Source: KeyPlatformInvocation,
		Binding: Binding{Audience: testAudience, RequestHash: testRequestHash}}
	if err != nil || id != want {
		t.Fatalf("Normalize(vector) = %+v, %v", id, err)
	}
	if err := id.Binding.Check(testAudience, testRequestHash); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestNormalizeVersion2(t *testing.T) {
	t.Parallel()
	envKey := strconv.Quote(KeyPlatformInvocation)
	inv := invocationID
	good := signed(t, v2("signed", inv), testNow, "k1", "k1")
	bound := Binding{Audience: testAudience, RequestHash: testRequestHash}
	meta := func(env map[string]any) map[string]any { return map[string]any{KeyPlatformInvocation: env} }
	without := func(env map[string]any, field string) map[string]any {
		m := withField(env, "", field, nil)
		delete(m, field)
		return m
	}
	unsigned := without(good, "signature")
	// The same invocation signed as version 1, then relabelled: a signature never crosses versions.
	v1 := signed(t, Envelope{Version: 1, Platform: "signed", InvocationID: inv}, testNow, "k1", "k1")
	v1as2 := withField(withField(withField(v1, "", "version", 2.0), "", "audience", testAudience), "", "request_hash", testRequestHash)
	v2as1 := withField(without(without(good, "audience"), "request_hash"), "", "version", 1.0)

	cases := []normalizeCase{
		{name: "signed", meta: meta(good), want: Identity{Platform: "signed", CallID: inv, Source: KeyPlatformInvocation, Binding: bound}},
		{name: "signed, platform that accepts only version 2", meta: meta(signed(t, v2("bound", inv), testNow, "k1", "k1")),
			want: Identity{Platform: "bound", CallID: inv, Source: KeyPlatformInvocation, Binding: bound}},
		{name: "signed, platform where signatures are optional", meta: meta(signed(t, v2("optional", inv), testNow, "k2", "k2")),
			want: Identity{Platform: "optional", CallID: inv, Source: KeyPlatformInvocation, Binding: bound}},
		{name: "version written 2.0", meta: meta(withField(good, "", "version", 2.0)),
			want: Identity{Platform: "signed", CallID: inv, Source: KeyPlatformInvocation, Binding: bound}},

		{name: "unsigned", meta: meta(unsigned), code: CodeInvalid, msg: []string{envKey, "a version 2 envelope must be signed"}},
		{name: "unsigned, without issued_at", meta: meta(without(unsigned, "issued_at")), code: CodeInvalid, msg: []string{envKey, "a version 2 envelope must be signed"}},
		{name: "unsigned, platform without keys", meta: meta(asJSONValue(t, func() Envelope { e := v2("acme", inv); e.IssuedAt = unixPtr(testNow); return e }()).(map[string]any)),
			code: CodeInvalid, msg: []string{envKey, "a version 2 envelope must be signed"}},
		{name: "signed, platform without keys", meta: meta(signed(t, v2("acme", inv), testNow, "k1", "k1")), code: CodeInvalid, msg: []string{envKey, "unknown key"}},
		{name: "unknown field", meta: meta(withField(good, "", "tenant_s3cr3t", "x")), code: CodeInvalid, msg: []string{envKey, "field that version 2 does not define"}},
		{name: "unknown field in signature", meta: meta(withField(good, "signature", "s3cr3t", "x")), code: CodeInvalid, msg: []string{envKey, "signature has a field other than"}},
		{name: "audience missing", meta: meta(without(good, "audience")), code: CodeInvalid, msg: []string{envKey, "audience is missing"}},
		{name: "request_hash missing", meta: meta(without(good, "request_hash")), code: CodeInvalid, msg: []string{envKey, "request_hash is missing"}},
		{name: "audience number", meta: meta(withField(good, "", "audience", 1.0)), code: CodeInvalid, msg: []string{envKey, "audience must be a string, got number"}},
		{name: "audience upper case", meta: meta(withField(good, "", "audience", strings.ToUpper(testAudience))), code: CodeInvalid, msg: []string{envKey, "audience must be the router's installation id"}},
		{name: "audience not a UUID", meta: meta(withField(good, "", "audience", "s3cr3t-router")), code: CodeInvalid, msg: []string{envKey, "audience must be the router's installation id"}},
		{name: "request_hash prefixed", meta: meta(withField(good, "", "request_hash", "sha256:"+testRequestHash)), code: CodeInvalid, msg: []string{envKey, "request_hash must be 64 lower-case hex digits"}},
		{name: "request_hash upper case", meta: meta(withField(good, "", "request_hash", strings.ToUpper(testRequestHash))), code: CodeInvalid, msg: []string{envKey, "request_hash must be 64 lower-case hex digits"}},
		{name: "request_hash base64", meta: meta(withField(good, "", "request_hash", "fRpUEnsiJQL1t5tfsIAwYRUqRPkrN+I8ZSe69mXU2po=")), code: CodeInvalid, msg: []string{envKey, "request_hash must be 64"}},
		{name: "tampered audience", meta: meta(withField(good, "", "audience", "3f6c1a52-9d0e-4b7a-8c21-5e4f0a9b7d14")), code: CodeInvalid, msg: []string{envKey, "signature does not verify"}},
		{name: "tampered request_hash", meta: meta(withField(good, "", "request_hash", strings.Repeat("0", 64))), code: CodeInvalid, msg: []string{envKey, "signature does not verify"}},
		{name: "version 1 signature relabelled version 2", meta: meta(v1as2), code: CodeInvalid, msg: []string{envKey, "signature does not verify"}},
		{name: "version 2 signature relabelled version 1", meta: meta(v2as1), code: CodeInvalid, msg: []string{envKey, "signature does not verify"}},
		{name: "stale", meta: meta(signed(t, v2("signed", inv), testNow.Add(-DefaultMaxAge-time.Second), "k1", "k1")), code: CodeInvalid, msg: []string{envKey, "stale"}},
		{name: "version 1 with audience", meta: meta(withField(asJSONValue(t, Envelope{Version: 1, Platform: "acme", InvocationID: inv}).(map[string]any), "", "audience", testAudience)),
			code: CodeInvalid, msg: []string{envKey, "field that version 1 does not define"}},
		{name: "version 1 with request_hash", meta: meta(withField(v1, "", "request_hash", testRequestHash)),
			code: CodeInvalid, msg: []string{envKey, "field that version 1 does not define"}},
		{name: "version 1, signed, on a platform that requires version 2", meta: meta(signed(t, Envelope{Version: 1, Platform: "bound", InvocationID: inv}, testNow, "k1", "k1")),
			code: CodeInvalid, msg: []string{envKey, `platform "bound" requires envelope version 2`}},
		{name: "version 1, unsigned, on a platform that requires version 2", meta: meta(asJSONValue(t, Envelope{Version: 1, Platform: "bound", InvocationID: inv}).(map[string]any)),
			code: CodeInvalid, msg: []string{envKey, `platform "bound" requires envelope version 2`}},
	}
	runNormalizeCases(t, cases)
}

func TestBindingCheck(t *testing.T) {
	t.Parallel()
	const otherAudience = "00000000-0000-4000-8000-000000000000"
	otherHash := strings.Repeat("ab", 32)
	bound := Binding{Audience: testAudience, RequestHash: testRequestHash}
	for _, tc := range []struct {
		name        string
		b           Binding
		aud, hash   string
		field       string // the field the refusal names; "" when accepted
		quotesValue bool
	}{
		{name: "zero binding, anything", b: Binding{}, aud: otherAudience, hash: otherHash},
		{name: "zero binding, nothing", b: Binding{}},
		{name: "match", b: bound, aud: testAudience, hash: testRequestHash},
		{name: "another installation", b: bound, aud: otherAudience, hash: testRequestHash, field: "audience"},
		{name: "another request", b: bound, aud: testAudience, hash: otherHash, field: "request_hash"},
		{name: "both differ", b: bound, aud: otherAudience, hash: otherHash, field: "audience"},
		{name: "no installation id", b: bound, hash: testRequestHash, field: "audience"},
		{name: "no request hash", b: bound, aud: testAudience, field: "request_hash"},
		{name: "half a binding", b: Binding{Audience: testAudience}, aud: testAudience, hash: testRequestHash, field: "request_hash"},
	} {
		err := tc.b.Check(tc.aud, tc.hash)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: Check = %v", tc.name, err)
			}
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Code != CodeInvalid || !strings.Contains(e.Message, strconv.Quote(KeyPlatformInvocation)) || !strings.Contains(e.Message, tc.field+" ") {
			t.Errorf("%s: Check = %v, want identity_invalid naming %s", tc.name, err, tc.field)
			continue
		}
		for _, v := range []string{testAudience, testRequestHash, otherAudience, otherHash} {
			if strings.Contains(e.Message, v) {
				t.Errorf("%s: the message quotes a value: %s", tc.name, e.Message)
			}
		}
	}
}

func TestSignV2Refuses(t *testing.T) {
	t.Parallel()
	_, priv := testKey("k1")
	for _, tc := range []struct {
		name string
		env  Envelope
		want string
	}{
		{"no audience", Envelope{Version: 2, Platform: "acme", InvocationID: invocationID, RequestHash: testRequestHash}, "audience"},
		{"no request hash", Envelope{Version: 2, Platform: "acme", InvocationID: invocationID, Audience: testAudience}, "request_hash"},
		{"prefixed request hash", Envelope{Version: 2, Platform: "acme", InvocationID: invocationID, Audience: testAudience, RequestHash: "sha256:" + testRequestHash}, "request_hash"},
		{"version 1 with a binding", Envelope{Version: 1, Platform: "acme", InvocationID: invocationID, Audience: testAudience, RequestHash: testRequestHash}, "version 2"},
		{"version 3", Envelope{Version: 3, Platform: "acme", InvocationID: invocationID, Audience: testAudience, RequestHash: testRequestHash}, "unsupported envelope version"},
	} {
		tc.env.IssuedAt = unixPtr(testNow)
		if _, err := Sign(tc.env, "k1", priv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Sign error = %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	env := v2("acme", invocationID)
	if _, err := SigningBytes(env); err == nil || !strings.Contains(err.Error(), "issued_at") {
		t.Errorf("SigningBytes(version 2 without issued_at) = %v", err)
	}
}

func TestBindingCheckersMatchPatterns(t *testing.T) {
	t.Parallel()
	audRe, hashRe := regexp.MustCompile(AudiencePattern), regexp.MustCompile(RequestHashPattern)
	inputs := []string{"", testAudience, testRequestHash, strings.ToUpper(testAudience), strings.ToUpper(testRequestHash),
		testAudience + "\n", testRequestHash + "\n", testAudience[:35], testRequestHash[:63], testAudience + "0", testRequestHash + "0",
		strings.ReplaceAll(testAudience, "-", "0"), strings.Repeat("-", 36), "{" + testAudience[1:35] + "}", "sha256:" + testRequestHash[7:]}
	for i := 0; i < 256; i++ {
		c := string([]byte{byte(i)})
		for _, pos := range []int{0, 8, 13, 35} {
			inputs = append(inputs, testAudience[:pos]+c+testAudience[pos+1:])
		}
		inputs = append(inputs, c+testRequestHash[1:], testRequestHash[:63]+c)
	}
	for _, s := range inputs {
		if ok := checkAudience(s) == ""; ok != audRe.MatchString(s) {
			t.Errorf("checkAudience(%q) ok=%v, AudiencePattern says %v", s, ok, !ok)
		}
		if ok := checkRequestHash(s) == ""; ok != hashRe.MatchString(s) {
			t.Errorf("checkRequestHash(%q) ok=%v, RequestHashPattern says %v", s, ok, !ok)
		}
	}
}
