package hubu

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

const amount = 40_000

var (
	created  = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	deadline = created.Add(time.Hour)
	now      = created.Add(2 * time.Hour) // past deadline
)

// fixture returns an operation in state as the store would load it, with its ledger totals.
func fixture(state State, f func(*Operation)) Operation {
	op := Operation{ID: uuid.New(), AmountMicros: amount, Currency: "USD", State: state, CreatedAt: created, UpdatedAt: created}
	if f != nil {
		f(&op)
	}
	return op
}

var fixtures = map[string]Operation{
	"pending_approval":                  fixture(StatePendingApproval, func(o *Operation) { o.HeldMicros, o.ApprovalExpiresAt = amount, &deadline }),
	"approved":                          fixture(StateApproved, func(o *Operation) { byPerson(o); o.HeldMicros = amount }),
	"dispatching":                       fixture(StateDispatching, func(o *Operation) { o.DecisionID, o.HeldMicros = ptr(uuid.New()), amount }),
	"dispatching, approved by a person": fixture(StateDispatching, func(o *Operation) { byPerson(o); o.HeldMicros = amount }),
	"executing":                         fixture(StateExecuting, func(o *Operation) { o.DecisionID, o.HeldMicros = ptr(uuid.New()), amount }),
	"succeeded": fixture(StateSucceeded, func(o *Operation) {
		o.DecisionID, o.CapturedMicros, o.ReleasedMicros = ptr(uuid.New()), 30_000, 10_000
	}),
	"failed, charged": fixture(StateFailed, func(o *Operation) {
		o.DecisionID, o.CapturedMicros, o.ReleasedMicros, o.FailureReason = ptr(uuid.New()), 30_000, 10_000, ptr("boom")
	}),
	"failed, released": fixture(StateFailed, func(o *Operation) {
		o.DecisionID, o.ReleasedMicros, o.FailureReason = ptr(uuid.New()), amount, ptr("released by the executor")
	}),
	"denied by policy": fixture(StateDenied, func(o *Operation) { o.Denial = &Denial{Code: DenialBudgetExceeded, Message: "no"} }),
	"denied by an operator": fixture(StateDenied, func(o *Operation) {
		o.ReleasedMicros, o.DecidedBy, o.Denial = amount, ptr("ops"), &Denial{Code: DenialDenied, Message: "no"}
	}),
	"expired": fixture(StateExpired, func(o *Operation) {
		o.ReleasedMicros, o.ApprovalExpiresAt, o.Denial = amount, &deadline, &Denial{Code: DenialDenied, Message: "late"}
	}),
	"expired after approval": fixture(StateExpired, func(o *Operation) {
		byPerson(o)
		o.ReleasedMicros, o.Denial = amount, &Denial{Code: DenialDenied, Message: "late"}
	}),
}

func byPerson(o *Operation) {
	o.DecisionID, o.DecidedBy, o.DecidedAt, o.ApprovalExpiresAt = ptr(uuid.New()), ptr("ops"), ptr(created), &deadline
}

func ptr[T any](v T) *T { return &v }

var events = map[string]func(Operation) (Change, error){
	"approve":             func(op Operation) (Change, error) { return op.Approve("ops", now, time.Hour) },
	"deny":                func(op Operation) (Change, error) { return op.Deny("ops", "", now) },
	"expire":              func(op Operation) (Change, error) { return op.Expire(now) },
	"resume":              func(op Operation) (Change, error) { return op.Resume(now), nil },
	"hand_off":            func(op Operation) (Change, error) { return op.HandOff(now), nil },
	"accept":              func(op Operation) (Change, error) { return op.Accept(now), nil },
	"settle 30000":        func(op Operation) (Change, error) { return op.Settle(30_000, false, "", nil, now) },
	"settle failed 30000": func(op Operation) (Change, error) { return op.Settle(30_000, true, "", nil, now) },
	"settle failed 0":     func(op Operation) (Change, error) { return op.Settle(0, true, "", nil, now) },
	"release":             func(op Operation) (Change, error) { return op.Release("", now) },
}

// describe is "unchanged", an error code, or the state a change leads to with its ledger entries.
func describe(ch Change, err error) string {
	switch {
	case err != nil:
		return string(ErrorCode(err))
	case ch.Event == "":
		return "unchanged"
	}
	s := string(ch.Operation.State)
	for _, e := range ch.Ledger {
		s += fmt.Sprintf(" %s %d", e.Kind, e.AmountMicros)
	}
	return s
}

// TestTransitions runs every event on an operation in every state.
func TestTransitions(t *testing.T) {
	t.Parallel()
	const (
		same     = "unchanged"
		conflict = "conflict"
	)
	order := []string{"approve", "deny", "expire", "resume", "hand_off", "accept", "settle 30000", "settle failed 30000", "settle failed 0", "release"}
	grid := map[string][]string{
		"pending_approval":                  {"approved", "denied release 40000", "expired release 40000", same, same, same, conflict, conflict, conflict, conflict},
		"approved":                          {same, "denied release 40000", "expired release 40000", "dispatching", same, same, conflict, conflict, conflict, conflict},
		"dispatching":                       {conflict, conflict, same, same, "dispatching", "executing", "succeeded capture 30000 release 10000", "failed capture 30000 release 10000", "failed release 40000", "failed release 40000"},
		"dispatching, approved by a person": {same, conflict, same, same, "dispatching", "executing", "succeeded capture 30000 release 10000", "failed capture 30000 release 10000", "failed release 40000", "failed release 40000"},
		"executing":                         {conflict, conflict, same, same, same, same, "succeeded capture 30000 release 10000", "failed capture 30000 release 10000", "failed release 40000", "failed release 40000"},
		"succeeded":                         {conflict, conflict, same, same, same, same, same, conflict, conflict, conflict},
		"failed, charged":                   {conflict, conflict, same, same, same, same, conflict, same, conflict, conflict},
		"failed, released":                  {conflict, conflict, same, same, same, same, conflict, conflict, same, same},
		"denied by policy":                  {conflict, conflict, same, same, same, same, conflict, conflict, conflict, conflict},
		"denied by an operator":             {conflict, same, same, same, same, same, conflict, conflict, conflict, conflict},
		"expired":                           {conflict, conflict, same, same, same, same, conflict, conflict, conflict, conflict},
		"expired after approval":            {conflict, conflict, same, same, same, same, conflict, conflict, conflict, conflict},
	}
	if len(grid) != len(fixtures) {
		t.Fatalf("the grid has %d rows for %d fixtures", len(grid), len(fixtures))
	}
	for name, op := range fixtures {
		for i, ev := range order {
			t.Run(name+"/"+ev, func(t *testing.T) {
				ch, err := events[ev](op)
				if got, want := describe(ch, err), grid[name][i]; got != want {
					t.Fatalf("got %s, want %s (%v)", got, want, err)
				}
				if err == nil {
					checkChange(t, op, ch)
				}
			})
		}
	}
}

// checkChange checks what every change must keep: a move of the table, the money in its
// ledger, nothing held once final, and the time of the event on everything it writes.
func checkChange(t *testing.T, before Operation, ch Change) {
	t.Helper()
	after := ch.Operation
	if ch.Event == "" {
		if !equal(after, before) || ch.Ledger != nil {
			t.Fatalf("an unchanged operation changed: %+v, ledger %v", after, ch.Ledger)
		}
		return
	}
	if ch.From != before.State || !slices.ContainsFunc(transitions, func(tr Transition) bool {
		return tr.From == ch.From && tr.Event == ch.Event && tr.To == after.State
	}) {
		t.Fatalf("%s --%s--> %s is not in the table", ch.From, ch.Event, after.State)
	}
	var holds int64
	for _, e := range ch.Ledger {
		if e.Currency != before.Currency || !e.CreatedAt.Equal(now) || e.AmountMicros <= 0 {
			t.Fatalf("ledger entry %+v", e)
		}
		if e.Kind == LedgerHold {
			holds += e.AmountMicros
		}
	}
	total := func(o Operation) int64 { return o.HeldMicros + o.CapturedMicros + o.ReleasedMicros }
	if total(after) != total(before)+holds || after.HeldMicros < 0 || (after.State.Final() && after.HeldMicros != 0) {
		t.Fatalf("totals held %d captured %d released %d, from %+v", after.HeldMicros, after.CapturedMicros, after.ReleasedMicros, before)
	}
	if !after.UpdatedAt.Equal(now) || after.ID != before.ID || after.AmountMicros != before.AmountMicros {
		t.Fatalf("changed %+v from %+v", after, before)
	}
}

func equal(a, b Operation) bool { return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b) }

// TestTransitionDetails checks what the grid does not show: the fields each move writes,
// the exact refusals callers see, and the cases around deadlines and amounts.
func TestTransitionDetails(t *testing.T) {
	t.Parallel()
	t.Run("approve issues a decision the agent must resume within the ttl", func(t *testing.T) {
		ch, err := fixtures["pending_approval"].Approve("alice", now, 3*time.Hour)
		o := ch.Operation
		if err != nil || o.DecisionID == nil || *o.DecidedBy != "alice" || !o.DecidedAt.Equal(now) || !o.ApprovalExpiresAt.Equal(now.Add(3*time.Hour)) {
			t.Fatalf("%+v, %v", o, err)
		}
	})
	t.Run("deny records who and why", func(t *testing.T) {
		for reason, want := range map[string]string{"": "denied by an operator", "too dear": "too dear"} {
			ch, _ := fixtures["approved"].Deny("bob", reason, now)
			o := ch.Operation
			if *o.DecidedBy != "bob" || !o.DecidedAt.Equal(now) || *o.Denial != (Denial{Code: DenialDenied, Message: want}) || o.DecisionID == nil {
				t.Fatalf("%+v", o)
			}
		}
	})
	t.Run("expiry keeps who approved and says who was late", func(t *testing.T) {
		for name, want := range map[string]string{
			"pending_approval": "no one approved the operation in time",
			"approved":         "the agent did not resume the approved operation in time",
		} {
			op := fixtures[name]
			ch, _ := op.Expire(now)
			o := ch.Operation
			if o.DecidedBy != op.DecidedBy || !o.DecidedAt.Equal(now) || *o.Denial != (Denial{Code: DenialDenied, Message: want}) {
				t.Fatalf("%s: %+v", name, o)
			}
			if ch, _ := op.Expire(deadline.Add(-time.Nanosecond)); ch.Event != "" {
				t.Fatalf("%s expired before its deadline", name)
			}
			if ch, _ := op.Expire(deadline); ch.Event != EventExpire {
				t.Fatalf("%s did not expire at its deadline", name)
			}
		}
	})
	t.Run("a hand-off is counted", func(t *testing.T) {
		if ch := fixtures["dispatching"].HandOff(now).Operation.HandOff(now); ch.Operation.DispatchAttempts != 2 {
			t.Fatalf("attempts = %d", ch.Operation.DispatchAttempts)
		}
	})
	t.Run("a decision's first hand-off is counted with it", func(t *testing.T) {
		issue := func(e Event) Change {
			t.Helper()
			ch, err := Operation{ID: uuid.New(), AmountMicros: amount, Currency: "USD", CreatedAt: created}.Authorize(e, &Denial{Code: DenialDenied}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return ch
		}
		for _, c := range []struct {
			name string
			ch   Change
			want int
		}{
			{"auto-approved", issue(EventAutoApprove), 1},
			{"resumed", fixtures["approved"].Resume(now), 1},
			{"held: no decision", issue(EventHold), 0},
			{"refused: no decision", issue(EventRefuse), 0},
			{"dispatching already: HandOff counts re-sends", fixtures["dispatching"].HandOff(now), 1},
			{"a change that changes nothing", fixtures["executing"].Resume(now), 0},
		} {
			got := c.ch.WithFirstHandOff()
			if got.Operation.DispatchAttempts != c.want {
				t.Fatalf("%s: attempts = %d, want %d", c.name, got.Operation.DispatchAttempts, c.want)
			}
			got.Operation.DispatchAttempts = c.ch.Operation.DispatchAttempts
			if !reflect.DeepEqual(got, c.ch) {
				t.Fatalf("%s: changed more than the count: %+v", c.name, got)
			}
		}
	})
	t.Run("the budget counts holds and captures", func(t *testing.T) {
		for kind, want := range map[string]int64{LedgerHold: 5, LedgerCapture: 0, LedgerRelease: -5} {
			if got := (LedgerEntry{Kind: kind, AmountMicros: 5}).BudgetDelta(); got != want {
				t.Fatalf("%s: %d, want %d", kind, got, want)
			}
		}
	})
	t.Run("settle and release record why an operation failed", func(t *testing.T) {
		op := fixtures["executing"]
		for _, c := range []struct {
			ch   func() (Change, error)
			want *string
		}{
			{func() (Change, error) { return op.Settle(amount, false, "ignored", nil, now) }, nil},
			{func() (Change, error) { return op.Settle(amount, true, "", nil, now) }, ptr("the execution failed after the provider charged")},
			{func() (Change, error) { return op.Settle(amount, true, "blurry", nil, now) }, ptr("blurry")},
			{func() (Change, error) { return op.Release("", now) }, ptr("released by the executor")},
			{func() (Change, error) { return op.Release("no capacity", now) }, ptr("no capacity")},
		} {
			ch, err := c.ch()
			if got := ch.Operation.FailureReason; err != nil || (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Fatalf("failure reason %v, want %v (%v)", got, c.want, err)
			}
		}
	})
	t.Run("settle captures at most what was authorized", func(t *testing.T) {
		op := fixtures["executing"]
		for captured, want := range map[int64]string{
			0:          "succeeded release 40000",
			amount:     "succeeded capture 40000",
			-1:         "invalid_arguments",
			amount + 1: "invalid_arguments",
		} {
			if got := describe(op.Settle(captured, false, "", nil, now)); got != want {
				t.Fatalf("settle %d: %s, want %s", captured, got, want)
			}
		}
		if got := describe(fixtures["succeeded"].Settle(30_000, true, "", nil, now)); got != "conflict" {
			t.Fatalf("the same amount with another outcome: %s", got)
		}
		// The ledger, not the request, bounds the capture: a hold short of the amount is a bug.
		short := op
		short.HeldMicros = amount - 1
		if _, err := short.Settle(amount, false, "", nil, now); err == nil || ErrorCode(err) != CodeInternal {
			t.Fatalf("capture beyond the hold: %v", err)
		}
	})
	t.Run("an operation without a price holds nothing", func(t *testing.T) {
		free := fixture("", func(o *Operation) { o.AmountMicros = 0 })
		if got := describe(free.Authorize(EventAutoApprove, nil, time.Hour)); got != "dispatching" {
			t.Fatalf("authorize: %s", got)
		}
		free.State, free.DecisionID = StateExecuting, ptr(uuid.New())
		if got := describe(free.Settle(0, false, "", nil, now)); got != "succeeded" {
			t.Fatalf("settle: %s", got)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for _, c := range []struct{ fixture, event, want string }{
			{"expired", "approve", "the approval expired; the agent must make a new call"},
			{"denied by an operator", "approve", "the operation was denied"},
			{"executing", "approve", "the operation is not waiting for approval (state executing)"},
			{"expired", "deny", "the approval expired already"},
			{"denied by policy", "deny", "the operation is not waiting for approval (state denied)"},
			{"pending_approval", "release", "the operation has not been approved; there is nothing to settle"},
			{"approved", "settle 30000", "the operation has not been resumed; there is nothing to settle"},
			{"expired after approval", "release", "the operation was expired before it was executed; there is nothing to settle"},
			{"denied by an operator", "settle 30000", "the operation was denied before it was executed; there is nothing to settle"},
			{"succeeded", "settle failed 30000", "the decision was settled already with another amount or outcome"},
			{"failed, charged", "settle 30000", "the decision was settled already with another amount or outcome"},
			{"failed, released", "settle 30000", "the decision was released already"},
			{"succeeded", "release", "the decision was settled already"},
			{"failed, charged", "release", "the decision was settled already"},
		} {
			_, err := events[c.event](fixtures[c.fixture])
			if got := ErrorMessage(err); got != c.want {
				t.Errorf("%s on %s: %q, want %q", c.event, c.fixture, got, c.want)
			}
		}
		if _, err := fixtures["executing"].Settle(-1, false, "", nil, now); ErrorMessage(err) != "the captured amount must be between 0 and the authorized 40000 micros" {
			t.Errorf("settle -1: %v", err)
		}
	})
}

// TestAuthorize checks the first move of a new operation under each verdict of policy.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	denial := &Denial{Code: DenialBudgetExceeded, Message: "over budget"}
	for _, c := range []struct {
		event Event
		want  string
		check func(Operation) bool
	}{
		{EventAutoApprove, "dispatching hold 40000", func(o Operation) bool { return o.DecisionID != nil && o.ApprovalExpiresAt == nil }},
		{EventHold, "pending_approval hold 40000", func(o Operation) bool {
			return o.DecisionID == nil && o.ApprovalExpiresAt.Equal(created.Add(time.Hour))
		}},
		{EventRefuse, "denied", func(o Operation) bool { return o.DecisionID == nil && o.Denial == denial }},
		{EventApprove, "internal", nil},
	} {
		ch, err := fixture("", nil).Authorize(c.event, denial, time.Hour)
		if got := describe(ch, err); got != c.want || (c.check != nil && !c.check(ch.Operation)) {
			t.Fatalf("%s: %s %+v, want %s", c.event, got, ch.Operation, c.want)
		}
		if err == nil && (ch.From != "" || !ch.Operation.UpdatedAt.Equal(created) || ch.Operation.HeldMicros != int64(len(ch.Ledger))*amount) {
			t.Fatalf("%s: %+v", c.event, ch)
		}
	}
	if _, err := fixtures["pending_approval"].Authorize(EventAutoApprove, nil, time.Hour); err == nil {
		t.Fatal("an existing operation was authorized again")
	}
}

// TestStateDiagramInDocs keeps the diagram in docs/spend-lifecycle.md the table's.
// HUBU_UPDATE_DOCS=1 rewrites it.
func TestStateDiagramInDocs(t *testing.T) {
	t.Parallel()
	const path = "../../docs/spend-lifecycle.md"
	const marker = "<!-- generated by services/hubu: operation states; do not edit by hand -->\n```mermaid\n"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(doc, []byte(marker))
	end := bytes.Index(doc[max(start, 0):], []byte("\n```\n"))
	if start < 0 || end < 0 {
		t.Fatalf("%s has no mermaid block after the line %q", path, strings.Split(marker, "\n")[0])
	}
	start, end = start+len(marker), max(start, 0)+end+1
	want := stateDiagram()
	if string(doc[start:end]) == want {
		return
	}
	if os.Getenv("HUBU_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, slices.Concat(doc[:start], []byte(want), doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	fmt.Printf("%s%s```\n", marker, want)
	t.Errorf("the operation state diagram in %s is not the transition table's: rerun with HUBU_UPDATE_DOCS=1, or paste the block printed above", path)
}

// stateDiagram renders the transition table as a Mermaid state diagram.
func stateDiagram() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	var finals []State
	for i, tr := range Transitions() {
		if i > 0 && tr.From != transitions[i-1].From {
			b.WriteString("\n")
		}
		from := string(tr.From)
		if from == "" {
			from = "[*]"
		}
		fmt.Fprintf(&b, "    %s --> %s: %s\n", from, tr.To, tr.Label)
		if tr.To.Final() && !slices.Contains(finals, tr.To) {
			finals = append(finals, tr.To)
		}
	}
	b.WriteString("\n")
	for _, s := range finals {
		fmt.Fprintf(&b, "    %s --> [*]\n", s)
	}
	return b.String()
}
