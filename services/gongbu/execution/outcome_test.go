package execution_test

import (
	"context"
	"strings"
	"testing"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// runFor advances the clock by a lease at a time and ticks, as the background worker would
// over a long time.
func runFor(t *testing.T, env *gongbutest.Env, leases int) {
	t.Helper()
	for range leases {
		env.Clock.Advance(gongbutest.Lease + gongbutest.PollInterval)
		env.Tick(t)
	}
}

func TestRejectedFailsAndReleases(t *testing.T) {
	t.Parallel()
	for _, honours := range []bool{true, false} {
		env := gongbutest.New(t, honours)
		d := env.Issue("agent-a")
		env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 422"))
		x, created := mustExecute(t, env, d)
		if !created || x.State != gongbu.StateFailed || x.ChargedMicros == nil || *x.ChargedMicros != 0 || !x.Reported {
			t.Fatalf("honours=%v: %+v", honours, x)
		}
		if x.Error == nil || !strings.Contains(*x.Error, "422") {
			t.Fatalf("honours=%v: error %v", honours, x.Error)
		}
		runFor(t, env, 3)
		if env.Provider.Submits() != 1 || env.Provider.Polls() != 0 {
			t.Fatalf("honours=%v: the provider was called again (%d submits, %d polls)", honours, env.Provider.Submits(), env.Provider.Polls())
		}
		r := env.Authority.Reports()
		if len(r) != 1 || r[0].Settled || r[0].DecisionID != d.DecisionID || !strings.Contains(r[0].Reason, "422") {
			t.Fatalf("honours=%v: reports %+v, want one release", honours, r)
		}
	}
}

func TestAmbiguousSubmitWithKeysIsResentUnderTheSameKey(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d := env.Issue("agent-a")
	key := vendorkey.For("bfl", d.DecisionID)
	env.Provider.OnSubmit(gongbutest.Ambiguous())
	x, created := mustExecute(t, env, d)
	if !created || x.State != gongbu.StateSubmitting {
		t.Fatalf("created=%v state %s, want submitting", created, x.State)
	}

	// The lease still holds: nothing is resent yet.
	env.Clock.Advance(gongbutest.Lease - gongbutest.PollInterval)
	env.Tick(t)
	if env.Provider.Submits() != 1 {
		t.Fatalf("resent before the lease ran out: %d submits", env.Provider.Submits())
	}

	env.Clock.Advance(2 * gongbutest.PollInterval)
	env.Tick(t)
	if env.Provider.Submits() != 2 || env.Provider.SubmitsFor(key) != 2 {
		t.Fatalf("%d submits, %d under the derived key; want 2 and 2", env.Provider.Submits(), env.Provider.SubmitsFor(key))
	}
	x = env.Get(t, d.DecisionID)
	if x.State != gongbu.StateSubmitted || x.Attempts != 1 || x.ProviderJobID == nil {
		t.Fatalf("after the resubmission: %+v", x)
	}

	env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/sample.png", ""))
	env.Tick(t)
	if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSucceeded || !x.Reported {
		t.Fatalf("after the poll: %+v", x)
	}
	if env.Provider.Submits() != 2 {
		t.Fatalf("%d submits", env.Provider.Submits())
	}
}

func TestAmbiguousSubmitWithoutKeysIsIndeterminate(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d := env.Issue("agent-a")
	env.Provider.OnSubmit(gongbutest.Ambiguous())
	x, created := mustExecute(t, env, d)
	if !created || x.State != gongbu.StateIndeterminate || x.ChargedMicros != nil || x.Reported {
		t.Fatalf("created=%v %+v, want indeterminate at once", created, x)
	}
	runFor(t, env, 5)
	if env.Provider.Submits() != 1 || env.Provider.Polls() != 0 {
		t.Fatalf("an indeterminate execution reached the provider again: %d submits, %d polls", env.Provider.Submits(), env.Provider.Polls())
	}
	if r := env.Authority.Reports(); len(r) != 0 {
		t.Fatalf("an indeterminate execution was reported: %+v", r)
	}
	if x := env.Get(t, d.DecisionID); x.State != gongbu.StateIndeterminate || x.Reported {
		t.Fatalf("later: %+v", x)
	}
	// Re-sending the decision reports it as it stands.
	if again, created := mustExecute(t, env, d); created || again.State != gongbu.StateIndeterminate || env.Provider.Submits() != 1 {
		t.Fatalf("re-sent: created=%v %s, %d submits", created, again.State, env.Provider.Submits())
	}
	if !strings.Contains(env.Logs.String(), "an operator must reconcile it") {
		t.Fatal("no log line tells the operator")
	}
}

// crashedWhileSubmitting records a decision as a worker that died while calling the
// provider leaves it: submitting, under a lease that has run out.
func crashedWhileSubmitting(t *testing.T, env *gongbutest.Env) gongbu.Decision {
	t.Helper()
	d := env.Issue("agent-a")
	now := env.Clock.Now()
	_, _, created, err := env.Store.Insert(context.Background(), d, vendorkey.For("bfl", d.DecisionID), now.Add(-gongbutest.PollInterval), now.Add(-gongbutest.Lease))
	if err != nil || !created {
		t.Fatalf("insert: created=%v err=%v", created, err)
	}
	return d
}

func TestCrashWhileSubmittingWithKeysResubmits(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d := crashedWhileSubmitting(t, env)
	env.Tick(t)
	key := vendorkey.For("bfl", d.DecisionID)
	if env.Provider.Submits() != 1 || env.Provider.SubmitsFor(key) != 1 {
		t.Fatalf("%d submits, %d under the derived key; want 1 and 1", env.Provider.Submits(), env.Provider.SubmitsFor(key))
	}
	if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSubmitted || x.Attempts != 1 {
		t.Fatalf("%+v", x)
	}
	env.Tick(t) // polls (pending), never resubmits
	if env.Provider.Submits() != 1 || env.Provider.Polls() != 1 {
		t.Fatalf("%d submits, %d polls", env.Provider.Submits(), env.Provider.Polls())
	}
}

func TestCrashWhileSubmittingWithoutKeysIsIndeterminate(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d := crashedWhileSubmitting(t, env)
	env.Tick(t)
	x := env.Get(t, d.DecisionID)
	if x.State != gongbu.StateIndeterminate || x.Error == nil || x.Reported || x.ChargedMicros != nil {
		t.Fatalf("%+v", x)
	}
	runFor(t, env, 3)
	if env.Provider.Submits() != 0 || env.Provider.Polls() != 0 || len(env.Authority.Reports()) != 0 {
		t.Fatalf("%d submits, %d polls, reports %+v; want none", env.Provider.Submits(), env.Provider.Polls(), env.Authority.Reports())
	}
}

// A worker that is still submitting holds the lease; another tick must leave it alone.
func TestLiveSubmissionIsNotTakenOver(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d := env.Issue("agent-a")
	now := env.Clock.Now()
	if _, _, _, err := env.Store.Insert(context.Background(), d, vendorkey.For("bfl", d.DecisionID), now.Add(gongbutest.Lease), now); err != nil {
		t.Fatal(err)
	}
	env.Tick(t)
	if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSubmitting || x.Attempts != 0 {
		t.Fatalf("%+v", x)
	}
}
