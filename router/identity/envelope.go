package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// The hubu.dev/platform-invocation envelope, version 1 (proto/platform-invocation.schema.json).
const (
	EnvelopeVersion = 1
	SignatureAlg    = "ed25519"
	// MaxIssuedAt bounds issued_at to integers that every JSON implementation, and so every
	// signer's RFC 8785 canonical form, represents exactly (2^53 - 1).
	MaxIssuedAt = 1<<53 - 1
)

// Envelope is the typed identity a platform sends under _meta "hubu.dev/platform-invocation".
// Platform integrators build one, Sign it when their platform requires signatures, and send it
// as the JSON object json.Marshal makes of it.
type Envelope struct {
	Version      int        `json:"version"`
	Platform     string     `json:"platform"`
	InvocationID string     `json:"invocation_id"`
	IssuedAt     *int64     `json:"issued_at,omitempty"` // unix seconds; required when signed
	Signature    *Signature `json:"signature,omitempty"`
}

// Signature is an Ed25519 signature over SigningBytes of the envelope.
type Signature struct {
	Alg   string `json:"alg"`    // always "ed25519"
	KeyID string `json:"key_id"` // names one of the platform's keys in the operator's config
	Value string `json:"value"`  // base64url without padding of the 64-byte signature
}

var (
	envelopeFields  = []string{"version", "platform", "invocation_id", "issued_at", "signature"}
	signatureFields = []string{"alg", "key_id", "value"}
)

// ParseEnvelope checks the shape of an envelope as decoded from JSON (what the JSON Schema checks):
// version 1, no unknown fields at either level, every field of the right type and pattern, a
// platform other than the reserved codex and claude-code, and issued_at present when signed. It does
// not consult any configuration and does not verify the signature. The error text never contains
// anything from v.
func ParseEnvelope(v any) (Envelope, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Envelope{}, fmt.Errorf("the envelope must be a JSON object, got %s", jsonType(v))
	}
	var env Envelope
	// The version first: an envelope of another version may well have fields this one does not know.
	version, ok := obj["version"]
	if !ok {
		return Envelope{}, errors.New("the envelope has no version")
	}
	if n, isNum := jsonFloat(version); !isNum {
		return Envelope{}, fmt.Errorf("version must be the number 1, got %s", jsonType(version))
	} else if n != EnvelopeVersion {
		return Envelope{}, errors.New("unsupported envelope version (this router knows version 1 only)")
	}
	env.Version = EnvelopeVersion
	for k := range obj {
		if !slices.Contains(envelopeFields, k) {
			return Envelope{}, errors.New("the envelope has a field that version 1 does not define (allowed: version, platform, invocation_id, issued_at, signature)")
		}
	}

	p, err := requiredString(obj, "platform")
	if err != nil {
		return Envelope{}, err
	}
	if reason := checkPlatform(p); reason != "" {
		return Envelope{}, errors.New("platform " + reason)
	}
	if slices.Contains(reservedPlatforms, p) {
		return Envelope{}, errors.New("platform names a harness with its own _meta key (codex, claude-code); send that key instead of an envelope")
	}
	env.Platform = p

	id, err := requiredString(obj, "invocation_id")
	if err != nil {
		return Envelope{}, err
	}
	if reason := checkCallID(id); reason != "" {
		return Envelope{}, errors.New("invocation_id " + reason)
	}
	env.InvocationID = id

	if raw, ok := obj["issued_at"]; ok {
		t, isInt := jsonInteger(raw)
		if !isInt || t < 0 || t > MaxIssuedAt {
			return Envelope{}, fmt.Errorf("issued_at must be an integer number of unix seconds from 0 to 2^53-1, got %s", jsonType(raw))
		}
		env.IssuedAt = &t
	}

	if raw, ok := obj["signature"]; ok {
		sig, err := parseSignature(raw)
		if err != nil {
			return Envelope{}, err
		}
		if env.IssuedAt == nil {
			return Envelope{}, errors.New("a signed envelope must carry issued_at")
		}
		env.Signature = &sig
	}
	return env, nil
}

func parseSignature(v any) (Signature, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Signature{}, fmt.Errorf("signature must be a JSON object, got %s", jsonType(v))
	}
	for k := range obj {
		if !slices.Contains(signatureFields, k) {
			return Signature{}, errors.New("signature has a field other than alg, key_id and value")
		}
	}
	alg, err := requiredString(obj, "alg")
	if err != nil {
		return Signature{}, fmt.Errorf("signature.%w", err)
	}
	if alg != SignatureAlg {
		return Signature{}, errors.New(`signature.alg must be "ed25519"`)
	}
	keyID, err := requiredString(obj, "key_id")
	if err != nil {
		return Signature{}, fmt.Errorf("signature.%w", err)
	}
	if reason := checkID(keyID, MaxKeyIDLen); reason != "" {
		return Signature{}, errors.New("signature.key_id " + reason)
	}
	value, err := requiredString(obj, "value")
	if err != nil {
		return Signature{}, fmt.Errorf("signature.%w", err)
	}
	if _, err := decodeSignatureValue(value); err != nil {
		return Signature{}, err
	}
	return Signature{Alg: alg, KeyID: keyID, Value: value}, nil
}

// decodeSignatureValue accepts exactly the strings SignatureValuePattern matches: 86 characters of
// unpadded base64url whose unused trailing bits are zero (so one signature has one spelling).
func decodeSignatureValue(value string) ([]byte, error) {
	sig, err := base64.RawURLEncoding.Strict().DecodeString(value)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, errors.New("signature.value must be the unpadded base64url encoding of a 64-byte Ed25519 signature")
	}
	return sig, nil
}

// requiredString returns obj[name] when it is a string; the error names the field only.
func requiredString(obj map[string]any, name string) (string, error) {
	raw, ok := obj[name]
	if !ok {
		return "", fmt.Errorf("%s is missing", name)
	}
	s, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("%s must be a string, got %s", name, jsonType(raw))
	}
	return s, nil
}

// jsonFloat returns the value of a JSON number as decoded by encoding/json (float64, or
// json.Number with UseNumber) or as built in Go.
func jsonFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// jsonInteger returns v as an int64 when it is a JSON number with an integral value within ±2^53
// (1e3 and 1.0 count: JSON, RFC 8785 and JSON Schema do not tell them from 1000 and 1).
func jsonInteger(v any) (int64, bool) {
	if n, ok := v.(json.Number); ok {
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return i, i >= -MaxIssuedAt && i <= MaxIssuedAt
		}
	}
	if n, ok := v.(int64); ok {
		return n, n >= -MaxIssuedAt && n <= MaxIssuedAt
	}
	f, ok := jsonFloat(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > MaxIssuedAt {
		return 0, false
	}
	return int64(f), true
}

// checkSignedFields checks what SigningBytes covers, as ParseEnvelope does.
func checkSignedFields(env Envelope) error {
	if env.Version != EnvelopeVersion {
		return errors.New("unsupported envelope version (this router knows version 1 only)")
	}
	if reason := checkPlatform(env.Platform); reason != "" {
		return errors.New("platform " + reason)
	}
	if slices.Contains(reservedPlatforms, env.Platform) {
		return errors.New("platform names a harness with its own _meta key (codex, claude-code)")
	}
	if reason := checkCallID(env.InvocationID); reason != "" {
		return errors.New("invocation_id " + reason)
	}
	if env.IssuedAt != nil && (*env.IssuedAt < 0 || *env.IssuedAt > MaxIssuedAt) {
		return errors.New("issued_at must be from 0 to 2^53-1")
	}
	return nil
}

// signedFields is the envelope without its signature, its members in RFC 8785 order (sorted by
// UTF-16 code units; all ASCII here, so byte order).
type signedFields struct {
	InvocationID string `json:"invocation_id"`
	IssuedAt     *int64 `json:"issued_at,omitempty"`
	Platform     string `json:"platform"`
	Version      int    `json:"version"`
}

// SigningBytes returns the bytes an envelope's signature covers: the RFC 8785 (JCS) canonical JSON
// of the envelope without its signature member, e.g.
//
//	{"invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1767225600,"platform":"acme","version":1}
//
// For a valid envelope that is exactly what encoding/json writes for signedFields (members sorted,
// no whitespace, integers plain, and strings limited to [A-Za-z0-9._:-], which no encoder escapes);
// envelopes outside the contract are refused rather than given a second canonical form.
func SigningBytes(env Envelope) ([]byte, error) {
	if err := checkSignedFields(env); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(signedFields{
		InvocationID: env.InvocationID,
		IssuedAt:     env.IssuedAt,
		Platform:     env.Platform,
		Version:      env.Version,
	}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Sign returns env signed with priv under keyID. env must carry IssuedAt: the router refuses a
// signature whose issue time is more than the configured maximum age (default 5 minutes) from its
// clock, so a platform signs each delivery afresh, including redeliveries of one invocation.
func Sign(env Envelope, keyID string, priv ed25519.PrivateKey) (Envelope, error) {
	if env.IssuedAt == nil {
		return Envelope{}, errors.New("identity: Sign: a signed envelope must carry issued_at")
	}
	if reason := checkID(keyID, MaxKeyIDLen); reason != "" {
		return Envelope{}, errors.New("identity: Sign: key id " + reason)
	}
	if len(priv) != ed25519.PrivateKeySize {
		return Envelope{}, fmt.Errorf("identity: Sign: private key has %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	msg, err := SigningBytes(env)
	if err != nil {
		return Envelope{}, fmt.Errorf("identity: Sign: %w", err)
	}
	env.Signature = &Signature{
		Alg:   SignatureAlg,
		KeyID: keyID,
		Value: base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, msg)),
	}
	return env, nil
}

// mapEnvelope is the Source mapper of the envelope: shape, accepted platform, signature policy.
func mapEnvelope(value any, cfg *Config) (string, string, error) {
	env, err := ParseEnvelope(value)
	if err != nil {
		return "", "", err
	}
	pc, ok := cfg.platform(env.Platform)
	if !ok {
		// The platform is not named: it is not one the operator configured, so it is caller data.
		return "", "", errors.New("the envelope's platform is not accepted by this router (the operator lists accepted platforms in the identity config)")
	}
	if err := cfg.checkSignature(env, pc); err != nil {
		return "", "", err
	}
	return env.Platform, env.InvocationID, nil
}

// checkSignature applies the platform's signature policy to a parsed envelope. Messages may name
// the platform and a key id once they are known to be in the operator's config.
func (c *Config) checkSignature(env Envelope, pc PlatformConfig) error {
	if env.Signature == nil {
		if pc.RequireSignature {
			return fmt.Errorf("platform %q requires a signed envelope, and this one is unsigned", env.Platform)
		}
		return nil
	}
	key, ok := pc.Keys[env.Signature.KeyID]
	if !ok {
		return fmt.Errorf("the envelope is signed with an unknown key: no such key_id is configured for platform %q", env.Platform)
	}
	if len(key) != ed25519.PublicKeySize {
		return fmt.Errorf("key %q of platform %q is misconfigured (not a 32-byte Ed25519 public key)", env.Signature.KeyID, env.Platform)
	}
	msg, err := SigningBytes(env)
	if err != nil {
		return err
	}
	sig, err := decodeSignatureValue(env.Signature.Value)
	if err != nil {
		return err
	}
	if !ed25519.Verify(key, msg, sig) {
		return fmt.Errorf("the signature does not verify with key %q of platform %q", env.Signature.KeyID, env.Platform)
	}
	// Whole seconds on both sides: issued_at has no finer resolution.
	now, maxAge := c.now().Unix(), int64(c.maxAge()/time.Second)
	switch issued := *env.IssuedAt; {
	case now-issued > maxAge:
		return fmt.Errorf("the signature is stale: issued_at is more than %s before this router's clock", c.maxAge())
	case issued-now > maxAge:
		return fmt.Errorf("the signature is not yet valid: issued_at is more than %s after this router's clock", c.maxAge())
	}
	return nil
}
