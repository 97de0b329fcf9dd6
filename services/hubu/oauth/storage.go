package oauth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/credential"
	"hubu.dev/hubu/services/hubu/postgres"
)

// storage is the library's view of Hubu's records (op.Storage). The protocol's rules that
// the library leaves to its storage are kept here: PKCE S256 only, the resource a token is
// for, codes and refresh tokens spent once (a second use revokes the grant), grants that an
// operator can revoke.
type storage struct {
	s *Server
}

var _ op.Storage = storage{}

// authRequest is an authorization request as the library reads it.
type authRequest struct{ postgres.AuthRequest }

func (a authRequest) GetID() string                      { return a.ID.String() }
func (a authRequest) GetACR() string                     { return "" }
func (a authRequest) GetAMR() []string                   { return nil }
func (a authRequest) GetAudience() []string              { return []string{a.ClientID} } // the ID token's
func (a authRequest) GetAuthTime() time.Time             { return a.CreatedAt }
func (a authRequest) GetClientID() string                { return a.ClientID }
func (a authRequest) GetNonce() string                   { return a.Nonce }
func (a authRequest) GetRedirectURI() string             { return a.RedirectUri }
func (a authRequest) GetResponseType() oidc.ResponseType { return oidc.ResponseTypeCode }
func (a authRequest) GetResponseMode() oidc.ResponseMode { return oidc.ResponseMode(a.ResponseMode) }
func (a authRequest) GetScopes() []string                { return a.Scopes }
func (a authRequest) GetState() string                   { return a.State }
func (a authRequest) Done() bool                         { return a.GrantID != nil }
func (a authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: a.CodeChallenge, Method: oidc.CodeChallengeMethodS256}
}
func (a authRequest) GetSubject() string {
	if a.AgentID == nil {
		return ""
	}
	return a.AgentID.String()
}

// refreshRequest is a refresh token's grant as the library reads it.
type refreshRequest struct {
	postgres.OAuthToken
	token  string // the refresh token presented, spent by the rotation
	scopes []string
}

func (r *refreshRequest) GetAMR() []string            { return nil }
func (r *refreshRequest) GetAudience() []string       { return []string{r.ClientID} }
func (r *refreshRequest) GetAuthTime() time.Time      { return r.CreatedAt }
func (r *refreshRequest) GetClientID() string         { return r.ClientID }
func (r *refreshRequest) GetScopes() []string         { return r.scopes }
func (r *refreshRequest) GetSubject() string          { return r.AgentID.String() }
func (r *refreshRequest) SetCurrentScopes(s []string) { r.scopes = s }

// resourceKey carries the RFC 8707 resource parameters of the request being served.
type resourceKey struct{}

func (st storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method=S256 is required")
	}
	resource, err := st.s.resourceOf(ctx)
	if err != nil {
		return nil, err
	}
	scopes := slices.Clone(req.Scopes)
	if !slices.Contains(scopes, oidc.ScopeOfflineAccess) {
		scopes = append(scopes, oidc.ScopeOfflineAccess) // every grant gets a refresh token
	}
	now := st.s.now()
	r := postgres.AuthRequest{
		ID: uuid.New(), ClientID: req.ClientID, RedirectUri: req.RedirectURI, State: req.State, Nonce: req.Nonce,
		Scopes: scopes, ResponseMode: string(req.ResponseMode), Resource: resource, CodeChallenge: req.CodeChallenge,
		CreatedAt: now, ExpiresAt: now.Add(AuthRequestTTL),
	}
	if err := st.s.store.InsertAuthRequest(ctx, r); err != nil {
		return nil, err
	}
	return authRequest{r}, nil
}

func (st storage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, errors.New("no such authorization request")
	}
	r, err := st.s.store.GetAuthRequest(ctx, u)
	if err != nil {
		return nil, err
	}
	if !st.s.now().Before(r.ExpiresAt) {
		return nil, errors.New("the authorization request expired")
	}
	return authRequest{r}, nil
}

func (st storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := st.s.store.AuthRequestByCode(ctx, code, st.s.now())
	if err != nil {
		return nil, err
	}
	if r.GrantID == nil || r.AgentID == nil {
		return nil, errors.New("the authorization request was not allowed")
	}
	return authRequest{r}, nil // the store refused it past its expiry (CodeTTL after its issue)
}

func (st storage) SaveAuthCode(ctx context.Context, id, code string) error {
	u, err := uuid.Parse(id)
	if err != nil {
		return err
	}
	return st.s.store.SaveAuthCode(ctx, u, code, st.s.now().Add(CodeTTL))
}

// DeleteAuthRequest is called once the code was exchanged: the exchange spent it already
// (IssueTokens), so the request stays, to recognise a replay of its code.
func (st storage) DeleteAuthRequest(context.Context, string) error { return nil }

func (st storage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, _, exp, err := st.CreateAccessAndRefreshTokens(ctx, req, "")
	return id, exp, err
}

// CreateAccessAndRefreshTokens issues an access token and the next refresh token, spending
// the code (an exchange) or the refresh token (a rotation) in the same transaction.
func (st storage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	now := st.s.now()
	issue := postgres.TokenIssue{
		AccessID: secret(), AccessExpires: now.Add(AccessTokenTTL),
		Refresh: credential.New(credential.PrefixRefresh), RefreshTTL: RefreshTokenTTL,
	}
	switch r := req.(type) {
	case authRequest:
		issue.Grant, issue.AuthRequestID, issue.ClientID = *r.GrantID, r.ID, r.ClientID
		issue.Agent, issue.Audience, issue.Scopes, issue.SpendCode = *r.AgentID, r.Resource, r.Scopes, true
	case *refreshRequest:
		issue.Grant, issue.AuthRequestID, issue.ClientID = r.GrantID, r.AuthRequestID, r.ClientID
		issue.Agent, issue.Audience, issue.Scopes, issue.SpendRefresh = r.AgentID, r.Audience, r.scopes, current
	default:
		return "", "", time.Time{}, oidc.ErrUnsupportedGrantType()
	}
	if asked := resourcesFrom(ctx); len(asked) > 0 && (len(asked) != 1 || asked[0] != issue.Audience) {
		return "", "", time.Time{}, oidc.ErrInvalidTarget().WithDescription("resource is not the one the grant was given for")
	}
	if err := st.s.store.IssueTokens(ctx, issue, now); err != nil {
		if hubu.ErrorCode(err) == hubu.CodeUnauthorized {
			st.s.log().WarnContext(ctx, "oauth: a code or refresh token was used twice; its grant is revoked",
				"grant", issue.Grant, "client_id", issue.ClientID)
			return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("the code or refresh token was used already; the grant is revoked")
		}
		return "", "", time.Time{}, err
	}
	return issue.AccessID, issue.Refresh, issue.AccessExpires, nil
}

// TokenRequestByRefreshToken reads a refresh token's grant. A token used already is a replay
// (RFC 9700 §4.14.2): the grant is revoked, and the legitimate holder signs in again.
func (st storage) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	t, err := st.s.store.OAuthToken(ctx, token)
	if err != nil || t.Kind != "refresh" {
		return nil, op.ErrInvalidRefreshToken
	}
	now := st.s.now()
	if t.UsedAt != nil {
		if err := st.s.store.RevokeGrant(ctx, t.GrantID, now); err != nil {
			return nil, err
		}
		st.s.log().WarnContext(ctx, "oauth: a refresh token was replayed; its grant is revoked", "grant", t.GrantID, "client_id", t.ClientID)
		return nil, op.ErrInvalidRefreshToken
	}
	if !live(t, now) {
		return nil, op.ErrInvalidRefreshToken
	}
	return &refreshRequest{OAuthToken: t, token: token, scopes: t.Scopes}, nil
}

func (st storage) TerminateSession(context.Context, string, string) error {
	return errors.New("no session ends this way: revoke the grant")
}

// RevokeToken is RFC 7009: revoking a refresh token revokes its grant (every token of it);
// revoking an access token ends that token. A token of another client, or none Hubu knows,
// changes nothing (and the client hears success, as the RFC says).
func (st storage) RevokeToken(ctx context.Context, tokenOrID, _, clientID string) *oidc.Error {
	t, err := st.s.store.OAuthToken(ctx, tokenOrID)
	if err != nil || t.ClientID != clientID {
		return nil
	}
	if t.Kind == "refresh" {
		err = st.s.store.RevokeGrant(ctx, t.GrantID, st.s.now())
	} else {
		err = st.s.store.DeleteAccessToken(ctx, tokenOrID)
	}
	if err != nil {
		return oidc.ErrServerError()
	}
	return nil
}

// GetRefreshTokenInfo lets the revocation endpoint tell a refresh token from an access token:
// the "token id" of a refresh token is the token itself.
func (st storage) GetRefreshTokenInfo(ctx context.Context, clientID, token string) (string, string, error) {
	t, err := st.s.store.OAuthToken(ctx, token)
	if err != nil || t.Kind != "refresh" || t.ClientID != clientID {
		return "", "", op.ErrInvalidRefreshToken
	}
	return t.AgentID.String(), token, nil
}

// signingKey is the Ed25519 key ID tokens are signed with.
type signingKey struct {
	id  string
	key ed25519.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.EdDSA }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct{ signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.EdDSA }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key.Public() }

func (st storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{st.s.keys.SigningKID, st.s.keys.Signing}, nil
}

func (st storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.EdDSA}, nil
}

func (st storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{signingKey{st.s.keys.SigningKID, st.s.keys.Signing}}}, nil
}

func (st storage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := st.s.client(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{c, st.s.issuer}, nil
}

// AuthorizeClientIDSecret: every client is public (PKCE, no secret).
func (st storage) AuthorizeClientIDSecret(context.Context, string, string) error {
	return oidc.ErrInvalidClient().WithDescription("Hubu's clients are public: no client secret is accepted")
}

// The claims about a person: an agent has no name or email to give a client, only its id.
func (st storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, userID, _ string, _ []string) error {
	info.Subject = userID
	return nil
}

func (st storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	info.Subject = subject
	return nil
}

// SetIntrospectionFromToken is the library's own introspection, which Hubu does not route:
// routers introspect at Hubu's /oauth/introspect with their credential.
func (st storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("introspection is served at /oauth/introspect")
}

func (st storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (st storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT client authentication is not supported")
}

func (st storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("the JWT profile grant is not supported")
}

func (st storage) Health(ctx context.Context) error { return st.s.store.Ping(ctx) }

// live reports whether a token is within its life and its grant valid at now.
func live(t postgres.OAuthToken, now time.Time) bool {
	return now.Before(t.ExpiresAt) && t.GrantRevokedAt == nil && (t.GrantExpiresAt == nil || now.Before(*t.GrantExpiresAt))
}

// secret is 256 random bits, URL-safe: an access token's id, which the library encrypts into
// the token; Hubu keeps its hash.
func secret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// splitBearer is the id and subject the library encrypted into an access token.
func splitBearer(plain string) (id, subject string, ok bool) {
	return strings.Cut(plain, ":")
}
