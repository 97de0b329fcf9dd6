// Package httpserver serves Hubu's HTTP API, the chi server interface generated from
// proto/hubu.openapi.yaml, with bearer authentication, the roles of each route in one table
// (routeRoles), strict decoding, problem+json errors, Prometheus metrics and health probes.
package httpserver

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	kitmetrics "hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/lifecycle"
	"hubu.dev/hubu/services/hubu/postgres"
)

// Server implements hubuapi.ServerInterface.
type Server struct {
	Store     *postgres.Store
	Lifecycle *lifecycle.Service
	Logger    *slog.Logger
	Now       func() time.Time
	// Console, when set, is the approval console, served at /console and below; its
	// paths are absolute, so it is not mounted under a stripped prefix.
	Console http.Handler
	// Images reads the images the executor keeps (nil: none to read, answered 503).
	Images hubu.Images
	// OAuth, when set, is the authorization server for routers in OAuth mode, at the paths
	// it lists (/.well-known/oauth-authorization-server and /oauth/…).
	OAuth interface {
		http.Handler
		Paths() []string
	}
	// DecisionKey, when set, signs a read capability for each agent's authorization and
	// resume (see decisionsig.ReadHeader), so that Gongbu lets the agent's router wait on the
	// operation without asking Hubu. It is the key Hubu signs decisions with.
	DecisionKey ed25519.PrivateKey
	metrics     *metrics
}

var _ hubuapi.ServerInterface = (*Server)(nil)

// Handler returns the HTTP handler with every route, registering metrics on reg.
func (s *Server) Handler(reg prometheus.Registerer) http.Handler {
	s.metrics = newMetrics(reg)
	r := chi.NewRouter()
	r.Use(s.recoverer, s.instrument)
	if g, ok := reg.(prometheus.Gatherer); ok {
		r.Handle("/metrics", kitmetrics.Handler(g)) // at most kitmetrics.MaxScrapesInFlight at once
	}
	if s.OAuth != nil {
		for _, p := range s.OAuth.Paths() {
			r.Handle(p, s.OAuth)
		}
	}
	if s.Console != nil {
		r.Handle("/console", s.Console)
		r.Handle("/console/*", s.Console)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, hubu.Errorf(hubu.CodeNotFound, "no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		if allow := allowedMethods(r, req.URL.Path); allow != "" {
			w.Header().Set("Allow", allow) // RFC 9110: a 405 says which methods the route takes
		}
		s.writeError(w, req, hubu.Errorf(hubu.CodeMethodNotAllowed, "this route does not take %s", req.Method))
	})
	return hubuapi.HandlerWithOptions(s, hubuapi.ChiServerOptions{
		BaseRouter:  r,
		Middlewares: []hubuapi.MiddlewareFunc{s.authenticate},
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			s.writeError(w, r, invalid("bad request parameter: %s", paramName(err)))
		},
	})
}

// allowedMethods lists the methods the router takes on path, for a 405's Allow header.
func allowedMethods(r *chi.Mux, path string) string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if r.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
		}
	}
	return strings.Join(allowed, ", ")
}

type principalKey struct{}

// routeRoles is who may call each /v1 route: authenticate checks it, so no handler runs
// for a caller whose role is not listed, nor for a route missing here.
var routeRoles = map[string][]hubu.Role{
	"POST /v1/authorizations":                     {hubu.RoleAgent},
	"GET /v1/capabilities":                        {hubu.RoleAgent},
	"GET /v1/operations/{public_handle}":          {hubu.RoleAgent, hubu.RoleOperator},
	"POST /v1/operations/{public_handle}/resume":  {hubu.RoleAgent},
	"GET /v1/operations/{public_handle}/ledger":   {hubu.RoleAgent, hubu.RoleOperator},
	"GET /v1/operations/{public_handle}/image":    {hubu.RoleAgent, hubu.RoleOperator},
	"POST /v1/operations/{public_handle}/approve": {hubu.RoleOperator},
	"POST /v1/operations/{public_handle}/deny":    {hubu.RoleOperator},
	"GET /v1/approvals":                           {hubu.RoleOperator},
	"GET /v1/agents":                              {hubu.RoleOperator},
	"POST /v1/agents":                             {hubu.RoleOperator},
	"GET /v1/agents/{agent_id}":                   {hubu.RoleOperator},
	"PUT /v1/agents/{agent_id}/policy":            {hubu.RoleOperator},
	"PUT /v1/agents/{agent_id}/account":           {hubu.RoleOperator},
	"POST /v1/agents/{agent_id}/invites":          {hubu.RoleOperator},
	"PUT /v1/agents/{agent_id}/owner":             {hubu.RoleOperator},
	"GET /v1/prices":                              {hubu.RoleOperator, hubu.RoleAgent},
	"PUT /v1/prices":                              {hubu.RoleOperator},
	"GET /v1/credentials":                         {hubu.RoleOperator},
	"POST /v1/credentials/{credential_id}/revoke": {hubu.RoleOperator},
	"POST /v1/credentials/{credential_id}/rotate": {hubu.RoleOperator},
	"GET /v1/decisions":                           {hubu.RoleService},
	"GET /v1/decision-keys":                       {hubu.RoleService},
	"GET /v1/decisions/{decision_id}":             {hubu.RoleService},
	"POST /v1/decisions/{decision_id}/settle":     {hubu.RoleService},
	"POST /v1/decisions/{decision_id}/release":    {hubu.RoleService},
}

// authenticate resolves the bearer token of every /v1 request into a principal and refuses
// the roles routeRoles does not list for the route. The agent of a request is always the
// one its credential names.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			s.writeError(w, r, hubu.Errorf(hubu.CodeUnauthorized, "a bearer token is required"))
			return
		}
		p, err := s.Store.Authenticate(r.Context(), token, s.Now())
		if err == nil {
			p, err = s.actFor(r, p)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !slices.Contains(routeRoles[r.Method+" "+routeOf(r)], p.Role) {
			s.writeError(w, r, hubu.Errorf(hubu.CodeForbidden, "this credential may not do that"))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// principal is the caller, whose role authenticate has checked.
func principal(r *http.Request) hubu.Principal {
	p, _ := r.Context().Value(principalKey{}).(hubu.Principal)
	return p
}

func (s *Server) GetHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, hubuapi.Health{Status: hubuapi.Ok})
}

func (s *Server) GetReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Store.Ping(ctx); err != nil {
		s.logger().WarnContext(ctx, "not ready: database unreachable", "err", err)
		s.writeError(w, r, hubu.Errorf(hubu.CodeUnavailable, "the database is not reachable"))
		return
	}
	writeJSON(w, http.StatusOK, hubuapi.Health{Status: hubuapi.Ok})
}

// respond writes v with status, or err as a problem when it is set (v is then ignored).
func (s *Server) respond(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

// each converts every element of xs with f; the result is never nil, so an empty list is [].
func each[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func reasonOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// actFor is the principal a request acts as: its credential's own, or, for a router's
// credential that names a grant (contract.GrantHeader), the grant's agent while the grant is
// valid. A grant named beside any other credential is refused, and so is a router's
// credential that names none: alone it may only introspect tokens (at /oauth/introspect).
func (s *Server) actFor(r *http.Request, p hubu.Principal) (hubu.Principal, error) {
	grant := r.Header.Get(contract.GrantHeader)
	switch {
	case grant == "" && p.Role != hubu.RoleRouter:
		return p, nil
	case grant == "":
		return p, hubu.Errorf(hubu.CodeForbidden, "a router's credential acts only for the grant a request names (%s)", contract.GrantHeader)
	case p.Role != hubu.RoleRouter:
		return p, hubu.Errorf(hubu.CodeForbidden, "only a router's credential may act for a grant")
	}
	id, err := uuid.Parse(grant)
	if err != nil {
		return p, hubu.Errorf(hubu.CodeUnauthorized, "%s is not a grant id", contract.GrantHeader)
	}
	return s.Store.AuthenticateGrant(r.Context(), id, s.Now())
}
