package supportmatrix

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/mcpserver"
)

// DefaultPlatform is the envelope platform of a synthetic envelope when the log does not name one
// (the shape records an object's member names, never its values).
const DefaultPlatform = "acme"

// syntheticInvocationLen is the length of a synthetic envelope's invocation_id: the shape does not
// record the lengths inside an object, and a UUID is what platforms typically send.
const syntheticInvocationLen = 36

// The synthetic signing key, clock and key id. A signed envelope is given a signature that verifies
// under the synthetic config, so a signed shape is judged on its shape; whether an operator has the
// platform's key is configuration, not a property of the client.
var (
	syntheticKey   = ed25519.NewKeyFromSeed(sha256Sum("hubu support-matrix synthetic envelope key"))
	syntheticNow   = time.Unix(1767225600, 0).UTC() // 2026-01-01T00:00:00Z
	syntheticKeyID = "support-matrix"
	platformRE     = regexp.MustCompile(identity.PlatformPattern)
)

func sha256Sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// argumentCodes are verdicts the router records when it refuses a spend's arguments before it
// reads _meta (mcpserver.checkArguments). The log holds no arguments, so those lines are not
// compared with the decision for their _meta.
var argumentCodes = []string{mcpserver.CodeIdentityInArguments, mcpserver.CodeInvalidArguments}

// Synthesize builds a _meta of the recorded shapes, as encoding/json decodes one: for each key a
// value of the recorded JSON type; strings of the recorded byte length from [A-Za-z0-9], numbers
// 0, booleans false, arrays of the recorded length (of nulls), objects with the recorded member
// names (null members). mcpserver.Shape of the result has the recorded keys, types, lengths and
// member names (only the digests differ).
//
// The platform-invocation envelope is the exception among objects: its members that version 1
// defines get valid values (version 1, the given platform, an invocation_id of 36 characters,
// issued_at at the synthetic clock, a signature that verifies under SyntheticConfig), so the
// router judges the shape — the set of members — and not made-up values.
func Synthesize(shapes []mcpserver.MetaShape, platform string) map[string]any {
	meta := make(map[string]any, len(shapes))
	for _, s := range shapes {
		if s.Key == identity.KeyPlatformInvocation && s.Type == "object" {
			meta[s.Key] = synthesizeEnvelope(s.Keys, platform)
			continue
		}
		meta[s.Key] = synthesizeValue(s)
	}
	return meta
}

func synthesizeValue(s mcpserver.MetaShape) any {
	switch s.Type {
	case "string":
		return idString(s.Length)
	case "number":
		return float64(0)
	case "boolean":
		return false
	case "array":
		return make([]any, s.Length)
	case "object":
		obj := make(map[string]any, len(s.Keys))
		for _, k := range s.Keys {
			obj[k] = nil
		}
		return obj
	}
	return nil // "null"; Read refuses other types
}

// idString returns n bytes from [A-Za-z0-9]: a valid call id when 16 <= n <= 256
// (identity.MinCallIDLen, identity.MaxCallIDLen), so a recorded length is judged as it was sent.
func idString(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	return strings.Repeat(alphabet, n/len(alphabet)+1)[:n]
}

func synthesizeEnvelope(members []string, platform string) map[string]any {
	env := make(map[string]any, len(members))
	issuedAt := syntheticNow.Unix()
	for _, m := range members {
		switch m {
		case "version":
			env[m] = float64(identity.EnvelopeVersion)
		case "platform":
			env[m] = platform
		case "invocation_id":
			env[m] = idString(syntheticInvocationLen)
		case "issued_at":
			env[m] = float64(issuedAt)
		default:
			env[m] = nil // "signature" is filled in below; unknown members stay null
		}
	}
	if _, signed := env["signature"]; signed {
		// A placeholder of the right form (86 'A's are the base64url of 64 zero bytes) when the
		// envelope lacks what a signature covers; the router then refuses it for that.
		sig := map[string]any{"alg": identity.SignatureAlg, "key_id": syntheticKeyID, "value": strings.Repeat("A", 86)}
		if _, ok := env["issued_at"]; ok {
			e := identity.Envelope{
				Version: identity.EnvelopeVersion, Platform: platform,
				InvocationID: idString(syntheticInvocationLen), IssuedAt: &issuedAt,
			}
			if signed, err := identity.Sign(e, syntheticKeyID, syntheticKey); err == nil {
				sig["value"] = signed.Signature.Value
			}
		}
		env["signature"] = sig
	}
	return env
}

// SyntheticConfig is the identity configuration the matrix asks the router with: it accepts the
// envelope platform (unsigned, or signed with the synthetic key) at the synthetic clock.
func SyntheticConfig(platform string) *identity.Config {
	return &identity.Config{
		Platforms: map[string]identity.PlatformConfig{
			platform: {Keys: map[string]ed25519.PublicKey{syntheticKeyID: syntheticKey.Public().(ed25519.PublicKey)}},
		},
		Now: func() time.Time { return syntheticNow },
	}
}

// EnvelopePlatform is the platform a synthetic envelope for this line names: the one the recorded
// verdict accepted, when it accepted an envelope platform (the log then shows the operator accepts
// it), else DefaultPlatform.
func EnvelopePlatform(recorded string) string {
	if p, ok := strings.CutPrefix(recorded, "accepted:"); ok && platformRE.MatchString(p) &&
		p != identity.PlatformCodex && p != identity.PlatformClaudeCode {
		return p
	}
	return DefaultPlatform
}

// Decide returns the router's real decision for the _meta shape of a diagnose line, in the form
// the line records it: "accepted:<platform>", or the identity error code.
func Decide(line mcpserver.DiagnoseLine) string {
	platform := EnvelopePlatform(line.Verdict)
	id, err := identity.Normalize(Synthesize(line.Meta, platform), SyntheticConfig(platform))
	if err != nil {
		code, _ := identity.DescribeError(err)
		return code
	}
	return "accepted:" + id.Platform
}

// Comparable reports whether a recorded verdict is about _meta, so that Decide must agree with it.
func Comparable(recorded string) bool {
	return !slices.Contains(argumentCodes, recorded)
}

// Describe renders a verdict for people: "accepted (codex)", "rejected: identity_required".
func Describe(verdict string) string {
	if p, ok := strings.CutPrefix(verdict, "accepted:"); ok {
		return fmt.Sprintf("accepted (%s)", p)
	}
	return "rejected: " + verdict
}
