// Package httpserver serves mockflux over HTTP: the chi server interface generated from
// proto/bfl.openapi.yaml, x-key authentication, signed sample URLs, the fault effects
// (slow, fail before charging, charge then drop the connection, charge then 500), and the
// tasks' webhooks (package webhook sends them).
package httpserver

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
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
	"hubu.dev/hubu/services/mockflux/render"
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

func (s *Server) notify(job mockflux.Job) {
	due := job.RenderedAt
	if job.Outcome == mockflux.OutcomeRequestModerated {
		due = job.CreatedAt // flagged before processing: it never renders
	}
	s.notices.Send(webhook.Notice{JobID: job.ID, Status: job.Outcome, URL: job.Webhook.URL, Secret: []byte(job.Webhook.Secret), Due: due})
}

// webhookDone counts and journals how a webhook ended. A journal that refuses the record
// leaves the webhook due after a restart: sent twice rather than never, which receivers
// must bear anyway.
func (s *Server) webhookDone(jobID string, o webhook.Outcome) {
	s.webhooks.WithLabelValues(string(o)).Inc()
	if err := s.Provider.RecordWebhook(jobID, string(o)); err != nil {
		s.Logger.Error("cannot record the webhook's outcome; a restart will send it again", "job_id", jobID, "outcome", o, "err", err)
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

func (s *Server) Submit(w http.ResponseWriter, r *http.Request, model string, params bflapi.SubmitParams) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, "the body is too large or could not be read")
		return
	}
	effects := s.Faults.Take()
	if effects.Slow > 0 {
		select {
		case <-time.After(effects.Slow):
		case <-r.Context().Done():
			// The client left or the server is stopping: nothing was done, and nobody to tell.
			panic(http.ErrAbortHandler)
		}
	}
	if effects.FailBeforeCharge {
		writeDetail(w, http.StatusInternalServerError, "Internal Server Error (mockflux fault fail_before_charge: nothing was charged)")
		return
	}
	job, replayed, err := s.Provider.Submit(mockflux.SubmitRequest{
		Model: model, Body: body, IdempotencyKey: deref(params.IdempotencyKey), IgnoreKey: effects.IdempotencyOff, Outcome: effects.Outcome,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var charged int64
	if !replayed {
		charged = job.CostMicros
		if job.Webhook.URL != "" {
			// Also when a fault then hides the answer: the job exists and renders.
			s.notify(job)
		}
	}
	// The idempotency key and the webhook are not logged: they are the caller's, and the job
	// id identifies the call.
	s.Logger.InfoContext(r.Context(), "submit", "job_id", job.ID, "model", job.Model, "replayed", replayed,
		"charged_micros", charged, "webhook", job.Webhook.URL != "")
	if effects.ChargeThenDrop {
		s.drop(w)
		return
	}
	if effects.ChargeThen500 {
		writeDetail(w, http.StatusInternalServerError, "Internal Server Error (mockflux fault charge_then_500: the task was charged)")
		return
	}
	writeJSON(w, http.StatusOK, bflapi.SubmitResponse{
		Id:         job.ID,
		PollingUrl: cmp.Or(s.PollingURL, otherName(r)) + "/v1/get_result?id=" + url.QueryEscape(job.ID),
		Cost:       new(credits(job.CostMicros)),
		InputMp:    new(megapixels(job.InputPixels...)),
		OutputMp:   new(megapixels(int64(job.Width) * int64(job.Height))),
	})
}

// credits is an amount in BFL's credits (1 credit = $0.01 = 10,000 micros), as its answers
// state a cost.
func credits(micros int64) float64 { return float64(micros) / 10_000 }

// megapixels are pixels in BFL's megapixels (2^20 pixels), to two decimals, as its answers
// state input_mp and output_mp.
func megapixels(pixels ...int64) float64 {
	var sum int64
	for _, px := range pixels {
		sum += px
	}
	return math.Round(float64(sum)/(1<<20)*100) / 100
}

// drop closes the connection without a response, as a provider that crashed after charging.
func (s *Server) drop(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler) // HTTP/2 and other writers: net/http resets the stream
}

func (s *Server) GetResult(w http.ResponseWriter, r *http.Request, params bflapi.GetResultParams) {
	poll, ok := s.Provider.Poll(params.Id)
	if !ok {
		writeJSON(w, http.StatusOK, bflapi.ResultResponse{Id: params.Id, Status: bflapi.ResultStatusTaskNotFound})
		return
	}
	if !poll.Ready {
		writeJSON(w, http.StatusOK, bflapi.ResultResponse{Id: poll.Job.ID, Status: bflapi.ResultStatusPending, Progress: new(poll.Progress)})
		return
	}
	job := poll.Job
	if job.Outcome != "" {
		// An end without a result, as the real API answers it: no result, and for a
		// moderation the reasons in details.
		res := bflapi.ResultResponse{Id: job.ID, Status: bflapi.ResultStatus(job.Outcome)}
		if job.Outcome != mockflux.OutcomeError {
			res.Details = &map[string]any{"Moderation Reasons": []string{"mockflux fault"}}
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	file := job.ID + "." + job.Format
	// From the first Ready answer, not from when the job rendered: a job polled late (after
	// a restart, or by a caller that lost its webhook) still gets a URL that works.
	exp := poll.FirstReady.Add(s.SampleTTL).Unix()
	sample := cmp.Or(s.DeliveryURL, otherName(r)) + "/samples/" + file + "?exp=" + strconv.FormatInt(exp, 10) + "&sig=" + s.sign(file, exp)
	start, end := unixSeconds(job.CreatedAt), unixSeconds(poll.ReadyAt)
	writeJSON(w, http.StatusOK, bflapi.ResultResponse{
		Id:     job.ID,
		Status: bflapi.ResultStatusReady,
		Result: &bflapi.Result{Sample: sample, Prompt: new(job.Prompt), Seed: new(job.Seed), StartTime: &start, EndTime: &end, Duration: new(end - start)},
	})
}

func (s *Server) GetSample(w http.ResponseWriter, r *http.Request, file string, params bflapi.GetSampleParams) {
	if !hmac.Equal([]byte(params.Sig), []byte(s.sign(file, params.Exp))) {
		writeDetail(w, http.StatusForbidden, "invalid sample URL signature")
		return
	}
	if s.Now().Unix() > params.Exp {
		writeDetail(w, http.StatusForbidden, "the sample URL has expired")
		return
	}
	id, ext, _ := strings.Cut(file, ".")
	job, ok := s.Provider.Job(id)
	if !ok || ext != job.Format {
		writeDetail(w, http.StatusNotFound, "no such sample")
		return
	}
	encode := render.Encode
	if s.FullSize {
		encode = render.EncodeFull
	}
	img, contentType, err := encode(job.Format, job.Prompt, job.Seed, job.Width, job.Height)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(img)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(img)
}

func (s *Server) ListCharges(w http.ResponseWriter, r *http.Request) {
	charges, total := s.Provider.Charges()
	count, _ := s.Provider.ChargeTotals()
	out := bflapi.Charges{Charges: make([]bflapi.Charge, len(charges)), Count: count, TotalMicros: total}
	for i, c := range charges {
		out.Charges[i] = bflapi.Charge{
			Id: c.ID, JobId: c.JobID, Model: c.Model, AmountMicros: c.AmountMicros,
			IdempotencyKey: c.IdempotencyKey, CreatedAt: c.CreatedAt,
		}
		if c.Refunded {
			out.Charges[i].Refunded = new(true)
		}
		if !c.ReadyAt.IsZero() {
			out.Charges[i].ReadyAt = new(c.ReadyAt)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) GetFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.faults())
}

func (s *Server) ArmFault(w http.ResponseWriter, r *http.Request) {
	var req bflapi.FaultRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, "the body is not a valid FaultRequest: "+err.Error())
		return
	}
	count, delayMS := deref(req.Count), deref(req.DelayMs)
	if err := s.Faults.Arm(req.Kind, count, time.Duration(delayMS)*time.Millisecond); err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	s.Logger.InfoContext(r.Context(), "fault armed", "kind", req.Kind, "count", count, "delay_ms", delayMS)
	writeJSON(w, http.StatusOK, s.faults())
}

func (s *Server) ClearFaults(w http.ResponseWriter, r *http.Request) {
	s.Faults.Clear()
	s.Logger.InfoContext(r.Context(), "faults cleared")
	writeJSON(w, http.StatusOK, s.faults())
}

// GetCredits answers the account's balance in credits, as the real API's /v1/credits does;
// without a limit (no --credits), a balance that never runs out.
func (s *Server) GetCredits(w http.ResponseWriter, r *http.Request) {
	micros, limited := s.Provider.Credits()
	if !limited {
		micros = 1 << 50
	}
	writeJSON(w, http.StatusOK, bflapi.CreditsResponse{Credits: credits(micros)})
}

func (s *Server) faults() bflapi.Faults {
	out := bflapi.Faults{Active: []bflapi.Fault{}, Idempotency: s.Provider.HonoursIdempotency()}
	for _, a := range s.Faults.Active() {
		f := bflapi.Fault{Kind: a.Kind, Count: a.Remaining}
		if a.Kind == bflapi.FaultKindSlow {
			f.DelayMs = new(int(a.Delay.Milliseconds()))
		}
		if a.Kind == bflapi.FaultKindIdempotencyOff {
			out.Idempotency = false
		}
		out.Active = append(out.Active, f)
	}
	return out
}

// sign is the hex HMAC-SHA256 of a sample file name and its expiry.
func (s *Server) sign(file string, exp int64) string {
	m := hmac.New(sha256.New, s.SigningKey)
	m.Write([]byte(file + "\n" + strconv.FormatInt(exp, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

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

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixMicro()) / 1e6
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
