package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// leakMarker appears in no message template, platform name or key id of the tests: a message that
// contains it quotes the request. Seeds put it in values and field names; the fuzzer spreads it.
const leakMarker = "zq"

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite testdata/fuzz/*/seed-* from the seeds in fuzz_test.go")

// FuzzNormalize fuzzes the JSON text of a whole _meta object.
func FuzzNormalize(f *testing.F) {
	cfg, sch := testConfig(), loadSchema(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var meta map[string]any
		if json.Unmarshal(data, &meta) != nil {
			return
		}
		checkNormalize(t, meta, cfg, sch)
	})
}

// FuzzEnvelope fuzzes the JSON text of a hubu.dev/platform-invocation envelope.
func FuzzEnvelope(f *testing.F) {
	cfg, sch := testConfig(), loadSchema(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		env, parseErr := ParseEnvelope(v)
		schemaErr := sch.Validate(v)
		if (parseErr == nil) != (schemaErr == nil) {
			t.Fatalf("ParseEnvelope and the JSON Schema disagree on %s:\nParseEnvelope: %v\nschema: %v", data, parseErr, schemaErr)
		}
		if parseErr != nil {
			checkMessage(t, parseErr.Error())
		} else {
			checkParsed(t, env)
		}
		checkNormalize(t, map[string]any{KeyPlatformInvocation: v}, cfg, sch)
	})
}

// checkParsed: a parsed envelope has one canonical form, which round-trips.
func checkParsed(t *testing.T, env Envelope) {
	t.Helper()
	sb, err := SigningBytes(env)
	if err != nil {
		t.Fatalf("SigningBytes of a parsed envelope: %v", err)
	}
	if sb2, _ := SigningBytes(env); !bytes.Equal(sb, sb2) {
		t.Fatal("SigningBytes is not deterministic")
	}
	var back map[string]any
	if err := json.Unmarshal(sb, &back); err != nil || bytes.Contains(sb, []byte("signature")) {
		t.Fatalf("signing bytes %s: %v", sb, err)
	}
	unsigned := env
	unsigned.Signature = nil
	if env.Version == EnvelopeVersion2 {
		// Version 2 is never unsigned: put the signature back to parse what it covers.
		back["signature"] = map[string]any{"alg": env.Signature.Alg, "key_id": env.Signature.KeyID, "value": env.Signature.Value}
		unsigned = env
	}
	again, err := ParseEnvelope(back)
	if err != nil {
		t.Fatalf("signing bytes %s do not parse: %v", sb, err)
	}
	if !reflect.DeepEqual(again, unsigned) {
		t.Fatalf("signing bytes round trip: %+v, want %+v", again, unsigned)
	}
	if sb3, _ := SigningBytes(again); !bytes.Equal(sb, sb3) {
		t.Fatalf("canonical form is not a fixed point: %s then %s", sb, sb3)
	}
	if sig := env.Signature; sig != nil && (!keyIDRe.MatchString(sig.KeyID) || !signatureValueRe.MatchString(sig.Value)) {
		t.Fatalf("parsed signature outside the patterns: %+v", sig)
	}
	// What integrators marshal parses back to the same envelope.
	if env2, err := ParseEnvelope(asJSONValue(t, env)); err != nil || !reflect.DeepEqual(env2, env) {
		t.Fatalf("json.Marshal round trip of %+v: %+v, %v", env, env2, err)
	}
}

// checkNormalize holds Normalize to its properties on any decoded _meta.
func checkNormalize(t *testing.T, meta map[string]any, cfg *Config, sch *jsonschema.Schema) {
	t.Helper()
	before, _ := json.Marshal(meta)
	id, err := Normalize(meta, cfg)
	if after, _ := json.Marshal(meta); !bytes.Equal(before, after) {
		t.Fatal("Normalize modified _meta")
	}
	if id2, err2 := Normalize(meta, cfg); id2 != id || !reflect.DeepEqual(err2, err) {
		t.Fatalf("Normalize is not deterministic: %+v %v, then %+v %v", id, err, id2, err2)
	}
	// Only the identity keys matter; any other key is noise.
	only, present := map[string]any{}, 0
	for _, s := range Sources {
		if v, ok := meta[s.Key]; ok {
			only[s.Key] = v
			present++
		}
	}
	if id3, err3 := Normalize(only, cfg); id3 != id || !reflect.DeepEqual(err3, err) {
		t.Fatalf("a non-identity _meta key changed the result: %+v %v, without it %+v %v", id, err, id3, err3)
	}

	if err != nil {
		e, ok := err.(*Error)
		if !ok {
			t.Fatalf("Normalize error %T %v is not an *Error", err, err)
		}
		want := CodeInvalid
		switch {
		case present == 0:
			want = CodeRequired
		case present > 1:
			want = CodeAmbiguous
		}
		if e.Code != want {
			t.Fatalf("%d identity keys present: code %s, want %s (%s)", present, e.Code, want, e.Message)
		}
		if want == CodeRequired && !strings.Contains(e.Message, RequiredMessage) {
			t.Fatalf("identity_required message lacks the contract sentence: %s", e.Message)
		}
		checkMessage(t, e.Message)
		return
	}

	if present != 1 {
		t.Fatalf("accepted %+v with %d identity keys present", id, present)
	}
	if !callIDRe.MatchString(id.CallID) || !platformRe.MatchString(id.Platform) {
		t.Fatalf("accepted identity outside the patterns: %+v", id)
	}
	i := slices.IndexFunc(Sources, func(s Source) bool { return s.Key == id.Source })
	if i < 0 {
		t.Fatalf("identity from unknown source %q", id.Source)
	}
	src := Sources[i]
	if src.Platform != "" {
		if id.Platform != src.Platform || meta[src.Key] != any(id.CallID) || id.Binding != (Binding{}) {
			t.Fatalf("source %q mapped %v to %+v", src.Key, meta[src.Key], id)
		}
		return
	}
	if slices.Contains(reservedPlatforms, id.Platform) {
		t.Fatalf("envelope accepted with reserved platform %q", id.Platform)
	}
	pc, ok := cfg.Platforms[id.Platform]
	if !ok {
		t.Fatalf("envelope accepted with a platform the config does not list: %q", id.Platform)
	}
	if err := sch.Validate(meta[src.Key]); err != nil {
		t.Fatalf("accepted envelope fails the JSON Schema: %v", err)
	}
	env, err := ParseEnvelope(meta[src.Key])
	if err != nil || env.Platform != id.Platform || env.InvocationID != id.CallID {
		t.Fatalf("accepted %+v, but ParseEnvelope says %+v, %v", id, env, err)
	}
	// Version 2 is always signed and hands its binding to the caller; version 1 binds nothing.
	if want := (Binding{Audience: env.Audience, RequestHash: env.RequestHash}); id.Binding != want ||
		(env.Version == EnvelopeVersion2) != (want != Binding{}) || (env.Version == EnvelopeVersion2 && env.Signature == nil) {
		t.Fatalf("accepted version %d envelope %+v as %+v", env.Version, env, id)
	}
	if env.Version < pc.MinVersion {
		t.Fatalf("accepted a version %d envelope for %q, which requires version %d", env.Version, id.Platform, pc.MinVersion)
	}
	if env.Signature == nil {
		if pc.RequireSignature {
			t.Fatalf("unsigned envelope accepted for %q, which requires signatures", id.Platform)
		}
		return
	}
	key, ok := pc.Keys[env.Signature.KeyID]
	msg, _ := SigningBytes(env)
	sig, _ := base64.RawURLEncoding.DecodeString(env.Signature.Value)
	if !ok || !ed25519.Verify(key, msg, sig) {
		t.Fatalf("accepted a signature that does not verify: %+v", env)
	}
	if age := cfg.now().Sub(time.Unix(*env.IssuedAt, 0)); age > cfg.maxAge() || age < -cfg.maxAge() {
		t.Fatalf("accepted a signature issued %s from now", age)
	}
}

// checkMessage: messages are one line of printable ASCII and quote nothing from the request.
func checkMessage(t *testing.T, msg string) {
	t.Helper()
	for i := 0; i < len(msg); i++ {
		if msg[i] < 0x20 || msg[i] > 0x7e {
			t.Fatalf("message has byte %#x: %q", msg[i], msg)
		}
	}
	if strings.Contains(msg, leakMarker) {
		t.Fatalf("message quotes the request: %q", msg)
	}
}

// fuzzSeed is one seed of the committed corpus under testdata/fuzz/<target>/seed-<name>.
type fuzzSeed struct {
	target, name string
	json         string
}

func fuzzSeeds(t testing.TB) []fuzzSeed {
	marshal := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	signedJSON := func(env Envelope, at time.Time, signer, keyID string) string {
		return marshal(signed(t, env, at, signer, keyID))
	}
	openAIContext := `"openai/session":"v1/conv_68a1f2c3d4e5","openai/subject":"v1/user-Q9rT2xL0aB","openai/organization":"org-Zx81Pq","openai/userLocation":{"city":"Oslo","region":"Oslo","country":"NO","timezone":"Europe/Oslo"}`
	codexCall := `"callId":"call_Ab3dE5fG7hJ9kL1mN3pQ5rS7","itemId":"fc_68a1f2c3d4e5f6a7","openai/request_id":"req_7f3a9c1e2b4d","sessionId":"0199a2b3-c4d5-7e6f-8a9b-0c1d2e3f4a5b","windowId":"w-1","progressToken":3`
	acme := Envelope{Version: 1, Platform: "acme", InvocationID: "inv-2026-01-01-0001"}
	signedEnv := Envelope{Version: 1, Platform: "signed", InvocationID: "job:42:step:7:attempt:1"}
	optional := Envelope{Version: 1, Platform: "optional", InvocationID: "run.9f8e7d6c5b4a3210"}
	bound := v2("bound", "inv-2026-01-01-v2-0001")
	boundSigned := signed(t, bound, testNow, "k1", "k1")
	v2Unsigned := asJSONValue(t, bound).(map[string]any)
	v2Unsigned["issued_at"] = float64(testNow.Unix())
	envMeta := func(envJSON string) string {
		return `{"hubu.dev/platform-invocation":` + envJSON + `,"progressToken":"pt-1","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
	}
	n := func(name, text string) fuzzSeed { return fuzzSeed{"FuzzNormalize", name, text} }
	e := func(name, text string) fuzzSeed { return fuzzSeed{"FuzzEnvelope", name, text} }
	return []fuzzSeed{
		n("codex-desktop", `{`+codexCall+`,`+openAIContext+`}`),
		n("chatgpt-work", `{`+codexCall+`,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",`+openAIContext+`}`),
		n("chatgpt-chat", `{`+openAIContext+`,"openai/locale":"nb-NO","openai/userAgent":"ChatGPT/1.2025.350 (iOS 19.1)","timezone":"Europe/Oslo"}`),
		n("claude-code", `{"claudecode/toolUseId":"toolu_01A09q90qw90lq917835lq9","progressToken":"b2f1c0de-1"}`),
		n("empty", `{}`),
		n("codex-and-claude", `{"callId":"call_Ab3dE5fG7hJ9kL1mN3pQ5rS7","claudecode/toolUseId":"toolu_01A09q90qw90lq917835lq9"}`),
		n("codex-and-envelope", `{"callId":"call_Ab3dE5fG7hJ9kL1mN3pQ5rS7","hubu.dev/platform-invocation":`+marshal(acme)+`}`),
		n("callid-number", `{"callId":12345,"progressToken":1}`),
		n("callid-null", `{"callId":null}`),
		n("callid-array", `{"callId":["call_Ab3dE5fG7hJ9kL1mN3pQ5rS7"]}`),
		n("callid-15", `{"callId":"call_Ab3dE5fG7h"}`),
		n("callid-16", `{"claudecode/toolUseId":"toolu_01A09q90qw"}`),
		n("callid-257", `{"callId":"`+strings.Repeat("c", 257)+`"}`),
		n("callid-unicode", `{"callId":"zq-call-Ab3dE5fG7hJ9kL\u00e9"}`),
		n("callid-space", `{"claudecode/toolUseId":"zq-toolu-01A09q90 zq"}`),
		n("callid-marker-ok", `{"callId":"zq-zq.zq:zq_zq-zq.zq"}`),
		n("envelope-unsigned", envMeta(marshal(acme))),
		n("envelope-signed", envMeta(signedJSON(signedEnv, testNow, "k1", "k1"))),
		n("envelope-signed-optional", envMeta(signedJSON(optional, testNow, "k2", "k2"))),
		n("envelope-signed-stale", envMeta(signedJSON(signedEnv, testNow.Add(-time.Hour), "k1", "k1"))),
		n("envelope-unsigned-required", envMeta(marshal(signedEnv))),
		n("envelope-version-2", envMeta(`{"version":2,"platform":"acme","invocation_id":"inv-2026-01-01-0002"}`)),
		n("envelope-unknown-field", envMeta(`{"version":1,"platform":"acme","invocation_id":"zq-inv-2026-01-01","zqfield":"zq"}`)),
		n("envelope-codex", envMeta(`{"version":1,"platform":"codex","invocation_id":"call_Ab3dE5fG7hJ9kL1mN3pQ5rS7"}`)),
		n("envelope-v2-signed", envMeta(marshal(boundSigned))),
		n("envelope-v1-min-version-2", envMeta(signedJSON(Envelope{Version: 1, Platform: "bound", InvocationID: "inv-2026-01-01-v1-0001"}, testNow, "k1", "k1"))),

		e("unsigned", marshal(acme)),
		e("unsigned-with-issued-at", `{"version":1,"platform":"optional","invocation_id":"zq-inv-2026-01-01-0003","issued_at":1767225600}`),
		e("signed", signedJSON(signedEnv, testNow, "k1", "k1")),
		e("signed-optional", signedJSON(optional, testNow.Add(-time.Minute), "k2", "k2")),
		e("signed-stale", signedJSON(signedEnv, testNow.Add(-DefaultMaxAge-time.Second), "k1", "k1")),
		e("signed-future", signedJSON(signedEnv, testNow.Add(time.Hour), "k1", "k1")),
		e("signed-wrong-key", signedJSON(signedEnv, testNow, "k2", "k1")),
		e("signed-unknown-key", signedJSON(signedEnv, testNow, "k1", "zq-key")),
		e("signed-no-keys", signedJSON(acme, testNow, "k1", "k1")),
		e("unsigned-required", marshal(signedEnv)),
		e("codex", `{"version":1,"platform":"codex","invocation_id":"call_Ab3dE5fG7hJ9kL1mN3pQ5rS7"}`),
		e("not-accepted", `{"version":1,"platform":"zq","invocation_id":"inv-2026-01-01-0004"}`),
		e("version-string", `{"version":"1","platform":"acme","invocation_id":"inv-2026-01-01-0004"}`),
		e("version-float", `{"version":1.5,"platform":"acme","invocation_id":"inv-2026-01-01-0004"}`),
		e("unknown-field", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-0004","zqfield":"zq"}`),
		e("signature-without-issued-at", `{"version":1,"platform":"signed","invocation_id":"inv-2026-01-01-0004","signature":{"alg":"ed25519","key_id":"k1","value":"`+strings.Repeat("A", 86)+`"}}`),
		e("signature-unknown-field", `{"version":1,"platform":"signed","invocation_id":"inv-2026-01-01-0004","issued_at":1767225600,"signature":{"alg":"ed25519","key_id":"k1","value":"`+strings.Repeat("A", 86)+`","zq":1}}`),
		e("issued-at-negative", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-0004","issued_at":-1}`),
		e("issued-at-max", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-0004","issued_at":9007199254740991}`),
		e("issued-at-over-max", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-0004","issued_at":9007199254740992}`),
		e("issued-at-fraction", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-0004","issued_at":1767225600.5}`),
		e("invocation-id-15", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-"}`),
		e("invocation-id-16", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-1"}`),
		e("invocation-id-256", `{"version":1,"platform":"acme","invocation_id":"`+strings.Repeat("i", 256)+`"}`),
		e("invocation-id-257", `{"version":1,"platform":"acme","invocation_id":"`+strings.Repeat("i", 257)+`"}`),
		e("platform-32", `{"version":1,"platform":"`+strings.Repeat("p", 32)+`","invocation_id":"inv-2026-01-01-0004"}`),
		e("platform-33", `{"version":1,"platform":"`+strings.Repeat("p", 33)+`","invocation_id":"inv-2026-01-01-0004"}`),
		e("v2-signed", marshal(boundSigned)),
		e("v2-signed-optional-platform", signedJSON(v2("signed", "inv-2026-01-01-v2-0002"), testNow, "k1", "k1")),
		e("v2-unsigned", marshal(v2Unsigned)),
		e("v2-tampered-audience", marshal(withField(boundSigned, "", "audience", "3f6c1a52-9d0e-4b7a-8c21-5e4f0a9b7d14"))),
		e("v2-tampered-hash", marshal(withField(boundSigned, "", "request_hash", strings.Repeat("0", 64)))),
		e("v2-hash-uppercase", marshal(withField(boundSigned, "", "request_hash", strings.ToUpper(testRequestHash)))),
		e("v2-hash-prefixed", marshal(withField(boundSigned, "", "request_hash", "sha256:"+testRequestHash))),
		e("v2-audience-uppercase", marshal(withField(boundSigned, "", "audience", strings.ToUpper(testAudience)))),
		e("v2-unknown-field", marshal(withField(boundSigned, "", "zqfield", "zq"))),
		e("v1-with-audience", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-0005","audience":"`+testAudience+`"}`),
		e("v1-with-request-hash", `{"version":1,"platform":"acme","invocation_id":"inv-2026-01-01-0005","request_hash":"`+testRequestHash+`"}`),
		e("version-3", `{"version":3,"platform":"acme","invocation_id":"inv-2026-01-01-0004"}`),
		e("null", `null`),
		e("array", `[{"version":1}]`),
	}
}

// TestFuzzSeedCorpus keeps the committed seeds equal to fuzzSeeds (run with -write-fuzz-seeds to
// rewrite them) and checks that they reach every outcome, so the fuzzer starts from all of them.
func TestFuzzSeedCorpus(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	outcomes := map[string]bool{}
	for _, s := range fuzzSeeds(t) {
		path := filepath.Join("testdata", "fuzz", s.target, "seed-"+s.name)
		content := "go test fuzz v1\n[]byte(" + strconv.Quote(s.json) + ")\n"
		if *writeFuzzSeeds {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Errorf("%s is missing or stale (go test ./identity -run TestFuzzSeedCorpus -write-fuzz-seeds): %v", path, err)
		}

		meta := map[string]any{}
		if s.target == "FuzzNormalize" {
			meta = decode[map[string]any](t, s.json)
		} else {
			meta[KeyPlatformInvocation] = decode[any](t, s.json)
		}
		id, err := Normalize(meta, cfg)
		var e *Error
		switch {
		case err == nil && id.Binding != (Binding{}):
			outcomes[s.target+" accepted bound envelope"] = true
		case err == nil && id.Source == KeyPlatformInvocation && meta[KeyPlatformInvocation].(map[string]any)["signature"] != nil:
			outcomes[s.target+" accepted signed envelope"] = true
		case err == nil:
			outcomes[s.target+" accepted "+id.Source] = true
		case errors.As(err, &e):
			outcomes[s.target+" "+e.Code] = true
		}
	}
	for _, want := range []string{
		"FuzzNormalize accepted " + KeyCodexCallID,
		"FuzzNormalize accepted " + KeyClaudeCodeToolUseID,
		"FuzzNormalize accepted " + KeyPlatformInvocation,
		"FuzzNormalize accepted signed envelope",
		"FuzzNormalize " + CodeRequired,
		"FuzzNormalize " + CodeAmbiguous,
		"FuzzNormalize " + CodeInvalid,
		"FuzzEnvelope accepted " + KeyPlatformInvocation,
		"FuzzEnvelope accepted signed envelope",
		"FuzzNormalize accepted bound envelope",
		"FuzzEnvelope accepted bound envelope",
		"FuzzEnvelope " + CodeInvalid,
	} {
		if !outcomes[want] {
			t.Errorf("no seed reaches %q (outcomes: %v)", want, outcomes)
		}
	}
}
