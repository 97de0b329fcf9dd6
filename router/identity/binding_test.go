package identity

import (
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

func TestNormalizeVersion2(t *testing.T) {
	t.Parallel()
	inv := invocationID
	good := signed(t, v2("signed", inv), testNow, "k1", "k1")
	bound := Binding{Audience: testAudience, RequestHash: testRequestHash}
	meta := func(env map[string]any) map[string]any { return map[string]any{KeyPlatformInvocation: env} }
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

		badEnvelope("unsigned", meta(unsigned), "a version 2 envelope must be signed"),
		badEnvelope("unsigned, without issued_at", meta(without(unsigned, "issued_at")), "a version 2 envelope must be signed"),
		badEnvelope("unsigned, platform without keys", meta(asJSONValue(t, func() Envelope { e := v2("acme", inv); e.IssuedAt = new(testNow.Unix()); return e }()).(map[string]any)), "a version 2 envelope must be signed"),
		badEnvelope("signed, platform without keys", meta(signed(t, v2("acme", inv), testNow, "k1", "k1")), "unknown key"),
		badEnvelope("unknown field", meta(withField(good, "", "tenant_s3cr3t", "x")), "field that version 2 does not define"),
		badEnvelope("unknown field in signature", meta(withField(good, "signature", "s3cr3t", "x")), "signature has a field other than"),
		badEnvelope("audience missing", meta(without(good, "audience")), "audience is missing"),
		badEnvelope("request_hash missing", meta(without(good, "request_hash")), "request_hash is missing"),
		badEnvelope("audience number", meta(withField(good, "", "audience", 1.0)), "audience must be a string, got number"),
		badEnvelope("audience upper case", meta(withField(good, "", "audience", strings.ToUpper(testAudience))), "audience must be the router's installation id"),
		badEnvelope("audience not a UUID", meta(withField(good, "", "audience", "s3cr3t-router")), "audience must be the router's installation id"),
		badEnvelope("request_hash prefixed", meta(withField(good, "", "request_hash", "sha256:"+testRequestHash)), "request_hash must be 64 lower-case hex digits"),
		badEnvelope("request_hash upper case", meta(withField(good, "", "request_hash", strings.ToUpper(testRequestHash))), "request_hash must be 64 lower-case hex digits"),
		badEnvelope("request_hash base64", meta(withField(good, "", "request_hash", "fRpUEnsiJQL1t5tfsIAwYRUqRPkrN+I8ZSe69mXU2po=")), "request_hash must be 64"),
		badEnvelope("tampered audience", meta(withField(good, "", "audience", "3f6c1a52-9d0e-4b7a-8c21-5e4f0a9b7d14")), "signature does not verify"),
		badEnvelope("tampered request_hash", meta(withField(good, "", "request_hash", strings.Repeat("0", 64))), "signature does not verify"),
		badEnvelope("version 1 signature relabelled version 2", meta(v1as2), "signature does not verify"),
		badEnvelope("version 2 signature relabelled version 1", meta(v2as1), "signature does not verify"),
		badEnvelope("stale", meta(signed(t, v2("signed", inv), testNow.Add(-DefaultMaxAge-time.Second), "k1", "k1")), "stale"),
		badEnvelope("version 1 with audience", meta(withField(asJSONValue(t, Envelope{Version: 1, Platform: "acme", InvocationID: inv}).(map[string]any), "", "audience", testAudience)), "field that version 1 does not define"),
		badEnvelope("version 1 with request_hash", meta(withField(v1, "", "request_hash", testRequestHash)), "field that version 1 does not define"),
		badEnvelope("version 1, signed, on a platform that requires version 2", meta(signed(t, Envelope{Version: 1, Platform: "bound", InvocationID: inv}, testNow, "k1", "k1")), `platform "bound" requires envelope version 2`),
		badEnvelope("version 1, unsigned, on a platform that requires version 2", meta(asJSONValue(t, Envelope{Version: 1, Platform: "bound", InvocationID: inv}).(map[string]any)), `platform "bound" requires envelope version 2`),
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
	agrees(t, "checkAudience", func(s string) bool { return checkAudience(s) == "" }, audRe, inputs)
	agrees(t, "checkRequestHash", func(s string) bool { return checkRequestHash(s) == "" }, hashRe, inputs)
}
