package httpserver_test

import (
	"context"
	"net/http"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
)

// The amount and the account are fixed when an operation is first decided. These tests
// change the catalog or the agent's account between the first delivery of a call and its
// redelivery; the redelivery must still be a replay of the stored record.

// catalogChange is something an operator does between two deliveries of one call.
type catalogChange struct {
	name  string
	apply func(t *testing.T, b *bundle, agents ...agent)
}

var catalogChanges = []catalogChange{
	{"price raised", func(t *testing.T, b *bundle, _ ...agent) { setPrices(t, b, "*", 30_000, 90_000, "USD") }},
	{"price lowered", func(t *testing.T, b *bundle, _ ...agent) { setPrices(t, b, "*", 1_000, 2_000, "USD") }},
	{"price now free", func(t *testing.T, b *bundle, _ ...agent) { setPrices(t, b, "*", 0, 0, "USD") }},
	{"currency changed", func(t *testing.T, b *bundle, _ ...agent) { setPrices(t, b, "*", 25_000, 60_000, "EUR") }},
	{"size-specific price added", func(t *testing.T, b *bundle, _ ...agent) { setPrices(t, b, "1024x1024", 26_000, 61_000, "USD") }},
	{"agent moved to another account", func(t *testing.T, b *bundle, agents ...agent) {
		for _, a := range agents {
			resp, err := b.Operator.SetAgentAccountWithResponse(context.Background(), a.ID, hubuapi.AccountUpdate{Account: "acct:team-b"})
			if err != nil || resp.JSON200 == nil {
				t.Fatalf("set account: %v %s", err, resp.Body)
			}
		}
	}},
	{"model removed from the catalog", func(t *testing.T, b *bundle, _ ...agent) {
		// The API has no way to remove a price; an operator (or a migration) can still delete
		// the row, and Hubu must not need the catalog to answer a replay.
		removeModel(t, b, "flux-dev")
		removeModel(t, b, "flux-pro-1.1-ultra")
	}},
}

// setPrices sets the prices of flux-dev and flux-pro-1.1-ultra for size.
func setPrices(t *testing.T, b *bundle, size string, dev, ultra int64, currency string) {
	t.Helper()
	setPrice(t, b, "flux-dev", size, dev, currency)
	setPrice(t, b, "flux-pro-1.1-ultra", size, ultra, currency)
}

func setPrice(t *testing.T, b *bundle, model, size string, amount int64, currency string) {
	t.Helper()
	resp, err := b.Operator.SetPriceWithResponse(context.Background(),
		hubuapi.PriceUpdate{Provider: "bfl", Model: model, Size: size, AmountMicros: amount, Currency: currency})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("set price: %v %s", err, resp.Body)
	}
}

func removeModel(t *testing.T, b *bundle, model string) {
	t.Helper()
	if _, err := b.Pool.Exec(context.Background(), "DELETE FROM prices WHERE provider = 'bfl' AND model = $1", model); err != nil {
		t.Fatal(err)
	}
	b.Cache.Sync(t) // a change made by hand reaches Hubu's cache on its notification
	if r := authorize(t, b.NewAgent(t, "probe-"+model, nil), newCall(model)); r.StatusCode() != http.StatusBadRequest {
		t.Fatalf("a new call for the removed model %s: %d %s, want 400", model, r.StatusCode(), r.Body)
	}
}

// mustReplay re-delivers c and requires a 200 replay of the record want.
func mustReplay(t *testing.T, a agent, c call, want hubuapi.Operation) hubuapi.Operation {
	t.Helper()
	resp := authorize(t, a, c)
	if resp.StatusCode() != http.StatusOK || resp.JSON200 == nil || resp.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("redelivery: %d replayed=%q %s", resp.StatusCode(), resp.HTTPResponse.Header.Get("Idempotent-Replayed"), resp.Body)
	}
	got := *resp.JSON200
	if got.PublicHandle != want.PublicHandle || got.AmountMicros != want.AmountMicros ||
		got.Currency != want.Currency || got.Account != want.Account || got.Scope != want.Scope || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("redelivery returned %+v, want the stored record %+v", got, want)
	}
	if (got.DecisionId == nil) != (want.DecisionId == nil) || (got.DecisionId != nil && *got.DecisionId != *want.DecisionId) {
		t.Fatalf("redelivery changed the decision: %v, want %v", got.DecisionId, want.DecisionId)
	}
	return got
}

// (a) A held spend, the price changes, the harness re-delivers: the replay reports the
// original amount, and once approved and resumed the operation runs, and is captured, at
// that amount.
func TestRedeliveryOfHeldOperationAfterPriceChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	c, held := heldCall(t, b, a)

	setPrice(t, b, "flux-pro-1.1-ultra", "*", 90_000, "USD")

	again := mustReplay(t, a, c, held)
	if again.State != hubuapi.OperationStatePendingApproval || again.AmountMicros != 60_000 || again.HeldMicros != 60_000 {
		t.Fatalf("replay while held: %+v", again)
	}
	approved, _ := b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle)
	if approved.JSON200 == nil || approved.JSON200.AmountMicros != 60_000 {
		t.Fatalf("approve: %d %s", approved.StatusCode(), approved.Body)
	}
	afterApproval := mustReplay(t, a, c, *approved.JSON200)
	if afterApproval.State != hubuapi.OperationStateApproved {
		t.Fatalf("replay after approval: %+v", afterApproval)
	}
	if len(b.Executor.Decisions()) != 0 {
		t.Fatal("a redelivery ran the approved operation before the agent resumed it")
	}

	resumed, _ := a.Client.ResumeOperationWithResponse(ctx, held.PublicHandle)
	if resumed.JSON200 == nil || resumed.JSON200.State != hubuapi.OperationStateExecuting || resumed.JSON200.AmountMicros != 60_000 {
		t.Fatalf("resume: %d %s", resumed.StatusCode(), resumed.Body)
	}
	ds := b.Executor.Decisions()
	if len(ds) != 1 || ds[0].AmountMicros != 60_000 || ds[0].DecisionID != *approved.JSON200.DecisionId {
		t.Fatalf("executor got %+v, want one decision for 60000", ds)
	}
	wantStatus(t, "capture at the new price", b.settle(ds[0].DecisionID, hubuapi.SettleRequest{AmountMicros: 90_000}), http.StatusBadRequest)
	settled, _ := b.service.SettleDecisionWithResponse(ctx, ds[0].DecisionID, hubuapi.SettleRequest{AmountMicros: 60_000})
	if settled.JSON200 == nil || settled.JSON200.State != hubuapi.OperationStateSucceeded || settled.JSON200.CapturedMicros != 60_000 {
		t.Fatalf("settle: %d %s", settled.StatusCode(), settled.Body)
	}
	final := mustReplay(t, a, c, *settled.JSON200)
	if final.State != hubuapi.OperationStateSucceeded || final.CapturedMicros != 60_000 {
		t.Fatalf("replay after settle: %+v", final)
	}
	if n := len(b.Executor.Decisions()); n != 1 {
		t.Fatalf("executor got %d decisions, want 1", n)
	}
	if n := b.Count(t, "SELECT count(*) FROM operations"); n != 1 {
		t.Fatalf("%d operations, want 1", n)
	}
}

// (b), (c), (d) Whatever state the operation is in, and whatever the operator changed since,
// a redelivery of the same request is a replay of the stored record; one still to be handed
// off is handed off under its first decision and amount.
func TestRedeliveryAfterCatalogOrAccountChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Each state is reached through the API; the returned record is the one a replay must show.
	states := []struct {
		name  string
		reach func(t *testing.T, b *bundle, a, stingy agent) (agent, call, hubuapi.Operation)
	}{
		{"pending_approval", func(t *testing.T, b *bundle, a, _ agent) (agent, call, hubuapi.Operation) {
			c, op := heldCall(t, b, a)
			return a, c, op
		}},
		{"approved", func(t *testing.T, b *bundle, a, _ agent) (agent, call, hubuapi.Operation) {
			c, op := heldCall(t, b, a)
			r, _ := b.Operator.ApproveOperationWithResponse(ctx, op.PublicHandle)
			if r.JSON200 == nil {
				t.Fatalf("approve: %s", r.Body)
			}
			return a, c, *r.JSON200
		}},
		{"dispatching", func(t *testing.T, b *bundle, a, _ agent) (agent, call, hubuapi.Operation) {
			b.Executor.FailNext(1)
			c := newCall("flux-dev")
			return a, c, spend(t, a, c, hubuapi.OperationStateDispatching)
		}},
		{"executing", func(t *testing.T, b *bundle, a, _ agent) (agent, call, hubuapi.Operation) {
			c := newCall("flux-dev")
			return a, c, spend(t, a, c, hubuapi.OperationStateExecuting)
		}},
		{"succeeded", func(t *testing.T, b *bundle, a, _ agent) (agent, call, hubuapi.Operation) {
			c := newCall("flux-dev")
			op := mustOperation(t, authorize(t, a, c))
			r, _ := b.service.SettleDecisionWithResponse(ctx, *op.DecisionId, hubuapi.SettleRequest{AmountMicros: 25_000})
			if r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateSucceeded {
				t.Fatalf("settle: %s", r.Body)
			}
			return a, c, *r.JSON200
		}},
		{"failed", func(t *testing.T, b *bundle, a, _ agent) (agent, call, hubuapi.Operation) {
			c := newCall("flux-dev")
			op := mustOperation(t, authorize(t, a, c))
			r, _ := b.service.ReleaseDecisionWithResponse(ctx, *op.DecisionId, hubuapi.ReleaseRequest{})
			if r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateFailed {
				t.Fatalf("release: %s", r.Body)
			}
			return a, c, *r.JSON200
		}},
		{"denied", func(t *testing.T, b *bundle, _, stingy agent) (agent, call, hubuapi.Operation) {
			c := newCall("flux-dev")
			return stingy, c, spend(t, stingy, c, hubuapi.OperationStateDenied)
		}},
	}
	for _, change := range catalogChanges {
		t.Run(change.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			a := b.NewAgent(t, "agent", nil)
			stingy := b.NewAgent(t, "stingy", policy(10_000, 10_000, 5_000_000))
			type recorded struct {
				name   string
				agent  agent
				call   call
				stored hubuapi.Operation
			}
			var ops []recorded
			for _, s := range states {
				who, c, op := s.reach(t, b, a, stingy)
				if string(op.State) != s.name {
					t.Fatalf("%s: reached state %s", s.name, op.State)
				}
				ops = append(ops, recorded{s.name, who, c, op})
			}
			ledger := b.Count(t, "SELECT count(*) FROM ledger_entries")
			decisions := len(b.Executor.Decisions())

			change.apply(t, b, a, stingy)

			for _, r := range ops {
				got := mustReplay(t, r.agent, r.call, r.stored)
				switch r.name {
				case "dispatching":
					// The redelivery continues the hand-off under the first decision.
					if got.State != hubuapi.OperationStateExecuting {
						t.Fatalf("%s: replay left it %s", r.name, got.State)
					}
					ds := b.Executor.Decisions()
					last := ds[len(ds)-1]
					if len(ds) != decisions+1 || last.DecisionID != *r.stored.DecisionId || last.AmountMicros != r.stored.AmountMicros ||
						last.Currency != r.stored.Currency {
						t.Fatalf("%s: executor got %+v after the replay", r.name, ds)
					}
				default:
					if got.State != r.stored.State || got.HeldMicros != r.stored.HeldMicros || got.CapturedMicros != r.stored.CapturedMicros {
						t.Fatalf("%s: replay %+v, want %+v", r.name, got, r.stored)
					}
				}
			}
			if n := b.Count(t, "SELECT count(*) FROM ledger_entries"); n != ledger {
				t.Fatalf("replays wrote %d ledger entries", n-ledger)
			}
			if n := b.Count(t, "SELECT count(*) FROM operations"); n != len(ops) {
				t.Fatalf("%d operations, want %d", n, len(ops))
			}
		})
	}
}

// (e) A request under the same key that asks for different work is still refused with
// create_new_operation, before and after the catalog changed, and nothing is written.
func TestDifferentRequestUnderSameKeyAfterCatalogChange(t *testing.T) {
	t.Parallel()
	seed := int64(7)
	differences := []struct {
		name   string
		change func(c *call)
	}{
		{"prompt", func(c *call) { c.Args.Prompt = "a paper crane" }},
		{"model", func(c *call) { c.Args.Model = "flux-pro-1.1" }},
		{"model no longer in the catalog", func(c *call) { c.Args.Model = "flux-dev" }},
		{"unknown model", func(c *call) { c.Args.Model = "flux-imaginary" }},
		{"size", func(c *call) { c.Args.Width = 768 }},
		{"seed", func(c *call) { c.Args.Seed = &seed }},
		{"request hash only", nil},
	}
	for _, change := range catalogChanges {
		t.Run(change.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t)
			a := b.NewAgent(t, "agent", nil)
			c, held := heldCall(t, b, a)
			change.apply(t, b, a)
			ledger := b.Count(t, "SELECT count(*) FROM ledger_entries")
			for _, d := range differences {
				other := c
				req := other.Request()
				if d.change != nil {
					d.change(&other)
					req = other.Request()
				} else {
					req.RequestHash = "00" + req.RequestHash[2:]
				}
				if r := replyOf(a.Client.AuthorizeWithResponse(ctx, req)); r.status != http.StatusConflict || problemCode(t, r.body) != "create_new_operation" {
					t.Fatalf("%s: %d %s", d.name, r.status, r.body)
				}
			}
			// Another public handle for the same key is a conflict, not a replay.
			stolen := c
			stolen.Handle = newCall("flux-dev").Handle
			if r := authorize(t, a, stolen); r.StatusCode() != http.StatusConflict || problemCode(t, r.Body) != "conflict" {
				t.Fatalf("other handle: %d %s", r.StatusCode(), r.Body)
			}
			if n := b.Count(t, "SELECT count(*) FROM operations WHERE agent_id = $1", a.ID); n != 1 {
				t.Fatalf("%d operations after the refused requests, want 1", n)
			}
			if n := b.Count(t, "SELECT count(*) FROM ledger_entries"); n != ledger {
				t.Fatalf("refused requests wrote %d ledger entries", n-ledger)
			}
			// The original request is still a replay of the untouched record.
			mustReplay(t, a, c, held)
		})
	}
}
