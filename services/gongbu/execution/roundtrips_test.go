package execution_test

import (
	"context"
	"testing"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/sql/sqltest"
)

// The round trips to Postgres of Gongbu's steps on a new spend's critical path, pinned: one
// more is a change to the latency of every spend, and should be made on purpose (then change
// the figure here, and say why in docs/performance.md). Each step runs twice, on fresh
// executions, and is counted the second time, once pgx's statement cache is warm. So are the
// writes that commit without waiting for the disk: only the note that Hubu took the report
// (Store.MarkReported says why), never the record of a submission or an outcome; and the
// setting ends with its statement, so the connection's next write waits for the disk again.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	trips := &sqltest.RoundTrips{}
	env := gongbutest.NewCounted(t, true, trips)
	submitted := func() gongbu.Execution {
		x, _ := mustExecute(t, env, env.Issue("agent-a"))
		return x
	}
	for _, c := range []struct {
		name      string
		trips     int
		unflushed int
		prepare   func() (step func())
	}{
		// Is it recorded (a re-send)? Then the row with the epoch it is judged by, in one
		// statement; after the provider's answer, its job.
		{"a new decision handed off, submitted", 3, 0, func() func() {
			d := env.Issue("agent-a")
			return func() {
				if _, created := mustExecute(t, env, d); !created {
					t.Fatal("not created")
				}
			}
		}},
		{"a decision handed off again", 1, 0, func() func() {
			d := env.Issue("agent-a")
			mustExecute(t, env, d)
			return func() {
				if _, created := mustExecute(t, env, d); created {
					t.Fatal("created twice")
				}
			}
		}},
		// The webhook's claim of the job, the success, and, once Hubu took the report, that
		// it was reported.
		{"a provider's notice that the job is done", 3, 1, func() func() {
			x := submitted()
			env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
			return func() {
				if ok, err := env.Service.Nudge(ctx, x); err != nil || !ok {
					t.Fatalf("nudge: %v %v", ok, err)
				}
			}
		}},
	} {
		for run := range 2 {
			step := c.prepare()
			trips.Reset()
			step()
			if got, _ := trips.Counts(); run == 1 && got != c.trips {
				t.Errorf("%s: %d round trips, want %d", c.name, got, c.trips)
			}
			if got := trips.Unflushed(); run == 1 && got != c.unflushed {
				t.Errorf("%s: %d writes that do not wait for the disk, want %d", c.name, got, c.unflushed)
			}
			var setting string
			if err := env.Pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil || setting != "on" {
				t.Fatalf("%s: the connection's synchronous_commit is %q afterwards (%v), want on", c.name, setting, err)
			}
		}
	}
}
