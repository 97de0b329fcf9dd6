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

// keyRefresh is how often, at most, Gongbu reads Hubu's decision keys again for a signature
// under a key it does not know (a key Hubu made after Gongbu last read them).
const keyRefresh = 10 * time.Second

// decisionKeys are Hubu's public keys for decisions, read from Hubu when first needed and
// again when a signature names a key not among them.
type decisionKeys struct {
	mu     sync.Mutex
	keys   map[string]ed25519.PublicKey
	readAt time.Time // the last read, successful or not
}

// lookup returns the key id names, reading Hubu's keys again when id is not among those
// held and the last read is older than keyRefresh.
func (k *decisionKeys) lookup(ctx context.Context, a gongbu.Authority, id string, now time.Time) (ed25519.PublicKey, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if pub, ok := k.keys[id]; ok {
		return pub, true
	}
	if !k.readAt.IsZero() && !now.Before(k.readAt) && now.Sub(k.readAt) < keyRefresh {
		return nil, false
	}
	k.readAt = now
	keys, err := a.DecisionKeys(ctx)
	if err != nil {
		return nil, false // the caller asks Hubu about the decision instead, which fails the same way if Hubu is down
	}
	k.keys = make(map[string]ed25519.PublicKey, len(keys))
	for _, key := range keys {
		k.keys[key.ID] = key.Public
	}
	pub, ok := k.keys[id]
	return pub, ok
}

// issued returns the decision id as Hubu issued it: from Hubu's signature when the hand-off
// has a valid one, otherwise by asking Hubu. A signature that does not verify is refused:
// either it was tampered with or it was never Hubu's. One that has expired, or that names a
// key Hubu does not list, says nothing either way, and Hubu is asked.
func (s *Service) issued(ctx context.Context, id uuid.UUID, signature string) (gongbu.Issued, error) {
	if signature != "" {
		c, err := decisionsig.Verify(signature, func(kid string) (ed25519.PublicKey, bool) {
			return s.keys.lookup(ctx, s.Authority, kid, s.Now())
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
	c, err := decisionsig.VerifyRead(capability, func(kid string) (ed25519.PublicKey, bool) {
		return s.keys.lookup(ctx, s.Authority, kid, s.Now())
	}, s.Now())
	return err == nil && c.PublicHandle == handle && c.Grant == caller.Grant &&
		subtle.ConstantTimeCompare([]byte(c.Credential), []byte(decisionsig.CredentialHash(caller.Token))) == 1
}
