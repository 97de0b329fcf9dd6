package identity

import (
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "identity.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	k1, _ := testKey("k1")
	k2, _ := testKey("k2")
	path := writeConfig(t, `{
		"platforms": {
			"acme": {"require_signature": true, "keys": {"k1": "`+base64.StdEncoding.EncodeToString(k1)+`",
			                                              "k2": "`+base64.RawURLEncoding.EncodeToString(k2)+`"}},
			"beta": {},
			"gamma": {"keys": {"k1": "`+base64.RawStdEncoding.EncodeToString(k1)+`"}},
			"delta": {"min_version": 2, "keys": {"k1": "`+base64.StdEncoding.EncodeToString(k1)+`"}},
			"eps": {"min_version": 1}
		},
		"max_age_seconds": 120
	}`)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	type keys = map[string]ed25519.PublicKey
	want := map[string]PlatformConfig{
		"acme":  {RequireSignature: true, Keys: keys{"k1": k1, "k2": k2}},
		"beta":  {Keys: keys{}},
		"gamma": {Keys: keys{"k1": k1}},
		"delta": {MinVersion: 2, Keys: keys{"k1": k1}},
		"eps":   {MinVersion: 1, Keys: keys{}},
	}
	if !reflect.DeepEqual(cfg.Platforms, want) || cfg.MaxAge != 2*time.Minute {
		t.Fatalf("config = %+v, want platforms %+v and max age 2m", cfg, want)
	}

	// The loaded config works end to end.
	cfg.Now = testConfig().Now
	env := signed(t, Envelope{Version: 1, Platform: "acme", InvocationID: invocationID}, testNow, "k2", "k2")
	if id, err := Normalize(map[string]any{KeyPlatformInvocation: env}, cfg); err != nil || id.Platform != "acme" {
		t.Errorf("Normalize with loaded config = %+v, %v", id, err)
	}

	empty, err := LoadConfig(writeConfig(t, `{}`))
	if err != nil || len(empty.Platforms) != 0 || empty.MaxAge != 0 {
		t.Errorf("LoadConfig({}) = %+v, %v", empty, err)
	}
}

func TestLoadConfigRefuses(t *testing.T) {
	t.Parallel()
	k1, _ := testKey("k1")
	good := base64.StdEncoding.EncodeToString(k1)
	for _, tc := range []struct{ name, text, want string }{
		{"not JSON", `platforms: {}`, "invalid character"},
		{"array", `[]`, "cannot unmarshal"},
		{"unknown top-level field", `{"platform": {}}`, `unknown field "platform"`},
		{"unknown platform field", `{"platforms": {"acme": {"requireSignature": true}}}`, `unknown field "requireSignature"`},
		{"trailing data", `{} {}`, "after the JSON object"},
		{"key not base64", `{"platforms": {"acme": {"keys": {"k1": "not base64!"}}}}`, `platform "acme": key "k1": want the standard or URL-safe base64`},
		{"key 31 bytes", `{"platforms": {"acme": {"keys": {"k1": "` + base64.StdEncoding.EncodeToString(k1[:31]) + `"}}}}`, `key "k1": want`},
		{"key 64 bytes (a private key)", `{"platforms": {"acme": {"keys": {"k1": "` + base64.StdEncoding.EncodeToString(make([]byte, 64)) + `"}}}}`, `key "k1": want`},
		{"key wrong type", `{"platforms": {"acme": {"keys": {"k1": 5}}}}`, "cannot unmarshal number"},
		{"key id bad", `{"platforms": {"acme": {"keys": {"k 1": "` + good + `"}}}}`, `key id "k 1" contains characters`},
		{"platform name bad", `{"platforms": {"Acme": {}}}`, `platform "Acme"`},
		{"platform codex", `{"platforms": {"codex": {}}}`, `platform "codex": reserved`},
		{"platform claude-code", `{"platforms": {"claude-code": {}}}`, `platform "claude-code": reserved`},
		{"required without keys", `{"platforms": {"acme": {"require_signature": true}}}`, `platform "acme": require_signature is set but no keys`},
		{"min_version 2 without keys", `{"platforms": {"acme": {"min_version": 2}}}`, `platform "acme": min_version 2 needs keys`},
		{"min_version 0", `{"platforms": {"acme": {"min_version": 0}}}`, `platform "acme": min_version: must be 1 or 2`},
		{"min_version 3", `{"platforms": {"acme": {"min_version": 3, "keys": {"k1": "` + good + `"}}}}`, `platform "acme": min_version: must be 1 or 2`},
		{"min_version string", `{"platforms": {"acme": {"min_version": "2"}}}`, "cannot unmarshal string"},
		{"max age zero", `{"max_age_seconds": 0}`, "max_age_seconds"},
		{"max age negative", `{"max_age_seconds": -5}`, "max_age_seconds"},
		{"max age fraction", `{"max_age_seconds": 1.5}`, "cannot unmarshal number"},
		{"max age huge", `{"max_age_seconds": 86401}`, "max_age_seconds"},
	} {
		path := writeConfig(t, tc.text)
		_, err := LoadConfig(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: LoadConfig error = %v, want one containing %q", tc.name, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q should be one line naming the file", tc.name, err)
		}
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("LoadConfig(missing) = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	k1, _ := testKey("k1")
	if err := testConfig().Validate(); err != nil {
		t.Errorf("testConfig().Validate() = %v", err)
	}
	var nilCfg *Config
	if err := nilCfg.Validate(); err != nil {
		t.Errorf("nil Validate = %v", err)
	}
	for _, cfg := range []*Config{
		{MaxAge: -time.Second},
		{MaxAge: time.Millisecond},
		{Platforms: map[string]PlatformConfig{"codex": {}}},
		{Platforms: map[string]PlatformConfig{"a_b": {}}},
		{Platforms: map[string]PlatformConfig{"acme": {RequireSignature: true}}},
		{Platforms: map[string]PlatformConfig{"acme": {Keys: map[string]ed25519.PublicKey{"k1": k1[:16]}}}},
		{Platforms: map[string]PlatformConfig{"acme": {Keys: map[string]ed25519.PublicKey{"": k1}}}},
		{Platforms: map[string]PlatformConfig{"acme": {MinVersion: 2}}},
		{Platforms: map[string]PlatformConfig{"acme": {MinVersion: 3, Keys: map[string]ed25519.PublicKey{"k1": k1}}}},
		{Platforms: map[string]PlatformConfig{"acme": {MinVersion: -1}}},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", cfg)
		}
	}
}
