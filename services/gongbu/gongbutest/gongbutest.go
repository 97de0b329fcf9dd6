// Package gongbutest holds the fakes at Gongbu's edges — Hubu as the Authority and a
// scripted paid Provider — and an Env that wires them, with a controllable clock, to a real
// execution.Service on a fresh Postgres database. Only tests import it.
package gongbutest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/postgres"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/sqltest"
)

// Timings of every Env's services.
const (
	Lease        = time.Minute
	PollInterval = 2 * time.Second
	PollDeadline = 10 * time.Minute
)

// ErrDown is what a fake answers while it is down.
var ErrDown = errors.New("connection refused (fake)")

// AtOnce runs f(0) … f(n-1), each on a goroutine of its own, releases them together and
// waits for them all.
func AtOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// NewDecision returns a valid decision for a 1024x1024 flux-dev image.
func NewDecision() gongbu.Decision {
	seed := int64(42)
	return gongbu.Decision{
		DecisionID:   uuid.New(),
		PublicHandle: contract.NewPublicHandle(),
		AgentID:      uuid.New(),
		Tool:         "generate_image",
		Scope:        gongbu.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"},
		Arguments:    gongbu.ImageArguments{Prompt: "an origami fox", Model: "flux-dev", Width: 1024, Height: 1024, Seed: &seed},
		AmountMicros: 25_000,
		Currency:     "USD",
	}
}

// Env is an execution.Service on its own database with fakes at its edges.
type Env struct {
	Pool      *pgxpool.Pool
	DBURL     string
	Store     *postgres.Store
	Clock     *testclock.Clock
	Authority *Authority
	Provider  *Provider
	Service   *execution.Service
	Logs      *testlog.Buffer
}

// New returns an Env whose provider honours idempotency keys or not.
func New(t testing.TB, honours bool) *Env {
	t.Helper()
	pool, dbURL := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	return newEnv(pool, dbURL, honours)
}

// NewCounted is New on a pool of one connection whose traffic trips counts, for tests that
// pin the round trips of a path (see sqltest.RoundTrips).
func NewCounted(t testing.TB, honours bool, trips *sqltest.RoundTrips) *Env {
	t.Helper()
	dbURL := sqltest.NewDatabase(t, "gongbu", gongbusql.Migrations())
	return newEnv(sqltest.NewCountedPool(t, dbURL, trips), dbURL, honours)
}

func newEnv(pool *pgxpool.Pool, dbURL string, honours bool) *Env {
	e := &Env{
		Pool: pool, DBURL: dbURL, Store: postgres.NewStore(pool), Clock: testclock.New(),
		Authority: NewAuthority(), Provider: NewProvider(honours), Logs: &testlog.Buffer{},
	}
	e.Service = e.NewService(e.Provider)
	return e
}

// NewService returns another service on the same database, clock and Authority, as a
// second worker process or a restarted one would be.
func (e *Env) NewService(p gongbu.Provider) *execution.Service {
	return &execution.Service{
		Store: e.Store, Providers: map[string]gongbu.Provider{p.Name(): p}, Authority: e.Authority,
		Logger: slog.New(slog.NewJSONHandler(e.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:    e.Clock.Now, Lease: Lease, PollInterval: PollInterval, PollDeadline: PollDeadline,
		// The tests drive every poll through Tick and the controllable clock.
		FirstPoll: -1,
	}
}

// Issue makes the Authority know a new decision in state dispatching and returns it.
func (e *Env) Issue(agentToken string) gongbu.Decision { return e.IssueIn("dispatching", agentToken) }

// IssueIn makes the Authority know a new decision in an operation state and returns it.
func (e *Env) IssueIn(state, agentToken string) gongbu.Decision {
	d := NewDecision()
	e.Authority.Issue(d, state, agentToken)
	return d
}

// IssueWith makes the Authority know a new decision in state dispatching, changed by change,
// and returns it.
func (e *Env) IssueWith(agentToken string, change func(*gongbu.Decision)) gongbu.Decision {
	d := NewDecision()
	change(&d)
	e.Authority.Issue(d, "dispatching", agentToken)
	return d
}

// Executions counts the rows in the executions table.
func (e *Env) Executions(t testing.TB) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), "SELECT count(*) FROM executions").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Epoch returns the database's epoch.
func (e *Env) Epoch(t testing.TB) gongbu.Epoch {
	t.Helper()
	ep, err := e.Store.Epoch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// Get returns the execution of a decision, failing the test when there is none.
func (e *Env) Get(t testing.TB, id uuid.UUID) gongbu.Execution {
	t.Helper()
	x, err := e.Store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Tick runs one background pass, failing the test on error.
func (e *Env) Tick(t testing.TB) {
	t.Helper()
	if err := e.Service.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}
