package execution_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// The first submission was charged and then answered with a 500 (or not at all); the takeover
// resubmits under the same key and the provider refuses that second request. The refusal says
// nothing of the first one's charge: the execution is indeterminate and Hubu keeps the hold.
func TestRefusalOfATakeoverIsIndeterminate(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"401", "402", "403", "422", "429"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			env := gongbutest.New(t, true)
			d := env.Issue("agent-a")
			env.Provider.OnSubmit(gongbutest.Ambiguous(), gongbutest.Reject("FLUX answered "+status))
			if x, _ := mustExecute(t, env, d); x.State != gongbu.StateSubmitting {
				t.Fatalf("after the ambiguous first submit: %s", x.State)
			}
			runFor(t, env, 3)
			x := env.Get(t, d.DecisionID)
			if x.State != gongbu.StateIndeterminate || x.Reported || x.ChargedMicros != nil || x.Error == nil ||
				!strings.Contains(*x.Error, "refused a resubmission") {
				t.Fatalf("%+v", x)
			}
			if r := env.Authority.Reports(); len(r) != 0 {
				t.Fatalf("reports %+v: a refused resubmission released a hold the first submission may have been charged for", r)
			}
			if n := env.Provider.SubmitsFor(vendorkey.For("bfl", d.DecisionID)); n != 2 {
				t.Fatalf("%d submits, want 2", n)
			}
		})
	}
}

// A decision Gongbu has no record of may still have been submitted: Hubu saw an executor
// accept it (its operation is past dispatching), or it was issued before this database began
// its record (a new or restored database). Where the provider honours keys it is submitted
// again under the same key, but a refusal of that is not trusted.
func TestRefusalOfAReRunIsIndeterminate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		state  string
		before bool // issued before the database's epoch began
	}{{"dispatching", true}, {"executing", false}, {"succeeded", false}} {
		env := gongbutest.New(t, true)
		d := env.IssueIn(c.state, "agent-a")
		if c.before {
			env.Authority.SetIssuedAt(d.DecisionID, env.Epoch(t).BeganAt.Add(-time.Second))
		}
		env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 403"))
		x, created := mustExecute(t, env, d)
		if !created || x.State != gongbu.StateIndeterminate || x.Reported || x.ChargedMicros != nil {
			t.Fatalf("%+v: created=%v %+v", c, created, x)
		}
		if env.Provider.Submits() != 1 || len(env.Authority.Reports()) != 0 {
			t.Fatalf("%+v: %d submits, reports %+v", c, env.Provider.Submits(), env.Authority.Reports())
		}
	}
}

// Where the provider does not honour keys, such a decision is never submitted at all; and a
// decision Gongbu provably never submitted is submitted once, however often Hubu had to try
// to hand it over (a proxy's 502, a timeout, a crash of Hubu are no evidence of a submission).
func TestReHandedDecisionWithoutKeys(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	for _, c := range []struct {
		state  string
		before bool
	}{{"executing", false}, {"succeeded", false}, {"dispatching", true}} {
		d := env.IssueIn(c.state, "agent-a")
		if c.before {
			env.Authority.SetIssuedAt(d.DecisionID, env.Epoch(t).BeganAt.Add(-time.Minute))
		}
		x, created := mustExecute(t, env, d)
		if !created || x.State != gongbu.StateIndeterminate || x.Reported || x.Error == nil || !strings.Contains(*x.Error, "not submitted") {
			t.Fatalf("%+v: created=%v %+v", c, created, x)
		}
	}
	runFor(t, env, 2)
	if env.Provider.Submits() != 0 || len(env.Authority.Reports()) != 0 {
		t.Fatalf("%d submits, reports %+v; want none", env.Provider.Submits(), env.Authority.Reports())
	}

	// Still dispatching at Hubu, issued after the epoch began, no row here: never submitted.
	// It is submitted, and a refusal of it is trusted.
	d := env.Issue("agent-a")
	env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 402"))
	if x, _ := mustExecute(t, env, d); x.State != gongbu.StateFailed || x.ChargedMicros == nil || *x.ChargedMicros != 0 || !x.Reported {
		t.Fatalf("never submitted, refused: %+v", x)
	}
	d = env.Issue("agent-a")
	x, _ := mustExecute(t, env, d)
	if x.State != gongbu.StateSubmitted {
		t.Fatalf("never submitted: %+v", x)
	}
	if again, created := mustExecute(t, env, d); created || again.State != gongbu.StateSubmitted {
		t.Fatalf("the same decision again: created=%v %+v", created, again)
	}
	if n := env.Provider.SubmitsFor(vendorkey.For("bfl", d.DecisionID)); n != 1 {
		t.Fatalf("%d submits of a decision handed over twice, want 1", n)
	}
}

// After a restore from a backup the operator renews the epoch: a decision issued before it
// that the restored database has no record of is then treated as possibly submitted.
func TestRenewedEpochMakesOlderDecisionsDoubtful(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d := env.Issue("agent-a")
	before := env.Epoch(t)
	renewed, err := env.Store.RenewEpoch(context.Background())
	if err != nil || renewed.ID == before.ID || !renewed.BeganAt.After(before.BeganAt) {
		t.Fatalf("renewed %+v (was %+v), err %v", renewed, before, err)
	}
	env.Authority.SetIssuedAt(d.DecisionID, renewed.BeganAt.Add(-time.Millisecond))
	if x, _ := mustExecute(t, env, d); x.State != gongbu.StateIndeterminate || env.Provider.Submits() != 0 {
		t.Fatalf("%+v, %d submits", x, env.Provider.Submits())
	}
}

// A submission whose outcome stays unknown is re-sent under its key only so often, and only
// for so long; then it is indeterminate and waits for an operator.
func TestTakeoversAreBounded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		set       func(*execution.Service)
		takeovers int // leases through which it is still submitting, each with a takeover
		more      int // leases after those until it is indeterminate
		why       string
	}{
		{"by count", func(s *execution.Service) { s.MaxTakeovers = 4 }, 4, 3, "through 4 resubmissions"},
		{"by age", func(s *execution.Service) { s.SubmitDeadline = 3 * gongbutest.Lease }, 2, 2, "still unknown"},
		{"defaults", func(*execution.Service) {}, 10, 5, "through 10 resubmissions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := gongbutest.New(t, true)
			c.set(env.Service)
			d := env.Issue("agent-a")
			for range 20 {
				env.Provider.OnSubmit(gongbutest.Ambiguous())
			}
			mustExecute(t, env, d)
			runFor(t, env, c.takeovers)
			if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSubmitting || env.Provider.Submits() != c.takeovers+1 {
				t.Fatalf("after %d takeovers: %s, %d submits", c.takeovers, x.State, env.Provider.Submits())
			}
			runFor(t, env, c.more)
			x := env.Get(t, d.DecisionID)
			if x.State != gongbu.StateIndeterminate || x.Error == nil || !strings.Contains(*x.Error, c.why) || x.Reported {
				t.Fatalf("%+v", x)
			}
			if env.Provider.Submits() != c.takeovers+1 || len(env.Authority.Reports()) != 0 {
				t.Fatalf("%d submits, want the first and %d takeovers; reports %+v", env.Provider.Submits(), c.takeovers, env.Authority.Reports())
			}
		})
	}
}

// Resolving an indeterminate execution leaves its outcome for Tick to report: a charge is
// settled, nothing charged is released.
func TestResolvedExecutionsAreReported(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	charged, notCharged := env.Issue("agent-a"), env.Issue("agent-a")
	for _, d := range []gongbu.Decision{charged, notCharged} {
		env.Provider.OnSubmit(gongbutest.Ambiguous())
		if x, _ := mustExecute(t, env, d); x.State != gongbu.StateIndeterminate {
			t.Fatalf("%s", x.State)
		}
	}
	ctx := context.Background()
	if _, err := env.Store.Resolve(ctx, charged.DecisionID, 20_000, env.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Resolve(ctx, notCharged.DecisionID, 0, env.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	env.Tick(t)
	r := env.Authority.Reports()
	if len(r) != 2 {
		t.Fatalf("reports %+v", r)
	}
	for _, rep := range r {
		switch rep.DecisionID {
		case charged.DecisionID:
			if !rep.Settled || rep.Failed || rep.Amount != 20_000 {
				t.Fatalf("charged: %+v, want a settle of 20000", rep)
			}
		case notCharged.DecisionID:
			if rep.Settled || !strings.Contains(rep.Reason, "resolved by an operator") {
				t.Fatalf("not charged: %+v, want a release", rep)
			}
		}
	}
	if env.Provider.Submits() != 2 {
		t.Fatalf("%d submits", env.Provider.Submits())
	}
}
