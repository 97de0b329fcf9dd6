package execution

import (
	"context"
	"crypto/ed25519"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/services/gongbu"
)

// How Gongbu keeps Hubu's public keys for decisions (decisionKeys).
const (
	// keyRefresh is how often, at most, Gongbu reads Hubu's keys: for a signature under a key
	// it does not hold (one Hubu made after Gongbu last read them), or once they are old.
	keyRefresh = 10 * time.Second
	// keyMaxAge is how long keys are used before they are read again, so that a key Hubu no
	// longer lists (a retired one) drops out.
	keyMaxAge = 10 * time.Minute
	// keyReadTimeout bounds one read of the keys.
	keyReadTimeout = 5 * time.Second
)

// decisionKeys are Hubu's public keys for decisions, read from Hubu when first needed, again
// when a hand-off's signature names a key not among them, and once they are keyMaxAge old. One
// read runs at a time, outside the lock: a caller never waits for another's read, and answers
// from the keys held (or asks Hubu about its decision) meanwhile.
type decisionKeys struct {
	mu      sync.Mutex
	keys    map[string]ed25519.PublicKey // nil until a read answered
	readAt  time.Time                    // the last read that answered
	tryAt   time.Time                    // the last read started
	reading bool
}

// lookup returns the key id names. It reads Hubu's keys first, when they are due (none held,
// older than keyMaxAge, or id not among them), no read is under way and none started within
// keyRefresh, and the caller may start one: refresh false (a caller Hubu has not yet vouched
// for, who could otherwise make Gongbu read the keys at will by naming keys it does not hold)
// starts one only when none are held or they are old. A read that fails keeps the keys held.
func (k *decisionKeys) lookup(ctx context.Context, a gongbu.Authority, id string, now time.Time, refresh bool) (ed25519.PublicKey, bool) {
	k.mu.Lock()
	pub, ok := k.keys[id]
	old := k.keys == nil || !within(now, k.readAt, keyMaxAge)
	start := (old || !ok) && !k.reading && (k.tryAt.IsZero() || !within(now, k.tryAt, keyRefresh)) && (refresh || old)
	if !start {
		k.mu.Unlock()
		return pub, ok
	}
	k.reading, k.tryAt = true, now
	k.mu.Unlock()

	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyReadTimeout)
	keys, err := a.DecisionKeys(readCtx)
	cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reading = false
	if err != nil {
		return pub, ok // the caller asks Hubu about its decision instead, if it must
	}
	k.keys, k.readAt = make(map[string]ed25519.PublicKey, len(keys)), now
	for _, key := range keys {
		k.keys[key.ID] = key.Public
	}
	pub, ok = k.keys[id]
	return pub, ok
}

// within reports whether now is no earlier than since and less than d after it (a clock that
// went back counts as out of it).
func within(now, since time.Time, d time.Duration) bool {
	return !now.Before(since) && now.Sub(since) < d
}

// issued returns the decision id as Hubu issued it: from Hubu's signature when the hand-off
// has a valid one, otherwise by asking Hubu. A signature that does not verify is refused:
// either it was tampered with or it was never Hubu's. One that Gongbu cannot use (expired,
// under a key Hubu does not list, of a newer form, or from a clock far ahead) says nothing
// either way, and Hubu is asked.
func (s *Service) issued(ctx context.Context, id uuid.UUID, signature string) (gongbu.Issued, error) {
	if signature != "" {
		c, err := decisionsig.Verify(signature, func(kid string) (ed25519.PublicKey, bool) {
			return s.keys.lookup(ctx, s.Authority, kid, s.Now(), true)
		}, s.Now())
		switch {
		case err == nil && c.DecisionID != id:
			return gongbu.Issued{}, gongbu.Errorf(gongbu.CodeForbidden, "the signature is for another decision")
		case err == nil:
			return issuedOf(c)
		case errors.Is(err, decisionsig.ErrInvalid):
			return gongbu.Issued{}, gongbu.Errorf(gongbu.CodeForbidden, "the decision's signature does not verify")
		}
		s.logger().InfoContext(ctx, "asking Hubu about a decision whose signature cannot be checked here", "decision_id", id, "why", err.Error())
	}
	issued, err := s.Authority.Decision(ctx, id)
	switch {
	case gongbu.ErrorCode(err) == gongbu.CodeNotFound:
		return gongbu.Issued{}, gongbu.Errorf(gongbu.CodeForbidden, "Hubu did not issue this decision")
	case err != nil:
		s.logger().WarnContext(ctx, "cannot check a decision with Hubu", "decision_id", id, "err", err)
		return gongbu.Issued{}, gongbu.Errorf(gongbu.CodeUnavailable, "Hubu cannot be reached to check the decision")
	}
	return issued, nil
}

// issuedOf is a signed decision as Gongbu's Issued, the form Hubu's answer takes too.
func issuedOf(c decisionsig.Claims) (gongbu.Issued, error) {
	var args gongbu.ImageArguments
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return gongbu.Issued{}, gongbu.Errorf(gongbu.CodeForbidden, "the signed decision's arguments cannot be read")
	}
	return gongbu.Issued{
		Decision: gongbu.Decision{
			DecisionID: c.DecisionID, PublicHandle: c.PublicHandle, AgentID: c.AgentID, Tool: c.Tool,
			Scope:     gongbu.Scope{Provider: c.Scope.Provider, Model: c.Scope.Model, Size: c.Scope.Size},
			Arguments: args, AmountMicros: c.AmountMicros, Currency: c.Currency,
		},
		State: c.State, IssuedAt: c.IssuedAt,
	}, nil
}

// MayRead reports whether capability, a read capability Hubu signed (decisionsig.ReadHeader),
// lets caller read the operation of handle now: it verifies, is for this operation, and names
// the caller's own token and grant. false says only that the capability does not settle it;
// the caller then asks Hubu.
func (s *Service) MayRead(ctx context.Context, capability string, caller gongbu.Caller, handle string) bool {
	if capability == "" {
		return false
	}
	// Whoever sends the capability may not be who it names (Hubu has not seen this request's
	// token yet): it reads Hubu's keys only when Gongbu holds none.
	c, err := decisionsig.VerifyRead(capability, func(kid string) (ed25519.PublicKey, bool) {
		return s.keys.lookup(ctx, s.Authority, kid, s.Now(), false)
	}, s.Now())
	return err == nil && c.PublicHandle == handle && c.Grant == caller.Grant &&
		subtle.ConstantTimeCompare([]byte(c.Credential), []byte(decisionsig.CredentialHash(caller.Token))) == 1
}
