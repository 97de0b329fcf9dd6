package mcpserver_test

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/router/identity"
)

func TestReadOnlyTools(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	missing := `{"public_handle":"hubu:public-operation:v1:00000000-0000-4000-8000-00000000abcd"}`
	mustError(t, e.call(t, "operation_status", missing, nil), "not_found")
	mustError(t, e.call(t, "resume_operation", missing, nil), "not_found")
	mustError(t, e.call(t, "operation_status", `{"public_handle":"not-a-handle"}`, nil), "invalid_arguments")
	mustError(t, e.call(t, "capabilities", `{"anything":1}`, nil), "invalid_arguments")

	caps := outcome(t, e.call(t, "capabilities", `{}`, nil))
	sources, _ := caps.Details["identity_sources"].([]any)
	if caps.Status != "ok" || len(sources) != 3 {
		t.Fatalf("capabilities: %+v", caps)
	}
	handle := outcome(t, e.call(t, "generate_image", fox, codex("call_ro1d5hchBzp4PbAsEjoKtwVJ"))).PublicHandle
	st := outcome(t, e.call(t, "operation_status", fmt.Sprintf(`{"public_handle":%q}`, handle), nil))
	if st.PublicHandle != handle || st.Status != "executing" {
		t.Fatalf("status: %+v", st)
	}
	ex := outcome(t, e.call(t, "get_execution", fmt.Sprintf(`{"public_handle":%q}`, handle), nil))
	if ex.Status != "succeeded" || ex.Result == nil {
		t.Fatalf("execution: %+v", ex)
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
	if o := outcome(t, e.call(t, "generate_image", fox, env("acme", "inv-7f3a9c2e5b1d4a60"))); o.Status != "succeeded" {
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
	sig := map[string]any{"version": 1.0, "platform": "signed", "invocation_id": "inv-5d2b9e7c1a3f4e80", "issued_at": float64(now),
		"signature": map[string]any{"alg": signed.Signature.Alg, "key_id": signed.Signature.KeyID, "value": signed.Signature.Value}}
	if o := outcome(t, e.call(t, "generate_image", fox, map[string]any{"hubu.dev/platform-invocation": sig})); o.Status != "succeeded" {
		t.Fatalf("signed: %+v", o)
	}
	sig["invocation_id"] = "inv-5d2b9e7c1a3f4e81" // the signature no longer covers it
	mustError(t, e.call(t, "generate_image", fox, map[string]any{"hubu.dev/platform-invocation": sig}), "identity_invalid")
}
