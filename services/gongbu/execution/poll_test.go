package execution_test

import (
	"strings"
	"testing"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// submitted executes a new decision, which the fake provider accepts.
func submitted(t *testing.T, env *gongbutest.Env) (gongbu.Decision, gongbu.Execution) {
	t.Helper()
	d := env.Issue("agent-a")
	x, _ := mustExecute(t, env, d)
	if x.State != gongbu.StateSubmitted {
		t.Fatalf("state %s", x.State)
	}
	return d, x
}

func TestPendingThenReadySucceedsAndSettlesOnce(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d, x := submitted(t, env)
	env.Provider.OnPoll(gongbutest.Answer(gongbu.JobPending, "", ""), gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))

	env.Tick(t)
	if got := env.Get(t, d.DecisionID); got.State != gongbu.StateSubmitted || env.Provider.Polls() != 1 {
		t.Fatalf("after pending: %s, %d polls", got.State, env.Provider.Polls())
	}
	if p := env.Provider.Polled(); p[0].ID != *x.ProviderJobID || p[0].PollingURL != *x.PollingURL {
		t.Fatalf("polled %+v, want the recorded job %s", p[0], *x.ProviderJobID)
	}
	env.Tick(t) // before the poll interval: not polled
	if env.Provider.Polls() != 1 {
		t.Fatalf("polled again before the interval: %d polls", env.Provider.Polls())
	}

	env.Clock.Advance(gongbutest.PollInterval)
	env.Tick(t)
	got := env.Get(t, d.DecisionID)
	if got.State != gongbu.StateSucceeded || got.ResultURL == nil || *got.ResultURL != "https://provider.test/s.png" ||
		got.ChargedMicros == nil || *got.ChargedMicros != d.AmountMicros || !got.Reported {
		t.Fatalf("after ready: %+v", got)
	}
	runFor(t, env, 3)
	r := env.Authority.Reports()
	if len(r) != 1 || !r[0].Settled || r[0].Amount != d.AmountMicros || r[0].DecisionID != d.DecisionID {
		t.Fatalf("reports %+v, want one settle of %d", r, d.AmountMicros)
	}
	if env.Provider.Polls() != 2 || env.Provider.Submits() != 1 {
		t.Fatalf("%d polls, %d submits after the outcome", env.Provider.Polls(), env.Provider.Submits())
	}
}

func TestPollOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		answer   gongbutest.PollFunc
		state    gongbu.State
		settled  bool // the provider took the job: its price is captured (and Hubu told it failed)
		reported bool
	}{
		{"the provider failed the job", gongbutest.Answer(gongbu.JobFailed, "", "Content Moderated"), gongbu.StateFailed, true, true},
		{"the provider lost the job", gongbutest.Answer(gongbu.JobLost, "", ""), gongbu.StateIndeterminate, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := gongbutest.New(t, true)
			d, _ := submitted(t, env)
			env.Provider.OnPoll(c.answer)
			env.Tick(t)
			x := env.Get(t, d.DecisionID)
			if x.State != c.state || x.Reported != c.reported || x.Error == nil {
				t.Fatalf("%+v", x)
			}
			runFor(t, env, 3)
			r := env.Authority.Reports()
			switch {
			case c.settled && (len(r) != 1 || !r[0].Settled || r[0].Amount != d.AmountMicros || !r[0].Failed ||
				!strings.Contains(r[0].Reason, "Content Moderated")):
				t.Fatalf("reports %+v, want one settle of %d as failed, with the provider's reason", r, d.AmountMicros)
			case !c.settled && len(r) != 0:
				t.Fatalf("reports %+v, want none", r)
			}
			if env.Provider.Polls() != 1 || env.Provider.Submits() != 1 {
				t.Fatalf("%d polls, %d submits after the outcome", env.Provider.Polls(), env.Provider.Submits())
			}
		})
	}
}

func TestPollDeadline(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d, _ := submitted(t, env)
	for env.Clock.Now().Add(gongbutest.PollInterval).Before(*env.Get(t, d.DecisionID).PollDeadline) {
		env.Tick(t) // pending
		env.Clock.Advance(gongbutest.PollInterval)
		if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSubmitted {
			t.Fatalf("%s before the deadline", x.State)
		}
	}
	polls := env.Provider.Polls()
	if polls < int(gongbutest.PollDeadline/gongbutest.PollInterval)-2 {
		t.Fatalf("only %d polls before the deadline", polls)
	}
	env.Clock.Advance(gongbutest.PollInterval)
	env.Tick(t)
	x := env.Get(t, d.DecisionID)
	if x.State != gongbu.StateIndeterminate || x.Reported || len(env.Authority.Reports()) != 0 {
		t.Fatalf("after the deadline: %+v, reports %+v", x, env.Authority.Reports())
	}
	runFor(t, env, 2)
	if env.Provider.Polls() != polls+1 {
		t.Fatalf("polled after the deadline: %d polls, want %d", env.Provider.Polls(), polls+1)
	}
}

func TestPollErrorsAreRetried(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d, _ := submitted(t, env)
	env.Provider.OnPoll(gongbutest.PollError(), gongbutest.PollError(), gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	for i := range 2 {
		env.Tick(t)
		if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSubmitted {
			t.Fatalf("after poll error %d: %s", i+1, x.State)
		}
		env.Tick(t) // not again before the interval
		if env.Provider.Polls() != i+1 {
			t.Fatalf("%d polls, want %d", env.Provider.Polls(), i+1)
		}
		env.Clock.Advance(gongbutest.PollInterval)
	}
	env.Tick(t)
	if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSucceeded || !x.Reported {
		t.Fatalf("%+v", x)
	}
}

// A restarted Gongbu — a new Service on the same database — resumes polling what the old
// one had submitted, and never submits it again.
func TestRestartResumesPolling(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d, x := submitted(t, env)

	restarted := gongbutest.NewProvider(false)
	restarted.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	svc := env.NewService(restarted)
	env.Clock.Advance(gongbutest.PollInterval)
	if err := svc.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if restarted.Submits() != 0 || restarted.Polls() != 1 || restarted.Polled()[0].ID != *x.ProviderJobID {
		t.Fatalf("%d submits, %d polls (%+v)", restarted.Submits(), restarted.Polls(), restarted.Polled())
	}
	if got := env.Get(t, d.DecisionID); got.State != gongbu.StateSucceeded || !got.Reported {
		t.Fatalf("%+v", got)
	}
}
