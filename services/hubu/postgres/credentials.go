package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/credential"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// tokenPrefix is the prefix of each role's tokens.
var tokenPrefix = map[hubu.Role]string{
	hubu.RoleAgent:    credential.PrefixAgent,
	hubu.RoleOperator: credential.PrefixOperator,
	hubu.RoleService:  credential.PrefixService,
	hubu.RoleRouter:   credential.PrefixRouter,
}

// ListCredentials returns the record of every credential, by kind and name: never a token or
// its hash.
func (s *Store) ListCredentials(ctx context.Context) ([]hubu.Credential, error) {
	rows, err := s.q.ListCredentials(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	return each(rows, credentialOf), nil
}

// RevokeCredential revokes credential id for the operator who: its holder's next request is
// refused, and an operator's console sessions signed in with it end on their next request.
// Revoking a revoked credential answers its record unchanged.
func (s *Store) RevokeCredential(ctx context.Context, who hubu.Principal, id uuid.UUID, now time.Time) (hubu.Credential, error) {
	defer s.Cache.credentialsChanged() // also after a failure: the revocation may have committed
	return withTxV(ctx, s.pool, func(tx hubudb.DBTX) (hubu.Credential, error) {
		c, otherLasting, err := s.lockForChange(ctx, tx, id, who)
		if err != nil {
			return hubu.Credential{}, err
		}
		_, changed, err := c.Revoke(now, hubu.CredentialRef{ID: who.CredentialID, Name: who.Name}, otherLasting)
		if err != nil || !changed {
			return c, err
		}
		err = s.q.RevokeCredential(ctx, tx, hubudb.RevokeCredentialParams{ID: id, RevokedAt: &now, RevokedBy: &who.CredentialID})
		if err != nil {
			return hubu.Credential{}, fmt.Errorf("revoke credential: %w", err)
		}
		return s.getCredential(ctx, tx, id)
	})
}

// RotateCredential issues a replacement for credential id, for the operator who: same role,
// name and agent, a new token. The replaced credential stays valid for overlap (see
// hubu.Credential.Rotate).
func (s *Store) RotateCredential(ctx context.Context, who hubu.Principal, id uuid.UUID, overlap time.Duration, now time.Time) (hubu.Rotation, error) {
	defer s.Cache.credentialsChanged()
	return withTxV(ctx, s.pool, func(tx hubudb.DBTX) (hubu.Rotation, error) {
		c, _, err := s.lockForChange(ctx, tx, id, who)
		if err != nil {
			return hubu.Rotation{}, err
		}
		rotated, err := c.Rotate(now, overlap, who.CredentialID)
		if err != nil {
			return hubu.Rotation{}, err
		}
		if e := rotated.ExpiresAt; e != nil && (c.ExpiresAt == nil || !e.Equal(*c.ExpiresAt)) {
			if err := s.q.SetCredentialExpiry(ctx, tx, hubudb.SetCredentialExpiryParams{ID: id, ExpiresAt: rotated.ExpiresAt}); err != nil {
				return hubu.Rotation{}, fmt.Errorf("set credential expiry: %w", err)
			}
		}
		next := c.Replacement(uuid.New(), now, hubu.CredentialRef{ID: who.CredentialID, Name: who.Name})
		token := credential.New(tokenPrefix[next.Role])
		err = s.q.InsertCredential(ctx, tx, hubudb.InsertCredentialParams{
			ID: next.ID, TokenHash: credential.Hash(token), Kind: string(next.Role), Name: next.Name, AgentID: next.AgentID,
			CreatedAt: now, CreatedBy: &who.CredentialID, Replaces: next.Replaces,
		})
		if uniqueViolation(err, "credentials_replaces_key") { // the lock makes this unreachable; the constraint is the backstop
			return hubu.Rotation{}, hubu.Errorf(hubu.CodeConflict, "credential %s was replaced already", id)
		}
		if err != nil {
			return hubu.Rotation{}, fmt.Errorf("insert replacement credential: %w", err)
		}
		replaced, err := s.getCredential(ctx, tx, id)
		if err != nil {
			return hubu.Rotation{}, err
		}
		replacement, err := s.getCredential(ctx, tx, next.ID)
		if err != nil {
			return hubu.Rotation{}, err
		}
		return hubu.Rotation{Replacement: replacement, Token: token, Replaced: replaced}, nil
	})
}

// lockForChange locks credential id, the operator's own and every lasting operator credential
// (see the query), and returns id's record and how many operator credentials other than it
// are active with no end.
func (s *Store) lockForChange(ctx context.Context, tx hubudb.DBTX, id uuid.UUID, who hubu.Principal) (hubu.Credential, int, error) {
	rows, err := s.q.LockCredentialsForChange(ctx, tx, []uuid.UUID{id, who.CredentialID})
	if err != nil {
		return hubu.Credential{}, 0, fmt.Errorf("lock credentials: %w", err)
	}
	found, otherLasting := false, 0
	for _, r := range rows {
		switch {
		case r.ID == id:
			found = true
		case r.Kind == string(hubu.RoleOperator) && r.RevokedAt == nil && r.ExpiresAt == nil:
			otherLasting++
		}
	}
	if !found {
		return hubu.Credential{}, 0, hubu.Errorf(hubu.CodeNotFound, "no credential %s", id)
	}
	c, err := s.getCredential(ctx, tx, id)
	return c, otherLasting, err
}

func (s *Store) getCredential(ctx context.Context, db hubudb.DBTX, id uuid.UUID) (hubu.Credential, error) {
	r, err := s.q.GetCredential(ctx, db, id)
	if err != nil {
		return hubu.Credential{}, queryError(err, "get credential", hubu.Errorf(hubu.CodeNotFound, "no credential %s", id))
	}
	return credentialOf(hubudb.ListCredentialsRow(r)), nil
}

func credentialOf(r hubudb.ListCredentialsRow) hubu.Credential {
	c := hubu.Credential{
		ID: r.ID, Role: hubu.Role(r.Kind), Name: r.Name, AgentID: r.AgentID, CreatedAt: r.CreatedAt,
		Replaces: r.Replaces, ReplacedBy: r.ReplacedBy, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt,
		ClientID: r.OauthClientID, ClientName: r.ClientName, LastUsedAt: r.LastUsedAt,
	}
	c.CreatedBy = refOf(r.CreatedBy, r.CreatedByName)
	c.RevokedBy = refOf(r.RevokedBy, r.RevokedByName)
	return c
}

func refOf(id *uuid.UUID, name *string) *hubu.CredentialRef {
	if id == nil {
		return nil
	}
	ref := &hubu.CredentialRef{ID: *id}
	if name != nil {
		ref.Name = *name
	}
	return ref
}
