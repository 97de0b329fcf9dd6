package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"hubu.dev/hubu/kit/command"
)

// MaxScrapesInFlight is how many scrapes the metrics listener serves at once; one more is
// answered 503 at once. A Prometheus scrapes a target one request at a time, so a few allow
// for a pair of them and a person with curl.
const MaxScrapesInFlight = 4

// Handler serves g's metrics in Prometheus's text format, MaxScrapesInFlight scrapes at a time.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{MaxRequestsInFlight: MaxScrapesInFlight})
}

// RegistererOnly returns reg without its Gatherer. A service's Handler(reg) serves /metrics
// only when reg is also a Gatherer: given this one, it leaves /metrics to the listener of
// ServeAlongside, and only registers its metrics.
func RegistererOnly(reg prometheus.Registerer) prometheus.Registerer { return registererOnly{reg} }

type registererOnly struct{ prometheus.Registerer }

// ServeAlongside runs serve, which serves the process's API until ctx ends (command.Serve),
// and, when ln is not nil, Handler(g) at /metrics on ln and nothing else: that listener can be
// one only Prometheus reaches. When ctx ends both shut down; when either fails, so does the
// other (the process stops, saying why). It returns the errors of both.
func ServeAlongside(ctx context.Context, ln net.Listener, g prometheus.Gatherer, logger *slog.Logger, serve func(context.Context) error) error {
	if ln == nil {
		return serve(ctx)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(g))
	metricsErr := make(chan error, 1)
	go func() {
		err := command.Serve(ctx, command.NewHTTPServer(mux), ln, logger.With("listener", "metrics"), command.ShutdownGrace, nil)
		stop()
		metricsErr <- err
	}()
	err := serve(ctx)
	stop()
	return errors.Join(err, <-metricsErr)
}
