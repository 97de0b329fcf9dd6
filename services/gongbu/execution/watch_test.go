package execution_test

import (
	"context"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// waitReported waits, with a bound, until the decision's execution is in state and its
// outcome has been reported to Hubu. The outcome is recorded before it is reported, so a
// test that looked at the state alone could catch the execution between the two.
func waitReported(t *testing.T, env *gongbutest.Env, x gongbu.Execution, state gongbu.State) gongbu.Execution {
	t.Helper()
	var got gongbu.Execution
	if !waitfor.Within(10*time.Second, func() bool {
		got = env.Get(t, x.DecisionID)
		return got.State == state && got.Reported
	}) {
		t.Fatalf("still %s (reported %v) after 10s, want %s and reported", got.State, got.Reported, state)
	}
	return got
}

// The worker that submitted a job looks at it soon, and again with growing waits, so a quick
// provider's result is recorded without any background pass.
func TestSubmitterWatchesItsJobUntilReady(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	env.Service.FirstPoll = time.Millisecond
	env.Provider.OnPoll(gongbutest.Answer(gongbu.JobPending, "", ""), gongbutest.Answer(gongbu.JobPending, "", ""),
		gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	d := env.Issue("agent-a")
	x, _ := mustExecute(t, env, d)

	got := waitReported(t, env, x, gongbu.StateSucceeded)
	if env.Provider.Polls() != 3 || !got.Reported {
		t.Fatalf("%d polls, reported %v: want 3 polls by the watcher and the outcome reported", env.Provider.Polls(), got.Reported)
	}
	if r := env.Authority.Reports(); len(r) != 1 || !r[0].Settled {
		t.Fatalf("reports %+v", r)
	}
}

// A watcher holds the job's lease, so the background pass leaves the job alone while it
// watches; when the watcher is gone (its process stopped), the lease runs out and the pass
// takes the job over: a lost wake-up costs a poll interval, never the result.
func TestBackgroundPassTakesOverAJobItsWatcherLeft(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	env.Service.FirstPoll = time.Hour // after its first look, the watcher waits past the test
	env.Provider.OnPoll(gongbutest.Answer(gongbu.JobPending, "", ""), gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	d := env.Issue("agent-a")
	mustExecute(t, env, d)
	waitfor.True(t, 10*time.Second, "the watcher's first look", func() bool { return env.Provider.Polls() >= 1 })

	env.Tick(t)
	if n := env.Provider.Polls(); n != 1 {
		t.Fatalf("the pass polled a job its watcher holds: %d polls", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := env.Service.Drain(ctx); err != nil { // the watcher stops waiting at once
		t.Fatal(err)
	}
	next := env.NewService(env.Provider) // another replica, or this one restarted
	env.Clock.Advance(gongbutest.PollInterval)
	if err := next.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := env.Get(t, d.DecisionID); got.State != gongbu.StateSucceeded || !got.Reported || env.Provider.Polls() != 2 {
		t.Fatalf("after the pass: %s, reported %v, %d polls", got.State, got.Reported, env.Provider.Polls())
	}
}

// A provider's word that a job is done (Nudge) polls it at once, taking the lease from the
// worker that held it; that worker can then write nothing.
func TestNudgePollsAtOnceAndFencesTheFormerHolder(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	d := env.Issue("agent-a")
	x, _ := mustExecute(t, env, d) // FirstPoll < 0: no watcher, and the lease is the submitter's

	ok, err := env.Service.Nudge(context.Background(), x)
	if err != nil || !ok {
		t.Fatalf("nudge: %v, %v", ok, err)
	}
	got := env.Get(t, d.DecisionID)
	if got.State != gongbu.StateSucceeded || !got.Reported || got.LeaseGeneration != x.LeaseGeneration+1 {
		t.Fatalf("after the nudge: %+v", got)
	}
	if _, err := env.Store.Finish(context.Background(), x, gongbu.Failed("late", 0), env.Clock.Now()); err != gongbu.ErrLeaseLost {
		t.Fatalf("the former holder's write: %v, want ErrLeaseLost", err)
	}
	// A second word about a finished job changes nothing.
	if ok, err := env.Service.Nudge(context.Background(), x); err != nil || ok {
		t.Fatalf("nudge of a finished execution: %v, %v", ok, err)
	}
	if env.Provider.Polls() != 1 || len(env.Authority.Reports()) != 1 {
		t.Fatalf("%d polls, %d reports", env.Provider.Polls(), len(env.Authority.Reports()))
	}
}
