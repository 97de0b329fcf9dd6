package postgres

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"time"

	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// DecisionKey returns the key Hubu signs decisions with, making it on first use (the first
// replica to ask wins; every replica then signs with the same key).
func (s *Store) DecisionKey(ctx context.Context, now time.Time) (ed25519.PrivateKey, error) {
	row, err := s.q.GetDecisionKeyInUse(ctx, s.db)
	if isNoRows(err) {
		var seed [32]byte
		_, _ = rand.Read(seed[:])
		pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
		err = s.q.InsertDecisionKey(ctx, s.db, hubudb.InsertDecisionKeyParams{Kid: decisionsig.KeyID(pub), Seed: seed[:], CreatedAt: now})
		if err != nil {
			return nil, fmt.Errorf("make the decision key: %w", err)
		}
		row, err = s.q.GetDecisionKeyInUse(ctx, s.db)
	}
	if err != nil {
		return nil, fmt.Errorf("read the decision key: %w", err)
	}
	return ed25519.NewKeyFromSeed(row.Seed), nil
}

// RetiredKeyListed is how long a retired decision key is still listed: longer than anything
// signed with it lasts (decisionsig.MaxLifetime).
const RetiredKeyListed = 10 * time.Minute

// DecisionKeys returns the public half of every key that something Gongbu may still be shown
// was signed with: the key in use, and those retired within RetiredKeyListed of now.
func (s *Store) DecisionKeys(ctx context.Context, now time.Time) ([]decisionsig.Key, error) {
	since := now.Add(-RetiredKeyListed)
	rows, err := s.q.ListDecisionKeys(ctx, s.db, &since)
	if err != nil {
		return nil, fmt.Errorf("list the decision keys: %w", err)
	}
	keys := make([]decisionsig.Key, len(rows))
	for i, r := range rows {
		keys[i] = decisionsig.Key{ID: r.Kid, Public: ed25519.NewKeyFromSeed(r.Seed).Public().(ed25519.PublicKey)}
	}
	return keys, nil
}
