// Package oauthrs makes the HTTP router an OAuth protected resource (the MCP authorization
// specification): a request without a valid token is answered 401 with the URL of the
// router's protected resource metadata (RFC 9728), which names Hubu as the authorization
// server. A token is valid when Hubu's introspection (RFC 7662) says it is active and bound to
// this router (its audience is the router's resource URL, RFC 8707); it then acts for the
// agent of the person who signed in, through the grant it belongs to.
//
// The static token (ROUTER_MCP_TOKEN) may be accepted beside OAuth tokens: it acts for the
// router's own agent (HUBU_AGENT_TOKEN), as in a single-user stack.
package oauthrs

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"hubu.dev/hubu/router/mcpserver"
)

// CacheFor is the longest an active introspection answer is used again: a revoked grant is
// refused by the router within this long (Hubu refuses its calls at once).
const CacheFor = 5 * time.Second

// Scope is the scope Hubu's tokens carry.
const Scope = "hubu"

// Config is a protected resource's settings.
type Config struct {
	// Resource is the router's resource URL: its public /mcp URL, as clients reach it.
	Resource string
	// Issuer is Hubu's public issuer URL (the authorization server clients sign in at).
	Issuer string
	// IntrospectionURL is Hubu's /oauth/introspect as the router reaches it.
	IntrospectionURL string
	// RouterToken is the router's own Hubu credential: it introspects, and forwards calls for grants.
	RouterToken string
	// StaticToken, when set, is accepted too, acting for the router's own agent.
	StaticToken string
	Client      *http.Client
	Now         func() time.Time
}

// Resource is the protected resource: a token verifier with its cache, and the metadata.
type Resource struct {
	cfg      Config
	static   [32]byte
	mu       sync.Mutex
	cache    map[[32]byte]cached
	metadata *oauthex.ProtectedResourceMetadata
}

type cached struct {
	info  *auth.TokenInfo
	until time.Time
}

// New checks cfg and returns the protected resource.
func New(cfg Config) (*Resource, error) {
	u, err := url.Parse(cfg.Resource)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Fragment != "" {
		return nil, fmt.Errorf("the resource %q is not the router's absolute /mcp URL", cfg.Resource)
	}
	if cfg.Issuer == "" || cfg.IntrospectionURL == "" || cfg.RouterToken == "" {
		return nil, fmt.Errorf("OAuth mode needs Hubu's issuer URL, its introspection URL and the router's credential")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Resource{cfg: cfg, cache: map[[32]byte]cached{}, static: sha256.Sum256([]byte(cfg.StaticToken))}
	r.metadata = &oauthex.ProtectedResourceMetadata{
		Resource: cfg.Resource, AuthorizationServers: []string{strings.TrimRight(cfg.Issuer, "/")},
		ScopesSupported: []string{Scope}, BearerMethodsSupported: []string{"header"}, ResourceName: "Hubu",
	}
	return r, nil
}

// MetadataPath is where the protected resource metadata is served (RFC 9728 §3.1: the
// well-known prefix inserted before the resource's path).
func (r *Resource) MetadataPath() string {
	u, _ := url.Parse(r.cfg.Resource)
	return "/.well-known/oauth-protected-resource" + strings.TrimRight(u.Path, "/")
}

// MetadataURL is the metadata's absolute URL, for WWW-Authenticate.
func (r *Resource) MetadataURL() string {
	u, _ := url.Parse(r.cfg.Resource)
	return u.Scheme + "://" + u.Host + r.MetadataPath()
}

// MetadataHandler serves the protected resource metadata.
func (r *Resource) MetadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(r.metadata)
}

// Require wraps the MCP handler: every request needs a valid token. A token that cannot be
// checked now (Hubu unreachable) is answered 503 with Retry-After, not 401: the client keeps its
// token and tries again.
func (r *Resource) Require(next http.Handler) http.Handler {
	checked := auth.RequireBearerToken(r.Verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: r.MetadataURL()})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			if _, err := r.Verify(req.Context(), strings.TrimSpace(token), req); err != nil && !errors.Is(err, auth.ErrInvalidToken) {
				w.Header().Set("Retry-After", "1")
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		checked.ServeHTTP(w, req) // verified again from the cache, or refused with the challenge
	})
}

// Verify is the token verifier (auth.TokenVerifier).
func (r *Resource) Verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	if r.cfg.StaticToken != "" && subtle.ConstantTimeCompare(sum[:], r.static[:]) == 1 {
		return &auth.TokenInfo{Scopes: []string{Scope}, Expiration: r.cfg.Now().Add(time.Hour)}, nil
	}
	now := r.cfg.Now()
	r.mu.Lock()
	c, ok := r.cache[sum]
	if ok && now.After(c.until) {
		delete(r.cache, sum)
		ok = false
	}
	r.mu.Unlock()
	if ok {
		return c.info, nil
	}
	info, err := r.introspect(ctx, token)
	if err != nil {
		return nil, err
	}
	until := now.Add(CacheFor)
	if info.Expiration.Before(until) {
		until = info.Expiration
	}
	r.mu.Lock()
	if len(r.cache) > 10_000 { // a bound, not a policy: the next requests introspect again
		clear(r.cache)
	}
	r.cache[sum] = cached{info, until}
	r.mu.Unlock()
	return info, nil
}

// introspection is the part of RFC 7662's answer the router reads.
type introspection struct {
	Active   bool   `json:"active"`
	Sub      string `json:"sub"`
	Aud      any    `json:"aud"` // a string or an array (RFC 7662 §2.2)
	Scope    string `json:"scope"`
	Exp      int64  `json:"exp"`
	ClientID string `json:"client_id"`
	Grant    string `json:"hubu_grant"`
}

func (r *Resource) introspect(ctx context.Context, token string) (*auth.TokenInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.IntrospectionURL, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+r.cfg.RouterToken)
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return nil, errors.New("the token cannot be checked: Hubu cannot be reached")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the token was not checked: Hubu answered %d (is the router's credential valid?)", resp.StatusCode)
	}
	var in introspection
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&in); err != nil {
		return nil, errors.New("the introspection answer from Hubu is unreadable")
	}
	if !in.Active {
		return nil, fmt.Errorf("%w: the token is not active", auth.ErrInvalidToken)
	}
	if !audienceIs(in.Aud, r.cfg.Resource) {
		return nil, fmt.Errorf("%w: the token is for another resource", auth.ErrInvalidToken)
	}
	if in.Sub == "" || in.Grant == "" || in.Exp == 0 {
		return nil, fmt.Errorf("%w: the token names no agent or grant", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{
		Scopes: strings.Fields(in.Scope), Expiration: time.Unix(in.Exp, 0), UserID: in.Sub,
		Extra: map[string]any{mcpserver.GrantKey: in.Grant, "client_id": in.ClientID},
	}, nil
}

// audienceIs reports whether aud (a string or a list) names resource (a trailing slash aside).
func audienceIs(aud any, resource string) bool {
	var list []string
	switch v := aud.(type) {
	case string:
		list = []string{v}
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				list = append(list, s)
			}
		}
	}
	return oauthex.MatchesResource(list, resource)
}
