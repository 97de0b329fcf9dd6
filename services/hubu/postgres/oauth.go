package postgres

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/credential"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// The authorization server's records (package oauth speaks the protocol; this is its memory).
// Codes, tokens, invites and browser sessions are looked up by their SHA-256 only.

// OAuthKeys are the authorization server's keys, the same in every replica.
type OAuthKeys struct {
	Crypto     [32]byte // encrypts authorization codes and access token ids (the library's scheme)
	Signing    ed25519.PrivateKey
	SigningKID string
}

// OAuthKeys returns the keys, making them on first use (the first replica to ask wins).
func (s *Store) OAuthKeys(ctx context.Context, now time.Time) (OAuthKeys, error) {
	row, err := s.q.GetOAuthKeys(ctx, s.db)
	if isNoRows(err) {
		var crypto, seed [32]byte
		_, _ = rand.Read(crypto[:])
		_, _ = rand.Read(seed[:])
		pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
		kid := hex.EncodeToString(sha256.New().Sum(pub)[:8])
		err = s.q.InsertOAuthKeys(ctx, s.db, hubudb.InsertOAuthKeysParams{
			CryptoKey: crypto[:], SigningKey: seed[:], SigningKid: kid, CreatedAt: now,
		})
		if err != nil {
			return OAuthKeys{}, fmt.Errorf("make oauth keys: %w", err)
		}
		row, err = s.q.GetOAuthKeys(ctx, s.db)
	}
	if err != nil {
		return OAuthKeys{}, fmt.Errorf("read oauth keys: %w", err)
	}
	k := OAuthKeys{Signing: ed25519.NewKeyFromSeed(row.SigningKey), SigningKID: row.SigningKid}
	copy(k.Crypto[:], row.CryptoKey)
	return k, nil
}

// OAuthClient is a client Hubu knows.
type OAuthClient struct {
	ID               string
	Name             string
	RedirectURIs     []string
	MetadataDocument bool // ID is the URL of the document Hubu fetched
	FetchedAt        *time.Time
}

// SaveOAuthClient records a registration, or what a client's metadata document says now.
// A registered client is never changed (its id is Hubu's own, random).
func (s *Store) SaveOAuthClient(ctx context.Context, c OAuthClient, now time.Time) error {
	err := s.q.UpsertOAuthClient(ctx, s.db, hubudb.UpsertOAuthClientParams{
		ClientID: c.ID, Name: c.Name, RedirectUris: c.RedirectURIs, MetadataDocument: c.MetadataDocument,
		CreatedAt: now, FetchedAt: c.FetchedAt,
	})
	if err != nil {
		return fmt.Errorf("save oauth client: %w", err)
	}
	return nil
}

// OAuthClient returns the client id names; a not_found *hubu.Error when there is none.
func (s *Store) OAuthClient(ctx context.Context, id string) (OAuthClient, error) {
	r, err := s.q.GetOAuthClient(ctx, s.db, id)
	if err != nil {
		return OAuthClient{}, queryError(err, "get oauth client", hubu.Errorf(hubu.CodeNotFound, "no such client"))
	}
	return OAuthClient{ID: r.ClientID, Name: r.Name, RedirectURIs: r.RedirectUris, MetadataDocument: r.MetadataDocument, FetchedAt: r.FetchedAt}, nil
}

// CreateInvite issues a one-time sign-in code for the agent, valid for ttl.
func (s *Store) CreateInvite(ctx context.Context, who hubu.Principal, agentID uuid.UUID, ttl time.Duration, now time.Time) (string, time.Time, error) {
	if _, err := s.q.GetAgent(ctx, s.db, agentID); err != nil {
		return "", time.Time{}, queryError(err, "get agent", hubu.Errorf(hubu.CodeNotFound, "no agent %s", agentID))
	}
	code := credential.New(credential.PrefixInvite)
	expires := now.Add(ttl)
	var by *uuid.UUID
	if who.CredentialID != uuid.Nil {
		by = &who.CredentialID
	}
	err := s.q.InsertInvite(ctx, s.db, hubudb.InsertInviteParams{
		CodeHash: credential.Hash(code), AgentID: agentID, CreatedBy: by, CreatedAt: now, ExpiresAt: expires,
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("insert invite: %w", err)
	}
	return code, expires, nil
}

// UseInvite spends a sign-in code and returns its agent. An unknown, used or expired code is
// one and the same refusal: the page tells a guesser nothing.
func (s *Store) UseInvite(ctx context.Context, code string, now time.Time) (uuid.UUID, error) {
	agent, err := s.q.UseInvite(ctx, s.db, hubudb.UseInviteParams{CodeHash: credential.Hash(strings.TrimSpace(code)), Now: &now})
	if err != nil {
		return uuid.Nil, queryError(err, "use invite", hubu.Errorf(hubu.CodeUnauthorized, "that sign-in code is not valid (it works once, and expires)"))
	}
	return agent, nil
}

// AgentByOwnerEmail is the agent whose owner has this (verified) email.
func (s *Store) AgentByOwnerEmail(ctx context.Context, email string) (uuid.UUID, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	a, err := s.q.GetAgentByOwnerEmail(ctx, s.db, &email)
	if err != nil {
		return uuid.Nil, queryError(err, "agent by owner", hubu.Errorf(hubu.CodeNotFound, "no agent belongs to %s", email))
	}
	return a.ID, nil
}

// SetAgentOwner names the person an agent belongs to by a verified email ("" removes it).
func (s *Store) SetAgentOwner(ctx context.Context, agentID uuid.UUID, email string) error {
	var v *string
	if email = strings.ToLower(strings.TrimSpace(email)); email != "" {
		v = &email
	}
	n, err := s.q.SetAgentOwnerEmail(ctx, s.db, hubudb.SetAgentOwnerEmailParams{ID: agentID, OwnerEmail: v})
	if uniqueViolation(err, "agents_owner_email_key") {
		return hubu.Errorf(hubu.CodeConflict, "another agent already belongs to %s", email)
	}
	if err != nil {
		return fmt.Errorf("set agent owner: %w", err)
	}
	if n == 0 {
		return hubu.Errorf(hubu.CodeNotFound, "no agent %s", agentID)
	}
	return nil
}

// StartBrowserSession records that the browser holding the cookie id signed in as the agent.
func (s *Store) StartBrowserSession(ctx context.Context, id string, agentID uuid.UUID, via string, now time.Time, ttl time.Duration) error {
	_ = s.q.DeleteExpiredOAuthRows(ctx, s.db, hubudb.DeleteExpiredOAuthRowsParams{ExpiresAt: now, ExpiresAt_2: now.Add(-24 * time.Hour)})
	err := s.q.InsertBrowserSession(ctx, s.db, hubudb.InsertBrowserSessionParams{
		IDHash: credential.Hash(id), AgentID: agentID, Via: via, CreatedAt: now, ExpiresAt: now.Add(ttl),
	})
	if err != nil {
		return fmt.Errorf("insert browser session: %w", err)
	}
	return nil
}

// BrowserSession is the agent the browser holding cookie id signed in as; ok is false when
// it has no live session.
func (s *Store) BrowserSession(ctx context.Context, id string, now time.Time) (uuid.UUID, bool, error) {
	if id == "" {
		return uuid.Nil, false, nil
	}
	r, err := s.q.GetBrowserSession(ctx, s.db, hubudb.GetBrowserSessionParams{IDHash: credential.Hash(id), Now: now})
	if isNoRows(err) {
		return uuid.Nil, false, nil
	}
	if err != nil {
		return uuid.Nil, false, fmt.Errorf("get browser session: %w", err)
	}
	return r.AgentID, true, nil
}

// AuthRequest is an authorization request from /oauth/authorize until its code is exchanged.
type AuthRequest = hubudb.OauthAuthRequest

// InsertAuthRequest records a new authorization request.
func (s *Store) InsertAuthRequest(ctx context.Context, r AuthRequest) error {
	err := s.q.InsertAuthRequest(ctx, s.db, hubudb.InsertAuthRequestParams{
		ID: r.ID, ClientID: r.ClientID, RedirectUri: r.RedirectUri, State: r.State, Nonce: r.Nonce, Scopes: r.Scopes,
		ResponseMode: r.ResponseMode, Resource: r.Resource, CodeChallenge: r.CodeChallenge, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
	})
	if err != nil {
		return fmt.Errorf("insert auth request: %w", err)
	}
	return nil
}

// GetAuthRequest returns a request by id; not_found when there is none.
func (s *Store) GetAuthRequest(ctx context.Context, id uuid.UUID) (AuthRequest, error) {
	r, err := s.q.GetAuthRequest(ctx, s.db, id)
	if err != nil {
		return r, queryError(err, "get auth request", hubu.Errorf(hubu.CodeNotFound, "no such authorization request"))
	}
	return r, nil
}

// BindAuthRequestBrowser ties a request to the browser that opened its sign-in page (the hash
// of its cookie), once: only that browser may sign in and consent for it.
// It answers the hash the request is bound to, this browser's or, when another browser was
// first, that one's.
func (s *Store) BindAuthRequestBrowser(ctx context.Context, id uuid.UUID, browser string) ([]byte, error) {
	n, err := s.q.SetAuthRequestBrowser(ctx, s.db, hubudb.SetAuthRequestBrowserParams{ID: id, BrowserHash: credential.Hash(browser)})
	if err != nil {
		return nil, fmt.Errorf("bind auth request: %w", err)
	}
	if n == 1 {
		return credential.Hash(browser), nil
	}
	r, err := s.GetAuthRequest(ctx, id)
	return r.BrowserHash, err
}

// SetAuthRequestUpstream keeps the state, nonce and PKCE verifier of a sign-in at the team's
// OpenID Connect provider with the request it is for.
func (s *Store) SetAuthRequestUpstream(ctx context.Context, id uuid.UUID, state, nonce, verifier string) error {
	return s.q.SetAuthRequestUpstream(ctx, s.db, hubudb.SetAuthRequestUpstreamParams{
		ID: id, UpstreamState: &state, UpstreamNonce: &nonce, UpstreamVerifier: &verifier,
	})
}

// ClearAuthRequestUpstream forgets a failed sign-in at the provider (each is used once).
func (s *Store) ClearAuthRequestUpstream(ctx context.Context, id uuid.UUID) error {
	return s.q.ClearAuthRequestUpstream(ctx, s.db, id)
}

// SignInAuthRequest records that the agent's person signed in for the request.
func (s *Store) SignInAuthRequest(ctx context.Context, id, agentID uuid.UUID) error {
	n, err := s.q.SetAuthRequestAgent(ctx, s.db, hubudb.SetAuthRequestAgentParams{ID: id, AgentID: &agentID})
	if err != nil {
		return fmt.Errorf("sign in auth request: %w", err)
	}
	if n == 0 {
		return hubu.Errorf(hubu.CodeConflict, "this authorization request was already decided")
	}
	return nil
}

// AllowAuthRequest makes the grant the person allowed (an agent credential for the client)
// and ties it to the request, in one transaction; it answers the grant's id.
func (s *Store) AllowAuthRequest(ctx context.Context, r AuthRequest, clientName string, now time.Time) (uuid.UUID, error) {
	if r.AgentID == nil {
		return uuid.Nil, hubu.Errorf(hubu.CodeConflict, "no one signed in for this authorization request")
	}
	grant := uuid.New()
	defer s.Cache.credentialsChanged()
	return withTxV(ctx, s.pool, func(tx hubudb.DBTX) (uuid.UUID, error) {
		// A grant has no bearer token: its token_hash is the hash of a token nobody holds.
		err := s.q.InsertGrant(ctx, tx, hubudb.InsertGrantParams{
			ID: grant, TokenHash: credential.Hash(credential.New("hubu_grant_")), Name: "oauth: " + clientName,
			AgentID: r.AgentID, CreatedAt: now, OauthClientID: &r.ClientID,
		})
		if err != nil {
			return uuid.Nil, fmt.Errorf("insert grant: %w", err)
		}
		n, err := s.q.SetAuthRequestGrant(ctx, tx, hubudb.SetAuthRequestGrantParams{ID: r.ID, GrantID: &grant})
		if err != nil {
			return uuid.Nil, fmt.Errorf("set auth request grant: %w", err)
		}
		if n == 0 {
			return uuid.Nil, hubu.Errorf(hubu.CodeConflict, "this authorization request was already decided")
		}
		return grant, nil
	})
}

// DenyAuthRequest records that the person denied the client.
func (s *Store) DenyAuthRequest(ctx context.Context, id uuid.UUID) error {
	n, err := s.q.DenyAuthRequest(ctx, s.db, id)
	if err != nil {
		return fmt.Errorf("deny auth request: %w", err)
	}
	if n == 0 {
		return hubu.Errorf(hubu.CodeConflict, "this authorization request was already decided")
	}
	return nil
}

// SaveAuthCode records the code issued for an allowed request (its hash), once; the request
// then expires with the code, at expires.
func (s *Store) SaveAuthCode(ctx context.Context, id uuid.UUID, code string, expires time.Time) error {
	n, err := s.q.SaveAuthCode(ctx, s.db, hubudb.SaveAuthCodeParams{ID: id, CodeHash: credential.Hash(code), ExpiresAt: expires})
	if err != nil {
		return fmt.Errorf("save auth code: %w", err)
	}
	if n == 0 {
		return hubu.Errorf(hubu.CodeConflict, "a code was already issued for this authorization request")
	}
	return nil
}

// AuthRequestByCode returns the request a code was issued for. A code presented again after
// its exchange is a replay: the grant it made is revoked (RFC 6749 §4.1.2), and it is refused.
func (s *Store) AuthRequestByCode(ctx context.Context, code string, now time.Time) (AuthRequest, error) {
	r, err := s.q.GetAuthRequestByCode(ctx, s.db, credential.Hash(code))
	if err != nil {
		return AuthRequest{}, queryError(err, "auth request by code", hubu.Errorf(hubu.CodeUnauthorized, "unknown code"))
	}
	if r.CodeUsedAt != nil {
		if r.GrantID != nil {
			if err := s.RevokeGrant(ctx, *r.GrantID, now); err != nil {
				return AuthRequest{}, err
			}
		}
		return AuthRequest{}, hubu.Errorf(hubu.CodeUnauthorized, "the code was used already; the grant it made is revoked")
	}
	if !now.Before(r.ExpiresAt) {
		return AuthRequest{}, hubu.Errorf(hubu.CodeUnauthorized, "the code expired")
	}
	return r, nil
}

// OAuthToken is an access or refresh token's record.
type OAuthToken = hubudb.GetOAuthTokenRow

// TokenIssue is what IssueTokens writes: an access token and, when Refresh is set, the next
// refresh token, for a grant.
type TokenIssue struct {
	Grant         uuid.UUID
	AuthRequestID uuid.UUID
	ClientID      string
	Agent         uuid.UUID
	Audience      string
	Scopes        []string
	AccessID      string // the access token's secret id (the library encrypts it into the token)
	AccessExpires time.Time
	Refresh       string
	RefreshTTL    time.Duration
	// Spends, when set, is what this issue uses up: the request's code (a code exchange) or
	// the refresh token (a rotation). Only the first issue that spends it succeeds.
	SpendCode    bool
	SpendRefresh string
}

// IssueTokens writes the tokens, spending the code or refresh token they are issued for in the
// same transaction. When that was spent already (two exchanges raced, or a replay), the grant
// is revoked and the issue refused.
func (s *Store) IssueTokens(ctx context.Context, t TokenIssue, now time.Time) error {
	replayed, err := withTxV(ctx, s.pool, func(tx hubudb.DBTX) (bool, error) {
		var n int64
		var err error
		switch {
		case t.SpendCode:
			n, err = s.q.UseAuthCode(ctx, tx, hubudb.UseAuthCodeParams{ID: t.AuthRequestID, CodeUsedAt: &now})
		case t.SpendRefresh != "":
			n, err = s.q.UseRefreshToken(ctx, tx, hubudb.UseRefreshTokenParams{TokenHash: credential.Hash(t.SpendRefresh), UsedAt: &now})
		default:
			n = 1
		}
		if err != nil {
			return false, fmt.Errorf("spend code or refresh token: %w", err)
		}
		if n == 0 {
			return true, nil
		}
		insert := func(hash []byte, kind string, expires time.Time) error {
			return s.q.InsertOAuthToken(ctx, tx, hubudb.InsertOAuthTokenParams{
				TokenHash: hash, Kind: kind, GrantID: t.Grant, AuthRequestID: t.AuthRequestID, ClientID: t.ClientID,
				AgentID: t.Agent, Audience: t.Audience, Scopes: t.Scopes, CreatedAt: now, ExpiresAt: expires,
			})
		}
		if err := insert(credential.Hash(t.AccessID), "access", t.AccessExpires); err != nil {
			return false, fmt.Errorf("insert access token: %w", err)
		}
		if t.Refresh != "" {
			if err := insert(credential.Hash(t.Refresh), "refresh", now.Add(t.RefreshTTL)); err != nil {
				return false, fmt.Errorf("insert refresh token: %w", err)
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	if replayed {
		if err := s.RevokeGrant(ctx, t.Grant, now); err != nil {
			return err
		}
		return hubu.Errorf(hubu.CodeUnauthorized, "the code or refresh token was used already; its grant is revoked")
	}
	return nil
}

// OAuthToken returns a token's record by the token (a refresh token) or secret id (an access
// token); not_found when there is none.
func (s *Store) OAuthToken(ctx context.Context, tokenOrID string) (OAuthToken, error) {
	r, err := s.q.GetOAuthToken(ctx, s.db, credential.Hash(tokenOrID))
	if err != nil {
		return r, queryError(err, "get oauth token", hubu.Errorf(hubu.CodeNotFound, "no such token"))
	}
	return r, nil
}

// DeleteAccessToken ends one access token (RFC 7009 revocation of an access token).
func (s *Store) DeleteAccessToken(ctx context.Context, id string) error {
	return s.q.DeleteOAuthToken(ctx, s.db, credential.Hash(id))
}

// RevokeGrant revokes a grant as Hubu itself (a replayed code or refresh token, or the client
// revoked its refresh token): every token of it is refused from then on. Revoking a revoked
// grant changes nothing.
func (s *Store) RevokeGrant(ctx context.Context, id uuid.UUID, now time.Time) error {
	defer s.Cache.credentialsChanged()
	if err := s.q.RevokeCredential(ctx, s.db, hubudb.RevokeCredentialParams{ID: id, RevokedAt: &now}); err != nil {
		return fmt.Errorf("revoke grant: %w", err)
	}
	return nil
}

// AuthenticateGrant is the principal a router acts as for grant id: the grant's agent, while
// the grant is valid. It records the use (to the minute) for operators to see.
func (s *Store) AuthenticateGrant(ctx context.Context, id uuid.UUID, now time.Time) (hubu.Principal, error) {
	g, err := s.q.GetGrant(ctx, s.db, id)
	if err != nil {
		return hubu.Principal{}, queryError(err, "get grant", hubu.Errorf(hubu.CodeUnauthorized, "no such grant"))
	}
	if err := (hubu.Credential{ID: g.ID, RevokedAt: g.RevokedAt, ExpiresAt: g.ExpiresAt}).Authenticates(now); err != nil {
		return hubu.Principal{}, err
	}
	if g.LastUsedAt == nil || now.Sub(*g.LastUsedAt) >= time.Minute {
		_ = s.q.TouchGrant(ctx, s.db, hubudb.TouchGrantParams{ID: id, LastUsedAt: &now, LastUsedAt_2: ptr(now.Add(-time.Minute))})
	}
	return hubu.Principal{Role: hubu.RoleAgent, Name: g.Name, AgentID: *g.AgentID, CredentialID: g.ID}, nil
}

func ptr[T any](v T) *T { return &v }
