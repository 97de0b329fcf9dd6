// Package credential makes bearer tokens and the hashes Hubu stores in their place.
package credential

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// Prefixes say what a token is for at a glance (and let secret scanners find leaked ones).
const (
	PrefixAgent    = "hubu_agent_"
	PrefixOperator = "hubu_operator_"
	PrefixService  = "hubu_service_"
	PrefixRouter   = "hubu_router_"
	PrefixInvite   = "hubu_inv_"     // a one-time sign-in code
	PrefixRefresh  = "hubu_refresh_" // an OAuth refresh token
)

var encoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// New returns a fresh token with the prefix and 160 random bits.
func New(prefix string) string {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + strings.ToLower(encoding.EncodeToString(b))
}

// Hash is what Hubu stores and looks a presented token up by. Tokens carry 160 random
// bits, so a plain SHA-256 is enough; no salt or slow hash is needed.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
