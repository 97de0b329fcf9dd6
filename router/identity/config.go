package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"
)

// DefaultMaxAge is how far issued_at of a signed envelope may be from the router's clock, either
// way, when Config.MaxAge is zero.
const DefaultMaxAge = 5 * time.Minute

// Config is the operator's identity configuration. The zero Config, and a nil *Config, accept no
// envelope platform (Codex and Claude Code identities need no configuration).
type Config struct {
	// Platforms are the platform names accepted in envelopes, with their signature policy.
	Platforms map[string]PlatformConfig
	// MaxAge bounds |now - issued_at| of signed envelopes; zero means DefaultMaxAge.
	MaxAge time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// PlatformConfig is the signature policy of one envelope platform. A platform with keys but
// RequireSignature false accepts unsigned envelopes and verifies signed ones.
type PlatformConfig struct {
	Keys             map[string]ed25519.PublicKey // by key_id
	RequireSignature bool
	// MinVersion is the oldest envelope version accepted: 0 or 1 accepts both, 2 refuses
	// version 1 (unbound) envelopes, so every accepted envelope is signed and bound to this
	// router's installation and to the request. 2 needs Keys.
	MinVersion int
}

func (c *Config) platform(name string) (PlatformConfig, bool) {
	if c == nil {
		return PlatformConfig{}, false
	}
	pc, ok := c.Platforms[name]
	return pc, ok
}

func (c *Config) now() time.Time {
	if c == nil || c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Config) maxAge() time.Duration {
	if c == nil || c.MaxAge <= 0 {
		return DefaultMaxAge
	}
	return c.MaxAge
}

// Validate reports the first problem of a Config built in code (LoadConfig validates what it
// loads): platform names and key ids outside their patterns, reserved platforms, keys that are not
// 32-byte Ed25519 public keys, a platform that requires signatures but has no key, a MaxAge that is
// negative or below one second (issued_at has whole seconds), a MinVersion other than 0, 1 or 2, or
// MinVersion 2 without keys (version 2 envelopes are always signed).
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if c.MaxAge < 0 || (c.MaxAge > 0 && c.MaxAge < time.Second) {
		return fmt.Errorf("max age %s: must be at least 1s (or zero for the default %s)", c.MaxAge, DefaultMaxAge)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Platforms)) {
		pc := c.Platforms[name]
		if reason := checkPlatform(name); reason != "" {
			return fmt.Errorf("platform %q: the name %s", name, reason)
		}
		if slices.Contains(reservedPlatforms, name) {
			return fmt.Errorf("platform %q: reserved for its own _meta key, it cannot be an envelope platform", name)
		}
		if pc.RequireSignature && len(pc.Keys) == 0 {
			return fmt.Errorf("platform %q: require_signature is set but no keys are configured", name)
		}
		if pc.MinVersion < 0 || pc.MinVersion > EnvelopeVersion2 {
			return fmt.Errorf("platform %q: min_version %d: must be 1 or 2", name, pc.MinVersion)
		}
		if pc.MinVersion == EnvelopeVersion2 && len(pc.Keys) == 0 {
			return fmt.Errorf("platform %q: min_version 2 needs keys (version 2 envelopes are always signed)", name)
		}
		for _, id := range slices.Sorted(maps.Keys(pc.Keys)) {
			if reason := checkID(id, MaxKeyIDLen); reason != "" {
				return fmt.Errorf("platform %q: key id %q %s", name, id, reason)
			}
			if len(pc.Keys[id]) != ed25519.PublicKeySize {
				return fmt.Errorf("platform %q: key %q: an Ed25519 public key has %d bytes, this one %d", name, id, ed25519.PublicKeySize, len(pc.Keys[id]))
			}
		}
	}
	return nil
}

// configFile is the JSON file the operator writes, e.g.
//
//	{"platforms": {"acme": {"require_signature": true, "min_version": 2,
//	                        "keys": {"k1": "<base64 of the 32-byte public key>"}}},
//	 "max_age_seconds": 300}
type configFile struct {
	Platforms     map[string]platformFile `json:"platforms"`
	MaxAgeSeconds *int64                  `json:"max_age_seconds"`
}

type platformFile struct {
	RequireSignature bool              `json:"require_signature"`
	MinVersion       *int              `json:"min_version"`
	Keys             map[string]string `json:"keys"`
}

// LoadConfig reads the operator's identity configuration from a JSON file, strictly: unknown
// fields, trailing data, undecodable keys and everything Validate refuses are errors, each
// reported in one line naming the file and the offending entry.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity config: %w", err)
	}
	cfg, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("identity config %s: %w", path, err)
	}
	return cfg, nil
}

func parseConfig(data []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f configFile
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON object")
	}
	cfg := &Config{Platforms: make(map[string]PlatformConfig, len(f.Platforms))}
	if f.MaxAgeSeconds != nil {
		if *f.MaxAgeSeconds < 1 || *f.MaxAgeSeconds > int64(24*time.Hour/time.Second) {
			return nil, errors.New("max_age_seconds: must be from 1 to 86400")
		}
		cfg.MaxAge = time.Duration(*f.MaxAgeSeconds) * time.Second
	}
	for _, name := range slices.Sorted(maps.Keys(f.Platforms)) {
		pf := f.Platforms[name]
		pc := PlatformConfig{RequireSignature: pf.RequireSignature, Keys: make(map[string]ed25519.PublicKey, len(pf.Keys))}
		if pf.MinVersion != nil {
			// Zero is the Go default, not a version: in the file only 1 and 2 mean something.
			if *pf.MinVersion != EnvelopeVersion && *pf.MinVersion != EnvelopeVersion2 {
				return nil, fmt.Errorf("platform %q: min_version: must be 1 or 2", name)
			}
			pc.MinVersion = *pf.MinVersion
		}
		for _, id := range slices.Sorted(maps.Keys(pf.Keys)) {
			key, ok := decodePublicKey(pf.Keys[id])
			if !ok {
				return nil, fmt.Errorf("platform %q: key %q: want the standard or URL-safe base64 (padded or not) of a 32-byte Ed25519 public key", name, id)
			}
			pc.Keys[id] = key
		}
		cfg.Platforms[name] = pc
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func decodePublicKey(s string) (ed25519.PublicKey, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.Strict().DecodeString(s); err == nil && len(b) == ed25519.PublicKeySize {
			return ed25519.PublicKey(b), true
		}
	}
	return nil, false
}
