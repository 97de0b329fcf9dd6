// Package metrics holds the Prometheus collectors every service registers the same way (its
// build, its Postgres pool, gauges that a query reads from the database) and the handler and
// listener that serve them.
//
// State gauges (operations by state, executions stuck) are read from the database rather than
// kept in memory: every replica then reports the same truth, a restart loses nothing, and a row
// changed by hand or by another replica is counted like any other. They are read when a scrape
// asks for them, but at most once per refresh interval (see NewQueryCollector): however many
// scrape, and however often, the database does one count per interval.
package metrics

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/kit/buildinfo"
)

// NewBuildInfo returns the gauge <namespace>_build_info{version,commit,go}, always 1, so a
// dashboard can tell which build each target runs.
func NewBuildInfo(namespace string) prometheus.Collector {
	info := buildinfo.Read()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        namespace + "_build_info",
		Help:        "Always 1; the labels say which build is running.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": info.Commit, "go": info.GoVersion},
	}, func() float64 { return 1 })
}

// Pool is what the pool collector reads; *pgxpool.Pool is one.
type Pool interface{ Stat() *pgxpool.Stat }

// poolCollector reports a pgx pool's statistics as <namespace>_db_pool_*.
type poolCollector struct {
	pool                                    Pool
	acquired, idle, total, max              *prometheus.Desc
	acquires, acquireWait, emptyAcquireWait *prometheus.Desc
}

// NewPoolCollector returns a collector of pool's statistics: connections acquired, idle, open
// and allowed as gauges; acquisitions and the time spent waiting for them as counters. A
// growing wait says the pool is too small for the load (or connections leak).
func NewPoolCollector(namespace string, pool Pool) prometheus.Collector {
	name := func(s string) string { return namespace + "_db_pool_" + s }
	return &poolCollector{
		pool:             pool,
		acquired:         prometheus.NewDesc(name("acquired_conns"), "Connections in use.", nil, nil),
		idle:             prometheus.NewDesc(name("idle_conns"), "Open connections not in use.", nil, nil),
		total:            prometheus.NewDesc(name("total_conns"), "Open connections, in use, idle or being opened.", nil, nil),
		max:              prometheus.NewDesc(name("max_conns"), "The most connections the pool opens.", nil, nil),
		acquires:         prometheus.NewDesc(name("acquires_total"), "Connections acquired from the pool.", nil, nil),
		acquireWait:      prometheus.NewDesc(name("acquire_wait_seconds_total"), "Time spent acquiring connections.", nil, nil),
		emptyAcquireWait: prometheus.NewDesc(name("empty_acquire_wait_seconds_total"), "Time spent waiting because no connection was idle.", nil, nil),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.acquires, c.acquireWait, c.emptyAcquireWait} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(c.acquired, float64(s.AcquiredConns()))
	gauge(c.idle, float64(s.IdleConns()))
	gauge(c.total, float64(s.TotalConns()))
	gauge(c.max, float64(s.MaxConns()))
	counter(c.acquires, float64(s.AcquireCount()))
	counter(c.acquireWait, s.AcquireDuration().Seconds())
	counter(c.emptyAcquireWait, s.EmptyAcquireWaitTime().Seconds())
}
