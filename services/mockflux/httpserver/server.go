// Package httpserver serves mockflux over HTTP: the chi server interface generated from
// proto/bfl.openapi.yaml, x-key authentication, signed sample URLs, the fault effects
// (slow, fail before charging, charge then drop the connection, charge then 500), and the
// tasks' webhooks (package webhook sends them).
package httpserver

import (
	"cmp"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/fault"
	"hubu.dev/hubu/services/mockflux/webhook"
)

// MaxBody bounds a request body.
const MaxBody = 1 << 20

// DefaultSampleTTL is how long a sample URL is valid, as with the real API.
const DefaultSampleTTL = 10 * time.Minute

// Server implements bflapi.ServerInterface. Set the fields before calling Handler.
type Server struct {
	Provider *mockflux.Provider
	Faults   *fault.Set
	// APIKey, when set, is the only x-key accepted; otherwise any non-empty x-key is.
	APIKey string
	// SampleTTL is how long after a job is first reported Ready its sample URL works.
	SampleTTL time.Duration
	// SigningKey signs sample URLs; a random one is made when it is empty.
	SigningKey []byte
	Now        func() time.Time
	Logger     *slog.Logger
	// Ready says why submits cannot be charged now (answered by /readyz); nil is the
	// provider's own check of its journal.
	Ready func() error
	// Metrics is where the server registers its metrics and what /metrics serves; nil is a
	// registry of its own.
	Metrics *prometheus.Registry
	// After makes timers on Now's clock for webhooks (their render time, their retries); nil
	// is time.After, right for the wall clock.
	After func(time.Duration) <-chan time.Time
	// WebhookClient sends webhooks; nil is webhook's own (no redirects followed).
	WebhookClient *http.Client
	// PollingURL is the base of the polling URLs the submits answer, and DeliveryURL of the
	// sample URLs the polls answer (scheme and host, as https://api.eu2.bfl.ai): the real API
	// answers regional hosts for both. Empty: the host the request came to under its other
	// name where it has one (127.0.0.1 and localhost for each other), so that a client that
	// keeps to the submit's host is caught as it would be against the real API.
	PollingURL, DeliveryURL string
	// FullSize renders samples at the size asked for, as large as real results (render.EncodeFull),
	// instead of small stand-ins.
	FullSize bool

	requests *prometheus.CounterVec
	webhooks *prometheus.CounterVec
	notices  *webhook.Dispatcher
}

var _ bflapi.ServerInterface = (*Server)(nil)

// Handler returns the HTTP handler with every route, and starts delivering webhooks: those
// of jobs submitted from now on, and those the provider's journal says are still due. Close
// stops the deliveries.
func (s *Server) Handler() http.Handler {
	s.Faults = cmp.Or(s.Faults, &fault.Set{})
	if s.SampleTTL <= 0 {
		s.SampleTTL = DefaultSampleTTL
	}
	if len(s.SigningKey) == 0 {
		s.SigningKey = make([]byte, 32)
		_, _ = rand.Read(s.SigningKey) // never fails (crypto/rand panics instead)
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	s.Logger = cmp.Or(s.Logger, slog.Default())
	if s.Ready == nil {
		s.Ready = s.Provider.Ready
	}
	reg := cmp.Or(s.Metrics, prometheus.NewRegistry())
	s.registerMetrics(reg)
	s.notices = webhook.New(webhook.Options{
		Now: s.Now, After: s.After, Client: s.WebhookClient, Logger: s.Logger,
		Drop: s.Faults.TakeWebhookDrop, Done: s.webhookDone,
	})
	for _, job := range s.Provider.PendingWebhooks() {
		s.notify(job)
	}
	r := chi.NewRouter()
	// Instrumented first, so that refusals of the x-key check are counted too.
	r.Use(s.instrument, s.authenticate)
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeDetail(w, http.StatusNotFound, "Not Found")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
	})
	return bflapi.HandlerWithOptions(s, bflapi.ChiServerOptions{
		BaseRouter: r,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			if strings.HasPrefix(r.URL.Path, "/samples/") {
				writeDetail(w, http.StatusForbidden, "invalid sample URL")
				return
			}
			writeDetail(w, http.StatusUnprocessableEntity, paramProblem(err))
		},
	})
}

// Close stops the webhooks not yet sent or under way (a restart with a data file sends them)
// and waits for their goroutines. Call it once the server no longer takes submits.
func (s *Server) Close() {
	if s.notices != nil {
		s.notices.Close()
	}
}

// authenticate guards the FLUX API (/v1/); samples carry their own signature and the
// /_mock routes and /healthz are open, as they are for tests.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		key := r.Header.Get("x-key")
		if key == "" {
			writeDetail(w, http.StatusUnauthorized, "Not authenticated: send your API key in the x-key header")
			return
		}
		if s.APIKey != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.APIKey)) != 1 {
			writeDetail(w, http.StatusForbidden, "Invalid API key")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) GetHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, bflapi.Health{Status: bflapi.Ok})
}

// GetReadyz answers 503 while a submit could not be charged and recorded: with --data, once
// the journal refused a write it could not roll back.
func (s *Server) GetReadyz(w http.ResponseWriter, r *http.Request) {
	if err := s.Ready(); err != nil {
		s.Logger.WarnContext(r.Context(), "not ready", "err", err)
		writeDetail(w, http.StatusServiceUnavailable, "mockflux cannot record charges; restart it")
		return
	}
	writeJSON(w, http.StatusOK, bflapi.Health{Status: bflapi.Ok})
}

// registerMetrics registers the HTTP request counter, like Hubu's and Gongbu's, and the
// charges, read from the provider when scraped (they survive a restart with --data, and only
// ever grow).
func (s *Server) registerMetrics(reg prometheus.Registerer) {
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mockflux_http_requests_total", Help: "HTTP requests by route pattern, method and status.",
	}, []string{"route", "method", "status"})
	s.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mockflux_webhooks_total", Help: "Webhooks by how they ended: delivered, failed (every attempt), dropped (fault).",
	}, []string{"outcome"})
	for _, o := range webhook.Outcomes {
		s.webhooks.WithLabelValues(string(o)) // listed at 0 before the first
	}
	reg.MustRegister(s.requests, s.webhooks,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mockflux_charges_total", Help: "Charges made (a replayed idempotency key makes none).",
		}, func() float64 {
			n, _ := s.Provider.ChargeTotals()
			return float64(n)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mockflux_charged_micros_total", Help: "The sum of every charge, in micro-USD.",
		}, func() float64 {
			_, micros := s.Provider.ChargeTotals()
			return float64(micros)
		}),
	)
}

// instrument counts requests by route pattern, never by path: a path carries job ids and
// sample signatures. A request answered with no status at all (a fault dropped the
// connection, or the client left a slow one) is counted with status "none".
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			route, status := "unmatched", "none"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
				tracing.Route(r.Context(), r.Method, route)
			}
			if rec.status != 0 {
				status = strconv.Itoa(rec.status)
			}
			s.requests.WithLabelValues(route, r.Method, status).Inc()
		}()
		next.ServeHTTP(rec, r)
	})
}

// statusRecorder notes the status of the answer; 0 while there is none.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (the charge_then_drop fault
// hijacks it).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// otherName is where the client reached this server, under the host's other name where it
// has one (127.0.0.1 and localhost for each other, on the same port), so that URLs handed out
// work whatever port mockflux bound and yet are on another host than the request's.
func otherName(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	switch host {
	case "127.0.0.1":
		host = "localhost"
	case "localhost":
		host = "127.0.0.1"
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	}
	return scheme + "://" + host
}

// deref is *p, or the zero value for an absent optional field.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// statusOf is the one table from error code to HTTP status.
var statusOf = map[mockflux.Code]int{
	mockflux.CodeNotFound:  http.StatusNotFound,
	mockflux.CodeInvalid:   http.StatusUnprocessableEntity,
	mockflux.CodeKeyReused: http.StatusUnprocessableEntity,
	mockflux.CodeNoCredits: http.StatusPaymentRequired,
	mockflux.CodeTooMany:   http.StatusTooManyRequests,
	mockflux.CodeInternal:  http.StatusInternalServerError,
}

// writeError answers {"detail": ...}. Internal errors are logged and their details kept out
// of the response.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := cmp.Or(statusOf[mockflux.ErrorCode(err)], http.StatusInternalServerError)
	detail := err.Error()
	if status == http.StatusInternalServerError {
		s.Logger.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = "Internal Server Error"
	}
	writeDetail(w, status, detail)
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, bflapi.ErrorDetail{Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // sample URLs read as URLs, with & rather than \u0026
	_ = enc.Encode(v)
}

func paramProblem(err error) string {
	var required *bflapi.RequiredParamError
	if errors.As(err, &required) {
		return required.ParamName + ": field required"
	}
	return "invalid request parameter: " + err.Error()
}
