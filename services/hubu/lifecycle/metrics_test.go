package lifecycle_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu/hubutest"
	"hubu.dev/hubu/services/hubu/lifecycle"
)

// Every try to hand a decision to the executor is counted once, by whether the executor took
// it: on authorize, and on a recovery pass's re-send.
func TestHandOffAttemptsAreCounted(t *testing.T) {
	t.Parallel()
	b := hubutest.New(t, nil)
	reg := prometheus.NewRegistry()
	b.Lifecycle.HandOffs = lifecycle.NewHandOffCounter(reg)
	agent := b.NewAgent(t, "painter", nil)

	want := func(accepted, failed int) {
		t.Helper()
		expected := fmt.Sprintf(`# HELP hubu_handoff_attempts_total Tries to hand a decision to the executor, by result (accepted, failed).
# TYPE hubu_handoff_attempts_total counter
hubu_handoff_attempts_total{result="accepted"} %d
hubu_handoff_attempts_total{result="failed"} %d
`, accepted, failed)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "hubu_handoff_attempts_total"); err != nil {
			t.Fatal(err)
		}
	}
	want(0, 0)
	authorize(t, agent, "flux-pro-1.1-ultra", hubuapi.OperationStatePendingApproval) // held: nothing handed off
	want(0, 0)
	b.Executor.FailNext(2)
	authorize(t, agent, "flux-dev", hubuapi.OperationStateDispatching)
	authorize(t, agent, "flux-dev", hubuapi.OperationStateDispatching)
	want(0, 2)
	authorize(t, agent, "flux-dev", hubuapi.OperationStateExecuting)
	want(1, 2)
	b.Clock.Advance(time.Minute) // past RetryAfter: both are re-sent, and accepted
	if sent, err := b.Lifecycle.Recover(t.Context()); err != nil || sent != 2 {
		t.Fatalf("Recover: %d sent, %v", sent, err)
	}
	want(3, 2)
}
