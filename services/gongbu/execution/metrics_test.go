package execution_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// The executions gauges count every state from the database, call an open execution stuck
// once its lease ran out, and count the finished ones Hubu has not taken; the provider's calls
// are timed by operation and result.
func TestExecutionMetrics(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	reg := prometheus.NewRegistry()
	m := execution.NewMetrics(reg)
	env.Service = env.NewService(m.Timed(env.Provider))

	env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 422"))
	mustState(t, env, env.Issue("agent-a"), gongbu.StateFailed) // reported: Hubu took the release
	env.Provider.OnSubmit(gongbutest.Ambiguous())
	mustState(t, env, env.Issue("agent-a"), gongbu.StateSubmitting)
	mustState(t, env, env.Issue("agent-a"), gongbu.StateSubmitted)
	env.Authority.SetReportsDown(true)
	env.Provider.OnSubmit(gongbutest.Reject("FLUX answered 422"))
	mustState(t, env, env.Issue("agent-a"), gongbu.StateFailed) // not reported

	at := env.Clock.Now() // the collector's clock, moved by the test: each move reads again
	collector := execution.NewExecutionsCollector(env.Pool, &metrics.QueryOptions{Now: func() time.Time { return at }, Refresh: time.Second})
	want := func(stuck int) string {
		return fmt.Sprintf(`# HELP gongbu_executions Executions by state.
# TYPE gongbu_executions gauge
gongbu_executions{state="failed"} 2
gongbu_executions{state="indeterminate"} 0
gongbu_executions{state="submitted"} 1
gongbu_executions{state="submitting"} 1
gongbu_executions{state="succeeded"} 0
# HELP gongbu_executions_stuck Open executions (submitting, submitted) whose lease ran out: no worker is on them.
# TYPE gongbu_executions_stuck gauge
gongbu_executions_stuck{state="submitted"} %[1]d
gongbu_executions_stuck{state="submitting"} %[1]d
# HELP gongbu_executions_unreported Finished executions (succeeded, failed) whose outcome Hubu has not taken yet.
# TYPE gongbu_executions_unreported gauge
gongbu_executions_unreported 1
`, stuck)
	}
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want(0)), stateGauges...); err != nil {
		t.Fatal(err)
	}
	at = at.Add(gongbutest.Lease + time.Second)
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want(1)), stateGauges...); err != nil {
		t.Fatal(err)
	}

	env.Provider.OnPoll(gongbutest.PollError())
	env.Clock.Advance(gongbutest.PollInterval)
	env.Tick(t)
	calls := providerCalls(t, reg)
	for _, c := range []struct {
		series string
		min    uint64
	}{{"submit/ok", 1}, {"submit/rejected", 2}, {"submit/error", 1}, {"poll/error", 1}} {
		if calls[c.series] < c.min {
			t.Errorf("%d calls timed as %s, want at least %d (all: %v)", calls[c.series], c.series, c.min, calls)
		}
	}
}

var stateGauges = []string{"gongbu_executions", "gongbu_executions_stuck", "gongbu_executions_unreported"}

// A read that runs longer than its timeout (here: it waits for a lock) is ended by Postgres
// (statement_timeout), not by cancelling its context, so the pool keeps its connection; the
// read is not tried again within the refresh interval, and the next one after it uses the
// connection.
func TestExecutionsCollectorTimeoutKeepsTheConnection(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	cfg, err := pgxpool.ParseConfig(env.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var logs bytes.Buffer
	collector := execution.NewExecutionsCollector(pool, &metrics.QueryOptions{
		Now: env.Clock.Now, Timeout: 200 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
	})

	lock, err := env.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(context.Background()) }()
	if _, err := lock.Exec(t.Context(), "LOCK TABLE executions IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(collector, stateGauges...); n != 0 {
		t.Fatalf("%d gauges from a read that waited out its timeout, want 0", n)
	}
	if !strings.Contains(logs.String(), "statement timeout") {
		t.Fatalf("the read did not end by Postgres's statement timeout:\n%s", logs.String())
	}
	if err := lock.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(collector, stateGauges...); n != 0 {
		t.Fatalf("%d gauges within the refresh interval after a failed read, want 0", n)
	}
	env.Clock.Advance(metrics.DefaultRefresh)
	if n := testutil.CollectAndCount(collector, stateGauges...); n != 8 {
		t.Fatalf("%d gauges from the next read, want 8", n)
	}
	if st := pool.Stat(); st.AcquireCount() != 2 || st.NewConnsCount() != 1 || st.TotalConns() != 1 {
		t.Fatalf("%d reads, %d connections opened, %d open; want 2 reads on the first connection, kept",
			st.AcquireCount(), st.NewConnsCount(), st.TotalConns())
	}
}

func mustState(t *testing.T, env *gongbutest.Env, d gongbu.Decision, want gongbu.State) {
	t.Helper()
	if x, _ := mustExecute(t, env, d); x.State != want {
		t.Fatalf("executed: %+v, want %s", x, want)
	}
}

// providerCalls returns the count of each op/result series of the provider's latency histogram.
func providerCalls(t *testing.T, g prometheus.Gatherer) map[string]uint64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "gongbu_provider_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			calls[labels["op"]+"/"+labels["result"]] = m.GetHistogram().GetSampleCount()
		}
	}
	return calls
}

// A timed provider whose results Gongbu downloads still downloads them, and times it.
func TestTimedProviderKeepsDownloadingResults(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	reg := prometheus.NewRegistry()
	m := execution.NewMetrics(reg)
	if _, ok := m.Timed(env.Provider).(gongbu.ResultFetcher); ok {
		t.Fatal("a provider that downloads nothing became a ResultFetcher")
	}
	p := gongbutest.NewImageProvider(true)
	d := readyWithImages(t, env, p, "https://provider.test/s.png", m.Timed)
	if got := env.Get(t, d.DecisionID); got.Image == nil {
		t.Fatal("the timed provider's result was not downloaded")
	}
	if calls := providerCalls(t, reg); calls["fetch_result/ok"] != 1 {
		t.Fatalf("downloads timed: %v", calls)
	}
}
