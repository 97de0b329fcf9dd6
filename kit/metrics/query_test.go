package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/kit/waitfor"
)

var demoRows = prometheus.NewDesc("demo_rows", "Rows.", nil, nil)

// countingQuery is a query that answers n, the number of its calls so far, or fails while
// failing is set.
type countingQuery struct {
	calls   atomic.Int64
	failing atomic.Bool
}

func (q *countingQuery) read(context.Context, time.Duration) ([]prometheus.Metric, error) {
	n := q.calls.Add(1)
	if q.failing.Load() {
		return nil, errors.New("the database is away")
	}
	return []prometheus.Metric{prometheus.MustNewConstMetric(demoRows, prometheus.GaugeValue, float64(n))}, nil
}

// However many scrapes come at once, and however many within a refresh interval, the database
// is read once; the next scrape after the interval reads again.
func TestQueryCollectorReadsOncePerRefresh(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	q := &countingQuery{}
	release := make(chan struct{})
	var entered atomic.Bool
	c := metrics.NewQueryCollector("demo_state", []*prometheus.Desc{demoRows},
		func(ctx context.Context, timeout time.Duration) ([]prometheus.Metric, error) {
			entered.Store(true)
			<-release
			return q.read(ctx, timeout)
		}, &metrics.QueryOptions{Now: clock.Now})

	const scrapes = 20
	var wg sync.WaitGroup
	got := make([]int, scrapes)
	for i := range scrapes {
		wg.Go(func() { got[i] = testutil.CollectAndCount(c, "demo_rows") })
	}
	waitfor.True(t, 10*time.Second, "a scrape to read", entered.Load)
	close(release)
	wg.Wait()
	for i, n := range got {
		if n != 1 {
			t.Fatalf("scrape %d got %d demo_rows, want 1", i, n)
		}
	}
	if n := q.calls.Load(); n != 1 {
		t.Fatalf("%d scrapes at once read %d times, want once", scrapes, n)
	}

	clock.Advance(metrics.DefaultRefresh - time.Millisecond)
	if v := value(t, c, "demo_rows"); v != 1 || q.calls.Load() != 1 {
		t.Fatalf("within the interval: demo_rows %v after %d reads, want the first read's", v, q.calls.Load())
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(`# HELP demo_state_age_seconds Seconds since the database read began that the state gauges come from (the last one that succeeded, when they are missing).
# TYPE demo_state_age_seconds gauge
demo_state_age_seconds 14.999
`), "demo_state_age_seconds"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Millisecond)
	if v := value(t, c, "demo_rows"); v != 2 {
		t.Fatalf("after the interval: demo_rows %v, want a second read's", v)
	}
}

// A read that fails leaves the query's metrics out of every scrape until one succeeds, is
// logged and counted, and is not tried again before the interval is over; the age then tells
// how old the last good read is.
func TestQueryCollectorFailedRead(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	q := &countingQuery{}
	var logs syncBuffer
	c := metrics.NewQueryCollector("demo_state", []*prometheus.Desc{demoRows}, q.read,
		&metrics.QueryOptions{Now: clock.Now, Refresh: time.Minute, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	want := func(rows, age, errs string) string {
		var b strings.Builder
		if age != "" {
			b.WriteString("# HELP demo_state_age_seconds Seconds since the database read began that the state gauges come from (the last one that succeeded, when they are missing).\n# TYPE demo_state_age_seconds gauge\ndemo_state_age_seconds " + age + "\n")
		}
		b.WriteString("# HELP demo_state_read_errors_total Reads of the state gauges from the database that failed or ran out of time.\n# TYPE demo_state_read_errors_total counter\ndemo_state_read_errors_total " + errs + "\n")
		if rows != "" {
			b.WriteString("# HELP demo_rows Rows.\n# TYPE demo_rows gauge\ndemo_rows " + rows + "\n")
		}
		return b.String()
	}
	compare := func(step, want string) {
		t.Helper()
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}

	q.failing.Store(true)
	compare("the first read fails", want("", "", "1"))
	if !strings.Contains(logs.String(), "could not read the metrics from the database") {
		t.Fatalf("the failed read was not logged: %s", logs.String())
	}
	q.failing.Store(false)
	clock.Advance(time.Minute - time.Second)
	compare("within the interval", want("", "", "1"))
	if n := q.calls.Load(); n != 1 {
		t.Fatalf("%d reads within the interval after a failed one, want 1", n)
	}
	clock.Advance(time.Second)
	compare("the next read succeeds", want("2", "0", "1"))
	clock.Advance(time.Minute)
	q.failing.Store(true)
	compare("a later read fails", want("", "60", "2"))
}

// A read is bounded: a query that never answers gives up with its context, which ends a
// second after the timeout the query was told (Postgres ends the statement first), and the
// scrape answers.
func TestQueryCollectorTimeout(t *testing.T) {
	t.Parallel()
	var told, lasted time.Duration
	c := metrics.NewQueryCollector("demo_state", []*prometheus.Desc{demoRows},
		func(ctx context.Context, timeout time.Duration) ([]prometheus.Metric, error) {
			start := time.Now()
			told = timeout
			<-ctx.Done()
			lasted = time.Since(start)
			return nil, ctx.Err()
		}, &metrics.QueryOptions{Timeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	start := time.Now()
	if n := testutil.CollectAndCount(c, "demo_rows"); n != 0 {
		t.Fatalf("%d metrics from a failed read, want 0", n)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the scrape waited %v for the read", waited)
	}
	if told != 50*time.Millisecond || lasted < time.Second {
		t.Fatalf("the query was told %v and its context lasted %v; want 50ms, and a second more", told, lasted)
	}
}

func TestQueryOptionsDefaults(t *testing.T) {
	t.Parallel()
	o := (*metrics.QueryOptions)(nil).WithDefaults()
	if o.Timeout != metrics.DefaultQueryTimeout || o.Refresh != metrics.DefaultRefresh || o.Now == nil || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a negative refresh was taken")
		}
	}()
	(&metrics.QueryOptions{Refresh: -time.Second}).WithDefaults()
}

// value is the value of c's one metric named name: a gauge's or a counter's.
func value(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no one %s collected", name)
	return 0
}

// syncBuffer is a bytes.Buffer that a logger and the test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
