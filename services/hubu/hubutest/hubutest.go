// Package hubutest runs Hubu for tests: over real HTTP on a fresh Postgres database, with a
// controllable clock, a fake executor, an operator and a service credential, and the checks
// every test of it ends with (no secret logged, a consistent ledger). Only tests import it.
package hubutest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/proto/apitest"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/proto/hubuspec"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/console"
	"hubu.dev/hubu/services/hubu/httpserver"
	"hubu.dev/hubu/services/hubu/lifecycle"
	"hubu.dev/hubu/services/hubu/postgres"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

// Options change an Env; nil is every default.
type Options struct {
	// ApprovalTTL is how long an approval waits; 24h by default.
	ApprovalTTL time.Duration
	// Clock is Hubu's time; testclock.New() by default.
	Clock *testclock.Clock
	// Executor takes Hubu's decisions; by default a fake, Env.Executor.
	Executor hubu.Executor
	// Images is where Hubu reads the images the executor keeps (none by default).
	Images hubu.Images
	// Console serves the approval console too, refreshing every 300ms.
	Console bool
	// SignReads makes Hubu sign a read capability for each agent's authorization and resume
	// (httpserver.Server.DecisionKey), as a Hubu with an executor does.
	SignReads bool
	// RoundTrips, when set, counts what Hubu sends to Postgres (see sqltest.RoundTrips); Hubu's pool
	// then has one connection.
	RoundTrips *sqltest.RoundTrips
	// NoCache leaves Hubu without its cache of credentials and prices: every request reads
	// them from Postgres. By default Hubu has one, fed by a listener that is connected before
	// New returns.
	NoCache bool
}

// Env is Hubu over real HTTP on a database of its own.
type Env struct {
	Pool      *pgxpool.Pool
	Store     *postgres.Store
	Lifecycle *lifecycle.Service
	Clock     *testclock.Clock
	Executor  *Executor // nil when Options.Executor was given
	Logs      *testlog.Buffer
	Handler   http.Handler
	URL       string
	// Validator checks every response it carries against Hubu's spec; Client's use it.
	Validator *apitest.Transport
	// OperatorToken is alice's, an operator; ServiceToken is gongbu's, a service.
	OperatorToken, ServiceToken string
	Operator                    *hubuapi.ClientWithResponses // as alice
	// DatabaseURL is the database's, for another Hubu process on it.
	DatabaseURL string
	// Cache is the Store's cache; nil with Options.NoCache.
	Cache *Cache

	wiring wiring // how this Hubu was put together, for its replicas
}

// wiring is how an Env's Hubu is put together from a pool, for the Env and its replicas alike.
type wiring struct {
	approvalTTL time.Duration
	executor    hubu.Executor
	images      hubu.Images
	console     bool
	cache       bool
	signReads   bool
}

// start wires a Hubu on pool, logging into e.Logs at e.Clock's time, and serves it over HTTP
// until t ends.
func (w wiring) start(t testing.TB, e *Env, pool *pgxpool.Pool) (*Replica, *Cache) {
	t.Helper()
	r := &Replica{Store: postgres.NewStore(pool, w.approvalTTL)}
	var cache *Cache
	if w.cache {
		cache = StartCache(t, e.DatabaseURL, nil)
		r.Store.Cache = cache.Cache
	}
	logger := slog.New(slog.NewJSONHandler(e.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r.Lifecycle = &lifecycle.Service{Store: r.Store, Executor: w.executor, Images: w.images, Logger: logger, Now: e.Clock.Now, RetryAfter: 10 * time.Second}
	srv := &httpserver.Server{Store: r.Store, Lifecycle: r.Lifecycle, Logger: logger, Now: e.Clock.Now, Images: w.images}
	if w.signReads {
		key, err := r.Store.DecisionKey(context.Background(), e.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		srv.DecisionKey = key
	}
	if w.console {
		srv.Console = console.New(r.Store, &console.Options{Logger: logger, Now: e.Clock.Now, RefreshEvery: 300 * time.Millisecond, Images: w.images})
	}
	r.Handler = srv.Handler(prometheus.NewRegistry())
	ts := httptest.NewServer(r.Handler)
	t.Cleanup(ts.Close)
	r.URL = ts.URL
	return r, cache
}

// Replica is another Hubu on an Env's database, as a second replica behind a load balancer
// runs: a pool, store, cache, recovery service and HTTP server of its own, with the Env's
// clock, executor and log.
type Replica struct {
	Store     *postgres.Store
	Lifecycle *lifecycle.Service
	Handler   http.Handler
	URL       string
}

// NewReplica starts another Hubu on e's database, wired as e's is, until t ends.
func (e *Env) NewReplica(t testing.TB) *Replica {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r, _ := e.wiring.start(t, e, pool)
	return r
}

// New starts Hubu for t; when t ends, it fails t if Hubu logged a secret or its ledger
// disagrees with itself.
func New(t testing.TB, opts *Options) *Env {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	e := &Env{Clock: opts.Clock, Logs: &testlog.Buffer{}}
	if e.Clock == nil {
		e.Clock = testclock.New()
	}
	ttl := opts.ApprovalTTL
	if ttl == 0 {
		ttl = 24 * time.Hour
	}
	exec := opts.Executor
	if exec == nil {
		e.Executor = &Executor{}
		exec = e.Executor
	}
	if opts.RoundTrips != nil {
		e.DatabaseURL = sqltest.NewDatabase(t, "hubu", hubusql.Migrations())
		e.Pool = sqltest.NewCountedPool(t, e.DatabaseURL, opts.RoundTrips)
	} else {
		e.Pool, e.DatabaseURL = sqltest.NewPool(t, "hubu", hubusql.Migrations())
	}
	e.wiring = wiring{approvalTTL: ttl, executor: exec, images: opts.Images, console: opts.Console, cache: !opts.NoCache, signReads: opts.SignReads}
	var h *Replica
	h, e.Cache = e.wiring.start(t, e, e.Pool)
	e.Store, e.Lifecycle, e.Handler, e.URL = h.Store, h.Lifecycle, h.Handler, h.URL
	doc, err := hubuspec.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	e.Validator = apitest.NewTransport(t, doc, http.DefaultTransport)
	if e.OperatorToken, err = e.Store.CreateCredential(context.Background(), hubu.RoleOperator, "alice", e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if e.ServiceToken, err = e.Store.CreateCredential(context.Background(), hubu.RoleService, "gongbu", e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	e.Operator = e.Client(t, e.OperatorToken)
	t.Cleanup(func() {
		e.checkLedger(t)
		for _, secret := range []string{"hubu:operation:v1:", "hubu_agent_", "hubu_operator_", "hubu_service_", "hubu_router_", "hubu_inv_", "hubu_refresh_"} {
			if strings.Contains(e.Logs.String(), secret) {
				t.Errorf("Hubu logged a secret (%s…)", secret)
			}
		}
	})
	return e
}

// Client returns a generated client with token ("" for none) whose every response is
// validated against the spec.
func (e *Env) Client(t testing.TB, token string) *hubuapi.ClientWithResponses {
	t.Helper()
	c, err := hubuapi.NewClientWithResponses(e.URL,
		hubuapi.WithHTTPClient(&http.Client{Transport: e.Validator, Timeout: 30 * time.Second}),
		hubuapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if token != "" {
				r.Header.Set("Authorization", "Bearer "+token)
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CredentialID is the ID of the credential token belongs to.
func (e *Env) CredentialID(t testing.TB, token string) uuid.UUID {
	t.Helper()
	p, err := e.Store.Authenticate(context.Background(), token, e.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p.CredentialID
}

// Agent is an agent and a client with its token.
type Agent struct {
	ID     uuid.UUID
	Token  string
	Client *hubuapi.ClientWithResponses
}

// NewAgent creates an agent through the API, with the default policy when pol is nil.
func (e *Env) NewAgent(t testing.TB, name string, pol *hubuapi.Policy) Agent {
	t.Helper()
	resp, err := e.Operator.CreateAgentWithResponse(context.Background(), hubuapi.AgentCreate{Name: name, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON201 == nil {
		t.Fatalf("create agent: %d %s", resp.StatusCode(), resp.Body)
	}
	return Agent{ID: resp.JSON201.Agent.Id, Token: resp.JSON201.Token, Client: e.Client(t, resp.JSON201.Token)}
}

// Call is one spend call as the router sends it: a private key, a public handle, the arguments.
type Call struct {
	Key, Handle string
	// Tool is generate_image unless it is an edit (NewEdit).
	Tool string
	Args contract.ImageRequest
}

// NewCall is a new call for an origami fox by model: 1024x1024 where the model is sized in
// pixels, its default aspect ratio where it is not.
func NewCall(model string) Call {
	args := contract.ImageRequest{Prompt: "an origami fox", Model: model, Width: 1024, Height: 1024}
	if m, ok := contract.ModelNamed(model); ok && m.Sizing == contract.SizeByAspectRatio {
		args.Width, args.Height = 0, 0
	}
	return Call{Key: contract.NewOperationKey("codex"), Handle: contract.NewPublicHandle(), Tool: hubu.ToolGenerateImage, Args: args}
}

// NewEdit is a new edit_image call by model of the results inputs, making the first input's
// size.
func NewEdit(model string, inputs ...string) Call {
	c := NewCall(model)
	c.Tool, c.Args.Prompt, c.Args.InputImages = hubu.ToolEditImage, "make the fox blue", inputs
	c.Args.Width, c.Args.Height = 0, 0
	return c
}

// AuthorizeRequest is the call's authorization request as the Store takes it, for tests
// that call the Store directly.
func (c Call) AuthorizeRequest() hubu.AuthorizeRequest {
	r := c.Request()
	return hubu.AuthorizeRequest{OperationKey: r.OperationKey, PublicHandle: r.PublicHandle, Tool: string(r.Tool), RequestHash: r.RequestHash,
		Arguments: c.Args}
}

// Request is the call's authorization request, with the hash of its arguments.
func (c Call) Request() hubuapi.AuthorizeRequest {
	args, _ := json.Marshal(c.Args)
	tool := cmp.Or(c.Tool, hubu.ToolGenerateImage)
	h := sha256.Sum256(append([]byte(tool+"\x00"), args...))
	return hubuapi.AuthorizeRequest{OperationKey: c.Key, PublicHandle: c.Handle, Tool: hubuapi.Tool(tool),
		RequestHash: hex.EncodeToString(h[:]), Arguments: c.Args}
}

// Count runs a query that counts.
func (e *Env) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkLedger fails t unless a final operation holds nothing, an open one holds exactly its
// amount, captures never exceed the amount, and each budget period's usage equals its
// operations' outstanding holds plus captures.
func (e *Env) checkLedger(t testing.TB) {
	t.Helper()
	rows, err := e.Pool.Query(context.Background(), `
		SELECT o.public_handle, o.state, o.amount_micros,
		       coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0),
		       coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0),
		       coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)
		FROM operations o LEFT JOIN ledger_entries l ON l.operation_id = o.id
		GROUP BY o.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var handle, state string
		var amount, held, captured, released int64
		if err := rows.Scan(&handle, &state, &amount, &held, &captured, &released); err != nil {
			t.Fatal(err)
		}
		outstanding := held - captured - released
		final := hubu.State(state).Final()
		switch {
		case final && outstanding != 0:
			t.Errorf("ledger: final operation %s (%s) still holds %d", handle, state, outstanding)
		case !final && outstanding != amount:
			t.Errorf("ledger: open operation %s (%s) holds %d, want %d", handle, state, outstanding, amount)
		case captured > amount || outstanding < 0:
			t.Errorf("ledger: operation %s captured %d of %d (outstanding %d)", handle, captured, amount, outstanding)
		case state == "denied" && held != 0 && captured != 0:
			t.Errorf("ledger: denied operation %s captured %d", handle, captured)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	mismatch := e.Count(t, `
		SELECT count(*) FROM budget_usage u
		FULL JOIN (
			SELECT o.agent_id, o.budget_day,
			       sum(CASE l.kind WHEN 'hold' THEN l.amount_micros WHEN 'release' THEN -l.amount_micros ELSE 0 END) AS used
			FROM operations o JOIN ledger_entries l ON l.operation_id = o.id
			GROUP BY o.agent_id, o.budget_day
		) x ON x.agent_id = u.agent_id AND x.budget_day = u.day
		WHERE coalesce(u.used_micros, 0) <> coalesce(x.used, 0)`)
	if mismatch != 0 {
		t.Errorf("budget usage disagrees with the ledger on %d days", mismatch)
	}
}

// Executor is a fake executor: it records the decisions it is handed and can be told to
// fail the next hand-offs.
type Executor struct {
	mu        sync.Mutex
	decisions []hubu.Decision
	failNext  int
	hook      func(hubu.Decision) error // called first, outside the lock; its error fails the hand-off
}

func (x *Executor) Execute(_ context.Context, d hubu.Decision) error {
	x.mu.Lock()
	hook := x.hook
	x.mu.Unlock()
	if hook != nil {
		if err := hook(d); err != nil {
			return err
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.failNext > 0 {
		x.failNext--
		return errors.New("executor unavailable")
	}
	x.decisions = append(x.decisions, d)
	return nil
}

// OnExecute makes every hand-off call hook first.
func (x *Executor) OnExecute(hook func(hubu.Decision) error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.hook = hook
}

// Decisions are the decisions handed off, in order.
func (x *Executor) Decisions() []hubu.Decision {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]hubu.Decision(nil), x.decisions...)
}

// FailNext makes the next n hand-offs fail.
func (x *Executor) FailNext(n int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.failNext = n
}
