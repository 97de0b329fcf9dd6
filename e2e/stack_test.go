package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/proto/apitest"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/flux"
	gongbuhttp "hubu.dev/hubu/services/gongbu/httpserver"
	"hubu.dev/hubu/services/gongbu/hubulink"
	gongbupg "hubu.dev/hubu/services/gongbu/postgres"
	"hubu.dev/hubu/services/gongbu/reconcile"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/gongbuexec"
	hubuhttp "hubu.dev/hubu/services/hubu/httpserver"
	"hubu.dev/hubu/services/hubu/lifecycle"
	hubupg "hubu.dev/hubu/services/hubu/postgres"
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/fault"
	fluxhttp "hubu.dev/hubu/services/mockflux/httpserver"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

// clock is the controllable time every service of a stack shares.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// pausable lets a test cut Hubu off from Gongbu, as a crash or a network partition between
// the decision and the hand-off would; the hand-off itself is the real one. With loseReply
// the hand-off reaches Gongbu but its answer never comes back to Hubu.
type pausable struct {
	inner     hubu.Executor
	paused    atomic.Bool
	loseReply atomic.Bool
}

func (p *pausable) Execute(ctx context.Context, d hubu.Decision) error {
	if p.paused.Load() {
		return errors.New("hand-off paused by the test")
	}
	err := p.inner.Execute(ctx, d)
	if err == nil && p.loseReply.Load() {
		return errors.New("the executor's answer was lost (test)")
	}
	return err
}

// gate stands between Gongbu and mockflux when a test asks for it: it forwards everything,
// except that it can answer the next submits with a refusal of its own, or the next polls
// with a status of its own, as the real provider might.
type gate struct {
	mu     sync.Mutex
	refuse []int                 // statuses for the next submits
	polls  []bflapi.ResultStatus // statuses for the next polls
	proxy  *httputil.ReverseProxy
}

func (g *gate) refuseNext(status int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = append(g.refuse, status)
}

func (g *gate) answerNextPoll(status bflapi.ResultStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.polls = append(g.polls, status)
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/") && len(g.refuse) > 0:
		status := g.refuse[0]
		g.refuse = g.refuse[1:]
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(bflapi.ErrorDetail{Detail: http.StatusText(status)})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/get_result" && len(g.polls) > 0:
		status := g.polls[0]
		g.polls = g.polls[1:]
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(bflapi.ResultResponse{Id: r.URL.Query().Get("id"), Status: status})
	default:
		g.mu.Unlock()
		g.proxy.ServeHTTP(w, r)
	}
}

// stack is Hubu, Gongbu and mockflux in this process, each on its own real HTTP server and
// (for Hubu and Gongbu) its own real Postgres database, talking through the generated clients.
type stack struct {
	clock       *clock
	gongbuDB    string // the URL of Gongbu's database, for `gongbu resolve`
	gate        *gate  // between Gongbu and mockflux, with stackOptions.gate
	hubuStore   *hubupg.Store
	hubuLife    *lifecycle.Service
	handoff     *pausable
	gongbuStore *gongbupg.Store
	gongbu      *execution.Service
	flux        *mockflux.Provider
	faults      *fault.Set
	hubuURL     string
	gongbuURL   string
	fluxURL     string
	hubuToken   string // Hubu's service credential, held by Gongbu
	opToken     string // an operator's credential at Hubu
	gongbuToken string // the credential Gongbu accepts from Hubu
	operator    *hubuapi.ClientWithResponses
	agent       *hubuapi.ClientWithResponses
	agentGongbu *gongbuapi.ClientWithResponses
	otherGongbu *gongbuapi.ClientWithResponses
	asHubu      *gongbuapi.ClientWithResponses // Gongbu's API as Hubu calls it
	fluxAdmin   *bflapi.ClientWithResponses
	wipeGongbu  func(t *testing.T)
	t           *testing.T
}

type stackOptions struct {
	// fluxIdempotent tells Gongbu that the provider honours idempotency keys (mockflux does,
	// unless its idempotency_off fault is armed).
	fluxIdempotent bool
	// gate puts a gate between Gongbu and mockflux.
	gate bool
}

const (
	lease        = time.Minute
	pollInterval = time.Second
)

func newStack(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	ctx := context.Background()
	// The clock starts at the real time: Gongbu compares when Hubu issued a decision with when
	// its own database (made with the real clock) began its record.
	s := &stack{t: t, clock: &clock{now: time.Now().UTC().Truncate(time.Second)}, handoff: &pausable{}}

	// mockflux
	fp, err := mockflux.Open(mockflux.Options{PendingPolls: 1, Now: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fp.Close() })
	s.flux, s.faults = fp, &fault.Set{}
	fluxTS := httptest.NewServer((&fluxhttp.Server{Provider: fp, Faults: s.faults, Now: s.clock.Now}).Handler())
	t.Cleanup(fluxTS.Close)
	s.fluxURL = fluxTS.URL

	// Hubu and Gongbu need each other's address: start both servers first, route later.
	hubuHandler, gongbuHandler := &lateHandler{}, &lateHandler{}
	hubuTS := httptest.NewServer(hubuHandler)
	t.Cleanup(hubuTS.Close)
	gongbuTS := httptest.NewServer(gongbuHandler)
	t.Cleanup(gongbuTS.Close)
	s.hubuURL, s.gongbuURL = hubuTS.URL, gongbuTS.URL

	// Hubu
	hubuPool, _ := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	s.hubuStore = hubupg.NewStore(hubuPool, 24*time.Hour)
	s.gongbuToken = "hubu-to-gongbu-" + t.Name()
	gx, err := gongbuexec.New(s.gongbuURL, s.gongbuToken, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.handoff.inner = gx
	s.hubuLife = &lifecycle.Service{Store: s.hubuStore, Executor: s.handoff, Now: s.clock.Now, RetryAfter: 10 * time.Second}
	hubuHandler.set((&hubuhttp.Server{Store: s.hubuStore, Lifecycle: s.hubuLife, Now: s.clock.Now}).Handler(prometheus.NewRegistry()))
	s.hubuToken, err = s.hubuStore.CreateCredential(ctx, hubu.RoleService, "gongbu", s.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	opToken, err := s.hubuStore.CreateCredential(ctx, hubu.RoleOperator, "alice", s.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.opToken = opToken

	// Gongbu
	gongbuPool, gongbuDB := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	s.gongbuDB = gongbuDB
	s.gongbuStore = gongbupg.NewStore(gongbuPool)
	// wipeGongbu loses Gongbu's rows as a restore from an older backup would, followed by the
	// `gongbu renew-epoch` the runbook asks for (dated on the stack's clock).
	s.wipeGongbu = func(t *testing.T) {
		if _, err := gongbuPool.Exec(ctx, "DELETE FROM executions"); err != nil {
			t.Fatal(err)
		}
		if _, err := gongbuPool.Exec(ctx, "UPDATE database_epoch SET id = gen_random_uuid(), began_at = $1", s.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	authority, err := hubulink.New(s.hubuURL, s.hubuToken, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fluxForGongbu := s.fluxURL
	if opts.gate {
		target, err := url.Parse(s.fluxURL)
		if err != nil {
			t.Fatal(err)
		}
		s.gate = &gate{proxy: httputil.NewSingleHostReverseProxy(target)}
		gateTS := httptest.NewServer(s.gate)
		t.Cleanup(gateTS.Close)
		fluxForGongbu = gateTS.URL
	}
	adapter, err := flux.New(fluxForGongbu, "test-key", opts.fluxIdempotent, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.gongbu = &execution.Service{
		Store: s.gongbuStore, Providers: map[string]gongbu.Provider{"bfl": adapter}, Authority: authority,
		Now: s.clock.Now, Lease: lease, PollInterval: pollInterval, PollDeadline: 10 * time.Minute,
	}
	gongbuHandler.set((&gongbuhttp.Server{Executions: s.gongbu, Authority: authority, ServiceToken: s.gongbuToken, Ping: s.gongbuStore.Ping}).
		Handler(prometheus.NewRegistry()))

	// Clients; every response of Hubu and Gongbu is checked against its spec.
	hubuDoc, err := hubuapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	gongbuDoc, err := gongbuapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	hubuHTTP := &http.Client{Transport: apitest.NewTransport(t, hubuDoc, nil), Timeout: 30 * time.Second}
	gongbuHTTP := &http.Client{Transport: apitest.NewTransport(t, gongbuDoc, nil), Timeout: 30 * time.Second}
	s.operator = mustHubuClient(t, s.hubuURL, opToken, hubuHTTP)
	created, err := s.operator.CreateAgentWithResponse(ctx, hubuapi.AgentCreate{Name: "agent"})
	if err != nil || created.JSON201 == nil {
		t.Fatalf("create agent: %v", err)
	}
	other, err := s.operator.CreateAgentWithResponse(ctx, hubuapi.AgentCreate{Name: "other"})
	if err != nil || other.JSON201 == nil {
		t.Fatalf("create agent: %v", err)
	}
	s.agent = mustHubuClient(t, s.hubuURL, created.JSON201.Token, hubuHTTP)
	s.agentGongbu = mustGongbuClient(t, s.gongbuURL, created.JSON201.Token, gongbuHTTP)
	s.otherGongbu = mustGongbuClient(t, s.gongbuURL, other.JSON201.Token, gongbuHTTP)
	s.asHubu = mustGongbuClient(t, s.gongbuURL, s.gongbuToken, gongbuHTTP)
	s.fluxAdmin, err = bflapi.NewClientWithResponses(s.fluxURL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bearer(token string) func(context.Context, *http.Request) error {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

func mustHubuClient(t *testing.T, url, token string, hc *http.Client) *hubuapi.ClientWithResponses {
	c, err := hubuapi.NewClientWithResponses(url, hubuapi.WithHTTPClient(hc), hubuapi.WithRequestEditorFn(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustGongbuClient(t *testing.T, url, token string, hc *http.Client) *gongbuapi.ClientWithResponses {
	c, err := gongbuapi.NewClientWithResponses(url, gongbuapi.WithHTTPClient(hc), gongbuapi.WithRequestEditorFn(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var callSeq atomic.Int64

// spend authorizes a generate_image call through Hubu as the router would send it.
func (s *stack) spend(model string) hubuapi.Operation {
	s.t.Helper()
	resp, err := s.agent.AuthorizeWithResponse(context.Background(), newSpend(model))
	if err != nil || resp.JSON201 == nil {
		s.t.Fatalf("authorize: %v %s", err, resp.Body)
	}
	return *resp.JSON201
}

// newSpend is a new call's authorization request, as the router sends it.
func newSpend(model string) hubuapi.AuthorizeRequest {
	n := callSeq.Add(1)
	args := hubuapi.GenerateImageArguments{Prompt: fmt.Sprintf("an origami fox #%d", n), Model: model, Width: 1024, Height: 1024}
	return hubuapi.AuthorizeRequest{
		OperationKey: fmt.Sprintf("hubu:operation:v1:codex:00000000-0000-4000-8000-%012d", n),
		PublicHandle: fmt.Sprintf("hubu:public-operation:v1:00000000-0000-4000-9000-%012d", n),
		Tool:         hubuapi.GenerateImage, RequestHash: fmt.Sprintf("%064x", n), Arguments: args,
	}
}

// operation reads an operation from Hubu.
func (s *stack) operation(handle string) hubuapi.Operation {
	s.t.Helper()
	resp, err := s.agent.GetOperationWithResponse(context.Background(), handle)
	if err != nil || resp.JSON200 == nil {
		s.t.Fatalf("operation: %v %s", err, resp.Body)
	}
	return *resp.JSON200
}

// decision is the decision as Hubu issued it, in the shape Hubu hands to Gongbu.
func (s *stack) decision(op hubuapi.Operation) gongbuapi.ExecutionRequest {
	s.t.Helper()
	d, err := func() (gongbu.Issued, error) {
		a, err := hubulink.New(s.hubuURL, s.hubuToken, http.DefaultClient)
		if err != nil {
			return gongbu.Issued{}, err
		}
		return a.Decision(context.Background(), *op.DecisionId)
	}()
	if err != nil {
		s.t.Fatal(err)
	}
	return gongbuapi.ExecutionRequest{
		DecisionId: d.DecisionID, PublicHandle: d.PublicHandle, AgentId: d.AgentID, Tool: gongbuapi.ExecutionRequestTool(d.Tool),
		Scope:        gongbuapi.Scope{Provider: d.Scope.Provider, Model: d.Scope.Model, Size: d.Scope.Size},
		Arguments:    gongbuapi.ImageArguments{Prompt: d.Arguments.Prompt, Model: d.Arguments.Model, Width: d.Arguments.Width, Height: d.Arguments.Height, Seed: d.Arguments.Seed},
		AmountMicros: d.AmountMicros, Currency: d.Currency,
	}
}

// settle runs Gongbu's background work (takeovers, polls, reports) until Hubu's operation is
// final or the bound is reached, advancing the clock a poll interval each round.
func (s *stack) settle(handle string) hubuapi.Operation {
	s.t.Helper()
	for range 20 {
		if err := s.gongbu.Tick(context.Background()); err != nil {
			s.t.Fatal(err)
		}
		if op := s.operation(handle); op.State == hubuapi.OperationStateSucceeded || op.State == hubuapi.OperationStateFailed {
			return op
		}
		s.clock.Advance(pollInterval)
	}
	op := s.operation(handle)
	s.t.Fatalf("operation %s did not finish: %s", handle, op.State)
	return op
}

// charges is mockflux's charge ledger.
func (s *stack) charges() bflapi.Charges {
	s.t.Helper()
	resp, err := s.fluxAdmin.ListChargesWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		s.t.Fatalf("charges: %v", err)
	}
	return *resp.JSON200
}

func (s *stack) arm(kind bflapi.FaultKind, count int) {
	s.t.Helper()
	if err := s.faults.Arm(kind, count, 0); err != nil {
		s.t.Fatal(err)
	}
}

// reconcile compares Hubu's captures, Gongbu's executions and mockflux's charges.
func (s *stack) reconcile() reconcile.Report {
	s.t.Helper()
	src, err := reconcile.NewSources(s.hubuURL, s.hubuToken, s.gongbuURL, s.gongbuToken, s.fluxURL, http.DefaultClient)
	if err != nil {
		s.t.Fatal(err)
	}
	r, err := reconcile.Run(context.Background(), src)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// mustAgree fails the test unless the three records agree.
func (s *stack) mustAgree() {
	s.t.Helper()
	if r := s.reconcile(); len(r.Mismatches) != 0 {
		s.t.Fatalf("reconciliation:\n%s", r)
	}
}

// gongbuDecision converts the wire decision into Gongbu's domain type.
func gongbuDecision(r gongbuapi.ExecutionRequest) gongbu.Decision {
	return gongbu.Decision{
		DecisionID: r.DecisionId, PublicHandle: r.PublicHandle, AgentID: r.AgentId, Tool: string(r.Tool),
		Scope:        gongbu.Scope{Provider: r.Scope.Provider, Model: r.Scope.Model, Size: r.Scope.Size},
		Arguments:    gongbu.ImageArguments{Prompt: r.Arguments.Prompt, Model: r.Arguments.Model, Width: r.Arguments.Width, Height: r.Arguments.Height, Seed: r.Arguments.Seed},
		AmountMicros: r.AmountMicros, Currency: r.Currency,
	}
}

// resolve runs the real `gongbu resolve` against the stack's Gongbu database.
func (s *stack) resolve(decision string, verdict ...string) string {
	s.t.Helper()
	cmd := exec.Command(bin.Path("gongbu"), append([]string{"resolve", "--decision", decision}, verdict...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GONGBU_DATABASE_URL=" + s.gongbuDB}
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("gongbu resolve: %v\n%s", err, out)
	}
	return string(out)
}

// tick runs Gongbu's background pass once.
func (s *stack) tick() {
	s.t.Helper()
	if err := s.gongbu.Tick(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// execution reads Gongbu's execution of a decision as Hubu would.
func (s *stack) execution(op hubuapi.Operation) gongbuapi.Execution {
	s.t.Helper()
	resp, err := s.asHubu.GetExecutionWithResponse(context.Background(), *op.DecisionId)
	if err != nil || resp.JSON200 == nil {
		s.t.Fatalf("execution: %v", err)
	}
	return *resp.JSON200
}

// lateHandler lets a server start before its handler exists (Hubu and Gongbu need each
// other's address); the handler is set under a lock the serving goroutines also take.
type lateHandler struct {
	mu sync.RWMutex
	h  http.Handler
}

func (l *lateHandler) set(h http.Handler) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.h = h
}

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.RLock()
	h := l.h
	l.mu.RUnlock()
	if h == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}
