package hubu

import (
	"time"

	"github.com/google/uuid"
)

// CredentialState is where a credential stands at a moment. It is computed from the record
// (revoked_at, expires_at) and the time, never stored.
type CredentialState string

const (
	CredentialActive   CredentialState = "active"   // valid, with no end
	CredentialExpiring CredentialState = "expiring" // replaced by a rotation; valid until ExpiresAt
	CredentialExpired  CredentialState = "expired"  // replaced by a rotation, and its overlap is over
	CredentialRevoked  CredentialState = "revoked"  // an operator revoked it
)

// MaxRotationOverlap bounds how long a rotated credential stays valid beside its replacement:
// long enough to restart a service's processes one at a time, short enough that a rotation
// never leaves a leaked token working for long.
const MaxRotationOverlap = 24 * time.Hour

// CredentialRef names the operator credential that issued or revoked another one.
type CredentialRef struct {
	ID   uuid.UUID
	Name string
}

// Credential is the record of one bearer credential; never its token or the token's hash.
// An agent may hold several credentials over time (each rotation adds one); they all act as
// that agent, and during a rotation's overlap two of them are valid at once.
type Credential struct {
	ID         uuid.UUID
	Role       Role
	Name       string
	AgentID    *uuid.UUID // agents only
	CreatedAt  time.Time
	CreatedBy  *CredentialRef // the operator credential that issued it by a rotation
	Replaces   *uuid.UUID
	ReplacedBy *uuid.UUID
	ExpiresAt  *time.Time // set by the rotation that replaced it
	RevokedAt  *time.Time
	RevokedBy  *CredentialRef // nil for a revocation made before Hubu recorded who made it
	// An OAuth grant (a person signed in as the agent and allowed a client) names its client
	// and when a router last saw one of its tokens; it has no bearer token of its own.
	ClientID   *string
	ClientName *string
	LastUsedAt *time.Time
}

// StateAt is the credential's state at now. A revocation wins over an expiry.
func (c Credential) StateAt(now time.Time) CredentialState {
	switch {
	case c.RevokedAt != nil:
		return CredentialRevoked
	case c.ExpiresAt == nil:
		return CredentialActive
	case now.Before(*c.ExpiresAt):
		return CredentialExpiring
	}
	return CredentialExpired
}

// Authenticates refuses a credential that is no longer valid at now, saying why. Only a
// holder of a token that was valid once can hear this, so it tells a guesser nothing, and it
// tells whoever runs an agent or a service what to fix.
func (c Credential) Authenticates(now time.Time) error {
	switch c.StateAt(now) {
	case CredentialRevoked:
		return Errorf(CodeCredentialRevoked, "this credential was revoked at %s; ask an operator for a new token",
			c.RevokedAt.UTC().Format(time.RFC3339))
	case CredentialExpired:
		return Errorf(CodeCredentialExpired, "this credential was replaced by a rotation and expired at %s; use its replacement's token",
			c.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Revoke returns c revoked at now by the operator credential by; changed is false when c was
// revoked already (the first revocation stays the record). otherLasting counts the operator
// credentials other than c that are active with no end: revoking the last one is refused,
// since nobody could then manage Hubu without going to its database.
func (c Credential) Revoke(now time.Time, by CredentialRef, otherLasting int) (out Credential, changed bool, err error) {
	if c.RevokedAt != nil {
		return c, false, nil
	}
	if c.Role == RoleOperator && c.StateAt(now) == CredentialActive && otherLasting == 0 {
		return c, false, Errorf(CodeConflict, "credential %s is the last operator credential with no expiry: "+
			"create another operator (hubu operator create) first, or rotate this one instead", c.ID)
	}
	c.RevokedAt, c.RevokedBy = &now, &by
	return c, true, nil
}

// Rotate checks that c may be replaced now by a new credential, c staying valid for overlap,
// and returns c as the rotation leaves it: a valid credential expires when the overlap ends
// (at once without one). A revoked credential may be replaced too, so that an agent whose
// token leaked can be given a new one, but it stays revoked: no overlap. A credential is
// replaced once; to rotate again, rotate its replacement. An operator credential is rotated
// only by its holder (by is the rotating operator's credential): its replacement carries the
// holder's name, and another operator holding a token in that name could approve as them. A
// leaked operator credential is revoked, and its holder gets a new one (`hubu operator create`).
func (c Credential) Rotate(now time.Time, overlap time.Duration, by uuid.UUID) (Credential, error) {
	if c.Role == RoleOperator && c.ID != by {
		return c, Errorf(CodeForbidden, "an operator credential is rotated only by its holder: revoke credential %s instead, "+
			"and its holder gets a new one with `hubu operator create`", c.ID)
	}
	if c.ClientID != nil {
		return c, Errorf(CodeInvalidArguments, "an OAuth grant has no token to rotate (its refresh tokens rotate on every use): "+
			"revoke credential %s instead, and its person signs in again", c.ID)
	}
	if overlap < 0 || overlap > MaxRotationOverlap {
		return c, Errorf(CodeInvalidArguments, "the overlap must be between 0 and %s", MaxRotationOverlap)
	}
	if c.ReplacedBy != nil {
		return c, Errorf(CodeConflict, "credential %s was replaced already, by %s: rotate that one", c.ID, *c.ReplacedBy)
	}
	if c.RevokedAt != nil {
		if overlap > 0 {
			return c, Errorf(CodeInvalidArguments, "credential %s is revoked and cannot stay valid: rotate it with no overlap", c.ID)
		}
		return c, nil
	}
	end := now.Add(overlap)
	if c.ExpiresAt == nil || end.Before(*c.ExpiresAt) {
		c.ExpiresAt = &end
	}
	return c, nil
}

// Replacement is the credential a rotation of c issues: same role, name and agent.
func (c Credential) Replacement(id uuid.UUID, now time.Time, by CredentialRef) Credential {
	return Credential{ID: id, Role: c.Role, Name: c.Name, AgentID: c.AgentID, CreatedAt: now, CreatedBy: &by, Replaces: &c.ID}
}

// Rotation is what rotating a credential produced: the replacement with its token, which is
// shown once (Hubu keeps only its hash), and the replaced credential as the rotation left it.
type Rotation struct {
	Replacement Credential
	Token       string
	Replaced    Credential
}
