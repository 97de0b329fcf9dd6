// Package httpserver serves Hubu's HTTP API, the chi server interface generated from
// proto/hubu.openapi.yaml, with bearer authentication, the roles of each route in one table
// (routeRoles), strict decoding, problem+json errors, Prometheus metrics and health probes.
package httpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	kitmetrics "hubu.dev/hubu/kit/metrics"
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
	Images  hubu.Images
	metrics *metrics
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
	"GET /v1/prices":                              {hubu.RoleOperator, hubu.RoleAgent},
	"PUT /v1/prices":                              {hubu.RoleOperator},
	"GET /v1/credentials":                         {hubu.RoleOperator},
	"POST /v1/credentials/{credential_id}/revoke": {hubu.RoleOperator},
	"POST /v1/credentials/{credential_id}/rotate": {hubu.RoleOperator},
	"GET /v1/decisions":                           {hubu.RoleService},
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

func (s *Server) Authorize(w http.ResponseWriter, r *http.Request) {
	var body hubuapi.AuthorizeRequest
	if err := decode(w, r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := authorizeRequestOf(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op, replayed, err := s.Lifecycle.Authorize(r.Context(), principal(r).AgentID, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	w.Header().Set("Idempotent-Replayed", "false")
	if replayed {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	} else {
		s.metrics.decisions.WithLabelValues(string(op.State)).Inc()
	}
	writeJSON(w, status, operationOf(op))
}

func (s *Server) GetCapabilities(w http.ResponseWriter, r *http.Request) {
	c, err := s.Store.Capabilities(r.Context(), principal(r).AgentID, s.Now())
	s.respond(w, r, http.StatusOK, hubuapi.Capabilities{
		AgentId: c.Agent.ID, AgentName: c.Agent.Name, Account: c.Agent.Account,
		Tools:                     []hubuapi.Tool{hubuapi.GenerateImage},
		Prices:                    each(c.Prices, priceOf),
		AutoApproveLimitMicros:    c.Agent.Policy.AutoApproveLimitMicros,
		PerOperationCeilingMicros: c.Agent.Policy.PerOperationCeilingMicros,
		Budget: hubuapi.Budget{
			Period: hubuapi.BudgetPeriod(c.Budget.Period), PeriodStart: c.Budget.PeriodStart, LimitMicros: c.Budget.LimitMicros,
			UsedMicros: c.Budget.UsedMicros, RemainingMicros: c.Budget.RemainingMicros, Currency: c.Budget.Currency,
		},
	}, err)
}

func (s *Server) GetOperation(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.Store.GetOperation(r.Context(), principal(r), handle, s.Now())
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

// GetOperationImage serves an operation's image from the executor, to whoever may read the
// operation: its agent, or an operator.
func (s *Server) GetOperationImage(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle, params hubuapi.GetOperationImageParams) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.Store.GetOperation(r.Context(), principal(r), handle, s.Now()); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.Images == nil {
		s.writeError(w, r, hubu.Errorf(hubu.CodeUnavailable, "this Hubu has no executor to read images from"))
		return
	}
	img, err := s.Images.Image(r.Context(), handle, params.Preview != nil && *params.Preview)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", img.MIMEType)
	if img.ETag != "" {
		h.Set("ETag", img.ETag)
	}
	h.Set("Cache-Control", "private, max-age=86400, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(img.Bytes)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(img.Bytes)
}

func (s *Server) ResumeOperation(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.Lifecycle.Resume(r.Context(), principal(r), handle)
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

func (s *Server) GetOperationLedger(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, entries, err := s.Store.Ledger(r.Context(), principal(r), handle, s.Now())
	s.respond(w, r, http.StatusOK, hubuapi.Ledger{
		PublicHandle: op.PublicHandle, State: hubuapi.OperationState(op.State),
		AmountMicros: op.AmountMicros, Currency: op.Currency, ProviderCostMicros: op.ProviderCostMicros,
		HeldMicros: op.HeldMicros, CapturedMicros: op.CapturedMicros, ReleasedMicros: op.ReleasedMicros,
		Entries: each(entries, func(e hubu.LedgerEntry) hubuapi.LedgerEntry {
			return hubuapi.LedgerEntry{Id: e.ID, Kind: hubuapi.LedgerEntryKind(e.Kind), AmountMicros: e.AmountMicros, Currency: e.Currency, CreatedAt: e.CreatedAt}
		}),
	}, err)
}

func (s *Server) ApproveOperation(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	who := principal(r)
	op, err := s.Store.Approve(r.Context(), who.Name, handle, s.Now())
	if err == nil {
		s.logger().InfoContext(r.Context(), "operation approved", "public_handle", op.PublicHandle, "operator", who.Name)
	}
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

func (s *Server) DenyOperation(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	err := validateHandle(handle)
	var body hubuapi.DenyRequest
	if err == nil {
		err = decode(w, r, &body, true)
	}
	if err == nil {
		err = validReason(body.Reason)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	who := principal(r)
	op, err := s.Store.Deny(r.Context(), who.Name, handle, reasonOf(body.Reason), s.Now())
	if err == nil {
		s.logger().InfoContext(r.Context(), "operation denied", "public_handle", op.PublicHandle, "operator", who.Name)
	}
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

func (s *Server) ListApprovals(w http.ResponseWriter, r *http.Request) {
	ops, err := s.Store.ListPendingApprovals(r.Context(), s.Now())
	s.respond(w, r, http.StatusOK, hubuapi.OperationList{Operations: each(ops, operationOf)}, err)
}

func (s *Server) ListAgents(w http.ResponseWriter, r *http.Request) {
	agents, err := s.Store.ListAgents(r.Context())
	s.respond(w, r, http.StatusOK, hubuapi.AgentList{Agents: each(agents, agentOf)}, err)
}

func (s *Server) CreateAgent(w http.ResponseWriter, r *http.Request) {
	var body hubuapi.AgentCreate
	err := decode(w, r, &body, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !agentNameRE.MatchString(body.Name) {
		s.writeError(w, r, invalid("name must be 1 to 64 of a-z 0-9 . _ - and start with a letter or digit"))
		return
	}
	account := "acct:" + body.Name
	if body.Account != nil {
		account = *body.Account
	}
	if !accountRE.MatchString(account) {
		s.writeError(w, r, invalid("account must be 1 to 128 of A-Z a-z 0-9 . _ : -"))
		return
	}
	pol := hubu.DefaultPolicy()
	if body.Policy != nil {
		if pol, err = policyOf(*body.Policy); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	agent, token, err := s.Store.CreateAgent(r.Context(), body.Name, account, pol, s.Now())
	s.respond(w, r, http.StatusCreated, hubuapi.AgentCreated{Agent: agentOf(agent), Token: token}, err)
}

func (s *Server) GetAgent(w http.ResponseWriter, r *http.Request, id hubuapi.AgentID) {
	a, err := s.Store.GetAgent(r.Context(), id)
	s.respond(w, r, http.StatusOK, agentOf(a), err)
}

func (s *Server) SetAgentPolicy(w http.ResponseWriter, r *http.Request, id hubuapi.AgentID) {
	var body hubuapi.Policy
	err := decode(w, r, &body, false)
	var pol hubu.Policy
	if err == nil {
		pol, err = policyOf(body)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.Store.SetPolicy(r.Context(), id, pol, s.Now())
	s.respond(w, r, http.StatusOK, agentOf(a), err)
}

func (s *Server) SetAgentAccount(w http.ResponseWriter, r *http.Request, id hubuapi.AgentID) {
	var body hubuapi.AccountUpdate
	err := decode(w, r, &body, false)
	if err == nil && !accountRE.MatchString(body.Account) {
		err = invalid("account must be 1 to 128 of A-Z a-z 0-9 . _ : -")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.Store.SetAccount(r.Context(), id, body.Account)
	s.respond(w, r, http.StatusOK, agentOf(a), err)
}

func (s *Server) ListPrices(w http.ResponseWriter, r *http.Request) {
	prices, err := s.Store.ListPrices(r.Context())
	s.respond(w, r, http.StatusOK, hubuapi.PriceList{Prices: each(prices, priceOf)}, err)
}

func (s *Server) SetPrice(w http.ResponseWriter, r *http.Request) {
	var body hubuapi.PriceUpdate
	err := decode(w, r, &body, false)
	var p hubu.Price
	if err == nil {
		p, err = priceUpdateOf(body)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stored, err := s.Store.SetPrice(r.Context(), p, s.Now())
	s.respond(w, r, http.StatusOK, priceOf(stored), err)
}

func (s *Server) GetDecision(w http.ResponseWriter, r *http.Request, id hubuapi.DecisionID) {
	op, err := s.Store.GetDecision(r.Context(), id)
	o := operationOf(op)
	s.respond(w, r, http.StatusOK, hubuapi.Decision{
		DecisionId: id, PublicHandle: o.PublicHandle, AgentId: o.AgentId, Tool: o.Tool, Scope: o.Scope,
		Arguments: o.Arguments, AmountMicros: o.AmountMicros, Currency: o.Currency, State: o.State,
		IssuedAt: op.DecisionIssuedAt, DispatchAttempts: op.DispatchAttempts,
	}, err)
}

func (s *Server) ListDecisions(w http.ResponseWriter, r *http.Request) {
	ds, err := s.Store.ListDecisions(r.Context())
	s.respond(w, r, http.StatusOK, hubuapi.DecisionList{Decisions: each(ds, func(d postgres.DecisionSummary) hubuapi.DecisionSummary {
		return hubuapi.DecisionSummary{
			DecisionId: d.DecisionID, PublicHandle: d.PublicHandle, State: hubuapi.OperationState(d.State),
			AmountMicros: d.AmountMicros, Currency: d.Currency, HeldMicros: d.HeldMicros,
			CapturedMicros: d.CapturedMicros, ReleasedMicros: d.ReleasedMicros,
			ProviderCostMicros: d.ProviderCostMicros, CreatedAt: d.CreatedAt,
		}
	})}, err)
}

func (s *Server) SettleDecision(w http.ResponseWriter, r *http.Request, id hubuapi.DecisionID) {
	var body hubuapi.SettleRequest
	err := decode(w, r, &body, false)
	if err == nil {
		err = validReason(body.Reason)
	}
	failed := body.Failed != nil && *body.Failed
	if err == nil && body.Reason != nil && !failed {
		err = invalid("reason goes only with failed: true")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.Store.Settle(r.Context(), id, body.AmountMicros, failed, reasonOf(body.Reason), body.ProviderCostMicros, s.Now())
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

func (s *Server) ReleaseDecision(w http.ResponseWriter, r *http.Request, id hubuapi.DecisionID) {
	var body hubuapi.ReleaseRequest
	err := decode(w, r, &body, true)
	if err == nil {
		err = validReason(body.Reason)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.Store.Release(r.Context(), id, reasonOf(body.Reason), s.Now())
	s.respond(w, r, http.StatusOK, operationOf(op), err)
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

func operationOf(op hubu.Operation) hubuapi.Operation {
	out := hubuapi.Operation{
		PublicHandle: op.PublicHandle, AgentId: op.AgentID, Tool: hubuapi.Tool(op.Tool), State: hubuapi.OperationState(op.State),
		AmountMicros: op.AmountMicros, Currency: op.Currency, Account: op.Account,
		Scope:       hubuapi.Scope{Provider: op.Scope.Provider, Model: op.Scope.Model, Size: op.Scope.Size},
		RequestHash: op.RequestHash, DecisionId: op.DecisionID, ApprovalExpiresAt: op.ApprovalExpiresAt, DecidedBy: op.DecidedBy,
		FailureReason: op.FailureReason, ProviderCostMicros: op.ProviderCostMicros,
		HeldMicros: op.HeldMicros, CapturedMicros: op.CapturedMicros, ReleasedMicros: op.ReleasedMicros,
		CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt,
	}
	_ = json.Unmarshal(op.Arguments, &out.Arguments) // written by Hubu from a validated request
	if op.Denial != nil {
		out.Denial = &hubuapi.Denial{Code: hubuapi.DenialCode(op.Denial.Code), Message: op.Denial.Message}
	}
	return out
}

func agentOf(a hubu.Agent) hubuapi.Agent {
	return hubuapi.Agent{
		Id: a.ID, Name: a.Name, Account: a.Account, CreatedAt: a.CreatedAt,
		Policy: hubuapi.Policy{
			Currency: a.Policy.Currency, PerOperationCeilingMicros: a.Policy.PerOperationCeilingMicros,
			AutoApproveLimitMicros: a.Policy.AutoApproveLimitMicros, BudgetMicros: a.Policy.BudgetMicros,
			BudgetPeriod: hubuapi.PolicyBudgetPeriod(a.Policy.BudgetPeriod), AllowedProviders: a.Policy.AllowedProviders,
			AllowedModels: a.Policy.AllowedModels,
		},
	}
}

func priceOf(p hubu.Price) hubuapi.Price {
	out := hubuapi.Price{Provider: p.Provider, Model: p.Model, Size: p.Size, Rule: hubuapi.PriceRule(p.Rule), AmountMicros: p.AmountMicros,
		Currency: p.Currency, UpdatedAt: p.UpdatedAt}
	if p.Rule == hubu.PriceMegapixel {
		out.ExtraMpMicros, out.InputMpMicros = &p.ExtraMPMicros, &p.InputMPMicros
	}
	return out
}
