package execution_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// Where the provider states what a job costs (BFL's cost), that is what Hubu captures, with the
// stated cost beside it; never more than the decision's amount, and a stated cost above it is
// raised: logged with the execution and counted.
func TestProviderCostIsCaptured(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		cost          int64
		captured      int64
		aboveTheHold  bool
		currencyOther bool
	}{
		{"below the hold", 20_000, 20_000, false, false},
		{"the hold", 25_000, 25_000, false, false},
		{"above the hold", 30_000, 25_000, true, false},
		{"in credits, for a decision in another currency", 20_000, 25_000, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := gongbutest.New(t, false)
			reg := prometheus.NewRegistry()
			env.Service.Metrics = execution.NewMetrics(reg)
			d := env.IssueWith("agent-a", func(d *gongbu.Decision) {
				if c.currencyOther {
					d.Currency = "EUR"
				}
			})
			env.Provider.OnSubmit(env.Provider.AcceptCosting(c.cost))
			env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/samples/job-1.png", ""))
			x, _ := mustExecute(t, env, d)
			if x.ProviderCostMicros == nil || *x.ProviderCostMicros != c.cost {
				t.Fatalf("the stated cost is not recorded with the job: %+v", x)
			}
			runFor(t, env, 1)
			x = env.Get(t, d.DecisionID)
			if x.State != gongbu.StateSucceeded || *x.ChargedMicros != c.captured {
				t.Fatalf("%+v, want succeeded charging %d", x, c.captured)
			}
			r := env.Authority.Reports()
			if len(r) != 1 || !r[0].Settled || r[0].Amount != c.captured || r[0].ProviderCost == nil || *r[0].ProviderCost != c.cost {
				t.Fatalf("reports %+v, want a settle of %d with the stated %d", r, c.captured, c.cost)
			}
			logged := strings.Contains(env.Logs.String(), "the provider states a cost above the decision's amount")
			counted := testutil.ToFloat64(env.Service.Metrics.CostAboveHold()) == 1
			if logged != c.aboveTheHold || counted != c.aboveTheHold {
				t.Fatalf("raised: logged %v, counted %v; want %v", logged, counted, c.aboveTheHold)
			}
		})
	}
}

// A job the provider ends without charging for it (BFL: moderated, or an error) releases the
// whole hold; one it charged for is captured though it failed.
func TestFailuresChargedOrNot(t *testing.T) {
	t.Parallel()
	for _, uncharged := range []bool{true, false} {
		env := gongbutest.New(t, false)
		d := env.Issue("agent-a")
		env.Provider.OnPoll(func(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error) {
			return gongbu.PollResult{Status: gongbu.JobFailed, Detail: "Content Moderated", Uncharged: uncharged}, nil
		})
		mustExecute(t, env, d)
		runFor(t, env, 1)
		x := env.Get(t, d.DecisionID)
		r := env.Authority.Reports()
		switch {
		case x.State != gongbu.StateFailed || len(r) != 1:
			t.Fatalf("uncharged=%v: %+v, reports %+v", uncharged, x, r)
		case uncharged && (*x.ChargedMicros != 0 || r[0].Settled):
			t.Fatalf("an uncharged failure charged %d, reports %+v; want its hold released", *x.ChargedMicros, r)
		case !uncharged && (*x.ChargedMicros != 25_000 || !r[0].Settled || !r[0].Failed):
			t.Fatalf("a charged failure: %d, reports %+v; want 25000 captured as failed", *x.ChargedMicros, r)
		}
	}
}
