package httpserver

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	kitmetrics "hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// When a dispatching operation counts as stuck, as docs/operations.md's alert has it: its
// hand-off failed this many times, or nobody has tried it for this long.
const (
	StuckDispatchAttempts = 5
	StuckDispatchAfter    = 5 * time.Minute
)

// operationStates are every state an operation can be in, so each gauge is reported, as 0 when
// no operation is in it, and an alert on one does not wait for its series to appear.
var operationStates = []hubu.State{
	hubu.StatePendingApproval, hubu.StateApproved, hubu.StateDispatching, hubu.StateExecuting,
	hubu.StateSucceeded, hubu.StateFailed, hubu.StateDenied, hubu.StateExpired,
}

// NewOperationsCollector returns the gauges hubu_operations{state} and
// hubu_operations_dispatching_stuck, read from pool at most once per opts.Refresh (see
// kitmetrics.NewQueryCollector), with hubu_state_metrics_age_seconds and
// hubu_state_metrics_read_errors_total. "Stuck" is measured against opts.Now.
func NewOperationsCollector(pool *pgxpool.Pool, opts *kitmetrics.QueryOptions) prometheus.Collector {
	o := opts.WithDefaults()
	byState := prometheus.NewDesc("hubu_operations", "Operations by state.", []string{"state"}, nil)
	stuck := prometheus.NewDesc("hubu_operations_dispatching_stuck",
		"Dispatching operations whose hand-off failed 5 times or more, or was not tried for 5 minutes.", nil, nil)
	q := hubudb.New()
	read := func(ctx context.Context, timeout time.Duration) ([]prometheus.Metric, error) {
		var rows []hubudb.CountOperationsByStateRow
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if err := q.SetLocalStatementTimeout(ctx, tx, timeout.Milliseconds()); err != nil {
				return err
			}
			var err error
			rows, err = q.CountOperationsByState(ctx, tx, hubudb.CountOperationsByStateParams{
				StuckAttempts: StuckDispatchAttempts, StaleBefore: o.Now().Add(-StuckDispatchAfter),
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		counts := make(map[string]int64, len(operationStates))
		var stuckCount int64
		for _, r := range rows {
			counts[r.State] = r.Operations
			stuckCount += r.Stuck
		}
		ms := make([]prometheus.Metric, 0, len(operationStates)+1)
		for _, s := range operationStates {
			ms = append(ms, prometheus.MustNewConstMetric(byState, prometheus.GaugeValue, float64(counts[string(s)]), string(s)))
		}
		return append(ms, prometheus.MustNewConstMetric(stuck, prometheus.GaugeValue, float64(stuckCount))), nil
	}
	return kitmetrics.NewQueryCollector("hubu_state_metrics", []*prometheus.Desc{byState, stuck}, read, &o)
}
