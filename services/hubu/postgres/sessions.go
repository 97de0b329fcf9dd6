package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// ConsoleSession is an operator signed in to the approval console. Sessions are kept in
// Postgres so that every replica on the database shares them: a load balancer may send each of
// an operator's requests to another replica.
type ConsoleSession struct {
	// ID is the random id the browser's cookie holds. Only its SHA-256 is stored, so a reader of
	// the database cannot present the session.
	ID             string
	CredentialID   uuid.UUID
	Operator       string
	CredentialHash []byte // the operator token's hash, looked up again on every request
	CSRF           string
	ExpiresAt      time.Time
}

// errNoSession is what ConsoleSession answers for an id that has no live session.
var errNoSession = hubu.Errorf(hubu.CodeNotFound, "no such console session")

// sessionIDHash is what a session is stored and found by. Session ids carry 256 random bits,
// so a plain SHA-256 is enough, as for tokens (credential.Hash).
func sessionIDHash(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// CreateConsoleSession stores a new session, and removes the sessions that expired by now
// (sign-ins are rare; sweeping here keeps the table small without a pass of its own).
func (s *Store) CreateConsoleSession(ctx context.Context, sess ConsoleSession, now time.Time) error {
	if sess.ID == "" || sess.CSRF == "" {
		return errors.New("a console session needs an id and a CSRF token")
	}
	_, err := withTxV(ctx, s.pool, func(tx hubudb.DBTX) (struct{}, error) {
		if _, err := s.q.DeleteExpiredConsoleSessions(ctx, tx, now); err != nil {
			return struct{}{}, fmt.Errorf("delete expired console sessions: %w", err)
		}
		err := s.q.InsertConsoleSession(ctx, tx, hubudb.InsertConsoleSessionParams{
			IDHash: sessionIDHash(sess.ID), CredentialID: sess.CredentialID, Operator: sess.Operator,
			CredentialHash: sess.CredentialHash, CsrfToken: sess.CSRF, CreatedAt: now, ExpiresAt: sess.ExpiresAt,
		})
		if err != nil {
			return struct{}{}, fmt.Errorf("insert console session: %w", err)
		}
		return struct{}{}, nil
	})
	return err
}

// ConsoleSession returns the live session with that id: not_found when there is none, or it
// expired by now (an expired one is removed).
func (s *Store) ConsoleSession(ctx context.Context, id string, now time.Time) (ConsoleSession, error) {
	r, err := s.q.GetConsoleSession(ctx, s.db, sessionIDHash(id))
	if err != nil {
		return ConsoleSession{}, queryError(err, "get console session", errNoSession)
	}
	if !now.Before(r.ExpiresAt) {
		if err := s.DeleteConsoleSession(ctx, id); err != nil {
			return ConsoleSession{}, err
		}
		return ConsoleSession{}, errNoSession
	}
	return ConsoleSession{
		ID: id, CredentialID: r.CredentialID, Operator: r.Operator, CredentialHash: r.CredentialHash,
		CSRF: r.CsrfToken, ExpiresAt: r.ExpiresAt,
	}, nil
}

// DeleteConsoleSession ends a session, on every replica at once. Ending one that is gone
// already is no error.
func (s *Store) DeleteConsoleSession(ctx context.Context, id string) error {
	if err := s.q.DeleteConsoleSession(ctx, s.db, sessionIDHash(id)); err != nil {
		return fmt.Errorf("delete console session: %w", err)
	}
	return nil
}

// SetConsoleFlash keeps a one-time message for the session's next page, which the browser
// may load from another replica.
func (s *Store) SetConsoleFlash(ctx context.Context, id, msg string) error {
	if err := s.q.SetConsoleSessionFlash(ctx, s.db, hubudb.SetConsoleSessionFlashParams{IDHash: sessionIDHash(id), Flash: msg}); err != nil {
		return fmt.Errorf("set console flash: %w", err)
	}
	return nil
}

// TakeConsoleFlash returns the session's one-time message and clears it; "" when there is none
// (or no session).
func (s *Store) TakeConsoleFlash(ctx context.Context, id string) (string, error) {
	msg, err := s.q.TakeConsoleSessionFlash(ctx, s.db, sessionIDHash(id))
	if isNoRows(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("take console flash: %w", err)
	}
	return msg, nil
}
