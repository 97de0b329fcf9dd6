package identity

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaPath is the envelope's JSON Schema, the wire contract platform integrators validate against.
const schemaPath = "../../proto/platform-invocation.schema.json"

func loadSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	c := jsonschema.NewCompiler()
	const url = "https://hubu.dev/schemas/platform-invocation.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url) // also validates the schema against the 2020-12 meta-schema
	if err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	return sch
}

// TestSchemaShape checks that the schema states the same rules as this package's constants.
func TestSchemaShape(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	type prop struct {
		Type                 string   `json:"type"`
		Pattern              string   `json:"pattern"`
		Const                any      `json:"const"`
		Enum                 []any    `json:"enum"`
		Minimum              *float64 `json:"minimum"`
		Maximum              *float64 `json:"maximum"`
		Not                  *struct{ Enum []string }
		AdditionalProperties *bool           `json:"additionalProperties"`
		Required             []string        `json:"required"`
		Properties           map[string]prop `json:"properties"`
	}
	var s struct {
		Schema               string              `json:"$schema"`
		Type                 string              `json:"type"`
		AdditionalProperties *bool               `json:"additionalProperties"`
		Required             []string            `json:"required"`
		DependentRequired    map[string][]string `json:"dependentRequired"`
		Properties           map[string]prop     `json:"properties"`
		If                   struct {
			Required   []string        `json:"required"`
			Properties map[string]prop `json:"properties"`
		} `json:"if"`
		Then struct {
			Required []string `json:"required"`
		} `json:"then"`
		Else struct {
			Properties map[string]json.RawMessage `json:"properties"` // boolean schemas
		} `json:"else"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	top := s.Properties
	sig := top["signature"].Properties

	if s.Schema != "https://json-schema.org/draft/2020-12/schema" || s.Type != "object" {
		t.Errorf("$schema %q, type %q", s.Schema, s.Type)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties || top["signature"].AdditionalProperties == nil || *top["signature"].AdditionalProperties {
		t.Error("additionalProperties must be false at both levels")
	}
	if !sameSet(keys(top), envelopeFieldsV2) || !sameSet(keys(sig), signatureFields) {
		t.Errorf("properties %q / %q, want %q / %q", keys(top), keys(sig), envelopeFieldsV2, signatureFields)
	}
	if !sameSet(s.Required, []string{"version", "platform", "invocation_id"}) || !sameSet(top["signature"].Required, signatureFields) {
		t.Errorf("required %q / %q", s.Required, top["signature"].Required)
	}
	if !slices.Equal(s.DependentRequired["signature"], []string{"issued_at"}) {
		t.Errorf("dependentRequired = %v", s.DependentRequired)
	}
	if !slices.Equal(top["version"].Enum, []any{float64(EnvelopeVersion), float64(EnvelopeVersion2)}) {
		t.Errorf("version enum = %v", top["version"].Enum)
	}
	// Version 2 requires all its fields; version 1 allows none of those it lacks.
	if v := s.If.Properties["version"]; !slices.Equal(s.If.Required, []string{"version"}) || v.Const != float64(EnvelopeVersion2) || len(s.If.Properties) != 1 {
		t.Errorf("if = %+v, want version const 2, required", s.If)
	}
	if !sameSet(s.Then.Required, envelopeFieldsV2) {
		t.Errorf("then.required = %q, want %q", s.Then.Required, envelopeFieldsV2)
	}
	v2only := slices.DeleteFunc(slices.Clone(envelopeFieldsV2), func(f string) bool { return slices.Contains(envelopeFieldsV1, f) })
	if !sameSet(keys(s.Else.Properties), v2only) {
		t.Errorf("else.properties = %q, want %q", keys(s.Else.Properties), v2only)
	}
	for k, v := range s.Else.Properties {
		if string(v) != "false" {
			t.Errorf("else.properties.%s = %s, want false", k, v)
		}
	}
	for _, c := range []struct{ name, got, want string }{
		{"platform", top["platform"].Pattern, PlatformPattern},
		{"invocation_id", top["invocation_id"].Pattern, CallIDPattern},
		{"signature.key_id", sig["key_id"].Pattern, KeyIDPattern},
		{"signature.value", sig["value"].Pattern, SignatureValuePattern},
		{"audience", top["audience"].Pattern, AudiencePattern},
		{"request_hash", top["request_hash"].Pattern, RequestHashPattern},
	} {
		if c.got != c.want {
			t.Errorf("%s pattern = %q, want %q", c.name, c.got, c.want)
		}
	}
	if n := top["platform"].Not; n == nil || !slices.Equal(n.Enum, reservedPlatforms) {
		t.Errorf("platform not.enum = %+v, want %q", n, reservedPlatforms)
	}
	if it := top["issued_at"]; it.Type != "integer" || it.Minimum == nil || *it.Minimum != 0 || it.Maximum == nil || *it.Maximum != MaxIssuedAt {
		t.Errorf("issued_at = %+v", it)
	}
	if sig["alg"].Const != SignatureAlg {
		t.Errorf("alg const = %v", sig["alg"].Const)
	}
}

func keys[V any](m map[string]V) []string { return slices.Collect(maps.Keys(m)) }

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}

// TestSchemaAgreesWithNormalize runs envelopes through the schema, ParseEnvelope and Normalize.
// FuzzEnvelope checks the same agreement on generated input.
func TestSchemaAgreesWithNormalize(t *testing.T) {
	t.Parallel()
	sch := loadSchema(t)
	cfg := testConfig()
	good := signed(t, Envelope{Version: 1, Platform: "signed", InvocationID: "inv-7f3a9c2e5b1d4a60"}, testNow, "k1", "k1")
	goodJSON, _ := json.Marshal(good)
	sigValue := good["signature"].(map[string]any)["value"].(string)
	long := strings.Repeat("a", 256)
	goodV2 := signed(t, v2("signed", "inv-7f3a9c2e5b1d4a60"), testNow, "k1", "k1")
	v2Sig := goodV2["signature"].(map[string]any)["value"].(string)
	v2JSON, _ := json.Marshal(goodV2)
	v2 := string(v2JSON)
	for _, tc := range []struct {
		name, json string
		valid      bool // by the schema and ParseEnvelope; Normalize accepts it too (testConfig platforms)
	}{
		{"minimal", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, true},
		{"all id characters", `{"version":1,"platform":"acme","invocation_id":"AZaz09._:-inv-01"}`, true},
		{"16-character id", `{"version":1,"platform":"acme","invocation_id":"` + long[:16] + `"}`, true},
		{"long id", `{"version":1,"platform":"acme","invocation_id":"` + long + `"}`, true},
		{"version 1.0", `{"version":1.0,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, true},
		{"issued_at 0", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":0}`, true},
		{"issued_at max", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":9007199254740991}`, true},
		{"issued_at 1e9", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1e9}`, true},
		{"signed", string(goodJSON), true},
		{"version 2", v2, true},
		{"version 2.0", strings.Replace(v2, `"version":2`, `"version":2.0`, 1), true},

		{"version 2 bare", `{"version":2,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"version 3", `{"version":3,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"version 2 unsigned", strings.Replace(v2, `,"signature":{"alg":"ed25519","key_id":"k1","value":"`+v2Sig+`"}`, ``, 1), false},
		{"version 2 without audience", strings.Replace(v2, `"audience":"`+testAudience+`",`, ``, 1), false},
		{"version 2 without request_hash", strings.Replace(v2, `"request_hash":"`+testRequestHash+`",`, ``, 1), false},
		{"version 2 without issued_at", strings.Replace(v2, `"issued_at":1767225600,`, ``, 1), false},
		{"version 2 unknown field", strings.Replace(v2, `"audience"`, `"tenant":"t","audience"`, 1), false},
		{"version 2 audience upper case", strings.Replace(v2, testAudience, strings.ToUpper(testAudience), 1), false},
		{"version 2 request_hash prefixed", strings.Replace(v2, testRequestHash, "sha256:"+testRequestHash, 1), false},
		{"version 2 request_hash null", strings.Replace(v2, `"`+testRequestHash+`"`, `null`, 1), false},
		{"version 1 with audience", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","audience":"` + testAudience + `"}`, false},
		{"version 1 with request_hash", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","request_hash":"` + testRequestHash + `"}`, false},
		{"version string", `{"version":"1","platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"version 1.5", `{"version":1.5,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"version true", `{"version":true,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"version missing", `{"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"unknown field", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","x":1}`, false},
		{"unknown signature field", strings.Replace(string(goodJSON), `"alg"`, `"x":1,"alg"`, 1), false},
		{"platform codex", `{"version":1,"platform":"codex","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"platform claude-code", `{"version":1,"platform":"claude-code","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"platform upper", `{"version":1,"platform":"Acme","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"platform leading hyphen", `{"version":1,"platform":"-a","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"platform 33", `{"version":1,"platform":"` + strings.Repeat("a", 33) + `","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"platform trailing newline", `{"version":1,"platform":"acme\n","invocation_id":"inv-7f3a9c2e5b1d4a60"}`, false},
		{"invocation_id empty", `{"version":1,"platform":"acme","invocation_id":""}`, false},
		{"invocation_id 15", `{"version":1,"platform":"acme","invocation_id":"` + long[:15] + `"}`, false},
		{"invocation_id 257", `{"version":1,"platform":"acme","invocation_id":"` + long + `a"}`, false},
		{"invocation_id unicode", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60\u00e9"}`, false},
		{"invocation_id trailing newline", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60\n"}`, false},
		{"invocation_id number", `{"version":1,"platform":"acme","invocation_id":1}`, false},
		{"issued_at negative", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":-1}`, false},
		{"issued_at fraction", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1.5}`, false},
		{"issued_at 2^53", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":9007199254740992}`, false},
		{"issued_at null", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":null}`, false},
		{"signed without issued_at", strings.Replace(string(goodJSON), `"issued_at":1767225600,`, ``, 1), false},
		{"alg", strings.Replace(string(goodJSON), `"ed25519"`, `"EdDSA"`, 1), false},
		{"value padded", strings.Replace(string(goodJSON), sigValue, sigValue+"==", 1), false},
		{"value trailing bits", strings.Replace(string(goodJSON), sigValue, sigValue[:85]+"B", 1), false},
		{"key_id empty", strings.Replace(string(goodJSON), `"key_id":"k1"`, `"key_id":""`, 1), false},
		{"signature null", `{"version":1,"platform":"acme","invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1,"signature":null}`, false},
		{"array", `[]`, false},
		{"string", `"x"`, false},
		{"null", `null`, false},
	} {
		v := decode[any](t, tc.json)
		schemaErr := sch.Validate(v)
		_, parseErr := ParseEnvelope(v)
		if (schemaErr == nil) != tc.valid {
			t.Errorf("%s: schema valid = %v, want %v (%v)", tc.name, schemaErr == nil, tc.valid, schemaErr)
		}
		if (parseErr == nil) != tc.valid {
			t.Errorf("%s: ParseEnvelope valid = %v, want %v (%v)", tc.name, parseErr == nil, tc.valid, parseErr)
		}
		_, err := Normalize(map[string]any{KeyPlatformInvocation: v}, cfg)
		if (err == nil) != tc.valid {
			t.Errorf("%s: Normalize accepted = %v, want %v (%v)", tc.name, err == nil, tc.valid, err)
		}
	}
}
