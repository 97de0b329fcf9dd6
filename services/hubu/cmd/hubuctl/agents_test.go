package main

import (
	"encoding/json"
	"regexp"
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

// An invite prints its code alone on the last line, for scripts, and sends the TTL in seconds.
func TestAgentInvite(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	r := runCLI(t, f.env(), "agent", "invite", testAgent)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if last := lines[len(lines)-1]; last != testInvite {
		t.Fatalf("the last line is %q, want the code alone:\n%s", last, r.stdout)
	}
	for _, want := range []string{"for one sign-in until 2026-05-02 09:00:00Z", testAgent, "will not be shown again"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if got := string(f.body("POST /v1/agents/" + testAgent + "/invites")); got != `{"ttl_seconds":86400}` {
		t.Errorf("body %s, want the default of a day", got)
	}

	r = runCLI(t, f.env(), "agent", "invite", "--ttl", "2h", testAgent, "--json")
	if r.code != 0 {
		t.Fatalf("--json: exit %d, stderr %q", r.code, r.stderr)
	}
	var inv map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &inv); err != nil || len(inv) != 3 || inv["code"] != testInvite ||
		inv["agent_id"] != testAgent || inv["expires_at"] != "2026-05-02T09:00:00Z" {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if got := string(f.body("POST /v1/agents/" + testAgent + "/invites")); got != `{"ttl_seconds":7200}` {
		t.Errorf("body %s, want 7200 seconds", got)
	}
	for _, ttl := range []string{"1m", "168h"} {
		if r := runCLI(t, f.env(), "agent", "invite", testAgent, "--ttl", ttl); r.code != 0 {
			t.Errorf("--ttl %s: exit %d, stderr %q", ttl, r.code, r.stderr)
		}
	}
}

func TestAgentSetEmail(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	r := runCLI(t, f.env(), "agent", "set-email", testAgent, "Alice@Example.com")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Email set.") || !strings.Contains(r.stdout, "Alice@Example.com") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := string(f.body("PUT /v1/agents/" + testAgent + "/owner")); got != `{"email":"Alice@Example.com"}` {
		t.Errorf("body %s", got)
	}
	for _, args := range [][]string{{testAgent, "--clear"}, {testAgent, ""}} {
		r := runCLI(t, f.env(), append([]string{"agent", "set-email"}, args...)...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Email removed") || strings.Contains(r.stdout, "Email  ") {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		if got := string(f.body("PUT /v1/agents/" + testAgent + "/owner")); got != `{"email":""}` {
			t.Errorf("%q: body %s", args, got)
		}
	}
	requireOneErrorLine(t, runCLI(t, f.env(), "agent", "set-email", testAgent, "taken@example.com"), 1,
		"hubuctl: conflict: another agent already belongs to taken@example.com")
}

// agent create --email sets the email after making the agent; when Hubu refuses the email,
// the agent's token is printed all the same, and the refusal after it.
func TestAgentCreateWithEmail(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	r := runCLI(t, f.env(), "agent", "create", "--name", "demo", "--email", "alice@example.com")
	if r.code != 0 || !regexp.MustCompile(`(?m)^Email\s+alice@example.com$`).MatchString(r.stdout) || !strings.Contains(r.stdout, "Token: agent-token-xyz\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := string(f.body("POST /v1/agents")); got != `{"name":"demo"}` {
		t.Errorf("create body %s", got)
	}
	if got := string(f.body("PUT /v1/agents/" + testAgent + "/owner")); got != `{"email":"alice@example.com"}` {
		t.Errorf("owner body %s", got)
	}

	r = runCLI(t, f.env(), "agent", "create", "--name", "demo", "--email", "alice@example.com", "--json")
	var created hubuapi.AgentCreated
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil || created.Token != "agent-token-xyz" ||
		created.Agent.OwnerEmail == nil || *created.Agent.OwnerEmail != "alice@example.com" {
		t.Fatalf("--json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, f.env(), "agent", "create", "--name", "demo", "--email", "taken@example.com")
	if r.code != 1 || !strings.Contains(r.stdout, "Token: agent-token-xyz\n") || strings.Contains(r.stdout, "taken@") {
		t.Fatalf("a refused email: exit %d, stdout %q", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "the agent was created, but its email was not set (try hubuctl agent set-email "+testAgent+" EMAIL): conflict: another agent") ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("a refused email: stderr %q", r.stderr)
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
