// Package decisionsig is the form in which Hubu signs what Gongbu would otherwise ask it: a
// decision, so that Gongbu can check a hand-off on its own, and a read capability (read.go), so
// that Gongbu can let a router wait on an operation without asking Hubu who owns it.
//
// A signature travels beside the hand-off in the Hubu-Decision-Signature header, as
//
//	v1.<key id>.<claims>.<signature>
//
// where claims is the base64url (unpadded) JSON of Claims and signature the base64url Ed25519
// signature over "hubu-decision-signature-v1.<key id>.<claims>". A Gongbu that does not know the
// header ignores it, and a Hubu that sends none leaves Gongbu to ask: either side can be upgraded
// first.
package decisionsig

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Header carries the signature of the decision a hand-off (POST /v1/executions) is for.
const Header = "Hubu-Decision-Signature"

// Audience is the only audience a signed decision has: the executor.
const Audience = "gongbu"

// MaxHeader bounds a signature Hubu sends: a decision whose arguments would make it longer goes
// unsigned, and Gongbu asks about it as before. It stays below the 8 KiB that common reverse
// proxies allow a header line by default, so that a proxy between Hubu and Gongbu never refuses
// a hand-off for its signature.
const MaxHeader = 6 << 10

// MaxLifetime is the furthest ahead an expiry may lie, by the verifier's clock: more than any
// signature or capability is made to last, so one that lies further ahead comes from a clock that
// runs ahead of the verifier's, and says nothing about how long it is meant to last.
const MaxLifetime = 5 * time.Minute

const (
	version = "v1"
	// What a signature is of goes into what is signed, so that no signature of one kind is
	// ever taken for another.
	decisionContext = "hubu-decision-signature-v1."
	readContext     = "hubu-read-capability-v1."
)

// Scope is the decision's provider, model and size, as Hubu priced it.
type Scope struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Size     string `json:"size"`
}

// Claims is what Hubu states about a decision when it hands it off: the decision as Hubu's
// GET /v1/decisions/{id} would answer it (the operation's state at the signing, and when the
// decision was issued), for whom, and until when.
type Claims struct {
	DecisionID   uuid.UUID       `json:"decision_id"`
	PublicHandle string          `json:"public_handle"`
	AgentID      uuid.UUID       `json:"agent_id"`
	Tool         string          `json:"tool"`
	Scope        Scope           `json:"scope"`
	Arguments    json.RawMessage `json:"arguments"`
	AmountMicros int64           `json:"amount_micros"`
	Currency     string          `json:"currency"`
	State        string          `json:"state"`
	IssuedAt     time.Time       `json:"issued_at"`
	Audience     string          `json:"aud"`
	ExpiresAt    time.Time       `json:"exp"`
}

// Key is one of Hubu's public keys for decisions.
type Key struct {
	ID     string
	Public ed25519.PublicKey
}

// KeyID names a public key: the first 9 bytes of its SHA-256 in base64url, which anyone who
// has the key can compute.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// Sign returns the header value for c under key.
func Sign(key ed25519.PrivateKey, c Claims) (string, error) { return sign(key, decisionContext, c) }

func sign(key ed25519.PrivateKey, context string, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode signed claims: %w", err)
	}
	kid := KeyID(key.Public().(ed25519.PublicKey))
	encoded := base64.RawURLEncoding.EncodeToString(payload)
	sig := ed25519.Sign(key, []byte(context+kid+"."+encoded))
	return version + "." + kid + "." + encoded + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Errors of Verify and VerifyRead. Only ErrInvalid says that something is wrong; every other
// one says that the verifier cannot use the signature, a reason to ask Hubu instead.
var (
	ErrInvalid    = errors.New("the signature does not verify")
	ErrExpired    = errors.New("the signature has expired")
	ErrUnknownKey = errors.New("the signature is made with a key this verifier does not know")
	// ErrUnsupported is a signature of another version, or whose claims hold fields this
	// verifier does not know: made by a newer Hubu, it may say more than this verifier reads.
	ErrUnsupported = errors.New("the signature is of a form this verifier does not know")
	// ErrTooFarAhead is an expiry further ahead than MaxLifetime: the signer's clock runs ahead.
	ErrTooFarAhead = errors.New("the signature expires further ahead than any is made to: the clocks are apart")
)

// Verify checks header against the public key it names (keys looks it up) and returns its
// claims when the signature holds, is for Audience, and has not expired at now.
func Verify(header string, keys func(id string) (ed25519.PublicKey, bool), now time.Time) (Claims, error) {
	var c Claims
	if err := verify(header, decisionContext, keys, &c); err != nil {
		return Claims{}, err
	}
	if c.Audience != Audience || c.DecisionID == uuid.Nil {
		return Claims{}, ErrInvalid
	}
	if err := checkExpiry(c.ExpiresAt, now); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// checkExpiry says whether an expiry holds at now.
func checkExpiry(expires, now time.Time) error {
	switch {
	case !now.Before(expires):
		return ErrExpired
	case expires.After(now.Add(MaxLifetime)):
		return ErrTooFarAhead
	}
	return nil
}

// verify checks header's signature under context and decodes its claims into v.
func verify(header, context string, keys func(id string) (ed25519.PublicKey, bool), v any) error {
	if len(header) > MaxHeader {
		return ErrInvalid
	}
	parts := strings.Split(header, ".")
	switch {
	case len(parts) != 4 || parts[1] == "":
		return ErrInvalid
	case parts[0] != version:
		return ErrUnsupported
	}
	kid := parts[1]
	pub, ok := keys(kid)
	if !ok {
		return ErrUnknownKey
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil || len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, []byte(context+kid+"."+parts[2]), sig) {
		return ErrInvalid
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return ErrInvalid
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if json.Valid(payload) {
			return ErrUnsupported // signed, well formed, with fields this verifier does not know
		}
		return ErrInvalid
	}
	return nil
}
