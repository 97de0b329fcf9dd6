package httpserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	kitmetrics "hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu/httpserver"
)

// The operations gauges count every state from the database, 0 for a state no operation is
// in, and call a dispatching operation stuck once its hand-off failed 5 times or was not tried
// for 5 minutes.
func TestOperationsCollector(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "painter", policy(50_000, 1_000_000, 10_000_000))
	spend(t, a, newCall("flux-pro-1.1-ultra"), hubuapi.OperationStatePendingApproval)
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStateExecuting)
	b.Executor.FailNext(2)
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStateDispatching)
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStateDispatching)

	var at time.Time // the collector's clock, moved by the test: each move reads again
	collector := httpserver.NewOperationsCollector(b.Pool, &kitmetrics.QueryOptions{Now: func() time.Time { return at }, Refresh: time.Second})
	want := func(stuck int) string {
		return fmt.Sprintf(`# HELP hubu_operations Operations by state.
# TYPE hubu_operations gauge
hubu_operations{state="approved"} 0
hubu_operations{state="denied"} 0
hubu_operations{state="dispatching"} 2
hubu_operations{state="executing"} 1
hubu_operations{state="expired"} 0
hubu_operations{state="failed"} 0
hubu_operations{state="pending_approval"} 1
hubu_operations{state="succeeded"} 0
# HELP hubu_operations_dispatching_stuck Dispatching operations whose hand-off failed 5 times or more, or was not tried for 5 minutes.
# TYPE hubu_operations_dispatching_stuck gauge
hubu_operations_dispatching_stuck %d
`, stuck)
	}
	at = b.Clock.Now().Add(httpserver.StuckDispatchAfter - time.Second)
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want(0)), stateGauges...); err != nil {
		t.Fatal(err)
	}
	at = b.Clock.Now().Add(httpserver.StuckDispatchAfter + time.Second)
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want(2)), stateGauges...); err != nil {
		t.Fatal(err)
	}
	// Many failed tries make one stuck however recent the last one was.
	at = b.Clock.Now()
	if _, err := b.Pool.Exec(t.Context(), `UPDATE operations SET dispatch_attempts = 5
		WHERE id = (SELECT id FROM operations WHERE state = 'dispatching' LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want(1)), stateGauges...); err != nil {
		t.Fatal(err)
	}
}

// A scrape after a read that failed reports none of the operations gauges, and does not fail.
func TestOperationsCollectorWithoutDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, err := pgxpool.New(t.Context(), b.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	collector := httpserver.NewOperationsCollector(pool, &kitmetrics.QueryOptions{Now: b.Clock.Now, Logger: slog.New(slog.NewJSONHandler(b.Logs, nil))})
	if n := testutil.CollectAndCount(collector, stateGauges...); n != 9 {
		t.Fatalf("%d metrics with the database up, want 9", n)
	}
	pool.Close()
	if n := testutil.CollectAndCount(collector, stateGauges...); n != 9 {
		t.Fatalf("%d metrics within the refresh interval, want the 9 read before", n)
	}
	b.Clock.Advance(kitmetrics.DefaultRefresh)
	if n := testutil.CollectAndCount(collector, stateGauges...); n != 0 {
		t.Fatalf("%d metrics with the read failing, want 0", n)
	}
	if n := testutil.CollectAndCount(collector, "hubu_state_metrics_read_errors_total", "hubu_state_metrics_age_seconds"); n != 2 {
		t.Fatalf("%d of the error counter and the age, want both", n)
	}
	if !strings.Contains(b.Logs.String(), "could not read the metrics from the database") {
		t.Fatalf("the failed read was not logged:\n%s", b.Logs)
	}
}

var stateGauges = []string{"hubu_operations", "hubu_operations_dispatching_stuck"}

// newPool is a pool of its own on b's database, of one connection, whose statistics only the
// collector moves.
func newPool(t *testing.T, b *bundle) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// lockOperations holds a lock on the operations table that makes every read of it wait, until
// the returned function is called.
func lockOperations(t *testing.T, b *bundle) (unlock func()) {
	t.Helper()
	tx, err := b.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE operations IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(unlock)
	return unlock
}

// waitingForLock reports whether a statement waits for a lock on b's database.
func waitingForLock(t *testing.T, b *bundle) func() bool {
	return func() bool {
		var n int
		err := b.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'operations'::regclass").Scan(&n)
		return err == nil && n > 0
	}
}

// Scrapes that come while the database is read share the read, and one that gives up does not
// cancel it: its connection goes back to the pool, and the scrapes after it, within the refresh
// interval, are served what it read.
func TestOperationsCollectorSharesReads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "painter", policy(50_000, 1_000_000, 10_000_000))
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStateExecuting)
	pool := newPool(t, b)
	reg := prometheus.NewRegistry()
	reg.MustRegister(httpserver.NewOperationsCollector(pool, &kitmetrics.QueryOptions{Now: b.Clock.Now, Timeout: 30 * time.Second}))
	srv := httptest.NewServer(kitmetrics.Handler(reg))
	defer srv.Close()
	scrape := func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}

	unlock := lockOperations(t, b)
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := scrape(ctx)
		gaveUp <- err
	}()
	waitfor.True(t, 10*time.Second, "the read to wait for the lock", waitingForLock(t, b))
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the scrape that gave up: %v", err)
	}
	// The scrapes that come while it reads, or after it within the interval, are served its read.
	const waiting = 3
	bodies := make(chan string, waiting)
	for range waiting {
		go func() {
			body, err := scrape(t.Context())
			if err != nil {
				body = err.Error()
			}
			bodies <- body
		}()
	}
	unlock()
	for range waiting {
		if body := <-bodies; !strings.Contains(body, `hubu_operations{state="executing"} 1`) {
			t.Fatalf("a scrape that waited for the read:\n%s", body)
		}
	}
	if body, err := scrape(t.Context()); err != nil || !strings.Contains(body, `hubu_operations{state="executing"} 1`) {
		t.Fatalf("a scrape after the read: %v\n%s", err, body)
	}
	st := pool.Stat()
	if st.AcquireCount() != 1 || st.NewConnsCount() != 1 || st.TotalConns() != 1 {
		t.Fatalf("%d connections acquired, %d opened, %d open; want one read on one connection, kept",
			st.AcquireCount(), st.NewConnsCount(), st.TotalConns())
	}
}

// A read that runs longer than its timeout is ended by Postgres (statement_timeout), not by
// cancelling its context, so the pool keeps its connection; the next read uses it.
func TestOperationsCollectorTimeoutKeepsTheConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool := newPool(t, b)
	var logs bytes.Buffer
	collector := httpserver.NewOperationsCollector(pool, &kitmetrics.QueryOptions{
		Now: b.Clock.Now, Timeout: 200 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	unlock := lockOperations(t, b)
	start := time.Now()
	if n := testutil.CollectAndCount(collector, stateGauges...); n != 0 {
		t.Fatalf("%d gauges from a read that waited out its timeout, want 0", n)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the scrape waited %v", waited)
	}
	if !strings.Contains(logs.String(), "statement timeout") {
		t.Fatalf("the read did not end by Postgres's statement timeout:\n%s", logs.String())
	}
	unlock()
	b.Clock.Advance(kitmetrics.DefaultRefresh)
	if n := testutil.CollectAndCount(collector, stateGauges...); n != 9 {
		t.Fatalf("%d gauges from the next read, want 9", n)
	}
	if st := pool.Stat(); st.NewConnsCount() != 1 || st.TotalConns() != 1 {
		t.Fatalf("%d connections opened, %d open; want the first one kept", st.NewConnsCount(), st.TotalConns())
	}
}
