package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

func TestAuthorizeNewThenReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "codex-desktop", nil)
	c := newCall("flux-dev")

	first := authorize(t, a, c)
	if first.StatusCode() != http.StatusCreated || first.HTTPResponse.Header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("first: %d replayed=%q %s", first.StatusCode(), first.HTTPResponse.Header.Get("Idempotent-Replayed"), first.Body)
	}
	op := *first.JSON201
	if op.State != hubuapi.OperationStateExecuting || op.AmountMicros != 25_000 || op.Currency != "USD" || op.DecisionId == nil {
		t.Fatalf("first: %+v", op)
	}
	if op.HeldMicros != 25_000 || op.Scope != (hubuapi.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"}) {
		t.Fatalf("hold or scope: %+v", op)
	}
	if op.AgentId != a.ID || op.Account != "acct:codex-desktop" {
		t.Fatalf("agent or account: %+v", op)
	}

	for range 3 {
		again := authorize(t, a, c)
		if again.StatusCode() != http.StatusOK || again.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %s", again.StatusCode(), again.Body)
		}
		r := *again.JSON200
		if r.PublicHandle != op.PublicHandle || *r.DecisionId != *op.DecisionId || r.State != op.State {
			t.Fatalf("replay returned another record: %+v", r)
		}
	}
	if n := len(b.Executor.Decisions()); n != 1 {
		t.Fatalf("executor got %d decisions, want 1", n)
	}
	if n := b.Count(t, "SELECT count(*) FROM operations"); n != 1 {
		t.Fatalf("%d operations, want 1", n)
	}
	if n := b.Count(t, "SELECT count(*) FROM ledger_entries"); n != 1 {
		t.Fatalf("%d ledger entries, want one hold", n)
	}
}

// The same key for another agent is another operation: keys are scoped by agent.
func TestSameKeyTwoAgents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a1, a2 := b.NewAgent(t, "one", nil), b.NewAgent(t, "two", nil)
	c := newCall("flux-dev")
	op1 := mustOperation(t, authorize(t, a1, c))
	c2 := c
	c2.Handle = newCall("flux-dev").Handle
	resp := authorize(t, a2, c2)
	if resp.StatusCode() != http.StatusCreated {
		t.Fatalf("second agent: %d %s", resp.StatusCode(), resp.Body)
	}
	if resp.JSON201.AgentId == op1.AgentId {
		t.Fatal("the second agent's operation names the first agent")
	}
	// The same public handle for a new key is refused: handles name one operation.
	c3 := newCall("flux-dev")
	c3.Handle = c.Handle
	if r := authorize(t, a2, c3); r.StatusCode() != http.StatusConflict || problemCode(t, r.Body) != "conflict" {
		t.Fatalf("reused handle: %d %s", r.StatusCode(), r.Body)
	}
}

// A request under the same key that asks for different work is refused. (A changed price or
// account is not such a request: see redelivery_test.go.)
func TestCreateNewOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name   string
		change func(t *testing.T, b *bundle, a agent, c *call)
	}{
		{"scope: model", func(t *testing.T, b *bundle, a agent, c *call) { c.Args.Model = "flux-pro-1.1" }},
		{"scope: size", func(t *testing.T, b *bundle, a agent, c *call) { c.Args.Width = 768 }},
		{"request", func(t *testing.T, b *bundle, a agent, c *call) { c.Args.Prompt = "a paper crane" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			a := b.NewAgent(t, "agent", nil)
			c := newCall("flux-dev")
			op := mustOperation(t, authorize(t, a, c))
			tc.change(t, b, a, &c)
			resp := authorize(t, a, c)
			if resp.StatusCode() != http.StatusConflict || problemCode(t, resp.Body) != "create_new_operation" {
				t.Fatalf("changed %s: %d %s", tc.name, resp.StatusCode(), resp.Body)
			}
			if n := b.Count(t, "SELECT count(*) FROM operations"); n != 1 {
				t.Fatalf("%d operations after the refused change, want 1", n)
			}
			got, err := a.Client.GetOperationWithResponse(ctx, op.PublicHandle)
			if err != nil || got.JSON200 == nil || got.JSON200.AmountMicros != op.AmountMicros || got.JSON200.Account != op.Account {
				t.Fatalf("the original record changed: %v %s", err, got.Body)
			}
		})
	}
}

// A redelivery of a recorded call decides nothing, so it takes no lock: it is answered while
// the agent's policy lock is held elsewhere (as by a decision in progress), which a new call of
// the agent waits for.
func TestRedeliveryWaitsForNoDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	c := newCall("flux-dev")
	first := spend(t, a, c, hubuapi.OperationStateExecuting)

	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM policies WHERE agent_id = $1 FOR UPDATE", a.ID); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := a.Client.AuthorizeWithResponse(rctx, c.Request())
	if err != nil {
		t.Fatalf("a redelivery while the agent's lock is held: %v", err)
	}
	if resp.JSON200 == nil || resp.JSON200.PublicHandle != first.PublicHandle {
		t.Fatalf("a redelivery while the agent's lock is held: %d %s", resp.StatusCode(), resp.Body)
	}

	answered := make(chan *hubuapi.AuthorizeResponse, 1)
	go func() {
		resp, _ := a.Client.AuthorizeWithResponse(ctx, newCall("flux-dev").Request())
		answered <- resp
	}()
	waitfor.True(t, 10*time.Second, "the new call to wait for the agent's lock", func() bool {
		return b.Count(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'") > 0
	})
	select {
	case resp := <-answered:
		t.Fatalf("a new call was decided while the agent's lock was held: %v", resp)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-answered:
		if resp == nil || resp.JSON201 == nil {
			t.Fatalf("the new call once the lock was free: %v", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new call was not decided once the agent's lock was free")
	}
}

func TestConcurrentDeliveriesOfOneKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	c := newCall("flux-dev")
	const n = 50
	statuses := make([]int, n)
	handles := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp := authorize(t, a, c)
			statuses[i] = resp.StatusCode()
			if op := resp.JSON200; op != nil {
				handles[i] = op.PublicHandle
			} else if op := resp.JSON201; op != nil {
				handles[i] = op.PublicHandle
			}
		})
	}
	wg.Wait()
	created := 0
	for i, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("delivery %d: status %d", i, s)
		}
		if handles[i] != c.Handle {
			t.Fatalf("delivery %d saw handle %q", i, handles[i])
		}
	}
	if created != 1 {
		t.Fatalf("%d deliveries created a record, want 1", created)
	}
	if got := b.Count(t, "SELECT count(*) FROM operations"); got != 1 {
		t.Fatalf("%d operations, want 1", got)
	}
	if got := b.Count(t, "SELECT count(*) FROM ledger_entries WHERE kind = 'hold'"); got != 1 {
		t.Fatalf("%d holds, want 1", got)
	}
	// A delivery that finds the decision still being handed off re-sends it (executors are
	// idempotent per decision id), so the executor may see it more than once, but only ever
	// one decision.
	distinct := map[string]bool{}
	for _, d := range b.Executor.Decisions() {
		distinct[d.DecisionID.String()] = true
	}
	if len(distinct) != 1 {
		t.Fatalf("executor got %d distinct decisions, want 1", len(distinct))
	}
}

func TestBudgetRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// flux-dev costs 25 000 micros: the budget fits exactly 10.
	a := b.NewAgent(t, "agent", policy(50_000, 1_000_000, 250_000))
	const n = 50
	answers := make([]*hubuapi.AuthorizeResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			answers[i], errs[i] = a.Client.AuthorizeWithResponse(context.Background(), newCall("flux-dev").Request())
		})
	}
	wg.Wait()
	approved := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("authorization %d: %v", i, errs[i])
		}
		switch op := mustOperation(t, answers[i]); {
		case op.State == hubuapi.OperationStateExecuting:
			approved++
		case op.State == hubuapi.OperationStateDenied && op.Denial != nil && string(op.Denial.Code) == hubu.DenialBudgetExceeded:
		default:
			t.Fatalf("operation %d: state %s denial %+v", i, op.State, op.Denial)
		}
	}
	if approved != 10 {
		t.Fatalf("%d approved, want exactly 10", approved)
	}
	caps, err := a.Client.GetCapabilitiesWithResponse(context.Background())
	if err != nil || caps.JSON200 == nil {
		t.Fatalf("capabilities: %v %s", err, caps.Body)
	}
	if bu := caps.JSON200.Budget; bu.UsedMicros != 250_000 || bu.RemainingMicros != 0 {
		t.Fatalf("budget after the race: %+v", bu)
	}
}

// Denials are records too: a re-delivered denied call gets the same denial, not a new try.
func TestDenialIsRecordedAndReplayed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "agent", policy(50_000, 50_000, 5_000_000)) // ceiling below flux-pro-1.1-ultra
	c := newCall("flux-pro-1.1-ultra")
	op := mustOperation(t, authorize(t, a, c))
	if op.State != hubuapi.OperationStateDenied || op.Denial == nil || op.Denial.Code != hubuapi.DenialCodeDenied || op.HeldMicros != 0 {
		t.Fatalf("above the ceiling: %+v", op)
	}
	again := authorize(t, a, c)
	if again.StatusCode() != http.StatusOK || again.JSON200.State != hubuapi.OperationStateDenied {
		t.Fatalf("replay of a denial: %d %s", again.StatusCode(), again.Body)
	}
	restricted := b.NewAgent(t, "restricted", &hubuapi.Policy{Currency: "USD", AutoApproveLimitMicros: 50_000,
		PerOperationCeilingMicros: 1_000_000, BudgetMicros: 1_000_000, BudgetPeriod: hubuapi.PolicyBudgetPeriodDay,
		AllowedProviders: []string{"bfl"}, AllowedModels: []string{"flux-schnell"}})
	op = mustOperation(t, authorize(t, restricted, newCall("flux-dev")))
	if op.State != hubuapi.OperationStateDenied || op.Denial.Code != hubuapi.DenialCodeDenied {
		t.Fatalf("model outside the allowed list: %+v", op)
	}
	if len(b.Executor.Decisions()) != 0 {
		t.Fatal("a denied operation reached the executor")
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "agent", &hubuapi.Policy{Currency: "USD", AutoApproveLimitMicros: 50_000,
		PerOperationCeilingMicros: 1_000_000, BudgetMicros: 5_000_000, BudgetPeriod: hubuapi.PolicyBudgetPeriodWeek,
		AllowedProviders: []string{"*"}, AllowedModels: []string{"flux-dev", "flux-pro-1.1"}})
	mustOperation(t, authorize(t, a, newCall("flux-dev")))
	resp, err := a.Client.GetCapabilitiesWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("capabilities: %v %s", err, resp.Body)
	}
	c := resp.JSON200
	if len(c.Prices) != 2 || c.Budget.UsedMicros != 25_000 || c.Budget.RemainingMicros != 4_975_000 || c.Budget.Period != hubuapi.BudgetPeriodWeek {
		t.Fatalf("capabilities: %+v", c)
	}
	if c.AutoApproveLimitMicros != 50_000 || c.Tools[0] != hubuapi.GenerateImage {
		t.Fatalf("capabilities: %+v", c)
	}
}

func TestReplayMustMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	c := newCall("flux-dev")
	mustOperation(t, authorize(t, a, c))

	otherHandle := c
	otherHandle.Handle = newCall("flux-dev").Handle
	if r := authorize(t, a, otherHandle); r.StatusCode() != http.StatusConflict || problemCode(t, r.Body) != "conflict" {
		t.Fatalf("same key, another public handle: %d %s", r.StatusCode(), r.Body)
	}
	// Same key and hash, other arguments: the hash is not trusted alone.
	req := c.Request()
	req.Arguments.Prompt = "a paper crane"
	resp, err := a.Client.AuthorizeWithResponse(context.Background(), req)
	if err != nil || resp.StatusCode() != http.StatusConflict || problemCode(t, resp.Body) != "create_new_operation" {
		t.Fatalf("same key and hash, other arguments: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
}

func TestCapabilitiesLeaveOutWhatTheCeilingForbids(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "agent", policy(10_000, 40_000, 5_000_000))
	caps, _ := a.Client.GetCapabilitiesWithResponse(context.Background())
	var models []string
	for _, p := range caps.JSON200.Prices {
		models = append(models, p.Model)
	}
	if got := strings.Join(models, ","); got != "flux-2-klein-4b,flux-2-klein-9b,flux-2-pro,flux-dev,flux-kontext-pro,flux-pro-1.1" {
		t.Fatalf("models %s, want those at or under the 0.04 ceiling", got)
	}
}
