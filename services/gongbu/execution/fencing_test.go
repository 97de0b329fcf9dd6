package execution_test

import (
	"context"
	"testing"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// A worker whose submission outlives its lease: another worker takes the execution over and
// resubmits under the same key, and the provider charges that job. The first worker's late
// refusal must not release the hold (nor write anything): the outcome belongs to the worker
// holding the lease.
func TestLateAnswerOfALostLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d := env.Issue("agent-a")
	var takeover gongbu.Execution
	env.Provider.OnSubmit(
		func(ctx context.Context, key string, _ gongbu.Decision) (gongbu.Job, error) {
			// While the first call hangs, its lease runs out and another worker takes over.
			env.Clock.Advance(gongbutest.Lease + gongbutest.PollInterval)
			env.NewService(env.Provider).Tick(t.Context())
			takeover = env.Get(t, d.DecisionID)
			return gongbu.Job{}, &gongbu.Rejected{Reason: "FLUX answered 429 (late)"}
		},
		env.Provider.Accept(), // the takeover's resubmission
	)
	x, created := mustExecute(t, env, d)
	if !created || takeover.State != gongbu.StateSubmitted || takeover.LeaseGeneration != 1 {
		t.Fatalf("takeover %+v", takeover)
	}
	if x.State != gongbu.StateSubmitted || x.ChargedMicros != nil {
		t.Fatalf("after the late refusal: %+v, want the takeover's submitted job to stand", x)
	}
	if r := env.Authority.Reports(); len(r) != 0 {
		t.Fatalf("reports %+v: the late refusal released a hold the takeover was charged for", r)
	}
	env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/sample.png", ""))
	runFor(t, env, 1)
	x = env.Get(t, d.DecisionID)
	if x.State != gongbu.StateSucceeded || x.ChargedMicros == nil || *x.ChargedMicros != d.AmountMicros {
		t.Fatalf("%+v", x)
	}
	if r := env.Authority.Reports(); len(r) != 1 || !r[0].Settled || r[0].Amount != d.AmountMicros {
		t.Fatalf("reports %+v, want one settle of the charge", r)
	}
	if n := env.Provider.SubmitsFor(vendorkey.For("bfl", d.DecisionID)); n != 2 {
		t.Fatalf("%d submits, want 2 under one key", n)
	}
}
