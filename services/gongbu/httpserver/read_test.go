package httpserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

func TestGetAndListExecutions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	list, err := b.service.ListExecutionsWithResponse(ctx)
	if err != nil || list.JSON200 == nil || list.JSON200.Executions == nil || len(list.JSON200.Executions) != 0 {
		t.Fatalf("empty list: %v %s", err, list.Body)
	}

	d1 := b.env.Issue(agentA)
	b.execute(t, b.service, d1)
	b.env.Clock.Advance(gongbutest.PollInterval)
	d2 := b.env.Issue(agentA)
	b.env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 422"))
	b.execute(t, b.service, d2)
	// d1's job finishes.
	b.env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.env.Tick(t)

	got, err := b.service.GetExecutionWithResponse(ctx, d1.DecisionID)
	if err != nil || got.JSON200 == nil {
		t.Fatalf("get: %v %d %s", err, got.StatusCode(), got.Body)
	}
	x := got.JSON200
	if x.State != gongbuapi.Succeeded || x.Result == nil || x.Result.ImageUrl != "https://provider.test/s.png" ||
		x.ChargedMicros == nil || *x.ChargedMicros != d1.AmountMicros || x.Reported == nil || !*x.Reported {
		t.Fatalf("get: %s", got.Body)
	}

	list, err = b.service.ListExecutionsWithResponse(ctx)
	if err != nil || list.JSON200 == nil || len(list.JSON200.Executions) != 2 {
		t.Fatalf("list: %v %s", err, list.Body)
	}
	if e := list.JSON200.Executions; e[0].DecisionId != d1.DecisionID || e[1].DecisionId != d2.DecisionID ||
		e[1].State != gongbuapi.Failed || e[1].Error == nil || e[1].Result != nil {
		t.Fatalf("list, oldest first: %s", list.Body)
	}

	for _, c := range []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"unknown decision", "/v1/executions/" + uuid.NewString(), serviceToken, http.StatusNotFound, "not_found"},
		{"get without a token", "/v1/executions/" + d1.DecisionID.String(), "", http.StatusUnauthorized, "unauthorized"},
		{"get with an agent's token", "/v1/executions/" + d1.DecisionID.String(), agentA, http.StatusForbidden, "forbidden"},
		{"list without a token", "/v1/executions", "", http.StatusUnauthorized, "unauthorized"},
		{"list with an agent's token", "/v1/executions", agentA, http.StatusForbidden, "forbidden"},
		{"a decision id that is not a UUID", "/v1/executions/not-a-uuid", serviceToken, http.StatusBadRequest, "invalid_arguments"},
	} {
		req, _ := http.NewRequest(http.MethodGet, b.url+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if status, body := b.do(t, req); status != c.status || problemCode(t, body) != c.code {
			t.Fatalf("%s: %d %s", c.name, status, body)
		}
	}
}

// do sends a hand-made request through the validating transport.
func (b *bundle) do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := (&http.Client{Transport: b.validator}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestOperationExecutionForAgents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.env.Issue(agentA)
	b.execute(t, b.service, d)
	agent := b.client(t, agentA)

	got, err := agent.GetOperationExecutionWithResponse(ctx, d.PublicHandle, nil)
	if err != nil || got.JSON200 == nil || got.JSON200.DecisionId != d.DecisionID || got.JSON200.State != gongbuapi.Submitted {
		t.Fatalf("own operation: %v %d %s", err, got.StatusCode(), got.Body)
	}

	// Hubu knows the operation as agent A's, but Gongbu has no execution for it yet.
	pending := b.env.Issue(agentA)

	for _, c := range []struct {
		name   string
		client *gongbuapi.ClientWithResponses
		handle string
		status int
		code   string
	}{
		{"another agent's operation", b.client(t, agentB), d.PublicHandle, http.StatusNotFound, "not_found"},
		{"an operation not executed yet", agent, pending.PublicHandle, http.StatusNotFound, "not_found"},
		{"an operation Hubu does not know", agent, "hubu:public-operation:v1:" + uuid.NewString(), http.StatusNotFound, "not_found"},
		{"the service credential is no agent", b.service, d.PublicHandle, http.StatusUnauthorized, "unauthorized"},
		{"a token Hubu does not know", b.client(t, "hubu_agent_unknown"), d.PublicHandle, http.StatusUnauthorized, "unauthorized"},
		{"no token", b.anonymous, d.PublicHandle, http.StatusUnauthorized, "unauthorized"},
		{"a malformed handle", agent, "hubu:public-operation:v1:not-a-uuid", http.StatusBadRequest, "invalid_arguments"},
		{"a private operation key", agent, "hubu:operation:v1:codex:" + uuid.NewString(), http.StatusBadRequest, "invalid_arguments"},
	} {
		resp, err := c.client.GetOperationExecutionWithResponse(ctx, c.handle, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != c.status || problemCode(t, resp.Body) != c.code {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode(), resp.Body)
		}
		if strings.Contains(string(resp.Body), d.DecisionID.String()) {
			t.Fatalf("%s: the answer reveals the execution: %s", c.name, resp.Body)
		}
	}

	b.env.Authority.SetDown(true)
	resp, err := agent.GetOperationExecutionWithResponse(ctx, d.PublicHandle, nil)
	if err != nil || resp.StatusCode() != http.StatusServiceUnavailable || problemCode(t, resp.Body) != "unavailable" {
		t.Fatalf("Hubu down: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
}

func TestProbesAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if r, err := b.anonymous.GetHealthzWithResponse(ctx); err != nil || r.JSON200 == nil {
		t.Fatalf("healthz: %v %s", err, r.Body)
	}
	if r, err := b.anonymous.GetReadyzWithResponse(ctx); err != nil || r.JSON200 == nil {
		t.Fatalf("readyz: %v %s", err, r.Body)
	}
	b.dbDown.Store(true)
	r, err := b.anonymous.GetReadyzWithResponse(ctx)
	if err != nil || r.StatusCode() != http.StatusServiceUnavailable || problemCode(t, r.Body) != "unavailable" {
		t.Fatalf("readyz with the database down: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if r, err := b.anonymous.GetHealthzWithResponse(ctx); err != nil || r.JSON200 == nil {
		t.Fatalf("healthz does not depend on the database: %v %s", err, r.Body)
	}

	resp, err := http.Get(b.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`gongbu_http_requests_total{method="GET",route="/healthz",status="200"} 2`,
		`gongbu_http_requests_total{method="GET",route="/readyz",status="503"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %s:\n%s", want, body)
		}
	}
}
