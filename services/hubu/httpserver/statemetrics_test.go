package httpserver_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

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

	var at time.Time // the collector's clock, moved by the test
	collector := httpserver.NewOperationsCollector(b.Pool, func() time.Time { return at }, nil)
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
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want(0))); err != nil {
		t.Fatal(err)
	}
	at = b.Clock.Now().Add(httpserver.StuckDispatchAfter + time.Second)
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want(2))); err != nil {
		t.Fatal(err)
	}
	// Many failed tries make one stuck however recent the last one was.
	at = b.Clock.Now()
	if _, err := b.Pool.Exec(t.Context(), `UPDATE operations SET dispatch_attempts = 5
		WHERE id = (SELECT id FROM operations WHERE state = 'dispatching' LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want(1))); err != nil {
		t.Fatal(err)
	}
}

// A scrape whose query fails reports none of the operations gauges, and does not fail.
func TestOperationsCollectorWithoutDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, err := pgxpool.New(t.Context(), b.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	collector := httpserver.NewOperationsCollector(pool, b.Clock.Now, slog.New(slog.NewJSONHandler(b.Logs, nil)))
	if n := testutil.CollectAndCount(collector); n != 9 {
		t.Fatalf("%d metrics with the database up, want 9", n)
	}
	pool.Close()
	if n := testutil.CollectAndCount(collector); n != 0 {
		t.Fatalf("%d metrics with the query failing, want 0", n)
	}
	if !strings.Contains(b.Logs.String(), "could not read the metrics from the database") {
		t.Fatalf("the failed query was not logged:\n%s", b.Logs)
	}
}
