package mcpserver_test

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/mcpserver"
	"hubu.dev/hubu/router/reqhash"
)

// boundConfig accepts platform "acme" with one key; minVersion 2 refuses version 1 envelopes.
func boundConfig(pub ed25519.PublicKey, minVersion int) *identity.Config {
	return &identity.Config{Platforms: map[string]identity.PlatformConfig{
		"acme": {MinVersion: minVersion, Keys: map[string]ed25519.PublicKey{"k1": pub}},
	}}
}

// setupAt is setup with the identity config and a registry file the test can read.
func setupAt(t *testing.T, cfg *identity.Config) (*env, string) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "router.db")
	return setup(t, &options{identity: cfg, state: state}), state
}

// recordedCalls counts the registry's rows, read beside the router.
func recordedCalls(t *testing.T, state string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+state+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM calls").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// refusedUnrecorded checks that the router refuses a spend as identity_invalid, saying says,
// before the registry records anything and before any backend is reached.
func refusedUnrecorded(t *testing.T, e *env, state, args string, meta map[string]any, says string) mcpserver.ToolResult {
	t.Helper()
	calls, rows := e.backend.Calls(""), recordedCalls(t, state)
	o := mustError(t, e.call(t, "generate_image", args, meta), identity.CodeInvalid)
	if !strings.Contains(o.Error.Message, says) {
		t.Fatalf("refusal %q does not say %q", o.Error.Message, says)
	}
	if n, r := e.backend.Calls(""), recordedCalls(t, state); n != calls || r != rows {
		t.Fatalf("a refused envelope reached a backend (%d requests) or the registry (%d rows)", n-calls, r-rows)
	}
	return o
}

func requestHash(t *testing.T, args string) string {
	t.Helper()
	d, _, err := reqhash.Hash("generate_image", []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// signV2 signs a version 2 envelope for one call, issued now, and returns it as _meta.
func signV2(t *testing.T, priv ed25519.PrivateKey, invocationID, audience, args string) map[string]any {
	t.Helper()
	now := time.Now().Unix()
	env, err := identity.Sign(identity.Envelope{
		Version: identity.EnvelopeVersion2, Platform: "acme", InvocationID: invocationID, IssuedAt: &now,
		Audience: audience, RequestHash: requestHash(t, args),
	}, "k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	return envelopeMeta(t, env)
}

// envelopeMeta is _meta carrying v as it arrives over the wire.
func envelopeMeta(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	return map[string]any{identity.KeyPlatformInvocation: obj}
}

// A version 2 envelope is accepted by the router it names, for the request it names, and
// refused anywhere else before the registry records anything and before any backend is reached.
func TestBoundEnvelope(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(nil)
	cfg := boundConfig(pub, 0)
	e, state := setupAt(t, cfg)
	installation := e.registry.InstallationID()
	other := `{"prompt":"an origami crane","model":"flux-dev","width":1024,"height":1024}`

	// Accepted, then a redelivery (signed afresh) is a replay.
	meta := signV2(t, priv, "inv-bound-0001-7f3a9c2e", installation, fox)
	first := toolResult(t, e.call(t, "generate_image", fox, meta))
	if first.Status != "succeeded" {
		t.Fatalf("bound envelope: %+v", first)
	}
	if k := e.backend.Keys(); len(k) != 1 || !strings.HasPrefix(k[0], "hubu:operation:v1:acme:") {
		t.Fatal("the key does not name the envelope's platform")
	}
	again := toolResult(t, e.call(t, "generate_image", fox, signV2(t, priv, "inv-bound-0001-7f3a9c2e", installation, fox)))
	if !again.Replayed || again.PublicHandle != first.PublicHandle {
		t.Fatalf("redelivery: %+v", again)
	}
	// The arguments are hashed canonically: key order and spacing are not another request.
	reordered := ` { "height": 1024, "width": 1024, "model": "flux-dev", "prompt": "an origami fox" } `
	if o := toolResult(t, e.call(t, "generate_image", reordered, signV2(t, priv, "inv-bound-0001-7f3a9c2e", installation, fox))); !o.Replayed {
		t.Fatalf("reordered arguments: %+v", o)
	}
	refused := []struct {
		name, args string
		meta       map[string]any
		msg        string
	}{
		{"signed for another installation", fox, signV2(t, priv, "inv-bound-0002-7f3a9c2e", "00000000-0000-4000-8000-000000000000", fox), "audience"},
		{"signed for other arguments", other, signV2(t, priv, "inv-bound-0003-7f3a9c2e", installation, fox), "request_hash"},
		{"a recorded call's envelope with other arguments", other, signV2(t, priv, "inv-bound-0001-7f3a9c2e", installation, fox), "request_hash"},
		{"unsigned", fox, func() map[string]any {
			m := signV2(t, priv, "inv-bound-0004-7f3a9c2e", installation, fox)
			delete(m[identity.KeyPlatformInvocation].(map[string]any), "signature")
			return m
		}(), "must be signed"},
		{"unknown field", fox, func() map[string]any {
			m := signV2(t, priv, "inv-bound-0005-7f3a9c2e", installation, fox)
			m[identity.KeyPlatformInvocation].(map[string]any)["tenant"] = "t-1"
			return m
		}(), "does not define"},
	}
	for _, c := range refused {
		if o := refusedUnrecorded(t, e, state, c.args, c.meta, c.msg); strings.Contains(o.Error.Message, installation) {
			t.Errorf("%s: message %q names the installation id", c.name, o.Error.Message)
		}
	}

	// The same envelope at another installation (another registry, which would take it for a new
	// operation and charge it again): refused, nothing recorded, no backend reached.
	e2, state2 := setupAt(t, cfg)
	refusedUnrecorded(t, e2, state2, fox, meta, "audience")
}

// Version 1 is unchanged, unless the platform requires version 2.
func TestVersion1EnvelopeBesideVersion2(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(nil)
	v1 := func(id string, signed bool) map[string]any {
		env := identity.Envelope{Version: identity.EnvelopeVersion, Platform: "acme", InvocationID: id}
		if signed {
			now := time.Now().Unix()
			env.IssuedAt = &now
			var err error
			if env, err = identity.Sign(env, "k1", priv); err != nil {
				t.Fatal(err)
			}
		}
		return envelopeMeta(t, env)
	}

	e, _ := setupAt(t, boundConfig(pub, 0))
	for _, signed := range []bool{false, true} {
		id := "inv-v1-unsigned-7f3a9c2e"
		if signed {
			id = "inv-v1-signed-7f3a9c2e5b"
		}
		if o := toolResult(t, e.call(t, "generate_image", fox, v1(id, signed))); o.Status != "succeeded" {
			t.Fatalf("version 1 (signed %v): %+v", signed, o)
		}
		// A version 1 envelope binds nothing: another router or other arguments are judged as before.
		e2, _ := setupAt(t, boundConfig(pub, 0))
		if o := toolResult(t, e2.call(t, "generate_image", fox, v1(id, signed))); o.Status != "succeeded" {
			t.Fatalf("version 1 (signed %v) at another installation: %+v", signed, o)
		}
	}

	strict, state := setupAt(t, boundConfig(pub, 2))
	for _, signed := range []bool{false, true} {
		refusedUnrecorded(t, strict, state, fox, v1("inv-v1-strict-7f3a9c2e5b", signed), "requires envelope version 2")
	}
	if o := toolResult(t, strict.call(t, "generate_image", fox, signV2(t, priv, "inv-v2-strict-7f3a9c2e5b", strict.registry.InstallationID(), fox))); o.Status != "succeeded" {
		t.Fatalf("min_version 2, version 2: %+v", o)
	}
}

// A platform's typed envelope, accepted when the operator configured the platform, and
// refused unsigned when the platform requires signatures.
func TestPlatformEnvelope(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(nil)
	cfg := &identity.Config{Platforms: map[string]identity.PlatformConfig{
		"acme":   {},
		"signed": {RequireSignature: true, Keys: map[string]ed25519.PublicKey{"k1": pub}},
	}}
	e := setup(t, &options{identity: cfg})
	env := func(platform, id string) map[string]any {
		return map[string]any{"hubu.dev/platform-invocation": map[string]any{"version": 1.0, "platform": platform, "invocation_id": id}}
	}
	if o := toolResult(t, e.call(t, "generate_image", fox, env("acme", "inv-7f3a9c2e5b1d4a60"))); o.Status != "succeeded" {
		t.Fatalf("acme: %+v", o)
	}
	if k := e.backend.Keys(); len(k) != 1 || !strings.HasPrefix(k[0], "hubu:operation:v1:acme:") {
		t.Fatal("the key does not name the envelope's platform")
	}
	mustError(t, e.call(t, "generate_image", fox, env("signed", "inv-0c4e8a2f6b1d3a97")), "identity_invalid")

	now := time.Now().Unix()
	signed, err := identity.Sign(identity.Envelope{Version: 1, Platform: "signed", InvocationID: "inv-5d2b9e7c1a3f4e80", IssuedAt: &now}, "k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	meta := envelopeMeta(t, signed)
	if o := toolResult(t, e.call(t, "generate_image", fox, meta)); o.Status != "succeeded" {
		t.Fatalf("signed: %+v", o)
	}
	meta[identity.KeyPlatformInvocation].(map[string]any)["invocation_id"] = "inv-5d2b9e7c1a3f4e81" // the signature no longer covers it
	mustError(t, e.call(t, "generate_image", fox, meta), "identity_invalid")
}
