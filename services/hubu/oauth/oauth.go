// Package oauth is Hubu's OAuth 2.1 authorization server for the routers a team runs (the MCP
// authorization specification): a person signs in as their agent (a one-time code an operator
// issued, or the team's OpenID Connect provider), allows a client, and the client's tokens act
// for that agent through a router, bound to it (RFC 8707). The protocol (authorize, token,
// revoke) is the zitadel/oidc library's; Hubu adds registration (RFC 7591), client ID metadata
// documents, the metadata (RFC 8414), the sign-in and consent pages, and the introspection
// routers use (RFC 7662). Every grant is one of the agent's credentials.
package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rs/cors"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"hubu.dev/hubu/services/hubu/oauth/upstream"
	"hubu.dev/hubu/services/hubu/postgres"
)

// Lifetimes.
const (
	AuthRequestTTL    = 10 * time.Minute // from /oauth/authorize to the code's exchange
	CodeTTL           = time.Minute      // a code, from its issue
	AccessTokenTTL    = time.Hour
	RefreshTokenTTL   = 30 * 24 * time.Hour
	BrowserSessionTTL = 12 * time.Hour
)

// Paths.
const (
	metadataPath   = "/.well-known/oauth-authorization-server"
	authorizePath  = "/oauth/authorize"
	callbackPath   = "/oauth/authorize/callback"
	tokenPath      = "/oauth/token"
	revokePath     = "/oauth/revoke"
	keysPath       = "/oauth/keys"
	registerPath   = "/oauth/register"
	introspectPath = "/oauth/introspect"
	signInPath     = "/oauth/signin"
	oidcPath       = "/oauth/signin/oidc"
	oidcReturnPath = "/oauth/signin/oidc/callback"
	consentPath    = "/oauth/consent"
)

// Config is the authorization server's settings.
type Config struct {
	// Issuer is Hubu's public URL (https; http only on a loopback address), as clients reach it.
	Issuer string
	// Resources are the routers' resource URLs (their /mcp URL) tokens may be issued for.
	Resources []string
	Store     *postgres.Store
	Logger    *slog.Logger
	Now       func() time.Time
	// MetadataClient fetches client ID metadata documents; it must refuse private addresses
	// (MetadataHTTPClient). nil: MetadataHTTPClient().
	MetadataClient *http.Client
	// Upstream, when set, is the team's OpenID Connect provider people may sign in with.
	Upstream *upstream.Provider
}

// Server is the authorization server.
type Server struct {
	issuer    string
	resources []string
	store     *postgres.Store
	logger    *slog.Logger
	now       func() time.Time
	keys      postgres.OAuthKeys
	provider  *op.Provider
	fetch     *http.Client
	upstream  *upstream.Provider
	secure    bool // cookies are Secure (an https issuer)
}

// New returns the authorization server, making its keys on first use.
func New(ctx context.Context, cfg Config) (*Server, error) {
	issuer := strings.TrimRight(cfg.Issuer, "/")
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("the OAuth issuer %q is not an absolute URL", cfg.Issuer)
	}
	insecure := u.Scheme == "http" && isLoopbackHost(u.Hostname())
	if u.Scheme != "https" && !insecure {
		return nil, fmt.Errorf("the OAuth issuer must be https (http only on a loopback address): %s", issuer)
	}
	if len(cfg.Resources) == 0 {
		return nil, errors.New("the authorization server needs the resource URL of at least one router")
	}
	for _, r := range cfg.Resources {
		if ru, err := url.Parse(r); err != nil || ru.Host == "" || ru.Fragment != "" || (ru.Scheme != "https" && !(ru.Scheme == "http" && isLoopbackHost(ru.Hostname()))) {
			return nil, fmt.Errorf("the router resource %q must be an https URL (http only on a loopback address)", r)
		}
	}
	s := &Server{
		issuer: issuer, resources: slices.Clone(cfg.Resources), store: cfg.Store, logger: cfg.Logger, now: cfg.Now,
		fetch: cfg.MetadataClient, upstream: cfg.Upstream, secure: u.Scheme == "https",
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.fetch == nil {
		s.fetch = MetadataHTTPClient()
	}
	if s.keys, err = cfg.Store.OAuthKeys(ctx, s.now()); err != nil {
		return nil, err
	}
	opts := []op.Option{
		op.WithCustomAuthEndpoint(op.NewEndpoint(authorizePath)),
		op.WithCustomTokenEndpoint(op.NewEndpoint(tokenPath)),
		op.WithCustomRevocationEndpoint(op.NewEndpoint(revokePath)),
		op.WithCustomKeysEndpoint(op.NewEndpoint(keysPath)),
		// Not routed (Hubu serves only the paths above): the library's own introspection,
		// user info and end-session endpoints.
		op.WithCustomIntrospectionEndpoint(op.NewEndpoint("/oauth/library/introspect")),
		op.WithCustomUserinfoEndpoint(op.NewEndpoint("/oauth/library/userinfo")),
		op.WithCustomEndSessionEndpoint(op.NewEndpoint("/oauth/library/end_session")),
	}
	if insecure {
		opts = append(opts, op.WithAllowInsecure())
	}
	// Browser clients (the MCP Inspector) call the token and revocation endpoints from their
	// own origin; none of them takes a cookie, so no origin is answered with credentials.
	opts = append(opts, op.WithCORSOptions(&cors.Options{
		AllowOriginFunc: func(string) bool { return true }, AllowCredentials: false,
		AllowedMethods: []string{http.MethodGet, http.MethodPost}, AllowedHeaders: []string{"Content-Type", "Authorization"},
	}))
	s.provider, err = op.NewProvider(&op.Config{
		CryptoKey: s.keys.Crypto, CodeMethodS256: true, GrantTypeRefreshToken: true,
		SupportedScopes: []string{ScopeHubu, oidc.ScopeOfflineAccess},
	}, storage{s}, op.StaticIssuer(issuer), opts...)
	if err != nil {
		return nil, fmt.Errorf("oauth provider: %w", err)
	}
	return s, nil
}

func (s *Server) log() *slog.Logger {
	if s.logger == nil {
		return slog.Default()
	}
	return s.logger
}

// Paths is every path the server answers, for Hubu's router to mount.
func (s *Server) Paths() []string {
	return []string{metadataPath, authorizePath, callbackPath, tokenPath, revokePath, keysPath, registerPath,
		introspectPath, signInPath, oidcPath, oidcReturnPath, consentPath}
}

// ServeHTTP serves the authorization server's paths.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case metadataPath:
		s.cors(w, r, s.metadata)
	case registerPath:
		s.cors(w, r, s.register)
	case introspectPath:
		s.introspect(w, r)
	case authorizePath:
		s.authorize(&issWriter{ResponseWriter: w, iss: s.issuer}, r)
	case callbackPath:
		if s.sameBrowser(w, r) {
			s.provider.ServeHTTP(&issWriter{ResponseWriter: w, iss: s.issuer}, r)
		}
	case tokenPath:
		s.withResources(w, r, s.provider.ServeHTTP)
	case revokePath, keysPath:
		s.provider.ServeHTTP(w, r)
	case signInPath:
		s.signIn(w, r)
	case oidcPath:
		s.signInUpstream(w, r)
	case oidcReturnPath:
		s.upstreamReturn(w, r)
	case consentPath:
		s.consent(w, r)
	default:
		http.NotFound(w, r)
	}
}

// metadata is RFC 8414's authorization server metadata.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.issuer,
		"authorization_endpoint":                         s.issuer + authorizePath,
		"token_endpoint":                                 s.issuer + tokenPath,
		"registration_endpoint":                          s.issuer + registerPath,
		"revocation_endpoint":                            s.issuer + revokePath,
		"introspection_endpoint":                         s.issuer + introspectPath,
		"jwks_uri":                                       s.issuer + keysPath,
		"scopes_supported":                               []string{ScopeHubu, oidc.ScopeOfflineAccess},
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"introspection_endpoint_auth_methods_supported":  []string{"bearer"},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
		"service_documentation":                          "https://github.com/hubu-dev/hubu/blob/main/docs/remote-clients.md",
	})
}

// authorize checks what the library leaves to Hubu before it takes the request: a scope (the
// library refuses none; OAuth 2.1 lets a client leave it out, and Hubu has one), and the
// resource the tokens will be for.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the request's parameters cannot be read", http.StatusBadRequest)
		return
	}
	if r.Form.Get("scope") == "" {
		q := r.URL.Query()
		q.Set("scope", ScopeHubu)
		r.URL.RawQuery = q.Encode()
		r.Form.Set("scope", ScopeHubu)
	}
	s.withResources(w, r, s.provider.ServeHTTP)
}

// withResources puts the request's RFC 8707 resource parameters in its context, for storage.
func (s *Server) withResources(w http.ResponseWriter, r *http.Request, next http.HandlerFunc) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the request's parameters cannot be read", http.StatusBadRequest)
		return
	}
	next(w, r.WithContext(context.WithValue(r.Context(), resourceKey{}, r.Form["resource"])))
}

func resourcesFrom(ctx context.Context) []string {
	v, _ := ctx.Value(resourceKey{}).([]string)
	return v
}

// resourceOf is the one router an authorization request's tokens are for: the resource it
// names, which must be one Hubu issues tokens for. A request that names none gets the only
// router when there is one (a client that predates RFC 8707), and is refused when there are
// several.
func (s *Server) resourceOf(ctx context.Context) (string, error) {
	asked := resourcesFrom(ctx)
	switch {
	case len(asked) == 0 && len(s.resources) == 1:
		return s.resources[0], nil
	case len(asked) == 0:
		return "", oidc.ErrInvalidRequest().WithDescription("name the router the tokens are for in the resource parameter (RFC 8707)")
	case len(asked) > 1:
		return "", oidc.ErrInvalidTarget().WithDescription("one resource per authorization: each router gets tokens of its own")
	}
	want := strings.TrimRight(asked[0], "/")
	for _, r := range s.resources {
		if strings.TrimRight(r, "/") == want {
			return r, nil
		}
	}
	return "", oidc.ErrInvalidTarget().WithDescription("Hubu issues no tokens for that resource")
}

// issWriter adds RFC 9207's iss to the authorization response the library redirects with, so
// that a client talking to several authorization servers can tell whose code it holds.
type issWriter struct {
	http.ResponseWriter
	iss string
}

func (w *issWriter) WriteHeader(status int) {
	if status == http.StatusFound || status == http.StatusSeeOther {
		// Only a redirect to the client (an answer, code or error); not one to Hubu's own pages.
		if loc, err := url.Parse(w.Header().Get("Location")); err == nil && loc.IsAbs() && !strings.HasPrefix(loc.String(), w.iss+"/") && loc.Query().Get("iss") == "" {
			q := loc.Query()
			q.Set("iss", w.iss)
			loc.RawQuery = q.Encode()
			w.Header().Set("Location", loc.String())
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

// cors lets browser-based clients (the MCP Inspector) read the metadata and register: neither
// takes cookies or credentials.
func (s *Server) cors(w http.ResponseWriter, r *http.Request, next http.HandlerFunc) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	next(w, r)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
