package execution_test

import (
	"context"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

func mustExecute(t *testing.T, env *gongbutest.Env, d gongbu.Decision) (gongbu.Execution, bool) {
	t.Helper()
	x, created, err := env.Service.Execute(context.Background(), d)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	return x, created
}

func TestExecuteSubmitsOnceUnderTheDerivedKey(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d := env.Issue("agent-a")

	x, created := mustExecute(t, env, d)
	key := vendorkey.For("bfl", d.DecisionID)
	if !created || x.State != gongbu.StateSubmitted || x.VendorKey != key || x.ProviderJobID == nil || x.PollDeadline == nil {
		t.Fatalf("first execute: created=%v %+v", created, x)
	}
	if env.Provider.Submits() != 1 || env.Provider.SubmitsFor(key) != 1 {
		t.Fatalf("submits %d, under the derived key %d; want 1 and 1", env.Provider.Submits(), env.Provider.SubmitsFor(key))
	}
	if want := env.Clock.Now().Add(gongbutest.PollDeadline); !x.PollDeadline.Equal(want) {
		t.Fatalf("poll deadline %v, want %v", x.PollDeadline, want)
	}

	asked := env.Authority.Asked()
	again, created := mustExecute(t, env, d)
	if created || again.State != gongbu.StateSubmitted || *again.ProviderJobID != *x.ProviderJobID || again.DecisionID != d.DecisionID {
		t.Fatalf("second execute: created=%v %+v", created, again)
	}
	if env.Provider.Submits() != 1 {
		t.Fatalf("a second execute called the provider: %d submits", env.Provider.Submits())
	}
	if env.Authority.Asked() != asked {
		t.Fatal("a second execute asked Hubu again; the recorded execution answers it")
	}
	if n := env.Executions(t); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// A re-sent decision that arrives after the first finished returns the outcome as it stands.
func TestExecuteAfterTheOutcomeReturnsIt(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d := env.Issue("agent-a")
	env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 422"))
	x, _ := mustExecute(t, env, d)
	if x.State != gongbu.StateFailed {
		t.Fatalf("state %s", x.State)
	}
	again, created := mustExecute(t, env, d)
	if created || again.State != gongbu.StateFailed || !again.Reported || env.Provider.Submits() != 1 {
		t.Fatalf("created=%v %+v, %d submits", created, again, env.Provider.Submits())
	}
}

func TestConcurrentExecutesSubmitOnce(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	for round := range 10 {
		d := env.Issue("agent-a")
		const n = 20
		type result struct {
			x       gongbu.Execution
			created bool
			err     error
		}
		results := make([]result, n)
		gongbutest.AtOnce(n, func(i int) {
			x, created, err := env.Service.Execute(context.Background(), d)
			results[i] = result{x, created, err}
		})
		created := 0
		for i, r := range results {
			if r.err != nil {
				t.Fatalf("round %d, request %d: %v", round, i, r.err)
			}
			if r.x.DecisionID != d.DecisionID {
				t.Fatalf("request %d got execution %s", i, r.x.DecisionID)
			}
			if r.created {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d requests created the execution, want 1", round, created)
		}
		if got := env.Provider.SubmitsFor(vendorkey.For("bfl", d.DecisionID)); got != 1 {
			t.Fatalf("round %d: %d provider calls for one decision, want 1", round, got)
		}
	}
	if n := env.Executions(t); n != 10 {
		t.Fatalf("%d rows, want 10", n)
	}
}

func TestExecuteRefusesWhatHubuDidNotIssue(t *testing.T) {
	t.Parallel()
	changes := []struct {
		name   string
		change func(*gongbu.Decision)
	}{
		{"prompt", func(d *gongbu.Decision) { d.Arguments.Prompt = "a paper crane" }},
		{"model", func(d *gongbu.Decision) { d.Arguments.Model, d.Scope.Model = "flux-pro-1.1", "flux-pro-1.1" }},
		{"size", func(d *gongbu.Decision) { d.Arguments.Width, d.Scope.Size = 512, "512x1024" }},
		{"seed", func(d *gongbu.Decision) { s := int64(7); d.Arguments.Seed = &s }},
		{"no seed", func(d *gongbu.Decision) { d.Arguments.Seed = nil }},
		{"output format", func(d *gongbu.Decision) { f := "jpeg"; d.Arguments.OutputFormat = &f }},
		{"amount", func(d *gongbu.Decision) { d.AmountMicros = 1 }},
		{"currency", func(d *gongbu.Decision) { d.Currency = "EUR" }},
		{"public handle", func(d *gongbu.Decision) { d.PublicHandle = gongbutest.NewDecision().PublicHandle }},
		{"agent", func(d *gongbu.Decision) { d.AgentID = gongbutest.NewDecision().AgentID }},
		{"tool", func(d *gongbu.Decision) { d.Tool = "generate_video" }},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := gongbutest.New(t, true)
			issued := env.Issue("agent-a")
			req := issued
			c.change(&req)
			_, _, err := env.Service.Execute(context.Background(), req)
			if gongbu.ErrorCode(err) != gongbu.CodeDecisionMismatch {
				t.Fatalf("err = %v, want decision_mismatch", err)
			}
			if env.Executions(t) != 0 || env.Provider.Submits() != 0 {
				t.Fatal("a refused request wrote a row or reached the provider")
			}

			// Once the decision runs, a request that differs from it is still refused.
			mustExecute(t, env, issued)
			_, _, err = env.Service.Execute(context.Background(), req)
			if gongbu.ErrorCode(err) != gongbu.CodeDecisionMismatch {
				t.Fatalf("against the recorded execution: err = %v, want decision_mismatch", err)
			}
			if env.Provider.Submits() != 1 {
				t.Fatalf("%d submits, want 1", env.Provider.Submits())
			}
		})
	}
}

func TestExecuteRefusals(t *testing.T) {
	t.Parallel()
	type refusal struct {
		name    string
		prepare func(env *gongbutest.Env) gongbu.Decision
		want    gongbu.Code
	}
	cases := []refusal{
		{"a decision Hubu never issued", func(*gongbutest.Env) gongbu.Decision { return gongbutest.NewDecision() }, gongbu.CodeForbidden},
		{"Hubu down", func(env *gongbutest.Env) gongbu.Decision {
			d := env.Issue("agent-a")
			env.Authority.SetDown(true)
			return d
		}, gongbu.CodeUnavailable},
		{"a provider without an adapter", func(env *gongbutest.Env) gongbu.Decision {
			d := gongbutest.NewDecision()
			d.Scope.Provider = "midjourney"
			env.Authority.Issue(d, "dispatching", "agent-a")
			return d
		}, gongbu.CodeInvalidArguments},
	}
	for _, state := range []string{"pending_approval", "approved", "denied", "expired", "failed"} {
		cases = append(cases, refusal{"operation " + state, func(env *gongbutest.Env) gongbu.Decision { return env.IssueIn(state, "agent-a") }, gongbu.CodeForbidden})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := gongbutest.New(t, true)
			d := c.prepare(env)
			_, _, err := env.Service.Execute(context.Background(), d)
			if gongbu.ErrorCode(err) != c.want {
				t.Fatalf("err = %v, want %s", err, c.want)
			}
			if env.Executions(t) != 0 || env.Provider.Submits() != 0 {
				t.Fatal("a refused request wrote a row or reached the provider")
			}
		})
	}
}

func TestExecuteInEveryExecutableState(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	for _, state := range []string{"dispatching", "executing", "succeeded"} {
		d := env.IssueIn(state, "agent-a")
		if x, created := mustExecute(t, env, d); !created || x.State != gongbu.StateSubmitted {
			t.Fatalf("%s: created=%v state %s", state, created, x.State)
		}
		if n := env.Provider.SubmitsFor(vendorkey.For("bfl", d.DecisionID)); n != 1 {
			t.Fatalf("%s: %d submits under the derived key", state, n)
		}
	}
}

// Hubu moves an operation past dispatching only after Gongbu accepted its decision. A
// decision that arrives in such a state with no execution here means Gongbu lost its record:
// the provider may hold the job. Resubmitting is safe only under an honoured key (above);
// otherwise it is indeterminate, and the provider is not called.
func TestLostRecordWithoutKeysIsIndeterminate(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	for _, state := range []string{"executing", "succeeded"} {
		d := env.IssueIn(state, "agent-a")
		x, created := mustExecute(t, env, d)
		if !created || x.State != gongbu.StateIndeterminate || x.Reported || x.Error == nil {
			t.Fatalf("%s: created=%v %+v", state, created, x)
		}
	}
	runFor(t, env, 2)
	if env.Provider.Submits() != 0 || len(env.Authority.Reports()) != 0 {
		t.Fatalf("%d submits, reports %+v; want none", env.Provider.Submits(), env.Authority.Reports())
	}
	// A fresh decision still runs.
	if x, _ := mustExecute(t, env, env.Issue("agent-a")); x.State != gongbu.StateSubmitted {
		t.Fatalf("dispatching: %s", x.State)
	}
}

// Hubu's HTTP client gives up (its request context ends) while the provider is answering.
// The paid call and its record must not be abandoned with it: the job is recorded.
func TestExecuteOutlivesTheCallersContext(t *testing.T) {
	t.Parallel()
	for _, honours := range []bool{false, true} {
		env := gongbutest.New(t, honours)
		d := env.Issue("agent-a")
		ctx, cancel := context.WithCancel(context.Background())
		env.Provider.OnSubmit(func(pctx context.Context, key string, _ gongbu.Decision) (gongbu.Job, error) {
			cancel() // the caller hangs up while the request is in flight
			if err := pctx.Err(); err != nil {
				return gongbu.Job{}, err // what an HTTP client does with a cancelled context
			}
			return env.Provider.Accept()(pctx, key, d)
		})
		x, created, err := env.Service.Execute(ctx, d)
		if err != nil || !created {
			t.Fatalf("honours=%v: created=%v err=%v", honours, created, err)
		}
		if got := env.Get(t, d.DecisionID); got.State != gongbu.StateSubmitted || got.ProviderJobID == nil {
			t.Fatalf("honours=%v: returned %s, stored %s (job %v); want the job recorded", honours, x.State, got.State, got.ProviderJobID)
		}
	}
}

// Hubu's client hangs up right after Gongbu checked the decision, before the row is written.
// The insert and the submission that follows it run on, detached from the request: a row
// without its submission would have to be taken over, and without an honoured key become
// indeterminate although nothing was ever sent.
func TestExecuteInsertOutlivesTheCallersContext(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d := env.Issue("agent-a")
	ctx, cancel := context.WithCancel(context.Background())
	env.Authority.OnDecision(cancel)
	x, created, err := env.Service.Execute(ctx, d)
	if err != nil || !created || x.State != gongbu.StateSubmitted {
		t.Fatalf("created=%v err=%v %+v", created, err, x)
	}
	if env.Provider.Submits() != 1 {
		t.Fatalf("%d submits", env.Provider.Submits())
	}
}

// CallTimeout bounds a submission that the provider never answers.
func TestCallTimeoutBoundsASubmission(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	env.Service.CallTimeout = 100 * time.Millisecond
	d := env.Issue("agent-a")
	env.Provider.OnSubmit(func(ctx context.Context, _ string, _ gongbu.Decision) (gongbu.Job, error) {
		<-ctx.Done()
		return gongbu.Job{}, ctx.Err()
	})
	done := make(chan gongbu.Execution, 1)
	go func() {
		x, _, _ := env.Service.Execute(context.Background(), d)
		done <- x
	}()
	select {
	case x := <-done:
		if x.State != gongbu.StateIndeterminate {
			t.Fatalf("%+v", x)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the submission was not bounded")
	}
}

// Drain refuses new executions and waits for those in flight to record their outcome, so a
// server can close its database after it.
func TestDrainWaitsForExecutionsInFlight(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	d := env.Issue("agent-a")
	arrived, answer := make(chan struct{}), make(chan struct{})
	env.Provider.OnSubmit(func(ctx context.Context, key string, _ gongbu.Decision) (gongbu.Job, error) {
		close(arrived)
		<-answer
		return env.Provider.Accept()(ctx, key, d)
	})
	executed := make(chan error, 1)
	go func() {
		_, _, err := env.Service.Execute(context.Background(), d)
		executed <- err
	}()
	<-arrived

	drained := make(chan error, 1)
	go func() { drained <- env.Service.Drain(context.Background()) }()
	// Once draining, a new decision is refused before anything is written. (Until Drain has
	// begun, a new one still runs: try fresh ones until one is refused.)
	var refused gongbu.Decision
	waitfor.True(t, 10*time.Second, "a new decision to be refused while draining", func() bool {
		other := env.Issue("agent-a")
		_, _, err := env.Service.Execute(context.Background(), other)
		if gongbu.ErrorCode(err) == gongbu.CodeUnavailable {
			refused = other
			return true
		}
		if err != nil {
			t.Fatalf("a new execution while draining: %v", err)
		}
		return false
	})
	if _, err := env.Store.Get(context.Background(), refused.DecisionID); gongbu.ErrorCode(err) != gongbu.CodeNotFound {
		t.Fatalf("a refused execution was recorded: %v", err)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned with a submission in flight: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(answer)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if err := <-executed; err != nil {
		t.Fatal(err)
	}
	if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSubmitted {
		t.Fatalf("after Drain: %s", x.State)
	}
	// With nothing in flight, Drain returns at once, whatever its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := env.Service.Drain(ctx); err != nil {
		t.Fatalf("nothing in flight: %v", err)
	}
}
