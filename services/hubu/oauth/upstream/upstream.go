// Package upstream delegates a person's sign-in to the team's own OpenID Connect provider: Hubu is
// a relying party there (authorization code flow with PKCE S256, state and nonce) and learns the
// person's verified email, which the caller maps to an agent. It never logs: codes, tokens and
// the PKCE verifier pass through it and must stay out of every log.
package upstream

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Config names the provider and Hubu's client there.
type Config struct {
	// Issuer is the provider's issuer URL, exactly as its discovery document states it
	// (a trailing slash matters).
	Issuer string
	// ClientID and ClientSecret are Hubu's client at the provider. The client id is the
	// audience every ID token must carry.
	ClientID, ClientSecret string
	// RedirectURL is Hubu's callback (…/oauth/signin/oidc/callback), registered at the provider.
	RedirectURL string
	// HTTPClient makes every request to the provider: discovery, keys, token, userinfo.
	// Default: a client with a 10 s timeout.
	HTTPClient *http.Client
}

// Provider is a discovered OpenID Connect provider with Hubu's client at it. It is safe for
// concurrent use and keeps no per-sign-in state: that is the caller's Pending.
type Provider struct {
	issuer   string
	client   *http.Client
	oidc     *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth2   oauth2.Config
}

// Pending is one sign-in between Begin and Finish. The caller keeps it server-side (never in
// the browser) and passes it to Finish once; all three values are secrets.
type Pending struct {
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"` // PKCE code verifier
}

// Identity is the person the provider signed in.
type Identity struct {
	Subject       string // the provider's stable id for the person
	Email         string // as the provider gave it; compare case-insensitively
	EmailVerified bool   // always true in an Identity that Finish returns
}

// ErrEmailNotVerified is a completed sign-in that names no email, or one whose email the
// provider does not say it verified (email_verified is not true): the person should verify
// it at their provider. Test with errors.Is.
var ErrEmailNotVerified = errors.New("the identity provider did not verify the email")

// ErrStateMismatch is a callback that does not belong to the pending sign-in (a forged or
// replayed callback, or one from another browser tab).
var ErrStateMismatch = errors.New("the callback does not match the pending sign-in")

// ProviderError is the provider's own refusal on the callback (RFC 6749 §4.1.2.1), such as
// access_denied when the person cancelled. Description is the provider's text, not Hubu's.
type ProviderError struct {
	Code, Description string
}

func (e *ProviderError) Error() string {
	if e.Description == "" {
		return "the identity provider refused the sign-in: " + e.Code
	}
	return fmt.Sprintf("the identity provider refused the sign-in: %s (%s)", e.Code, e.Description)
}

// New discovers the provider at cfg.Issuer (its /.well-known/openid-configuration) and
// checks that the document names that issuer.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	switch {
	case cfg.Issuer == "":
		return nil, errors.New("upstream: no issuer")
	case cfg.ClientID == "":
		return nil, errors.New("upstream: no client id")
	case cfg.RedirectURL == "":
		return nil, errors.New("upstream: no redirect URL")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	// The provider keeps the client from this context for its key set, too.
	op, err := oidc.NewProvider(oidc.ClientContext(ctx, cfg.HTTPClient), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("upstream: discover %s: %w", cfg.Issuer, err)
	}
	return &Provider{
		issuer:   cfg.Issuer,
		client:   cfg.HTTPClient,
		oidc:     op,
		verifier: op.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
		oauth2: oauth2.Config{
			ClientID:     cfg.ClientID,
			ClientSecret: cfg.ClientSecret,
			Endpoint:     op.Endpoint(),
			RedirectURL:  cfg.RedirectURL,
			Scopes:       []string{oidc.ScopeOpenID, "email"},
		},
	}, nil
}

// Begin starts a sign-in: the URL to send the browser to, and what the caller keeps until
// the callback.
func (p *Provider) Begin() (authURL string, pending Pending) {
	pending = Pending{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier()}
	authURL = p.oauth2.AuthCodeURL(pending.State,
		oidc.Nonce(pending.Nonce),
		oauth2.S256ChallengeOption(pending.Verifier))
	return authURL, pending
}

// Finish completes the sign-in from the callback's query: it checks the state, redeems the
// code with the PKCE verifier, verifies the ID token (signature, issuer, audience, expiry,
// nonce) and returns the person, whose email must be verified. A pending sign-in is good for
// one Finish, whatever its outcome.
func (p *Provider) Finish(ctx context.Context, pending Pending, query url.Values) (Identity, error) {
	if pending.State == "" || pending.Nonce == "" || pending.Verifier == "" {
		return Identity{}, errors.New("upstream: incomplete pending sign-in")
	}
	if !equal(query.Get("state"), pending.State) {
		return Identity{}, ErrStateMismatch
	}
	// RFC 9207: a provider that names itself on the callback must be this one (mix-up defence).
	if iss := query.Get("iss"); iss != "" && iss != p.issuer {
		return Identity{}, fmt.Errorf("upstream: the callback names issuer %q, want %q", iss, p.issuer)
	}
	if code := query.Get("error"); code != "" {
		return Identity{}, &ProviderError{Code: code, Description: query.Get("error_description")}
	}
	code := query.Get("code")
	if code == "" {
		return Identity{}, errors.New("upstream: the callback carries no code")
	}

	ctx = oidc.ClientContext(ctx, p.client)
	token, err := p.oauth2.Exchange(ctx, code, oauth2.VerifierOption(pending.Verifier))
	if err != nil {
		return Identity{}, fmt.Errorf("upstream: redeem the code: %w", err)
	}
	rawIDToken, _ := token.Extra("id_token").(string)
	if rawIDToken == "" {
		return Identity{}, errors.New("upstream: the token response has no ID token")
	}
	idToken, err := p.verifier.Verify(ctx, rawIDToken)
	if err != nil {
		return Identity{}, fmt.Errorf("upstream: ID token: %w", err)
	}
	if !equal(idToken.Nonce, pending.Nonce) {
		return Identity{}, errors.New("upstream: the ID token's nonce is not the pending sign-in's")
	}
	var claims struct {
		AuthorizedParty string     `json:"azp"`
		Email           *string    `json:"email"`
		EmailVerified   *looseBool `json:"email_verified"`
	}
	if err := idToken.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("upstream: ID token claims: %w", err)
	}
	// OpenID Connect Core §3.1.3.7: a token for several audiences names the party it is for.
	if len(idToken.Audience) > 1 && claims.AuthorizedParty != p.oauth2.ClientID {
		return Identity{}, fmt.Errorf("upstream: the ID token's authorized party is %q, not this client", claims.AuthorizedParty)
	}
	if idToken.AccessTokenHash != "" {
		if err := idToken.VerifyAccessToken(token.AccessToken); err != nil {
			return Identity{}, fmt.Errorf("upstream: ID token: %w", err)
		}
	}

	id := Identity{Subject: idToken.Subject}
	if claims.Email != nil && claims.EmailVerified != nil {
		id.Email, id.EmailVerified = *claims.Email, bool(*claims.EmailVerified)
	} else {
		// A provider may keep the scope's claims out of an ID token issued with an access
		// token (OpenID Connect Core §5.4) and give them at the userinfo endpoint instead.
		info, err := p.oidc.UserInfo(ctx, oauth2.StaticTokenSource(token))
		if err != nil {
			return Identity{}, fmt.Errorf("upstream: userinfo: %w", err)
		}
		// §5.3.2: userinfo about someone else is not to be used.
		if info.Subject != idToken.Subject {
			return Identity{}, errors.New("upstream: userinfo names another subject than the ID token")
		}
		id.Email, id.EmailVerified = info.Email, info.EmailVerified
	}
	switch {
	case id.Email == "":
		return Identity{}, fmt.Errorf("%w: no email claim", ErrEmailNotVerified)
	case !id.EmailVerified:
		return Identity{}, fmt.Errorf("%w: email_verified is not true", ErrEmailNotVerified)
	}
	return id, nil
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// looseBool reads a JSON boolean, or the strings "true" and "false" that some providers
// send for email_verified.
type looseBool bool

func (b *looseBool) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case bool:
		*b = looseBool(v)
	case string:
		*b = looseBool(v == "true")
	default:
		return fmt.Errorf("email_verified is %s, not a boolean", data)
	}
	return nil
}
