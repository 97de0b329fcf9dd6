package execution

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/sql/gongbu/gongbudb"
)

// What made a worker poll a job, as the metrics count it.
const (
	TriggerWatch   = "watch"   // the submitting worker's own early looks
	TriggerWebhook = "webhook" // the provider said the job is done
	TriggerPass    = "pass"    // the background pass, the backstop of both
)

// Metrics are the execution service's counters.
type Metrics struct {
	polls         *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	costAboveHold prometheus.Counter
}

// NewMetrics registers the counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gongbu_provider_polls_total",
			Help: "Polls of provider jobs by what triggered them (watch, webhook, pass) and what they found (pending, ready, failed, lost, error).",
		}, []string{"trigger", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gongbu_provider_request_duration_seconds",
			Help: "Calls to the provider's API by operation (submit, poll) and result (ok, rejected, error).",
			// From a quick poll to a submission that waits out the provider's slowest answer.
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"op", "result"}),
		costAboveHold: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gongbu_provider_cost_above_hold_total",
			Help: "Jobs whose provider stated a cost above the decision's amount: the amount was captured, the difference is the operator's to raise with the provider.",
		}),
	}
	// Every op and result exists from the start, so a rate of errors is defined from the first.
	for _, op := range []string{"submit", "poll"} {
		for _, result := range []string{"ok", "rejected", "error"} {
			m.latency.WithLabelValues(op, result)
		}
	}
	reg.MustRegister(m.polls, m.latency, m.costAboveHold)
	return m
}

// CostAboveHold counts the jobs whose provider stated a cost above the decision's amount.
func (m *Metrics) CostAboveHold() prometheus.Counter { return m.costAboveHold }

var pollResults = map[gongbu.PollStatus]string{
	gongbu.JobPending: "pending", gongbu.JobReady: "ready", gongbu.JobFailed: "failed", gongbu.JobLost: "lost",
}

func (s *Service) countPoll(trigger string, res gongbu.PollResult, err error) {
	if s.Metrics == nil {
		return
	}
	result := pollResults[res.Status]
	if err != nil {
		result = "error"
	}
	s.Metrics.polls.WithLabelValues(trigger, result).Inc()
}

// Timed returns p with each call to the provider's API observed in
// gongbu_provider_request_duration_seconds.
// A provider whose results Gongbu downloads stays a gongbu.ResultFetcher, its downloads
// observed as op "fetch_result".
func (m *Metrics) Timed(p gongbu.Provider) gongbu.Provider {
	t := &timedProvider{Provider: p, m: m}
	if f, ok := p.(gongbu.ResultFetcher); ok {
		return &timedFetcher{timedProvider: t, fetcher: f}
	}
	return t
}

type timedFetcher struct {
	*timedProvider
	fetcher gongbu.ResultFetcher
}

func (t *timedFetcher) FetchResult(ctx context.Context, url string) (gongbu.Image, error) {
	start := time.Now()
	img, err := t.fetcher.FetchResult(ctx, url)
	t.observe("fetch_result", start, err)
	return img, err
}

type timedProvider struct {
	gongbu.Provider
	m *Metrics
}

func (t *timedProvider) Submit(ctx context.Context, key string, d gongbu.Decision) (gongbu.Job, error) {
	start := time.Now()
	job, err := t.Provider.Submit(ctx, key, d)
	t.observe("submit", start, err)
	return job, err
}

func (t *timedProvider) Poll(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error) {
	start := time.Now()
	res, err := t.Provider.Poll(ctx, job)
	t.observe("poll", start, err)
	return res, err
}

func (t *timedProvider) observe(op string, start time.Time, err error) {
	result := "ok"
	switch {
	case gongbu.IsRejected(err):
		result = "rejected"
	case err != nil:
		result = "error"
	}
	t.m.latency.WithLabelValues(op, result).Observe(time.Since(start).Seconds())
}

// executionStates are every state an execution can be in, so each gauge is reported, as 0 when
// no execution is in it, and an alert on one does not wait for its series to appear.
var executionStates = []gongbu.State{
	gongbu.StateSubmitting, gongbu.StateSubmitted, gongbu.StateSucceeded, gongbu.StateFailed, gongbu.StateIndeterminate,
}

// NewExecutionsCollector returns the gauges gongbu_executions{state},
// gongbu_executions_stuck{state} (submitting or submitted, with a lease that ran out: no
// worker is on them) and gongbu_executions_unreported (finished, and not yet taken by Hubu),
// read from pool at most once per opts.Refresh (see metrics.NewQueryCollector), with
// gongbu_state_metrics_age_seconds and gongbu_state_metrics_read_errors_total. Leases are
// measured against opts.Now.
func NewExecutionsCollector(pool *pgxpool.Pool, opts *metrics.QueryOptions) prometheus.Collector {
	o := opts.WithDefaults()
	byState := prometheus.NewDesc("gongbu_executions", "Executions by state.", []string{"state"}, nil)
	stuck := prometheus.NewDesc("gongbu_executions_stuck",
		"Open executions (submitting, submitted) whose lease ran out: no worker is on them.", []string{"state"}, nil)
	unreported := prometheus.NewDesc("gongbu_executions_unreported",
		"Finished executions (succeeded, failed) whose outcome Hubu has not taken yet.", nil, nil)
	q := gongbudb.New()
	read := func(ctx context.Context, timeout time.Duration) ([]prometheus.Metric, error) {
		var rows []gongbudb.CountExecutionsByStateRow
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if err := q.SetLocalStatementTimeout(ctx, tx, timeout.Milliseconds()); err != nil {
				return err
			}
			var err error
			rows, err = q.CountExecutionsByState(ctx, tx, o.Now())
			return err
		})
		if err != nil {
			return nil, err
		}
		counts, stuckCounts := map[string]int64{}, map[string]int64{}
		var unreportedCount int64
		for _, r := range rows {
			counts[r.State], stuckCounts[r.State] = r.Executions, r.Stuck
			unreportedCount += r.Unreported
		}
		var ms []prometheus.Metric
		gauge := func(d *prometheus.Desc, v int64, labels ...string) {
			ms = append(ms, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...))
		}
		for _, s := range executionStates {
			gauge(byState, counts[string(s)], string(s))
		}
		for _, s := range []gongbu.State{gongbu.StateSubmitting, gongbu.StateSubmitted} {
			gauge(stuck, stuckCounts[string(s)], string(s))
		}
		gauge(unreported, unreportedCount)
		return ms, nil
	}
	return metrics.NewQueryCollector("gongbu_state_metrics", []*prometheus.Desc{byState, stuck, unreported}, read, &o)
}
