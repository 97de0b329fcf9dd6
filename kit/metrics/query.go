package metrics

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultQueryTimeout bounds a query collector's read when QueryOptions.Timeout is zero: a
// scrape must answer even when the database does not.
const DefaultQueryTimeout = 2 * time.Second

// DefaultRefresh is how long a query collector serves one read when QueryOptions.Refresh is
// zero: Prometheus's default scrape interval. The gauges are at most that old, and however many
// scrape, the database is read at most once in it.
const DefaultRefresh = 15 * time.Second

// queryGrace is how much longer than its Timeout a read's context lasts. The read asks
// Postgres to end its statements at Timeout (statement_timeout), which keeps the connection;
// a context that ends mid-query makes pgx close the connection instead, so the context is only
// the backstop for a database that does not answer at all.
const queryGrace = time.Second

// QueryFunc reads metrics from the database. Its statements should not run longer than
// timeout: on Postgres, it sets statement_timeout to it in the read's transaction. ctx ends
// a second after timeout, whoever is scraping.
type QueryFunc func(ctx context.Context, timeout time.Duration) ([]prometheus.Metric, error)

// QueryOptions tune a query collector; nil means every default.
type QueryOptions struct {
	// Timeout bounds each read; zero means DefaultQueryTimeout.
	Timeout time.Duration
	// Refresh is how long a read is served before a scrape reads again, and how long after a
	// read that failed the next is tried; zero means DefaultRefresh.
	Refresh time.Duration
	// Now is the clock Refresh and the age are measured with; nil means time.Now. The services
	// measure their "stuck" gauges with it too.
	Now func() time.Time
	// Logger receives the reads that failed; nil means slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of o, which may be nil, with each field left zero set to its
// default. A negative duration is a bug of the caller, which checks its settings: it panics.
func (o *QueryOptions) WithDefaults() QueryOptions {
	var out QueryOptions
	if o != nil {
		out = *o
	}
	if out.Timeout < 0 || out.Refresh < 0 {
		panic(fmt.Sprintf("metrics: negative QueryOptions: timeout %v, refresh %v", out.Timeout, out.Refresh))
	}
	out.Timeout = cmp.Or(out.Timeout, DefaultQueryTimeout)
	out.Refresh = cmp.Or(out.Refresh, DefaultRefresh)
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// queryCollector serves what its query last read, and reads again when a scrape finds that
// read Refresh old.
type queryCollector struct {
	descs         []*prometheus.Desc
	age, failures *prometheus.Desc
	query         QueryFunc
	opts          QueryOptions
	mu            sync.Mutex          // held through a read: the scrapes meanwhile wait for it and share it
	tried         time.Time           // when the last read began
	metrics       []prometheus.Metric // what the last read returned; nil when it failed
	read          time.Time           // when the last read that succeeded began
	failed        int                 // reads that failed
}

// NewQueryCollector returns a collector of the metrics query reads, described by descs, and of
// its own: <name>_age_seconds, how long ago the read they come from began (once one has
// succeeded), and <name>_read_errors_total, the reads that failed.
//
// The database is read when a scrape comes and the last read began Refresh ago or more; the
// scrapes in between are served that read, and those that come during a read wait for it.
// However many scrapes come, there is at most one read at a time and one per Refresh, and a
// scrape that gives up never cancels one (its context is the collector's, bounded by Timeout).
// A read that fails is logged, and the metrics it reads are missing from every scrape until
// one succeeds, rather than served stale: an alert on their absence (StateMetricsMissing) fires.
func NewQueryCollector(name string, descs []*prometheus.Desc, query QueryFunc, opts *QueryOptions) prometheus.Collector {
	return &queryCollector{
		descs: descs,
		query: query,
		opts:  opts.WithDefaults(),
		age: prometheus.NewDesc(name+"_age_seconds",
			"Seconds since the database read began that the state gauges come from (the last one that succeeded, when they are missing).", nil, nil),
		failures: prometheus.NewDesc(name+"_read_errors_total",
			"Reads of the state gauges from the database that failed or ran out of time.", nil, nil),
	}
}

func (c *queryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.age
	ch <- c.failures
}

// Collect reports nothing of the query's when its last read failed, rather than failing the
// whole scrape: the process's other metrics still arrive, and the missing series (with /readyz
// and the error counter) tell of the database.
func (c *queryCollector) Collect(ch chan<- prometheus.Metric) {
	ms, read, failed, now := c.snapshot()
	for _, m := range ms {
		ch <- m
	}
	if !read.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, now.Sub(read).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(failed))
}

// snapshot returns the last read's metrics, when the last read that succeeded began, how many
// failed, and the time now, reading first when the last read is Refresh old.
func (c *queryCollector) snapshot() (ms []prometheus.Metric, read time.Time, failed int, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now = c.opts.Now()
	// A clock that went back (a test's) reads again rather than trust a read from its future.
	if since := now.Sub(c.tried); c.tried.IsZero() || since >= c.opts.Refresh || since < 0 {
		c.readNow(now)
	}
	return c.metrics, c.read, c.failed, now
}

func (c *queryCollector) readNow(now time.Time) {
	c.tried = now
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout+queryGrace)
	defer cancel()
	ms, err := c.query(ctx, c.opts.Timeout)
	if err != nil {
		c.metrics = nil
		c.failed++
		c.opts.Logger.Warn("could not read the metrics from the database", "err", err)
		return
	}
	c.metrics, c.read = ms, now
}
