package httpserver

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/hubuapi"
)

type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hubu_http_requests_total", Help: "HTTP requests by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hubu_http_request_duration_seconds", Help: "HTTP request latency by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hubu_authorizations_total", Help: "New authorization records by their state once the first hand-off was tried.",
		}, []string{"state"}),
	}
	reg.MustRegister(m.requests, m.latency, m.decisions)
	return m
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := routeOf(r)
		if route != unmatched {
			tracing.Route(r.Context(), r.Method, route) // the span's name, like the metrics' labels, never holds a path
		}
		s.metrics.requests.WithLabelValues(route, r.Method, strconv.Itoa(rec.status)).Inc()
		s.metrics.latency.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
	})
}

// routeOf is the route pattern, never the path: paths carry public handles.
func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		return rc.RoutePattern()
	}
	return unmatched
}

// unmatched is the route of a request no route matched.
const unmatched = "unmatched"

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeError(w, r, errors.New("panic while serving the request"))
				s.logger().ErrorContext(r.Context(), "panic", "route", routeOf(r), "panic", v)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// paramName names the parameter a generated wrapper could not parse, without its value.
func paramName(err error) string {
	var bad *hubuapi.InvalidParamFormatError
	if errors.As(err, &bad) {
		return bad.ParamName
	}
	return "invalid value"
}
