package identity

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The hubu.dev/platform-invocation envelope (proto/platform-invocation.schema.json). Version 1
// names a call and may be signed; version 2 is always signed and binds the call to one router
// installation (audience) and one request (request_hash), so that a captured envelope is worth
// nothing at another installation or for other arguments.
const (
	EnvelopeVersion  = 1
	EnvelopeVersion2 = 2
	SignatureAlg     = "ed25519"
	// MaxIssuedAt bounds issued_at to integers that every JSON implementation, and so every
	// signer's RFC 8785 canonical form, represents exactly (2^53 - 1).
	MaxIssuedAt = 1<<53 - 1
)

// Envelope is the typed identity a platform sends under _meta "hubu.dev/platform-invocation".
// Platform integrators build one, Sign it when their platform requires signatures (version 2
// always), and send it as the JSON object json.Marshal makes of it.
type Envelope struct {
	Version      int    `json:"version"`
	Platform     string `json:"platform"`
	InvocationID string `json:"invocation_id"`
	IssuedAt     *int64 `json:"issued_at,omitempty"` // unix seconds; required when signed
	// Audience (version 2 only) is the installation id of the router the call is meant for
	// (hubu-unified-mcp installation-id prints it; routers sharing one registry share it).
	Audience string `json:"audience,omitempty"`
	// RequestHash (version 2 only) is the router's request hash of the call, lower-case hex:
	// sha256(tool || 0x00 || RFC 8785 canonical JSON of the arguments).
	RequestHash string     `json:"request_hash,omitempty"`
	Signature   *Signature `json:"signature,omitempty"`
}

// Signature is an Ed25519 signature over SigningBytes of the envelope.
type Signature struct {
	Alg   string `json:"alg"`    // always "ed25519"
	KeyID string `json:"key_id"` // names one of the platform's keys in the operator's config
	Value string `json:"value"`  // base64url without padding of the 64-byte signature
}

var (
	envelopeFieldsV1 = []string{"version", "platform", "invocation_id", "issued_at", "signature"}
	// Version 2 has every field of version 1 and the binding; all of them are required.
	envelopeFieldsV2 = []string{"version", "platform", "invocation_id", "issued_at", "audience", "request_hash", "signature"}
	signatureFields  = []string{"alg", "key_id", "value"}
)

// ParseEnvelope checks the shape of an envelope as decoded from JSON (what the JSON Schema checks):
// version 1 or 2, no field the version does not define at either level, every field of the right
// type and pattern, a platform other than the reserved codex and claude-code, issued_at present when
// signed, and for version 2 every field present (signature included). It does not consult any
// configuration, does not verify the signature and does not check the binding (Binding.Check does).
// The error text never contains anything from v.
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
	fields := envelopeFieldsV1
	switch n, isNum := jsonFloat(version); {
	case !isNum:
		return Envelope{}, fmt.Errorf("version must be the number 1 or 2, got %s", jsonType(version))
	case n == EnvelopeVersion:
		env.Version = EnvelopeVersion
	case n == EnvelopeVersion2:
		env.Version, fields = EnvelopeVersion2, envelopeFieldsV2
	default:
		return Envelope{}, errors.New(errUnsupportedVersion)
	}
	for k := range obj {
		if !slices.Contains(fields, k) {
			return Envelope{}, fmt.Errorf("the envelope has a field that version %d does not define (allowed: %s)", env.Version, strings.Join(fields, ", "))
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

	if env.Version == EnvelopeVersion2 {
		if err := parseBinding(obj, &env); err != nil {
			return Envelope{}, err
		}
	}
	return env, nil
}

const errUnsupportedVersion = "unsupported envelope version (this router knows versions 1 and 2)"

// parseBinding reads what version 2 adds: audience and request_hash, and a signature, which a
// binding needs (anyone could write an unsigned one).
func parseBinding(obj map[string]any, env *Envelope) error {
	aud, err := requiredString(obj, "audience")
	if err != nil {
		return err
	}
	if reason := checkAudience(aud); reason != "" {
		return errors.New("audience " + reason)
	}
	hash, err := requiredString(obj, "request_hash")
	if err != nil {
		return err
	}
	if reason := checkRequestHash(hash); reason != "" {
		return errors.New("request_hash " + reason)
	}
	if env.Signature == nil {
		return errors.New("a version 2 envelope must be signed (send version 1 for unsigned use)")
	}
	env.Audience, env.RequestHash = aud, hash
	return nil
}

// checkAudience returns why s does not match AudiencePattern (a lower-case UUID), or "".
func checkAudience(s string) string {
	if len(s) != 36 {
		return "must be the router's installation id, a lower-case UUID (36 characters)"
	}
	for i := 0; i < len(s); i++ {
		if dash := i == 8 || i == 13 || i == 18 || i == 23; dash && s[i] != '-' || !dash && !isLowerHex(s[i]) {
			return "must be the router's installation id, a lower-case UUID"
		}
	}
	return ""
}

// checkRequestHash returns why s does not match RequestHashPattern (64 lower-case hex digits), or "".
func checkRequestHash(s string) string {
	if len(s) != 64 || strings.IndexFunc(s, func(r rune) bool { return r > 0x7f || !isLowerHex(byte(r)) }) >= 0 {
		return "must be 64 lower-case hex digits, the SHA-256 of the tool name, a zero byte and the RFC 8785 canonical JSON of the arguments"
	}
	return ""
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

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
	switch env.Version {
	case EnvelopeVersion:
		if env.Audience != "" || env.RequestHash != "" {
			return errors.New("audience and request_hash belong to version 2 envelopes")
		}
	case EnvelopeVersion2:
		if env.IssuedAt == nil {
			return errors.New("a version 2 envelope must carry issued_at")
		}
		if reason := checkAudience(env.Audience); reason != "" {
			return errors.New("audience " + reason)
		}
		if reason := checkRequestHash(env.RequestHash); reason != "" {
			return errors.New("request_hash " + reason)
		}
	default:
		return errors.New(errUnsupportedVersion)
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
	Audience     string `json:"audience,omitempty"`
	InvocationID string `json:"invocation_id"`
	IssuedAt     *int64 `json:"issued_at,omitempty"`
	Platform     string `json:"platform"`
	RequestHash  string `json:"request_hash,omitempty"`
	Version      int    `json:"version"`
}

// SigningBytes returns the bytes an envelope's signature covers: the RFC 8785 (JCS) canonical JSON
// of the envelope without its signature member, e.g.
//
//	{"invocation_id":"inv-7f3a9c2e5b1d4a60","issued_at":1767225600,"platform":"acme","version":1}
//
// and for version 2 (one line)
//
//	{"audience":"<installation id>","invocation_id":"...","issued_at":...,"platform":"acme",
//	 "request_hash":"<64 hex digits>","version":2}
//
// For a valid envelope that is exactly what encoding/json writes for signedFields (members sorted,
// no whitespace, integers plain, and strings limited to [A-Za-z0-9._:-], which no encoder escapes);
// envelopes outside the contract are refused rather than given a second canonical form.
func SigningBytes(env Envelope) ([]byte, error) {
	if err := checkSignedFields(env); err != nil {
		return nil, err
	}
	return json.Marshal(signedFields{
		Audience:     env.Audience,
		InvocationID: env.InvocationID,
		IssuedAt:     env.IssuedAt,
		Platform:     env.Platform,
		RequestHash:  env.RequestHash,
		Version:      env.Version,
	})
}

// Sign returns env signed with priv under keyID. env must carry IssuedAt: the router refuses a
// signature whose issue time is more than the configured maximum age (default 5 minutes) from its
// clock, so a platform signs each delivery afresh, including redeliveries of one invocation.
// A version 2 env must also carry Audience and RequestHash.
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

// mapEnvelope is the Source mapper of the envelope: shape, accepted platform, version and
// signature policy. A version 2 envelope's binding goes into the Identity for the caller to check.
func mapEnvelope(value any, cfg *Config) (Identity, error) {
	env, err := ParseEnvelope(value)
	if err != nil {
		return Identity{}, err
	}
	pc, ok := cfg.platform(env.Platform)
	if !ok {
		// The platform is not named: it is not one the operator configured, so it is caller data.
		return Identity{}, errors.New("the envelope's platform is not accepted by this router (the operator lists accepted platforms in the identity config)")
	}
	if env.Version < pc.MinVersion {
		return Identity{}, fmt.Errorf("platform %q requires envelope version %d (bound to this router and the request), and this one is version %d", env.Platform, pc.MinVersion, env.Version)
	}
	if err := cfg.checkSignature(env, pc); err != nil {
		return Identity{}, err
	}
	return Identity{
		Platform: env.Platform, CallID: env.InvocationID,
		Binding: Binding{Audience: env.Audience, RequestHash: env.RequestHash},
	}, nil
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
