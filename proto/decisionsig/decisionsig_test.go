package decisionsig_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/decisionsig"
)

func claims(now time.Time) decisionsig.Claims {
	return decisionsig.Claims{
		DecisionID: uuid.New(), PublicHandle: "hubu:public-operation:v1:" + uuid.NewString(), AgentID: uuid.New(),
		Tool: "generate_image", Scope: decisionsig.Scope{Provider: "bfl", Model: "flux-2-pro", Size: "1024x1024"},
		Arguments: json.RawMessage(`{"prompt":"a fox"}`), AmountMicros: 30000, Currency: "USD", State: "dispatching",
		IssuedAt: now.Add(-time.Second), Audience: decisionsig.Audience, ExpiresAt: now.Add(time.Minute),
	}
}

func TestSignedDecisionsVerifyOnlyAsSigned(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	otherPub, otherPriv, _ := ed25519.GenerateKey(nil)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	keys := func(id string) (ed25519.PublicKey, bool) {
		for _, k := range []ed25519.PublicKey{pub, otherPub} {
			if decisionsig.KeyID(k) == id {
				return k, true
			}
		}
		return nil, false
	}
	c := claims(now)
	h, err := decisionsig.Sign(priv, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decisionsig.Verify(h, keys, now)
	if err != nil || got.DecisionID != c.DecisionID || string(got.Arguments) != string(c.Arguments) || !got.IssuedAt.Equal(c.IssuedAt) {
		t.Fatalf("a good signature: %v, %+v", err, got)
	}

	parts := strings.Split(h, ".")
	tampered := func(change func(*decisionsig.Claims)) string {
		c2 := c
		change(&c2)
		b, _ := json.Marshal(c2)
		return strings.Join([]string{parts[0], parts[1], base64.RawURLEncoding.EncodeToString(b), parts[3]}, ".")
	}
	other, _ := decisionsig.Sign(otherPriv, c)
	otherParts := strings.Split(other, ".")
	forAnother := claims(now)
	forAnother.Audience = "router"
	wrongAudience, _ := decisionsig.Sign(priv, forAnother)
	expired := claims(now)
	expired.ExpiresAt = now
	expiredSig, _ := decisionsig.Sign(priv, expired)
	ahead := claims(now)
	ahead.ExpiresAt = now.Add(decisionsig.MaxLifetime + time.Second)
	farAhead, _ := decisionsig.Sign(priv, ahead)
	_, unknownPriv, _ := ed25519.GenerateKey(nil)
	unknown, _ := decisionsig.Sign(unknownPriv, c)

	for name, tc := range map[string]struct {
		header string
		want   error
	}{
		"a higher amount":                     {tampered(func(c *decisionsig.Claims) { c.AmountMicros = 1 }), decisionsig.ErrInvalid},
		"other arguments":                     {tampered(func(c *decisionsig.Claims) { c.Arguments = json.RawMessage(`{"prompt":"a cat"}`) }), decisionsig.ErrInvalid},
		"a later expiry":                      {tampered(func(c *decisionsig.Claims) { c.ExpiresAt = now.Add(time.Hour) }), decisionsig.ErrInvalid},
		"another key's signature, this id":    {strings.Join([]string{parts[0], parts[1], parts[2], otherParts[3]}, "."), decisionsig.ErrInvalid},
		"this signature, another key's id":    {strings.Join([]string{parts[0], otherParts[1], parts[2], parts[3]}, "."), decisionsig.ErrInvalid},
		"another audience":                    {wrongAudience, decisionsig.ErrInvalid},
		"another version":                     {"v2" + h[2:], decisionsig.ErrUnsupported},
		"a field this verifier does not know": {signRaw(priv, `{"decision_id":"`+c.DecisionID.String()+`","aud":"gongbu","not_before":"2027-01-01T00:00:00Z"}`), decisionsig.ErrUnsupported},
		"not JSON, signed":                    {signRaw(priv, `{"decision_id":`), decisionsig.ErrInvalid},
		"an expiry beyond any lifetime":       {farAhead, decisionsig.ErrTooFarAhead},
		"not a signature":                     {"hello", decisionsig.ErrInvalid},
		"a signature cut short":               {h[:len(h)-4], decisionsig.ErrInvalid},
		"expired":                             {expiredSig, decisionsig.ErrExpired},
		"signed with a key Gongbu never saw":  {unknown, decisionsig.ErrUnknownKey},
		"too long":                            {h + strings.Repeat("A", decisionsig.MaxHeader), decisionsig.ErrInvalid},
	} {
		if _, err := decisionsig.Verify(tc.header, keys, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

func TestReadCapabilitiesAreNotDecisions(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := func(id string) (ed25519.PublicKey, bool) { return pub, id == decisionsig.KeyID(pub) }
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rc := decisionsig.ReadClaims{PublicHandle: "hubu:public-operation:v1:" + uuid.NewString(), Credential: decisionsig.CredentialHash("hubu_agent_x"),
		Audience: decisionsig.Audience, ExpiresAt: now.Add(time.Minute)}
	read, err := decisionsig.SignRead(priv, rc)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decisionsig.VerifyRead(read, keys, now); err != nil || got != rc {
		t.Fatalf("a good capability: %v %+v", err, got)
	}
	if _, err := decisionsig.VerifyRead(read, keys, now.Add(time.Minute)); !errors.Is(err, decisionsig.ErrExpired) {
		t.Fatalf("an expired capability: %v", err)
	}
	if _, err := decisionsig.VerifyRead(read, keys, now.Add(-decisionsig.MaxLifetime)); !errors.Is(err, decisionsig.ErrTooFarAhead) {
		t.Fatalf("a capability from a clock running ahead: %v", err)
	}
	decision, _ := decisionsig.Sign(priv, claims(now))
	if _, err := decisionsig.VerifyRead(decision, keys, now); !errors.Is(err, decisionsig.ErrInvalid) {
		t.Fatalf("a decision's signature taken as a capability: %v", err)
	}
	if _, err := decisionsig.Verify(read, keys, now); !errors.Is(err, decisionsig.ErrInvalid) {
		t.Fatalf("a capability taken as a decision's signature: %v", err)
	}
}

// signRaw signs claims given as JSON as Hubu signs a decision's: the format, spelled out.
func signRaw(key ed25519.PrivateKey, claims string) string {
	kid := decisionsig.KeyID(key.Public().(ed25519.PublicKey))
	payload := base64.RawURLEncoding.EncodeToString([]byte(claims))
	sig := ed25519.Sign(key, []byte("hubu-decision-signature-v1."+kid+"."+payload))
	return "v1." + kid + "." + payload + "." + base64.RawURLEncoding.EncodeToString(sig)
}
