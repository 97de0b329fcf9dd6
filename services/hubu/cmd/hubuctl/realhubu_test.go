package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu/hubutest"
)

// realHubu is Hubu over real HTTP on a database of its own, with an operator, alice, whose
// token hubuctl uses (env is hubuctl's environment; a test may change it).
type realHubu struct {
	*hubutest.Env
	t   *testing.T
	env map[string]string
	// secrets are tokens no hubuctl output may contain.
	secrets []string
}

// startRealHubu starts it with the clock at the real time, which the tests use too.
func startRealHubu(t *testing.T) *realHubu {
	e := hubutest.New(t, &hubutest.Options{Clock: testclock.At(time.Now())})
	return &realHubu{Env: e, t: t, secrets: []string{e.OperatorToken, e.ServiceToken},
		env: map[string]string{"HUBU_URL": e.URL, "HUBU_APPROVER_TOKEN": e.OperatorToken}}
}

// ctl runs hubuctl against h and returns what it printed; it fails the test when that holds
// a token.
func (h *realHubu) ctl(args ...string) (string, error) {
	h.t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return h.env[k] }, &out, &errOut)
	for _, s := range h.secrets {
		if strings.Contains(out.String()+errOut.String(), s) {
			h.t.Fatalf("hubuctl %v printed a token", args)
		}
	}
	return out.String() + errOut.String(), err
}

// TestAgainstRealHubu drives hubuctl against a real Hubu on a real Postgres: an operator
// creates an agent, the agent's spend is held, and hubuctl lists, approves, denies and shows it.
func TestAgainstRealHubu(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := startRealHubu(t)
	ctl, env := h.ctl, h.env

	out, err := ctl("agent", "create", "--name", "codex-desktop", "--json")
	if err != nil {
		t.Fatalf("agent create: %v %s", err, out)
	}
	var created hubuapi.AgentCreated
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Token, "hubu_agent_") {
		t.Fatalf("agent create --json: %v %s", err, out)
	}
	agentID := created.Agent.Id.String()
	if out, err := ctl("agent", "set-policy", agentID, "--auto-approve-micros", "10000"); err != nil || !strings.Contains(out, "USD 0.01") {
		t.Fatalf("set-policy: %v %s", err, out)
	}
	if out, err := ctl("agent", "list"); err != nil || !strings.Contains(out, "codex-desktop") {
		t.Fatalf("agent list: %v %s", err, out)
	}
	if out, err := ctl("prices", "set", "--provider", "bfl", "--model", "flux-dev", "--size", "*", "--amount-micros", "26000"); err != nil {
		t.Fatalf("prices set: %v %s", err, out)
	}
	if out, err := ctl("prices", "list"); err != nil || !strings.Contains(out, "USD 0.026 an image") {
		t.Fatalf("prices list: %v %s", err, out)
	}
	out, err = ctl("prices", "set", "--provider", "bfl", "--model", "flux-2-pro", "--first-mp-micros", "31000", "--extra-mp-micros", "16000", "--input-mp-micros", "14000")
	if err != nil || !strings.Contains(out, "USD 0.031 first MP, +USD 0.016 per further MP, +USD 0.014 per input MP") {
		t.Fatalf("prices set per megapixel: %v %s", err, out)
	}
	if out, err := ctl("prices", "set", "--provider", "bfl", "--model", "flux-2-pro", "--first-mp-micros", "1", "--amount-micros", "1"); err == nil {
		t.Fatalf("a flat and a per-megapixel price at once: %s", out)
	}

	agent := h.Client(t, created.Token)
	spend := func(prompt string) string {
		c := hubutest.NewCall("flux-dev")
		c.Args.Prompt = prompt
		resp, err := agent.AuthorizeWithResponse(ctx, c.Request())
		if err != nil || resp.JSON201 == nil || resp.JSON201.State != hubuapi.OperationStatePendingApproval {
			t.Fatalf("authorize: %v %s", err, resp.Body)
		}
		return resp.JSON201.PublicHandle
	}
	approveMe, denyMe := spend("an origami fox"), spend("a paper crane")

	out, err = ctl("approvals")
	if err != nil || !strings.Contains(out, approveMe) || !strings.Contains(out, denyMe) || !strings.Contains(out, "an origami fox") {
		t.Fatalf("approvals: %v %s", err, out)
	}
	if out, err := ctl("approve", approveMe); err != nil || !strings.Contains(out, "approved") {
		t.Fatalf("approve: %v %s", err, out)
	}
	if out, err := ctl("deny", denyMe, "--reason", "not today"); err != nil || !strings.Contains(out, "denied") {
		t.Fatalf("deny: %v %s", err, out)
	}
	// Approving a denied operation is refused with its code, and exit status 1.
	out, err = ctl("approve", denyMe)
	if err == nil || code(err) != 1 || !strings.Contains(out, "hubuctl: conflict:") {
		t.Fatalf("approve a denied operation: %v %s", err, out)
	}
	if out, err := ctl("operation", "show", approveMe); err != nil || !strings.Contains(out, "approved") || !strings.Contains(out, "USD 0.026") {
		t.Fatalf("operation show: %v %s", err, out)
	}
	if out, err := ctl("ledger", denyMe); err != nil || !strings.Contains(out, "hold") || !strings.Contains(out, "release") {
		t.Fatalf("ledger: %v %s", err, out)
	}
	if out, _ := ctl("approvals"); strings.Contains(out, approveMe) || strings.Contains(out, denyMe) {
		t.Fatalf("decided operations still pending: %s", out)
	}
	// An agent's token cannot approve, even through hubuctl.
	env["HUBU_APPROVER_TOKEN"] = created.Token
	if out, err := ctl("approvals"); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("approvals with an agent token: %v %s", err, out)
	}
}
