package httpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/kit/leaktest"
	"hubu.dev/hubu/proto/apitest"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/gongbuspec"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/httpserver"
)

// TestMain fails the package when a test leaves a goroutine behind. Idle keep-alive
// connections of the shared HTTP transport are not leaks.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}

const (
	serviceToken = "gongbu-service-token-for-tests"
	agentA       = "hubu_agent_a_token"
	agentB       = "hubu_agent_b_token"
)

type bundle struct {
	env       *gongbutest.Env
	url       string
	validator *apitest.Transport
	dbDown    atomic.Bool // readiness sees the database down
	service   *gongbuapi.ClientWithResponses
	anonymous *gongbuapi.ClientWithResponses
}

// setup serves Gongbu over real HTTP on its own database, with a fake Hubu and a fake
// provider that honours idempotency keys; options change the server before it serves.
func setup(t *testing.T, options ...func(*httpserver.Server, *gongbutest.Env)) *bundle {
	t.Helper()
	env := gongbutest.New(t, true)
	b := &bundle{env: env}
	srv := &httpserver.Server{
		Executions: env.Service, Authority: env.Authority, ServiceToken: serviceToken, Logger: env.Service.Logger,
		Ping: func(ctx context.Context) error {
			if b.dbDown.Load() {
				return errors.New("database down (test)")
			}
			return env.Store.Ping(ctx)
		},
	}
	for _, o := range options {
		o(srv, env)
	}
	ts := httptest.NewServer(srv.Handler(prometheus.NewRegistry()))
	t.Cleanup(ts.Close)
	doc, err := gongbuspec.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	b.url = ts.URL
	b.validator = apitest.NewTransport(t, doc, http.DefaultTransport)
	b.service = b.client(t, serviceToken)
	b.anonymous = b.client(t, "")
	// Someone else's agent must exist in Hubu for the ownership checks.
	env.Authority.Issue(gongbutest.NewDecision(), "succeeded", agentB)
	t.Cleanup(func() {
		if b.validator.Validated() == 0 {
			t.Error("no response was validated against the spec")
		}
		if logs := env.Logs.String(); strings.Contains(logs, serviceToken) || strings.Contains(logs, "hubu_agent_") {
			t.Error("Gongbu logged a token")
		}
	})
	return b
}

// client returns a generated client whose every response is validated against the spec.
func (b *bundle) client(t *testing.T, token string) *gongbuapi.ClientWithResponses {
	t.Helper()
	c, err := gongbuapi.NewClientWithResponses(b.url,
		gongbuapi.WithHTTPClient(&http.Client{Transport: b.validator, Timeout: 30 * time.Second}),
		gongbuapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
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

// request is the body Hubu sends for a decision.
func request(d gongbu.Decision) gongbuapi.ExecutionRequest {
	return gongbuapi.ExecutionRequest{
		DecisionId: d.DecisionID, PublicHandle: d.PublicHandle, AgentId: d.AgentID, Tool: gongbuapi.ExecutionRequestTool(d.Tool),
		Scope:     gongbuapi.Scope{Provider: d.Scope.Provider, Model: d.Scope.Model, Size: d.Scope.Size},
		Arguments: d.Arguments, AmountMicros: d.AmountMicros, Currency: d.Currency,
	}
}

func rawBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// problemCode is the stable code of a problem+json body.
func problemCode(t *testing.T, body []byte) string {
	t.Helper()
	var p gongbuapi.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("not a problem body: %s", body)
	}
	return string(p.Code)
}

func (b *bundle) execute(t *testing.T, c *gongbuapi.ClientWithResponses, d gongbu.Decision) *gongbuapi.ExecuteResponse {
	t.Helper()
	resp, err := c.ExecuteWithResponse(context.Background(), nil, request(d))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
