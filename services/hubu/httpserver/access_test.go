package httpserver_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/hubuapi"
)

func TestCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	alice, bob := b.NewAgent(t, "alice-agent", nil), b.NewAgent(t, "bob-agent", nil)
	op := mustOperation(t, authorize(t, alice, newCall("flux-dev")))
	held := mustOperation(t, authorize(t, alice, newCall("flux-pro-1.1-ultra")))

	// Another agent's operation does not exist for bob: 404, never 403.
	if r, _ := bob.Client.GetOperationWithResponse(ctx, op.PublicHandle); r.StatusCode() != http.StatusNotFound || problemCode(t, r.Body) != "not_found" {
		t.Fatalf("bob reading alice's operation: %d %s", r.StatusCode(), r.Body)
	}
	if r, _ := bob.Client.GetOperationLedgerWithResponse(ctx, op.PublicHandle); r.StatusCode() != http.StatusNotFound {
		t.Fatalf("bob reading alice's ledger: %d", r.StatusCode())
	}
	missing := "hubu:public-operation:v1:" + uuid.NewString()
	if r, _ := bob.Client.GetOperationWithResponse(ctx, missing); r.StatusCode() != http.StatusNotFound {
		t.Fatalf("unknown handle: %d", r.StatusCode())
	}
	if r, _ := alice.Client.GetOperationWithResponse(ctx, op.PublicHandle); r.JSON200 == nil {
		t.Fatalf("alice reading her operation: %d", r.StatusCode())
	}
	if r, _ := b.Operator.GetOperationWithResponse(ctx, op.PublicHandle); r.JSON200 == nil {
		t.Fatalf("operator reading it: %d", r.StatusCode())
	}

	for name, r := range map[string]reply{
		"agent approves":         replyOf(alice.Client.ApproveOperationWithResponse(ctx, held.PublicHandle)),
		"agent lists approvals":  replyOf(alice.Client.ListApprovalsWithResponse(ctx)),
		"agent creates an agent": replyOf(alice.Client.CreateAgentWithResponse(ctx, hubuapi.AgentCreate{Name: "sneaky"})),
		"agent sets a price": replyOf(alice.Client.SetPriceWithResponse(ctx,
			hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-dev", Size: "*", AmountMicros: 0, Currency: "USD"})),
		"agent settles":       replyOf(alice.Client.SettleDecisionWithResponse(ctx, *op.DecisionId, hubuapi.SettleRequest{AmountMicros: 0})),
		"operator authorizes": replyOf(b.Operator.AuthorizeWithResponse(ctx, newCall("flux-dev").Request())),
		"operator settles":    replyOf(b.Operator.SettleDecisionWithResponse(ctx, *op.DecisionId, hubuapi.SettleRequest{AmountMicros: 0})),
		"service authorizes":  replyOf(b.service.AuthorizeWithResponse(ctx, newCall("flux-dev").Request())),
		"service approves":    replyOf(b.service.ApproveOperationWithResponse(ctx, held.PublicHandle)),
	} {
		if r.status != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", name, r.status, r.body)
		}
	}

	if r, _ := b.anonymous.GetCapabilitiesWithResponse(ctx); r.StatusCode() != http.StatusUnauthorized {
		t.Fatalf("no token: %d", r.StatusCode())
	}
	forged := b.Client(t, "hubu_agent_forged")
	if r, _ := forged.AuthorizeWithResponse(ctx, newCall("flux-dev").Request()); r.StatusCode() != http.StatusUnauthorized || problemCode(t, r.Body) != "unauthorized" {
		t.Fatalf("forged token: %d %s", r.StatusCode(), r.Body)
	}
	if n := b.Count(t, "SELECT count(*) FROM operations"); n != 2 {
		t.Fatalf("%d operations, want the 2 alice made", n)
	}
	// Tokens are stored hashed.
	if n := b.Count(t, "SELECT count(*) FROM credentials WHERE position($1::bytea in token_hash) > 0", []byte(alice.Token)); n != 0 {
		t.Fatal("a token is stored in the clear")
	}
}

func TestOperatorManagesAgentsAndPrices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	if r, _ := b.Operator.CreateAgentWithResponse(ctx, hubuapi.AgentCreate{Name: "agent"}); r.StatusCode() != http.StatusConflict {
		t.Fatalf("duplicate agent name: %d %s", r.StatusCode(), r.Body)
	}
	list, _ := b.Operator.ListAgentsWithResponse(ctx)
	if list.JSON200 == nil || len(list.JSON200.Agents) != 1 || list.JSON200.Agents[0].Policy.BudgetMicros != 5_000_000 {
		t.Fatalf("agents: %s", list.Body)
	}
	set, _ := b.Operator.SetAgentPolicyWithResponse(ctx, a.ID, *policy(0, 100_000, 200_000))
	if set.JSON200 == nil || set.JSON200.Policy.AutoApproveLimitMicros != 0 {
		t.Fatalf("set policy: %s", set.Body)
	}
	// Auto-approve 0: every paid operation is held.
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStatePendingApproval)
	if r, _ := b.Operator.GetAgentWithResponse(ctx, uuid.New()); r.StatusCode() != http.StatusNotFound {
		t.Fatalf("unknown agent: %d", r.StatusCode())
	}
	prices, _ := b.Operator.ListPricesWithResponse(ctx)
	// BFL's published prices: flat, or per megapixel as [first, each further, each input].
	want := map[string][]int64{
		"flux-dev": {25_000}, "flux-pro-1.1": {40_000}, "flux-pro-1.1-ultra": {60_000}, "flux-kontext-pro": {40_000}, "flux-kontext-max": {80_000},
		"flux-2-pro": {30_000, 15_000, 15_000}, "flux-2-max": {70_000, 30_000, 30_000}, "flux-2-flex": {60_000, 60_000, 60_000},
		"flux-2-klein-4b": {14_000, 1_000, 1_000}, "flux-2-klein-9b": {15_000, 2_000, 2_000},
	}
	for _, p := range prices.JSON200.Prices {
		got := []int64{p.AmountMicros}
		if p.Rule == hubuapi.Megapixel && p.ExtraMpMicros != nil && p.InputMpMicros != nil {
			got = append(got, *p.ExtraMpMicros, *p.InputMpMicros)
		}
		if !slices.Equal(want[p.Model], got) || p.Currency != "USD" || p.Size != "*" || (len(got) == 3) != (p.Rule == hubuapi.Megapixel) {
			t.Errorf("seeded price %+v", p)
		}
		delete(want, p.Model)
	}
	if len(want) != 0 {
		t.Fatalf("seeded catalog lacks %v", want)
	}
	// A size-specific price wins over the model's "*" price.
	if r, _ := b.Operator.SetPriceWithResponse(ctx, hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-dev", Size: "512x512", AmountMicros: 1_000, Currency: "USD"}); r.JSON200 == nil {
		t.Fatalf("set price: %s", r.Body)
	}
	b.Operator.SetAgentPolicyWithResponse(ctx, a.ID, *policy(50_000, 100_000, 200_000))
	c := newCall("flux-dev")
	c.Args.Width, c.Args.Height = 512, 512
	if op := mustOperation(t, authorize(t, a, c)); op.AmountMicros != 1_000 {
		t.Fatalf("size-specific price: %+v", op)
	}
}
