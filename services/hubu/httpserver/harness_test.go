package httpserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

	"hubu.dev/hubu/proto/apitest"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/httpserver"
	"hubu.dev/hubu/services/hubu/lifecycle"
	"hubu.dev/hubu/services/hubu/postgres"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

// clock is a controllable time source.
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

// executor is a fake at the edge this package is not about: it records the decisions it
// is handed and can be told to fail the next n hand-offs.
type executor struct {
	mu        sync.Mutex
	decisions []hubu.Decision
	failNext  int
	hook      func(hubu.Decision) error // called first, outside the lock; its error fails the hand-off
}

func (e *executor) Execute(_ context.Context, d hubu.Decision) error {
	e.mu.Lock()
	hook := e.hook
	e.mu.Unlock()
	if hook != nil {
		if err := hook(d); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failNext > 0 {
		e.failNext--
		return fmt.Errorf("executor unavailable")
	}
	e.decisions = append(e.decisions, d)
	return nil
}

// OnExecute makes every hand-off call hook first.
func (e *executor) OnExecute(hook func(hubu.Decision) error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hook = hook
}

func (e *executor) Decisions() []hubu.Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]hubu.Decision(nil), e.decisions...)
}

func (e *executor) FailNext(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failNext = n
}

type bundle struct {
	pool          *pgxpool.Pool
	store         *postgres.Store
	life          *lifecycle.Service
	clock         *clock
	exec          *executor
	url           string
	validator     *apitest.Transport
	operatorToken string
	logs          *syncBuffer
	operator      *hubuapi.ClientWithResponses
	service       *hubuapi.ClientWithResponses
	anonymous     *hubuapi.ClientWithResponses
}

// setup starts Hubu over real HTTP on its own database, with an operator and a service credential.
func setup(t testing.TB) *bundle { return setupWithTTL(t, 24*time.Hour) }

// setupWithTTL is setup with another approval window.
func setupWithTTL(t testing.TB, approvalTTL time.Duration) *bundle {
	t.Helper()
	pool, _ := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	clk := &clock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	store := postgres.NewStore(pool, approvalTTL)
	exec := &executor{}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	life := &lifecycle.Service{Store: store, Executor: exec, Logger: logger, Now: clk.Now, RetryAfter: 10 * time.Second}
	srv := &httpserver.Server{Store: store, Lifecycle: life, Logger: logger, Now: clk.Now}
	ts := httptest.NewServer(srv.Handler(prometheus.NewRegistry()))
	t.Cleanup(ts.Close)

	doc, err := hubuapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{pool: pool, store: store, life: life, clock: clk, exec: exec, url: ts.URL,
		validator: apitest.NewTransport(t, doc, http.DefaultTransport)}
	opToken, err := store.CreateCredential(context.Background(), hubu.RoleOperator, "alice", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	svcToken, err := store.CreateCredential(context.Background(), hubu.RoleService, "gongbu", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.logs = logs
	b.operatorToken = opToken
	b.operator = b.client(t, opToken)
	b.service = b.client(t, svcToken)
	b.anonymous = b.client(t, "")
	t.Cleanup(func() {
		checkLedgerInvariants(t, pool)
		checkNoSecretsLogged(t, logs.String())
	})
	return b
}

// checkNoSecretsLogged fails when Hubu's log holds a token or a private operation key.
func checkNoSecretsLogged(t testing.TB, logs string) {
	t.Helper()
	for _, secret := range []string{"hubu:operation:v1:", "hubu_agent_", "hubu_operator_", "hubu_service_"} {
		if strings.Contains(logs, secret) {
			t.Errorf("Hubu logged a secret (%s…)", secret)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// client returns a generated client whose every response is validated against the spec.
func (b *bundle) client(t testing.TB, token string) *hubuapi.ClientWithResponses {
	t.Helper()
	c, err := hubuapi.NewClientWithResponses(b.url,
		hubuapi.WithHTTPClient(&http.Client{Transport: b.validator, Timeout: 30 * time.Second}),
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

type agent struct {
	id     uuid.UUID
	token  string
	client *hubuapi.ClientWithResponses
}

// newAgent creates an agent through the API, with the default policy when pol is nil.
func (b *bundle) newAgent(t testing.TB, name string, pol *hubuapi.Policy) agent {
	t.Helper()
	resp, err := b.operator.CreateAgentWithResponse(context.Background(), hubuapi.AgentCreate{Name: name, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON201 == nil {
		t.Fatalf("create agent: %d %s", resp.StatusCode(), resp.Body)
	}
	return agent{id: resp.JSON201.Agent.Id, token: resp.JSON201.Token, client: b.client(t, resp.JSON201.Token)}
}

func policy(auto, ceiling, budget int64) *hubuapi.Policy {
	return &hubuapi.Policy{
		Currency: "USD", AutoApproveLimitMicros: auto, PerOperationCeilingMicros: ceiling, BudgetMicros: budget,
		BudgetPeriod: hubuapi.PolicyBudgetPeriodDay, AllowedProviders: []string{"*"}, AllowedModels: []string{"*"},
	}
}

// call is one spend call as the router would send it: a private key, a public handle, the
// arguments and their hash.
type call struct {
	key, handle string
	args        hubuapi.GenerateImageArguments
}

func newCall(model string) call {
	return call{
		key:    "hubu:operation:v1:codex:" + uuid.NewString(),
		handle: "hubu:public-operation:v1:" + uuid.NewString(),
		args:   hubuapi.GenerateImageArguments{Prompt: "an origami fox", Model: model, Width: 1024, Height: 1024},
	}
}

func (c call) request() hubuapi.AuthorizeRequest {
	args, _ := json.Marshal(c.args)
	h := sha256.Sum256(append([]byte("generate_image\x00"), args...))
	return hubuapi.AuthorizeRequest{OperationKey: c.key, PublicHandle: c.handle, Tool: hubuapi.GenerateImage,
		RequestHash: hex.EncodeToString(h[:]), Arguments: c.args}
}

func authorize(t testing.TB, a agent, c call) *hubuapi.AuthorizeResponse {
	t.Helper()
	resp, err := a.client.AuthorizeWithResponse(context.Background(), c.request())
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// mustOperation returns the operation of a 200 or 201 answer.
func mustOperation(t testing.TB, resp *hubuapi.AuthorizeResponse) hubuapi.Operation {
	t.Helper()
	switch {
	case resp.JSON201 != nil:
		return *resp.JSON201
	case resp.JSON200 != nil:
		return *resp.JSON200
	}
	t.Fatalf("authorize: %d %s", resp.StatusCode(), resp.Body)
	return hubuapi.Operation{}
}

// problemCode is the stable code of a problem+json body.
func problemCode(t testing.TB, body []byte) string {
	t.Helper()
	var p hubuapi.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("not a problem body: %s", body)
	}
	return string(p.Code)
}

func count(t testing.TB, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkLedgerInvariants holds after every test: a final operation holds nothing, an open
// one holds exactly its amount, captures never exceed the amount, and each budget period's
// usage equals its operations' outstanding holds plus captures.
func checkLedgerInvariants(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
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
	mismatch := count(t, pool, `
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
