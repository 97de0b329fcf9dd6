package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/proto/apitest"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/gongbuspec"
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
	"hubu.dev/hubu/services/hubu/hubutest"
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/fault"
	fluxhttp "hubu.dev/hubu/services/mockflux/httpserver"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/sqltest"
)

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
// except that it can answer the next submits with a refusal of its own, as the real provider
// might.
type gate struct {
	mu     sync.Mutex
	refuse []int // statuses for the next submits
	proxy  *httputil.ReverseProxy
}

func (g *gate) refuseNext(status int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = append(g.refuse, status)
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
	default:
		g.mu.Unlock()
		g.proxy.ServeHTTP(w, r)
	}
}

// inProcess is Hubu, Gongbu and mockflux wired in this test process (unlike e2e/stack, which
// runs the real binaries), each on its own real HTTP server and (for Hubu and Gongbu) its own
// real Postgres database, talking through the generated clients.
type inProcess struct {
	clock       *testclock.Clock
	hubu        *hubutest.Env
	handoff     *pausable
	gongbuDB    string // the URL of Gongbu's database, for `gongbu resolve`
	gate        *gate  // between Gongbu and mockflux, with inProcessOptions.gate
	gongbuStore *gongbupg.Store
	gongbu      *execution.Service
	faults      *fault.Set
	gongbuURL   string
	fluxURL     string
	// fluxForGongbu is where Gongbu reaches mockflux: fluxURL, or the gate in front of it.
	fluxForGongbu string
	gongbuPool    *pgxpool.Pool
	gongbuToken   string                         // the credential Gongbu accepts from Hubu
	agent         *hubuapi.ClientWithResponses   // Hubu's API as an agent
	agentGongbu   *gongbuapi.ClientWithResponses // Gongbu's API as that agent, and as another
	otherGongbu   *gongbuapi.ClientWithResponses
	asHubu        *gongbuapi.ClientWithResponses // Gongbu's API as Hubu calls it
	fluxAdmin     *bflapi.ClientWithResponses
	authority     *hubulink.Client // Hubu's API as Gongbu calls it
	wipeGongbu    func(t *testing.T)
	t             *testing.T
}

type inProcessOptions struct {
	// fluxIdempotent: the provider honours idempotency keys, and Gongbu is told so; without
	// it, mockflux ignores them, as the real BFL API does.
	fluxIdempotent bool
	// gate puts a gate between Gongbu and mockflux.
	gate bool
}

const (
	lease        = time.Minute
	pollInterval = time.Second
)

func newInProcess(t *testing.T, opts inProcessOptions) *inProcess {
	t.Helper()
	ctx := context.Background()
	// The clock starts at the real time: Gongbu compares when Hubu issued a decision with when
	// its own database (made with the real clock) began its record.
	s := &inProcess{t: t, clock: testclock.At(time.Now().UTC().Truncate(time.Second))}

	// mockflux
	fp := must(mockflux.Open(mockflux.Options{PendingPolls: 1, Now: s.clock.Now, HonoursIdempotency: opts.fluxIdempotent}))(t)
	t.Cleanup(func() { _ = fp.Close() })
	s.faults = &fault.Set{}
	fluxSrv := &fluxhttp.Server{Provider: fp, Faults: s.faults, Now: s.clock.Now, APIKey: "test-key"}
	t.Cleanup(fluxSrv.Close) // stops any webhook still being sent
	fluxTS := httptest.NewServer(fluxSrv.Handler())
	t.Cleanup(fluxTS.Close)
	s.fluxURL = fluxTS.URL

	// Hubu and Gongbu need each other's address: Gongbu's listener comes first, its handler last.
	gongbuTS := httptest.NewUnstartedServer(nil)
	t.Cleanup(gongbuTS.Close)
	s.gongbuURL = "http://" + gongbuTS.Listener.Addr().String()

	// Hubu
	s.gongbuToken = "hubu-to-gongbu-" + t.Name()
	gx := must(gongbuexec.New(s.gongbuURL, s.gongbuToken, &http.Client{Timeout: 30 * time.Second}))(t)
	s.handoff = &pausable{inner: gx}
	s.hubu = hubutest.New(t, &hubutest.Options{Clock: s.clock, Executor: s.handoff})

	// Gongbu
	gongbuPool, gongbuDB := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	s.gongbuDB, s.gongbuPool = gongbuDB, gongbuPool
	s.gongbuStore = gongbupg.NewStore(gongbuPool)
	// wipeGongbu loses Gongbu's rows as a restore from an older backup would, followed by the
	// `gongbu renew-epoch` the runbook asks for (dated on the shared clock).
	s.wipeGongbu = func(t *testing.T) {
		must(gongbuPool.Exec(ctx, "DELETE FROM executions"))(t)
		must(gongbuPool.Exec(ctx, "UPDATE database_epoch SET id = gen_random_uuid(), began_at = $1", s.clock.Now()))(t)
	}
	s.authority = must(hubulink.New(s.hubu.URL, s.hubu.ServiceToken, &http.Client{Timeout: 30 * time.Second}))(t)
	fluxForGongbu := s.fluxURL
	s.fluxForGongbu = fluxForGongbu
	if opts.gate {
		s.gate = &gate{proxy: httputil.NewSingleHostReverseProxy(must(url.Parse(s.fluxURL))(t))}
		gateTS := httptest.NewServer(s.gate)
		t.Cleanup(gateTS.Close)
		fluxForGongbu = gateTS.URL
		s.fluxForGongbu = fluxForGongbu
	}
	otherHost := stack.MockfluxOtherHost(fluxForGongbu)
	adapter := must(flux.NewAdapter(flux.Config{BaseURL: fluxForGongbu, APIKey: "test-key", HonoursIdempotency: opts.fluxIdempotent,
		Timeout: 30 * time.Second, PollingHosts: []string{otherHost}, SampleHosts: []string{otherHost}}))(t)
	s.gongbu = &execution.Service{
		Store: s.gongbuStore, Providers: map[string]gongbu.Provider{"bfl": adapter}, Authority: s.authority,
		Now: s.clock.Now, Lease: lease, PollInterval: pollInterval, PollDeadline: 10 * time.Minute,
		FirstPoll: -1, // the suite drives every poll through Tick and its clock
	}
	gongbuTS.Config.Handler = (&gongbuhttp.Server{Executions: s.gongbu, Authority: s.authority, ServiceToken: s.gongbuToken, Ping: s.gongbuStore.Ping}).
		Handler(prometheus.NewRegistry())
	gongbuTS.Start()

	// Clients; every response of Hubu and Gongbu is checked against its spec.
	gongbuHTTP := &http.Client{Transport: apitest.NewTransport(t, must(gongbuspec.GetSpec())(t), nil), Timeout: 30 * time.Second}
	agent, other := s.hubu.NewAgent(t, "agent", nil), s.hubu.NewAgent(t, "other", nil)
	s.agent = agent.Client
	s.agentGongbu = mustGongbuClient(t, s.gongbuURL, agent.Token, gongbuHTTP)
	s.otherGongbu = mustGongbuClient(t, s.gongbuURL, other.Token, gongbuHTTP)
	s.asHubu = mustGongbuClient(t, s.gongbuURL, s.gongbuToken, gongbuHTTP)
	s.fluxAdmin = must(bflapi.NewClientWithResponses(s.fluxURL))(t)
	return s
}

func mustGongbuClient(t *testing.T, url, token string, hc *http.Client) *gongbuapi.ClientWithResponses {
	return must(gongbuapi.NewClientWithResponses(url, gongbuapi.WithHTTPClient(hc), gongbuapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	})))(t)
}

// spend authorizes a new generate_image call through Hubu as the router would send it.
func (s *inProcess) spend(model string) hubuapi.Operation {
	s.t.Helper()
	resp, err := s.agent.AuthorizeWithResponse(context.Background(), hubutest.NewCall(model).Request())
	if err != nil || resp.JSON201 == nil {
		s.t.Fatalf("authorize: %v %s", err, resp.Body)
	}
	return *resp.JSON201
}

func (s *inProcess) operation(handle string) hubuapi.Operation {
	s.t.Helper()
	resp, err := s.agent.GetOperationWithResponse(context.Background(), handle)
	if err != nil || resp.JSON200 == nil {
		s.t.Fatalf("operation: %v %s", err, resp.Body)
	}
	return *resp.JSON200
}

// issued is the decision as Hubu issued it, read as Gongbu reads it.
func (s *inProcess) issued(op hubuapi.Operation) gongbu.Issued {
	s.t.Helper()
	return must(s.authority.Decision(context.Background(), *op.DecisionId))(s.t)
}

// decision is the issued decision in the shape Hubu hands to Gongbu.
func (s *inProcess) decision(op hubuapi.Operation) gongbuapi.ExecutionRequest {
	d := s.issued(op)
	return gongbuapi.ExecutionRequest{
		DecisionId: d.DecisionID, PublicHandle: d.PublicHandle, AgentId: d.AgentID, Tool: gongbuapi.ExecutionRequestTool(d.Tool),
		Scope:        gongbuapi.Scope{Provider: d.Scope.Provider, Model: d.Scope.Model, Size: d.Scope.Size},
		Arguments:    gongbuapi.ImageArguments{Prompt: d.Arguments.Prompt, Model: d.Arguments.Model, Width: d.Arguments.Width, Height: d.Arguments.Height, Seed: d.Arguments.Seed},
		AmountMicros: d.AmountMicros, Currency: d.Currency,
	}
}

// settle runs Gongbu's background work (takeovers, polls, reports) until Hubu's operation is
// final or the bound is reached, advancing the clock a poll interval each round.
func (s *inProcess) settle(handle string) hubuapi.Operation {
	s.t.Helper()
	for range 20 {
		s.tick()
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
func (s *inProcess) charges() bflapi.Charges {
	s.t.Helper()
	resp, err := s.fluxAdmin.ListChargesWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		s.t.Fatalf("charges: %v", err)
	}
	return *resp.JSON200
}

// requireCharges fails the test unless mockflux has charged exactly want times.
func (s *inProcess) requireCharges(want int, when string) {
	s.t.Helper()
	if c := s.charges(); c.Count != want {
		s.t.Fatalf("%d provider charges %s, want %d", c.Count, when, want)
	}
}

// submitAtProvider is a submission that reaches mockflux from elsewhere than this Gongbu (a
// dead Gongbu, another client), with an idempotency key or none.
func (s *inProcess) submitAtProvider(model, prompt string, size int, key *string) bflapi.SubmitResponse {
	s.t.Helper()
	// The body Gongbu sends for a square image of that size, BFL's defaults stated.
	format := bflapi.FluxRequestOutputFormat("jpeg")
	r, err := s.fluxAdmin.SubmitWithResponse(context.Background(), model, &bflapi.SubmitParams{IdempotencyKey: key},
		bflapi.FluxRequest{Prompt: prompt, Width: &size, Height: &size, OutputFormat: &format, SafetyTolerance: new(2)}, func(_ context.Context, r *http.Request) error {
			r.Header.Set("x-key", "test-key")
			return nil
		})
	if err != nil || r.JSON200 == nil {
		s.t.Fatalf("submit at the provider: %v", err)
	}
	return *r.JSON200
}

// resendDecisions lets Hubu's retry delay pass and runs its recovery, which hands the
// decisions still dispatching to Gongbu again; it returns how many it re-sent.
func (s *inProcess) resendDecisions() int {
	s.t.Helper()
	s.clock.Advance(11 * time.Second)
	return must(s.hubu.Lifecycle.Recover(context.Background()))(s.t)
}

// requireSettledOnce settles the operation and requires a flux-dev spend charged once: it
// succeeded, captured the price, holds nothing, and the three records agree.
func (s *inProcess) requireSettledOnce(handle string) {
	s.t.Helper()
	if final := s.settle(handle); final.State != hubuapi.OperationStateSucceeded || final.CapturedMicros != 25_000 || final.HeldMicros != 0 {
		s.t.Fatalf("final: %+v", final)
	}
	s.requireCharges(1, "after settling")
	s.mustAgree()
}

// requireIndeterminateHeld requires the flux-dev spend's execution indeterminate after one
// provider charge: Hubu keeps the hold until an operator resolves it, and the reconciliation
// names the execution.
func (s *inProcess) requireIndeterminateHeld(op hubuapi.Operation) {
	s.t.Helper()
	if x := s.execution(op); x.State != gongbuapi.Indeterminate {
		s.t.Fatalf("execution: %+v, want indeterminate", x)
	}
	s.requireCharges(1, "with the execution indeterminate")
	if o := s.operation(op.PublicHandle); o.HeldMicros != 25_000 || o.CapturedMicros != 0 {
		s.t.Fatalf("Hubu must keep the hold until an operator resolves the execution: %+v", o)
	}
	if r := s.reconcile(); len(r.Mismatches) != 1 || !strings.Contains(r.Mismatches[0], "indeterminate") {
		s.t.Fatalf("reconciliation must name the indeterminate execution:\n%s", r)
	}
}

func (s *inProcess) arm(kind bflapi.FaultKind, count int) {
	s.t.Helper()
	noError(s.t, s.faults.Arm(kind, count, 0))
}

// reconcile compares Hubu's captures, Gongbu's executions, each job at mockflux and its charges.
func (s *inProcess) reconcile() reconcile.Report {
	s.t.Helper()
	records := must(reconcile.NewRecords(s.hubu.URL, s.hubu.ServiceToken, s.gongbuURL, s.gongbuToken, http.DefaultClient))(s.t)
	ledger := must(reconcile.NewMockLedger(s.fluxURL, http.DefaultClient))(s.t)
	provider := must(flux.NewAdapter(flux.Config{BaseURL: s.fluxURL, APIKey: "test-key", Timeout: 10 * time.Second, PollingHosts: s.fluxPollingHosts()}))(s.t)
	return must(reconcile.Run(context.Background(), records, reconcile.Options{Provider: provider, Ledger: ledger, Now: s.clock.Now}))(s.t)
}

// fluxPollingHosts are the hosts mockflux's polling URLs may name: its other name, as reached
// directly and through the gate.
func (s *inProcess) fluxPollingHosts() []string {
	return []string{stack.MockfluxOtherHost(s.fluxURL), stack.MockfluxOtherHost(s.fluxForGongbu)}
}

func (s *inProcess) mustAgree() {
	s.t.Helper()
	if r := s.reconcile(); len(r.Mismatches) != 0 {
		s.t.Fatalf("reconciliation:\n%s", r)
	}
}

// reconcileCommand runs the real `gongbu reconcile` against the services, in its production
// form (each job looked up at mockflux with key) plus any extra arguments.
func (s *inProcess) reconcileCommand(key string, extra ...string) (string, error) {
	args := append([]string{"reconcile", "--hubu-url", s.hubu.URL, "--hubu-token", s.hubu.ServiceToken,
		"--gongbu-url", s.gongbuURL, "--service-token", s.gongbuToken, "--flux-url", s.fluxURL, "--flux-key", key,
		"--flux-polling-hosts", strings.Join(s.fluxPollingHosts(), ",")}, extra...)
	cmd := exec.Command(bin.Path("gongbu"), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// tick runs Gongbu's background pass once.
func (s *inProcess) tick() {
	s.t.Helper()
	noError(s.t, s.gongbu.Tick(context.Background()))
}

// later advances the clock by step, then runs Gongbu's background pass; n times.
func (s *inProcess) later(n int, step time.Duration) {
	s.t.Helper()
	for range n {
		s.clock.Advance(step)
		s.tick()
	}
}

// execution reads Gongbu's execution of a decision as Hubu would.
func (s *inProcess) execution(op hubuapi.Operation) gongbuapi.Execution {
	s.t.Helper()
	resp, err := s.asHubu.GetExecutionWithResponse(context.Background(), *op.DecisionId)
	if err != nil || resp.JSON200 == nil {
		s.t.Fatalf("execution: %v", err)
	}
	return *resp.JSON200
}
