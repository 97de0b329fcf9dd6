package decisionsig

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

// ReadHeader carries a read capability: Hubu's statement that a credential may read one
// operation, which the router passes to Gongbu on its long-poll so that Gongbu need not ask
// Hubu who owns the operation. Hubu sends it with its answer to an agent's authorization or
// resume (response header); the router never shows it to the agent.
const ReadHeader = "Hubu-Read-Capability"

// ReadClaims say that the credential whose token hashes to Credential (with the OAuth grant
// Grant, for a router acting for one; "" otherwise) may read the operation PublicHandle until
// ExpiresAt.
type ReadClaims struct {
	PublicHandle string    `json:"public_handle"`
	Credential   string    `json:"cred"`
	Grant        string    `json:"grant,omitempty"`
	Audience     string    `json:"aud"`
	ExpiresAt    time.Time `json:"exp"`
}

// CredentialHash is how a read capability names a bearer token: its SHA-256, base64url.
func CredentialHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// SignRead returns the header value for c under key.
func SignRead(key ed25519.PrivateKey, c ReadClaims) (string, error) { return sign(key, readContext, c) }

// VerifyRead checks a read capability and returns its claims when it holds, is for Audience,
// and has not expired at now. Whether it is for the caller and the operation is the caller's
// to check.
func VerifyRead(header string, keys func(id string) (ed25519.PublicKey, bool), now time.Time) (ReadClaims, error) {
	var c ReadClaims
	if err := verify(header, readContext, keys, &c); err != nil {
		return ReadClaims{}, err
	}
	if c.Audience != Audience || c.PublicHandle == "" || c.Credential == "" {
		return ReadClaims{}, ErrInvalid
	}
	if err := checkExpiry(c.ExpiresAt, now); err != nil {
		return ReadClaims{}, err
	}
	return c, nil
}
