package httpserver

import (
	"context"
	"log/slog"
	"time"

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
// hubu_operations_dispatching_stuck, read from db with one query at every scrape. now is the
// clock "stuck" is measured against.
func NewOperationsCollector(db hubudb.DBTX, now func() time.Time, logger *slog.Logger) prometheus.Collector {
	byState := prometheus.NewDesc("hubu_operations", "Operations by state.", []string{"state"}, nil)
	stuck := prometheus.NewDesc("hubu_operations_dispatching_stuck",
		"Dispatching operations whose hand-off failed 5 times or more, or was not tried for 5 minutes.", nil, nil)
	q := hubudb.New()
	return &kitmetrics.QueryCollector{
		Descs:  []*prometheus.Desc{byState, stuck},
		Logger: logger,
		Query: func(ctx context.Context) ([]prometheus.Metric, error) {
			rows, err := q.CountOperationsByState(ctx, db, hubudb.CountOperationsByStateParams{
				StuckAttempts: StuckDispatchAttempts, StaleBefore: now().Add(-StuckDispatchAfter),
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
		},
	}
}
