package httpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu/hubutest"
)

// Names the tests here use for what hubutest provides.
type (
	agent = hubutest.Agent
	call  = hubutest.Call
)

var newCall = hubutest.NewCall

type bundle struct {
	*hubutest.Env
	service, anonymous *hubuapi.ClientWithResponses
}

// setup starts Hubu over real HTTP on its own database, with an operator and a service credential.
func setup(t testing.TB) *bundle { return setupWithTTL(t, 24*time.Hour) }

// setupWithTTL is setup with another approval window.
func setupWithTTL(t testing.TB, approvalTTL time.Duration) *bundle {
	t.Helper()
	e := hubutest.New(t, &hubutest.Options{ApprovalTTL: approvalTTL})
	return &bundle{Env: e, service: e.Client(t, e.ServiceToken), anonymous: e.Client(t, "")}
}

func policy(auto, ceiling, budget int64) *hubuapi.Policy {
	return &hubuapi.Policy{
		Currency: "USD", AutoApproveLimitMicros: auto, PerOperationCeilingMicros: ceiling, BudgetMicros: budget,
		BudgetPeriod: hubuapi.PolicyBudgetPeriodDay, AllowedProviders: []string{"*"}, AllowedModels: []string{"*"},
	}
}

func authorize(t testing.TB, a agent, c call) *hubuapi.AuthorizeResponse {
	t.Helper()
	resp, err := a.Client.AuthorizeWithResponse(context.Background(), c.Request())
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

// reply is the status and body of a generated client's response, for tables of requests;
// a request that failed has status 0 and the error as its body.
type reply struct {
	status int
	body   []byte
}

func replyOf[R interface {
	StatusCode() int
	GetBody() []byte
}](r R, err error) reply {
	if err != nil {
		return reply{body: []byte(err.Error())}
	}
	return reply{r.StatusCode(), r.GetBody()}
}

// spend authorizes c as a and requires the operation to be in state want.
func spend(t testing.TB, a agent, c call, want hubuapi.OperationState) hubuapi.Operation {
	t.Helper()
	op := mustOperation(t, authorize(t, a, c))
	if op.State != want {
		t.Fatalf("authorized %s: %+v, want %s", c.Args.Model, op, want)
	}
	return op
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
