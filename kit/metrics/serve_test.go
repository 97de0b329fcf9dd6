package metrics_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/kit/waitfor"
)

// blockingQuery is a read that waits until released, noting whether its context ended first.
type blockingQuery struct {
	release   chan struct{}
	reading   atomic.Int64 // reads begun
	cancelled atomic.Bool  // a read's context had ended when it was released
	done      atomic.Int64 // reads returned
}

func newBlockingQuery() *blockingQuery { return &blockingQuery{release: make(chan struct{})} }

func (q *blockingQuery) read(ctx context.Context, _ time.Duration) ([]prometheus.Metric, error) {
	q.reading.Add(1)
	defer q.done.Add(1)
	<-q.release
	if ctx.Err() != nil {
		q.cancelled.Store(true)
		return nil, ctx.Err()
	}
	return []prometheus.Metric{prometheus.MustNewConstMetric(demoRows, prometheus.GaugeValue, 1)}, nil
}

func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// A scrape that gives up while the database is read does not cancel the read: it completes,
// and the next scrape is served what it read, without reading again.
func TestCancelledScrapeKeepsTheRead(t *testing.T) {
	t.Parallel()
	q := newBlockingQuery()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewQueryCollector("demo_state", []*prometheus.Desc{demoRows}, q.read,
		&metrics.QueryOptions{Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)}))
	srv := httptest.NewServer(metrics.Handler(reg))
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, _, err := get(ctx, srv.URL)
		gaveUp <- err
	}()
	waitfor.True(t, 10*time.Second, "the scrape to read", func() bool { return q.reading.Load() == 1 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled scrape: %v", err)
	}
	close(q.release)
	waitfor.True(t, 10*time.Second, "the read to end", func() bool { return q.done.Load() == 1 })
	if q.cancelled.Load() {
		t.Fatal("the scrape's cancellation reached the read")
	}
	status, body, err := get(t.Context(), srv.URL)
	if err != nil || status != http.StatusOK || !strings.Contains(body, "demo_rows 1") {
		t.Fatalf("the next scrape: %d %v\n%s", status, err, body)
	}
	if n := q.reading.Load(); n != 1 {
		t.Fatalf("%d reads, want the cancelled scrape's alone", n)
	}
}

// blockingCollector holds every scrape until released.
type blockingCollector struct {
	release chan struct{}
	in      atomic.Int64
}

func (c *blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- demoRows }
func (c *blockingCollector) Collect(ch chan<- prometheus.Metric) {
	c.in.Add(1)
	<-c.release
	ch <- prometheus.MustNewConstMetric(demoRows, prometheus.GaugeValue, 1)
}

// The metrics handler serves MaxScrapesInFlight scrapes at once, and answers one more 503 at
// once instead of piling it up.
func TestHandlerBoundsScrapesInFlight(t *testing.T) {
	t.Parallel()
	c := &blockingCollector{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(metrics.Handler(reg))
	defer srv.Close()

	var wg sync.WaitGroup
	statuses := make([]int, metrics.MaxScrapesInFlight)
	for i := range metrics.MaxScrapesInFlight {
		wg.Go(func() { statuses[i], _, _ = get(t.Context(), srv.URL) })
	}
	waitfor.True(t, 10*time.Second, "the scrapes to be in flight", func() bool { return c.in.Load() == metrics.MaxScrapesInFlight })
	if status, _, err := get(t.Context(), srv.URL); err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("one scrape more than the limit: %d %v, want 503", status, err)
	}
	close(c.release)
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Fatalf("scrape %d within the limit: %d", i, s)
		}
	}
}

// With a listener, ServeAlongside serves the metrics there, and nothing else, beside the API,
// and stops both when the context ends; without one it only runs the API's.
func TestServeAlongside(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "demo_up", Help: "Up."}, func() float64 { return 1 }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	apiRan := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- metrics.ServeAlongside(ctx, ln, reg, slog.New(slog.DiscardHandler), func(ctx context.Context) error {
			close(apiRan)
			<-ctx.Done()
			return nil
		})
	}()
	<-apiRan
	base := "http://" + ln.Addr().String()
	if status, body, err := get(t.Context(), base+"/metrics"); err != nil || status != http.StatusOK || !strings.Contains(body, "demo_up 1") {
		t.Fatalf("/metrics on the metrics listener: %d %v\n%s", status, err, body)
	}
	if status, _, err := get(t.Context(), base+"/healthz"); err != nil || status != http.StatusNotFound {
		t.Fatalf("another path on the metrics listener: %d %v, want 404", status, err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("after the context ended: %v", err)
	}
	if _, _, err := get(t.Context(), base+"/metrics"); err == nil {
		t.Fatal("the metrics listener still answers after the stop")
	}

	// An API that fails stops the metrics listener too, and its error is returned.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("the API's listener failed")
	if err := metrics.ServeAlongside(t.Context(), ln, reg, slog.New(slog.DiscardHandler), func(context.Context) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("ServeAlongside with a failing API: %v", err)
	}
	if _, _, err := get(t.Context(), "http://"+ln.Addr().String()+"/metrics"); err == nil {
		t.Fatal("the metrics listener still answers after the API failed")
	}

	if err := metrics.ServeAlongside(t.Context(), nil, reg, slog.New(slog.DiscardHandler), func(context.Context) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("ServeAlongside without a listener: %v", err)
	}
}

// A service's Handler registers its metrics through RegistererOnly, but cannot gather them.
func TestRegistererOnly(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	only := metrics.RegistererOnly(reg)
	if _, ok := only.(prometheus.Gatherer); ok {
		t.Fatal("RegistererOnly is still a Gatherer")
	}
	only.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "demo_total", Help: "Demo."}))
	families, err := reg.Gather()
	if err != nil || len(families) != 1 {
		t.Fatalf("the registry behind it: %d families, %v", len(families), err)
	}
}
