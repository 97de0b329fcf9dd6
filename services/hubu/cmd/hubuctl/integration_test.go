package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/httpserver"
	"hubu.dev/hubu/services/hubu/lifecycle"
	"hubu.dev/hubu/services/hubu/postgres"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

// realHubu is Hubu over real HTTP on a database of its own, with an operator, alice, whose
// token hubuctl uses (env is hubuctl's environment; a test may change it).
type realHubu struct {
	t     *testing.T
	store *postgres.Store
	url   string
	env   map[string]string
	// secrets are tokens no hubuctl output may contain.
	secrets []string
}

func startRealHubu(t *testing.T) *realHubu {
	t.Helper()
	pool, _ := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	store := postgres.NewStore(pool, 24*time.Hour)
	life := &lifecycle.Service{Store: store, Now: time.Now, RetryAfter: time.Minute}
	ts := httptest.NewServer((&httpserver.Server{Store: store, Lifecycle: life, Now: time.Now}).Handler(prometheus.NewRegistry()))
	t.Cleanup(ts.Close)
	opToken, err := store.CreateCredential(context.Background(), hubu.RoleOperator, "alice", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &realHubu{t: t, store: store, url: ts.URL, secrets: []string{opToken},
		env: map[string]string{"HUBU_URL": ts.URL, "HUBU_APPROVER_TOKEN": opToken}}
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
	if out, err := ctl("prices", "list"); err != nil || !strings.Contains(out, "USD 0.026") {
		t.Fatalf("prices list: %v %s", err, out)
	}

	agent, err := hubuapi.NewClientWithResponses(h.url, hubuapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+created.Token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	spend := func(prompt string) string {
		resp, err := agent.AuthorizeWithResponse(ctx, hubuapi.AuthorizeRequest{
			OperationKey: "hubu:operation:v1:codex:" + uuid.NewString(), PublicHandle: "hubu:public-operation:v1:" + uuid.NewString(),
			Tool: hubuapi.GenerateImage, RequestHash: strings.Repeat("ab", 32),
			Arguments: hubuapi.GenerateImageArguments{Prompt: prompt, Model: "flux-dev", Width: 1024, Height: 1024},
		})
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
