package execution_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

func TestReportsAreRetriedUntilHubuHasThem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		script  func(env *gongbutest.Env)
		state   gongbu.State
		settled bool
	}{
		{"settle", func(env *gongbutest.Env) {
			env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
		}, gongbu.StateSucceeded, true},
		{"release", func(env *gongbutest.Env) {
			env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 422"))
		}, gongbu.StateFailed, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := gongbutest.New(t, true)
			c.script(env)
			d := env.Issue("agent-a")
			env.Authority.SetReportsDown(true)
			mustExecute(t, env, d)
			env.Tick(t)
			for range 2 {
				env.Tick(t)
				env.Clock.Advance(gongbutest.PollInterval)
			}
			x := env.Get(t, d.DecisionID)
			if x.State != c.state || x.Reported {
				t.Fatalf("while Hubu is down: %+v", x)
			}
			if env.Authority.FailedReports() < 2 {
				t.Fatalf("%d report attempts while Hubu was down, want a retry on every tick", env.Authority.FailedReports())
			}

			env.Authority.SetReportsDown(false)
			env.Tick(t)
			if x := env.Get(t, d.DecisionID); !x.Reported {
				t.Fatalf("not reported once Hubu is back: %+v", x)
			}
			runFor(t, env, 3)
			r := env.Authority.Reports()
			if len(r) != 1 || r[0].Settled != c.settled || r[0].DecisionID != d.DecisionID {
				t.Fatalf("reports %+v, want exactly one (settled=%v)", r, c.settled)
			}
			if c.settled && r[0].Amount != d.AmountMicros {
				t.Fatalf("settled %d, want %d", r[0].Amount, d.AmountMicros)
			}
		})
	}
}

// Two Gongbu processes on one database, ticking at the same time, take over crashed
// submissions and poll jobs; no decision ever reaches the provider twice.
func TestTwoWorkersNeverSubmitOneDecisionTwice(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	provider := env.Provider
	other := env.NewService(provider)

	var ids []uuid.UUID
	for range 10 {
		ids = append(ids, crashedWhileSubmitting(t, env).DecisionID)
	}
	// Fresh decisions arrive on the first worker while both tick.
	fresh := make([]gongbu.Decision, 10)
	for i := range fresh {
		fresh[i] = env.Issue("agent-a")
		ids = append(ids, fresh[i].DecisionID)
	}
	provider.OnPoll(func(context.Context, gongbu.Job) (gongbu.PollResult, error) {
		return gongbu.PollResult{Status: gongbu.JobPending}, nil
	})

	for round := range 5 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 2+len(fresh))
		for _, svc := range []interface{ Tick(context.Context) error }{env.Service, other} {
			wg.Go(func() {
				<-start
				for range 3 {
					if err := svc.Tick(context.Background()); err != nil {
						errs <- err
					}
				}
			})
		}
		if round == 0 {
			for _, d := range fresh {
				wg.Go(func() {
					<-start
					if _, _, err := env.Service.Execute(context.Background(), d); err != nil {
						errs <- err
					}
				})
			}
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		env.Clock.Advance(gongbutest.PollInterval)
	}
	for _, id := range ids {
		if n := provider.SubmitsFor(vendorkey.For("bfl", id)); n != 1 {
			t.Errorf("decision %s was submitted %d times", id, n)
		}
		if x := env.Get(t, id); x.State != gongbu.StateSubmitted {
			t.Errorf("decision %s is %s", id, x.State)
		}
	}
	if provider.Submits() != len(ids) {
		t.Fatalf("%d submits for %d decisions", provider.Submits(), len(ids))
	}
	// A job is polled at most once per interval, whichever worker polls it: 5 rounds.
	perJob := map[string]int{}
	for _, j := range provider.Polled() {
		perJob[j.ID]++
	}
	for job, n := range perJob {
		if n > 5 {
			t.Errorf("job %s was polled %d times in 5 intervals", job, n)
		}
	}
}

// Reports that Hubu keeps refusing go to the back of the queue: a full page of them must not
// hold back an outcome behind it for ever.
func TestFailingReportsDoNotStarveOthers(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	for range 100 { // one page of ListUnreported in Tick
		d := env.Issue("agent-a")
		env.Authority.FailReportsFor(d.DecisionID)
		env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 400"))
		if x, _ := mustExecute(t, env, d); x.State != gongbu.StateFailed || x.Reported {
			t.Fatalf("%+v", x)
		}
	}
	env.Clock.Advance(time.Second)
	later := env.Issue("agent-a")
	env.Authority.SetReportsDown(true)
	env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 400"))
	mustExecute(t, env, later)
	env.Authority.SetReportsDown(false)

	for range 2 {
		env.Clock.Advance(time.Second)
		env.Tick(t)
	}
	if x := env.Get(t, later.DecisionID); !x.Reported {
		t.Fatalf("an outcome behind %d failing reports was not reported after two passes", 100)
	}
	if r := env.Authority.Reports(); len(r) != 1 || r[0].DecisionID != later.DecisionID {
		t.Fatalf("reports %+v", r)
	}
}
