package execution_test

import (
	"context"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// Run is the background worker: it ticks until its context ends, then returns.
func TestRunTicksUntilCancelled(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d := crashedWhileSubmitting(t, env)
	env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		env.Service.Run(ctx, 10*time.Millisecond)
	}()
	if !waitfor.Within(10*time.Second, func() bool { return env.Get(t, d.DecisionID).State == gongbu.StateSucceeded }) {
		cancel()
		t.Fatalf("not succeeded within 10s: %+v", env.Get(t, d.DecisionID))
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of the cancellation")
	}
	if env.Provider.Submits() != 1 || len(env.Authority.Reports()) != 1 {
		t.Fatalf("%d submits, reports %+v", env.Provider.Submits(), env.Authority.Reports())
	}
}
