package identity

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type normalizeCase struct {
	name     string
	meta     map[string]any
	cfg      *Config // testConfig() when nil and noConfig is false
	noConfig bool
	want     Identity // when code is ""
	code     string
	msg      []string // substrings the message must contain
}

func runNormalizeCases(t *testing.T, cases []normalizeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			if cfg == nil && !tc.noConfig {
				cfg = testConfig()
			}
			got, err := Normalize(tc.meta, cfg)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("Normalize: unexpected error %v", err)
				}
				if got != tc.want {
					t.Fatalf("Normalize = %+v, want %+v", got, tc.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Normalize = %+v, %v; want *Error with code %s", got, err, tc.code)
			}
			if got != (Identity{}) {
				t.Errorf("Normalize returned identity %+v with an error", got)
			}
			if e.Code != tc.code {
				t.Errorf("code = %s, want %s (message: %s)", e.Code, tc.code, e.Message)
			}
			for _, s := range tc.msg {
				if !strings.Contains(e.Message, s) {
					t.Errorf("message %q does not contain %q", e.Message, s)
				}
			}
			if strings.Contains(e.Error(), secret) {
				t.Errorf("message echoes a value from _meta: %q", e.Error())
			}
			if strings.ContainsAny(e.Message, "\n\r") {
				t.Errorf("message is not one line: %q", e.Message)
			}
		})
	}
}

// badEnvelope is a case Normalize refuses as identity_invalid, with a message naming the
// envelope's _meta key and saying each of msg.
func badEnvelope(name string, meta map[string]any, msg ...string) normalizeCase {
	return normalizeCase{name: name, meta: meta, code: CodeInvalid, msg: append([]string{strconv.Quote(KeyPlatformInvocation)}, msg...)}
}

func TestNormalizeStringSources(t *testing.T) {
	t.Parallel()
	id256 := secret + strings.Repeat("x", 256-len(secret))
	allChars := "AZaz09._:-" + secret
	codexKey, claudeKey := strconv.Quote(KeyCodexCallID), strconv.Quote(KeyClaudeCodeToolUseID)
	cases := []normalizeCase{
		{name: "codex", meta: map[string]any{"callId": codexCallID}, want: Identity{Platform: "codex", CallID: codexCallID, Source: "callId"}},
		{
			name: "codex desktop, full shape",
			meta: decode[map[string]any](t, `{"callId":"call_s3cr3tAb3dE5fG7hJ9kL1mN3","itemId":"item-9","openai/request_id":"req-1",
				"sessionId":"sess-1","windowId":"w-1","progressToken":3,"openai/session":"conv-1","openai/subject":"user-1",
				"openai/organization":"org-1","openai/userLocation":{"city":"Oslo","country":"NO"}}`),
			want: Identity{Platform: "codex", CallID: "call_s3cr3tAb3dE5fG7hJ9kL1mN3", Source: "callId"},
		},
		{
			name: "ChatGPT Work, with traceparent",
			meta: decode[map[string]any](t, `{"callId":"call_s3cr3tQ9rT2xL0aBcD4eF6gH","itemId":"item-9","openai/session":"conv-1",
				"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`),
			want: Identity{Platform: "codex", CallID: "call_s3cr3tQ9rT2xL0aBcD4eF6gH", Source: "callId"},
		},
		{name: "claude code, real tool_use id shape", meta: map[string]any{"claudecode/toolUseId": "toolu_01A09q90qw90lq917835lq9"}, want: Identity{Platform: "claude-code", CallID: "toolu_01A09q90qw90lq917835lq9", Source: "claudecode/toolUseId"}},
		{name: "codex, real call id shape", meta: map[string]any{"callId": "call_Wz3kZ9b1XyQ4rT7uVp2sN8mC"}, want: Identity{Platform: "codex", CallID: "call_Wz3kZ9b1XyQ4rT7uVp2sN8mC", Source: "callId"}},
		{name: "claude code", meta: map[string]any{"claudecode/toolUseId": claudeCallID, "progressToken": "p"}, want: Identity{Platform: "claude-code", CallID: claudeCallID, Source: "claudecode/toolUseId"}},
		{name: "every allowed character", meta: map[string]any{"callId": allChars}, want: Identity{Platform: "codex", CallID: allChars, Source: "callId"}},
		{name: "256 bytes accepted", meta: map[string]any{"callId": id256}, want: Identity{Platform: "codex", CallID: id256, Source: "callId"}},
		{name: "string sources need no config", noConfig: true, meta: map[string]any{"callId": codexCallID}, want: Identity{Platform: "codex", CallID: codexCallID, Source: "callId"}},
		{name: "257 bytes refused", meta: map[string]any{"callId": id256 + "x"}, code: CodeInvalid, msg: []string{codexKey, "longer than 256 bytes"}},
		{name: "257 bytes refused, claude", meta: map[string]any{"claudecode/toolUseId": id256 + "x"}, code: CodeInvalid, msg: []string{claudeKey, "longer than 256 bytes"}},
		{name: "empty", meta: map[string]any{"callId": ""}, code: CodeInvalid, msg: []string{codexKey, "empty"}},
		{name: "empty, claude", meta: map[string]any{"claudecode/toolUseId": ""}, code: CodeInvalid, msg: []string{claudeKey, "empty"}},
	}
	// A call id shorter than 16 characters is too weak to tell calls apart (a model that makes
	// short ids may repeat them): refused, with a message that names the rule.
	for _, src := range []struct{ key, platform string }{{KeyCodexCallID, PlatformCodex}, {KeyClaudeCodeToolUseID, PlatformClaudeCode}} {
		id15, id16 := secret+strings.Repeat("x", 9), secret+strings.Repeat("x", 10)
		cases = append(cases,
			normalizeCase{name: "15 characters refused " + src.key, meta: map[string]any{src.key: id15},
				code: CodeInvalid, msg: []string{strconv.Quote(src.key), "the value is shorter than 16 characters"}},
			normalizeCase{name: "16 characters accepted " + src.key, meta: map[string]any{src.key: id16},
				want: Identity{Platform: src.platform, CallID: id16, Source: src.key}},
		)
	}
	// Each bad value is long enough, so that its characters are the only thing wrong with it.
	for _, bad := range []struct{ name, value string }{
		{"space", codexCallID + " 1"}, {"slash", codexCallID + "/1"}, {"backslash", codexCallID + `\\`},
		{"plus", codexCallID + "+1"}, {"equals", codexCallID + "=="}, {"newline", codexCallID + "\n"}, {"NUL", codexCallID + "\x00"},
		{"unicode letter", codexCallID + "é"}, {"unicode digit", codexCallID + "٣"}, {"emoji", codexCallID + "🙂"},
		{"fullwidth colon", codexCallID + "："}, {"invalid UTF-8", codexCallID + "\xff"}, {"quote", codexCallID + `"`},
	} {
		for _, key := range []string{KeyCodexCallID, KeyClaudeCodeToolUseID} {
			cases = append(cases, normalizeCase{
				name: bad.name + " " + key, meta: map[string]any{key: bad.value},
				code: CodeInvalid, msg: []string{strconv.Quote(key), "outside [A-Za-z0-9._:-]"},
			})
		}
	}
	for _, bad := range []struct {
		name, json, typ string
	}{
		{"number", `42`, "number"}, {"float", `1.5`, "number"}, {"zero", `0`, "number"},
		{"true", `true`, "boolean"}, {"false", `false`, "boolean"},
		{"null", `null`, "null"}, {"array", `["s3cr3t"]`, "array"}, {"empty array", `[]`, "array"},
		{"object", `{"id":"s3cr3t"}`, "object"},
	} {
		for _, key := range []string{KeyCodexCallID, KeyClaudeCodeToolUseID} {
			cases = append(cases, normalizeCase{
				name: bad.name + " " + key, meta: map[string]any{key: decode[any](t, bad.json)},
				code: CodeInvalid, msg: []string{strconv.Quote(key), "must be a string, got " + bad.typ},
			})
		}
	}
	runNormalizeCases(t, cases)
}

func TestNormalizeRequiredAndAmbiguous(t *testing.T) {
	t.Parallel()
	env := map[string]any{"version": 1.0, "platform": "acme", "invocation_id": invocationID}
	cases := []normalizeCase{
		{name: "nil meta", meta: nil, code: CodeRequired, msg: []string{RequiredMessage}},
		{name: "empty meta", meta: map[string]any{}, code: CodeRequired, msg: []string{RequiredMessage}},
		{
			name: "ChatGPT chat: session keys only",
			meta: decode[map[string]any](t, `{"openai/session":"conv-s3cr3t","openai/subject":"user-s3cr3t","openai/organization":"org-1",
				"openai/userLocation":{"country":"NO"},"openai/locale":"nb-NO","openai/userAgent":"ChatGPT/1.2025","timezone":"Europe/Oslo"}`),
			code: CodeRequired, msg: []string{RequiredMessage, `"callId"`, `"claudecode/toolUseId"`, `"hubu.dev/platform-invocation"`},
		},
		{
			name: "request ids, progress tokens and traces are not identity",
			meta: map[string]any{"openai/request_id": "req-" + secret, "progressToken": "tok-" + secret, "traceparent": "00-" + secret,
				"itemId": "item-" + secret, "sessionId": "sess-" + secret, "requestId": secret, "id": secret},
			code: CodeRequired, msg: []string{RequiredMessage},
		},
		{
			name: "keys are case-sensitive and exact",
			meta: map[string]any{"callid": secret, "CallId": secret, "call_id": secret, "toolUseId": secret, "claudecode/tooluseid": secret,
				"hubu.dev/platform_invocation": env, "_codex_apps": map[string]any{"call_id": secret}},
			code: CodeRequired, msg: []string{RequiredMessage},
		},
		{name: "codex and claude", meta: map[string]any{"callId": codexCallID, "claudecode/toolUseId": claudeCallID},
			code: CodeAmbiguous, msg: []string{`"callId"`, `"claudecode/toolUseId"`}},
		{name: "codex and envelope", meta: map[string]any{"callId": codexCallID, KeyPlatformInvocation: env},
			code: CodeAmbiguous, msg: []string{`"callId", "hubu.dev/platform-invocation"`}},
		{name: "all three", meta: map[string]any{"callId": codexCallID, "claudecode/toolUseId": claudeCallID, KeyPlatformInvocation: env},
			code: CodeAmbiguous, msg: []string{`"callId", "claudecode/toolUseId", "hubu.dev/platform-invocation"`}},
		{name: "an invalid second source is still a second source", meta: map[string]any{"callId": codexCallID, "claudecode/toolUseId": nil},
			code: CodeAmbiguous, msg: []string{`"callId"`, `"claudecode/toolUseId"`}},
		{name: "same value twice", meta: map[string]any{"callId": codexCallID, "claudecode/toolUseId": codexCallID},
			code: CodeAmbiguous},
	}
	runNormalizeCases(t, cases)
}

func TestNormalizeEnvelope(t *testing.T) {
	t.Parallel()
	envKey := strconv.Quote(KeyPlatformInvocation)
	inv := invocationID
	envJSON := func(body string) map[string]any {
		return map[string]any{KeyPlatformInvocation: decode[any](t, body)}
	}
	cases := []normalizeCase{
		{name: "unsigned, accepted platform", meta: envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`),
			want: Identity{Platform: "acme", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "unsigned with issued_at (not checked for age when unsigned)", meta: envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","issued_at":0}`),
			want: Identity{Platform: "acme", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "other _meta keys beside the envelope", meta: decode[map[string]any](t, `{"progressToken":7,"traceparent":"00-1",
			"hubu.dev/platform-invocation":{"invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","platform":"optional","version":1}}`),
			want: Identity{Platform: "optional", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "version written 1.0", meta: envJSON(`{"version":1.0,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`),
			want: Identity{Platform: "acme", CallID: inv, Source: KeyPlatformInvocation}},

		{name: "nil config accepts no platform", noConfig: true, meta: envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`),
			code: CodeInvalid, msg: []string{envKey, "not accepted"}},
		{name: "zero config accepts no platform", cfg: &Config{}, meta: envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`),
			code: CodeInvalid, msg: []string{envKey, "not accepted"}},
		badEnvelope("platform not accepted", envJSON(`{"version":1,"platform":"beta","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "not accepted"),
		badEnvelope("codex as envelope platform", envJSON(`{"version":1,"platform":"codex","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "own _meta key"),
		badEnvelope("claude-code as envelope platform", envJSON(`{"version":1,"platform":"claude-code","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "own _meta key"),
		{name: "codex refused even when the operator lists it", cfg: &Config{Platforms: map[string]PlatformConfig{"codex": {}}},
			meta: envJSON(`{"version":1,"platform":"codex","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), code: CodeInvalid, msg: []string{envKey, "own _meta key"}},

		badEnvelope("version 2 without its binding", envJSON(`{"version":2,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "audience is missing"),
		badEnvelope("version 2 with fields it does not define", envJSON(`{"version":2,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","tenant":"t"}`), "field that version 2 does not define"),
		badEnvelope("version 3", envJSON(`{"version":3,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "unsupported envelope version"),
		badEnvelope("version 0", envJSON(`{"version":0,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "unsupported envelope version"),
		badEnvelope("version 1.5", envJSON(`{"version":1.5,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "unsupported envelope version"),
		badEnvelope("version string", envJSON(`{"version":"1","platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "version must be the number 1 or 2, got string"),
		badEnvelope("version true", envJSON(`{"version":true,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "got boolean"),
		badEnvelope("version null", envJSON(`{"version":null,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "got null"),
		badEnvelope("version missing", envJSON(`{"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "no version"),
		badEnvelope("unknown field", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","s3cr3t_field":"x"}`), "field that version 1 does not define"),
		badEnvelope("unknown field that looks harmless", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","session":"x"}`), "field that version 1 does not define"),
		badEnvelope("unknown field in signature", map[string]any{KeyPlatformInvocation: withField(
			signed(t, Envelope{Version: 1, Platform: "signed", InvocationID: inv}, testNow, "k1", "k1"), "signature", "s3cr3t", "x")}, "signature has a field other than"),

		badEnvelope("envelope null", map[string]any{KeyPlatformInvocation: nil}, "got null"),
		badEnvelope("envelope string", map[string]any{KeyPlatformInvocation: `{"version":1,"platform":"acme","invocation_id":"s3cr3t"}`}, "must be a JSON object, got string"),
		badEnvelope("envelope array", envJSON(`[{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}]`), "got array"),
		badEnvelope("envelope number", envJSON(`1`), "got number"),
		badEnvelope("envelope empty object", envJSON(`{}`), "no version"),

		badEnvelope("platform missing", envJSON(`{"version":1,"invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "platform is missing"),
		badEnvelope("platform number", envJSON(`{"version":1,"platform":7,"invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "platform must be a string, got number"),
		badEnvelope("platform empty", envJSON(`{"version":1,"platform":"","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "platform is empty"),
		badEnvelope("platform upper case", envJSON(`{"version":1,"platform":"ACME","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "platform must be lower-case"),
		badEnvelope("platform leading hyphen", envJSON(`{"version":1,"platform":"-acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "platform must be lower-case"),
		badEnvelope("platform underscore", envJSON(`{"version":1,"platform":"ac_me","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "platform must be lower-case"),
		badEnvelope("platform 33 bytes", envJSON(`{"version":1,"platform":"`+strings.Repeat("a", 33)+`","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "platform is longer than 32 bytes"),
		badEnvelope("platform 32 bytes, pattern ok but not accepted", envJSON(`{"version":1,"platform":"`+strings.Repeat("a", 32)+`","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d"}`), "not accepted"),

		badEnvelope("invocation_id missing", envJSON(`{"version":1,"platform":"acme"}`), "invocation_id is missing"),
		badEnvelope("invocation_id number", envJSON(`{"version":1,"platform":"acme","invocation_id":12}`), "invocation_id must be a string, got number"),
		badEnvelope("invocation_id null", envJSON(`{"version":1,"platform":"acme","invocation_id":null}`), "invocation_id must be a string, got null"),
		badEnvelope("invocation_id empty", envJSON(`{"version":1,"platform":"acme","invocation_id":""}`), "invocation_id is empty"),
		badEnvelope("invocation_id 257", envJSON(`{"version":1,"platform":"acme","invocation_id":"`+secret+strings.Repeat("x", 251)+`"}`), "invocation_id is longer than 256 bytes"),
		{name: "invocation_id 256", meta: envJSON(`{"version":1,"platform":"acme","invocation_id":"` + secret + strings.Repeat("x", 250) + `"}`),
			want: Identity{Platform: "acme", CallID: secret + strings.Repeat("x", 250), Source: KeyPlatformInvocation}},
		badEnvelope("invocation_id 15 characters", envJSON(`{"version":1,"platform":"acme","invocation_id":"`+secret+strings.Repeat("x", 9)+`"}`), "invocation_id is shorter than 16 characters"),
		{name: "invocation_id 16 characters", meta: envJSON(`{"version":1,"platform":"acme","invocation_id":"` + secret + strings.Repeat("x", 10) + `"}`),
			want: Identity{Platform: "acme", CallID: secret + strings.Repeat("x", 10), Source: KeyPlatformInvocation}},
		badEnvelope("invocation_id unicode", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d\u00e9"}`), "invocation_id contains characters outside"),
		badEnvelope("invocation_id space", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d 1"}`), "invocation_id contains characters outside"),

		badEnvelope("issued_at string", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","issued_at":"1767225600"}`), "issued_at must be an integer"),
		badEnvelope("issued_at fraction", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","issued_at":1767225600.5}`), "issued_at must be an integer"),
		badEnvelope("issued_at negative", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","issued_at":-1}`), "issued_at must be an integer"),
		badEnvelope("issued_at 2^53", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","issued_at":9007199254740992}`), "issued_at must be an integer"),
		badEnvelope("issued_at null", envJSON(`{"version":1,"platform":"acme","invocation_id":"inv-s3cr3t-7f3a9c2e5b1d","issued_at":null}`), "issued_at must be an integer", "got null"),
	}
	runNormalizeCases(t, cases)
}

// withField returns a deep-enough copy of env with obj[field][key] = value (or env[key] when field is "").
func withField(env map[string]any, field, key string, value any) map[string]any {
	out := maps.Clone(env)
	if field == "" {
		out[key] = value
		return out
	}
	inner := maps.Clone(env[field].(map[string]any))
	inner[key] = value
	out[field] = inner
	return out
}

// without returns a copy of env without key.
func without(env map[string]any, key string) map[string]any {
	out := maps.Clone(env)
	delete(out, key)
	return out
}

func TestNormalizeSignatures(t *testing.T) {
	t.Parallel()
	envKey := strconv.Quote(KeyPlatformInvocation)
	inv := invocationID
	base := Envelope{Version: 1, Platform: "signed", InvocationID: inv}
	good := signed(t, base, testNow, "k1", "k1")
	goodSig := good["signature"].(map[string]any)["value"].(string)
	meta := func(env map[string]any) map[string]any { return map[string]any{KeyPlatformInvocation: env} }
	optional := Envelope{Version: 1, Platform: "optional", InvocationID: inv}
	acme := Envelope{Version: 1, Platform: "acme", InvocationID: inv}
	k1, _ := testKey("k1")
	// Flip the last significant bits of the signature: still well-formed, no longer valid.
	flipped := goodSig[:80] + string(rune(goodSig[80]^1)) + goodSig[81:]

	cases := []normalizeCase{
		{name: "valid", meta: meta(good), want: Identity{Platform: "signed", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "valid, issued MaxAge ago", meta: meta(signed(t, base, testNow.Add(-DefaultMaxAge), "k1", "k1")), want: Identity{Platform: "signed", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "valid, issued MaxAge ahead", meta: meta(signed(t, base, testNow.Add(DefaultMaxAge), "k1", "k1")), want: Identity{Platform: "signed", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "valid, issued_at written as a float", meta: meta(withField(good, "", "issued_at", 1.7672256e9)), want: Identity{Platform: "signed", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "valid, version written 1.0", meta: meta(withField(good, "", "version", 1.0)), want: Identity{Platform: "signed", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "signed on a platform that does not require it", meta: meta(signed(t, optional, testNow, "k2", "k2")), want: Identity{Platform: "optional", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "unsigned accepted when not required", meta: meta(asJSONValue(t, optional).(map[string]any)), want: Identity{Platform: "optional", CallID: inv, Source: KeyPlatformInvocation}},
		{name: "unsigned accepted, platform without keys", meta: meta(asJSONValue(t, acme).(map[string]any)), want: Identity{Platform: "acme", CallID: inv, Source: KeyPlatformInvocation}},

		badEnvelope("missing when required", meta(asJSONValue(t, base).(map[string]any)), `platform "signed" requires a signed envelope`),
		badEnvelope("missing when required, with issued_at", meta(asJSONValue(t, Envelope{Version: 1, Platform: "signed", InvocationID: inv, IssuedAt: new(testNow.Unix())}).(map[string]any)), "requires a signed envelope"),
		badEnvelope("tampered invocation_id", meta(withField(good, "", "invocation_id", inv+"2")), "signature does not verify", `key "k1"`),
		badEnvelope("tampered issued_at", meta(withField(good, "", "issued_at", float64(testNow.Unix()+1))), "signature does not verify"),
		badEnvelope("tampered signature bits", meta(withField(good, "signature", "value", flipped)), "signature does not verify"),
		badEnvelope("signature of another envelope", meta(withField(good, "signature", "value",
			signed(t, Envelope{Version: 1, Platform: "signed", InvocationID: "inv-other-0123456789"}, testNow, "k1", "k1")["signature"].(map[string]any)["value"])), "signature does not verify"),
		badEnvelope("wrong key", meta(signed(t, base, testNow, "k2", "k1")), "signature does not verify"),
		badEnvelope("unknown key_id", meta(signed(t, base, testNow, "k1", "k9-s3cr3t")), "unknown key", `platform "signed"`),
		badEnvelope("key of another platform", meta(signed(t, base, testNow, "k2", "k2")), "unknown key"),
		badEnvelope("signed on a platform without keys", meta(signed(t, acme, testNow, "k1", "k1")), "unknown key"),
		badEnvelope("stale", meta(signed(t, base, testNow.Add(-DefaultMaxAge-time.Second), "k1", "k1")), "stale"),
		badEnvelope("very stale", meta(signed(t, base, time.Unix(0, 0), "k1", "k1")), "stale"),
		badEnvelope("future", meta(signed(t, base, testNow.Add(DefaultMaxAge+time.Second), "k1", "k1")), "not yet valid"),
		badEnvelope("far future", meta(signed(t, base, time.Unix(MaxIssuedAt, 0), "k1", "k1")), "not yet valid"),
		{name: "custom MaxAge", cfg: func() *Config { c := testConfig(); c.MaxAge = time.Minute; return c }(),
			meta: meta(signed(t, base, testNow.Add(-61*time.Second), "k1", "k1")), code: CodeInvalid, msg: []string{envKey, "stale", "1m0s"}},
		badEnvelope("signed without issued_at", meta(withField(good, "", "issued_at", nil)), "issued_at"),
		badEnvelope("signed, issued_at removed", meta(without(good, "issued_at")), "a signed envelope must carry issued_at"),
		badEnvelope("alg other", meta(withField(good, "signature", "alg", "EdDSA")), `signature.alg must be "ed25519"`),
		badEnvelope("alg missing", meta(withField(good, "", "signature", without(good["signature"].(map[string]any), "alg"))), "signature.alg is missing"),
		badEnvelope("key_id bad characters", meta(withField(good, "signature", "key_id", "k1/"+secret)), "signature.key_id contains characters outside"),
		badEnvelope("key_id 65 bytes", meta(withField(good, "signature", "key_id", secret+strings.Repeat("k", 59))), "signature.key_id is longer than 64 bytes"),
		badEnvelope("key_id number", meta(withField(good, "signature", "key_id", 1.0)), "signature.key_id must be a string, got number"),
		badEnvelope("value padded", meta(withField(good, "signature", "value", goodSig+"==")), "signature.value must be"),
		badEnvelope("value std alphabet", meta(withField(good, "signature", "value", strings.NewReplacer("-", "+", "_", "/").Replace(goodSig[:85])+"+")), "signature.value must be"),
		badEnvelope("value non-zero trailing bits", meta(withField(good, "signature", "value", goodSig[:85]+"B")), "signature.value must be"),
		badEnvelope("value too short", meta(withField(good, "signature", "value", goodSig[:84])), "signature.value must be"),
		badEnvelope("value empty", meta(withField(good, "signature", "value", "")), "signature.value must be"),
		badEnvelope("signature null", meta(withField(good, "", "signature", nil)), "signature must be a JSON object, got null"),
		badEnvelope("signature string", meta(withField(good, "", "signature", goodSig)), "signature must be a JSON object, got string"),
		{name: "misconfigured key does not panic", cfg: &Config{Now: testConfig().Now, Platforms: map[string]PlatformConfig{
			"signed": {RequireSignature: true, Keys: map[string]ed25519.PublicKey{"k1": k1[:31]}}}},
			meta: meta(good), code: CodeInvalid, msg: []string{envKey, `key "k1" of platform "signed" is misconfigured`}},
	}
	runNormalizeCases(t, cases)
}

func TestNormalizeDoesNotModifyMeta(t *testing.T) {
	t.Parallel()
	good := signed(t, Envelope{Version: 1, Platform: "signed", InvocationID: invocationID}, testNow, "k1", "k1")
	for _, meta := range []map[string]any{
		{"callId": codexCallID, "progressToken": 1.0},
		{KeyPlatformInvocation: good},
		{KeyPlatformInvocation: withField(good, "", "extra", true)},
	} {
		before := fmt.Sprint(meta)
		_, _ = Normalize(meta, testConfig())
		if after := fmt.Sprint(meta); after != before {
			t.Errorf("Normalize modified _meta:\n%s\n%s", before, after)
		}
	}
}

func TestCheckIDMatchesPattern(t *testing.T) {
	t.Parallel()
	// Call ids have a floor of 16 characters: every byte is also tried first and last in an id of
	// 16, beside the lengths around both limits.
	pad := strings.Repeat("a", 15)
	inputs := []string{"", "a", "A.b_c", "a:b-c.d", "a b", "é", "\x00", "a\n", strings.Repeat("a", 256), strings.Repeat("a", 257), "[", "]", "^", "`", "{", "~", "@", "/",
		pad, pad + "a", pad[1:] + "é", "A.b_c:d-e.f_g:h-", "A.b_c:d-e.f_g:h", strings.Repeat("a", 255)}
	for c := 0; c < 256; c++ {
		inputs = append(inputs, string(rune(c)), "x"+string([]byte{byte(c)}), pad+string([]byte{byte(c)}), string([]byte{byte(c)})+pad)
	}
	agrees(t, "checkCallID", func(s string) bool { return checkCallID(s) == "" }, callIDRe, inputs)
	agrees(t, "checkID(key)", func(s string) bool { return checkID(s, MaxKeyIDLen) == "" }, keyIDRe, inputs)
	agrees(t, "checkPlatform", func(s string) bool { return checkPlatform(s) == "" }, platformRe,
		append(inputs, "acme", "a-", "-a", "0a", "a--b", strings.Repeat("a", 32), strings.Repeat("a", 33), "Acme", "claude-code"))
}

func TestSourcesTable(t *testing.T) {
	t.Parallel()
	var keys, fixed []string
	for _, s := range Sources {
		if s.Key == "" || s.Map == nil || s.Clients == "" {
			t.Errorf("incomplete source %+v", s)
		}
		if s.JSONType != "string" && s.JSONType != "object" {
			t.Errorf("source %q: JSONType %q", s.Key, s.JSONType)
		}
		if slices.Contains(keys, s.Key) {
			t.Errorf("duplicate source key %q", s.Key)
		}
		keys = append(keys, s.Key)
		if s.Platform != "" {
			if checkPlatform(s.Platform) != "" {
				t.Errorf("source %q: platform %q does not match PlatformPattern", s.Key, s.Platform)
			}
			fixed = append(fixed, s.Platform)
		}
	}
	if want := []string{KeyCodexCallID, KeyClaudeCodeToolUseID, KeyPlatformInvocation}; !slices.Equal(keys, want) {
		t.Errorf("source keys = %q, want %q (the contract table)", keys, want)
	}
	// An envelope naming a fixed platform would let one call reach the registry under two sources.
	if !slices.Equal(fixed, reservedPlatforms) {
		t.Errorf("reservedPlatforms = %q, want the fixed platforms of Sources %q", reservedPlatforms, fixed)
	}
}

func TestNormalizeChecksMapperOutput(t *testing.T) {
	// Not parallel: it swaps an entry of the package-level table.
	saved := Sources[0].Map
	t.Cleanup(func() { Sources[0].Map = saved })
	for _, out := range [][2]string{{"codex", ""}, {"codex", codexCallID + " b"}, {"codex", strings.Repeat("a", 15)}, {"", codexCallID}, {"Codex", codexCallID},
		{"codex", strings.Repeat("a", 257)}} {
		Sources[0].Map = func(any, *Config) (Identity, error) { return Identity{Platform: out[0], CallID: out[1]}, nil }
		if _, err := Normalize(map[string]any{KeyCodexCallID: codexCallID}, nil); err == nil {
			t.Errorf("mapper output %q accepted", out)
		}
	}
}

func TestErrorAndDescribeError(t *testing.T) {
	t.Parallel()
	_, err := Normalize(nil, nil)
	if got, want := err.Error(), CodeRequired+": "+RequiredMessage; !strings.HasPrefix(got, want) {
		t.Errorf("Error() = %q, want prefix %q", got, want)
	}
	code, msg := DescribeError(fmt.Errorf("tools/call: %w", err))
	if code != CodeRequired || !strings.HasPrefix(msg, RequiredMessage) {
		t.Errorf("DescribeError(wrapped) = %q, %q", code, msg)
	}
	if code, msg := DescribeError(errors.New("boom " + secret)); code != CodeInvalid || strings.Contains(msg, secret) {
		t.Errorf("DescribeError(foreign) = %q, %q", code, msg)
	}
	if code, msg := DescribeError(nil); code != "" || msg != "" {
		t.Errorf("DescribeError(nil) = %q, %q", code, msg)
	}
}
