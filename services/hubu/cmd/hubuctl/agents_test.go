package main

import (
	"encoding/json"
	"strings"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
)

func TestSetPolicyChangesOnlyGivenFields(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	r := runCLI(t, f.env(), "agent", "set-policy", testAgent, "--auto-approve-micros", "70000", "--models", "flux-dev, flux-pro-1.1")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Policy updated.") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var got hubuapi.Policy
	if err := json.Unmarshal(f.body("PUT /v1/agents/"+testAgent+"/policy"), &got); err != nil {
		t.Fatal(err)
	}
	want := hubuapi.Policy{
		Currency: "USD", PerOperationCeilingMicros: 2_000_000, AutoApproveLimitMicros: 70_000, BudgetMicros: 9_000_000,
		BudgetPeriod: "week", AllowedProviders: []string{"bfl"}, AllowedModels: []string{"flux-dev", "flux-pro-1.1"},
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("PUT policy = %s, want %s", g, w)
	}
}

func TestAgentCreate(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)

	r := runCLI(t, f.env(), "agent", "create", "--name", "demo")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "Token: agent-token-xyz\n") || !strings.Contains(r.stdout, "will not be shown again") {
		t.Errorf("stdout lacks the token and its note: %q", r.stdout)
	}
	if strings.Contains(r.stdout, testToken) {
		t.Errorf("stdout shows the operator token")
	}
	if got := string(f.body("POST /v1/agents")); got != `{"name":"demo"}` {
		t.Errorf("without policy flags the body is %s, want only the name", got)
	}

	// Partial policy flags start from the defaults.
	r = runCLI(t, f.env(), "agent", "create", "--name", "demo", "--account", "acct:team", "--ceiling-micros", "3000000", "--providers", "")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var got hubuapi.AgentCreate
	if err := json.Unmarshal(f.body("POST /v1/agents"), &got); err != nil {
		t.Fatal(err)
	}
	pol := defaultPolicy()
	pol.PerOperationCeilingMicros = 3_000_000
	pol.AllowedProviders = []string{}
	account := "acct:team"
	want := hubuapi.AgentCreate{Name: "demo", Account: &account, Policy: &pol}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("create body = %s, want %s", g, w)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
