// Package httpserver serves Gongbu's HTTP API, the chi server interface generated from
// proto/gongbu.openapi.yaml.
package httpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/kit/httpjson"
	kitmetrics "hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/changefeed"
	"hubu.dev/hubu/services/gongbu/execution"
)

// Server implements gongbuapi.ServerInterface.
type Server struct {
	Executions *execution.Service
	Authority  gongbu.Authority
	// ServiceToken is the credential Hubu presents; only it may submit decisions.
	ServiceToken string
	Logger       *slog.Logger
	Ping         func(context.Context) error
	// Changes wakes requests that wait for an execution to change (GET …/execution?wait=N);
	// nil leaves them to WaitBackstop alone.
	Changes *changefeed.Feed
	// WaitBackstop is how often a waiting request reads the execution again even without a
	// wake-up; 0 is DefaultWaitBackstop.
	WaitBackstop time.Duration
	// Webhooks are the providers that may tell Gongbu a job is done, by provider name.
	Webhooks map[string]Webhook
	requests *prometheus.CounterVec
}

var _ gongbuapi.ServerInterface = (*Server)(nil)

var statusOf = map[gongbu.Code]int{
	gongbu.CodeInvalidArguments:     http.StatusBadRequest,
	gongbu.CodeUnauthorized:         http.StatusUnauthorized,
	gongbu.CodeForbidden:            http.StatusForbidden,
	gongbu.CodeNotFound:             http.StatusNotFound,
	gongbu.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	gongbu.CodeDecisionMismatch:     http.StatusConflict,
	gongbu.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	gongbu.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	gongbu.CodeInternal:             http.StatusInternalServerError,
	gongbu.CodeUnavailable:          http.StatusServiceUnavailable,
}

// Handler returns the HTTP handler with every route, registering metrics on reg.
func (s *Server) Handler(reg prometheus.Registerer) http.Handler {
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gongbu_http_requests_total", Help: "HTTP requests by route pattern, method and status.",
	}, []string{"route", "method", "status"})
	reg.MustRegister(s.requests)
	r := chi.NewRouter()
	r.Use(s.instrument)
	if g, ok := reg.(prometheus.Gatherer); ok {
		r.Handle("/metrics", kitmetrics.Handler(g)) // at most kitmetrics.MaxScrapesInFlight at once
	}
	// Every error is problem+json, an unknown route or method too (chi's own are plain text).
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeNotFound, "no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		allowed := allowedMethods(r)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeMethodNotAllowed, "this route takes %s, not %s", strings.Join(allowed, " or "), r.Method))
	})
	return gongbuapi.HandlerWithOptions(s, gongbuapi.ChiServerOptions{
		BaseRouter: r,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "bad request parameter: %s", paramName(err)))
		},
	})
}

// paramName names the request parameter the generated router could not read (its value is
// never echoed), as Hubu's does.
func paramName(err error) string {
	var bad *gongbuapi.InvalidParamFormatError
	if errors.As(err, &bad) {
		return bad.ParamName
	}
	return "invalid value"
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := gongbu.ErrorCode(err)
	if code == gongbu.CodeInternal {
		s.logger().ErrorContext(r.Context(), "internal error", "method", r.Method, "route", routeOf(r), "err", err)
	}
	httpjson.WriteProblem(w, statusOf[code], string(code), gongbu.ErrorMessage(err))
}

func bearerToken(r *http.Request) string {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == r.Header.Get("Authorization") {
		return ""
	}
	return token
}

// requireService admits only Hubu's service credential.
func (s *Server) requireService(r *http.Request) error {
	token := bearerToken(r)
	if token == "" {
		return gongbu.Errorf(gongbu.CodeUnauthorized, "a bearer token is required")
	}
	want, got := sha256.Sum256([]byte(s.ServiceToken)), sha256.Sum256([]byte(token))
	if s.ServiceToken == "" || subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
		return gongbu.Errorf(gongbu.CodeForbidden, "only Hubu's service credential may do that")
	}
	return nil
}

func (s *Server) GetHealthz(w http.ResponseWriter, r *http.Request) {
	httpjson.WriteJSON(w, http.StatusOK, gongbuapi.Health{Status: gongbuapi.Ok})
}

func (s *Server) GetReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeUnavailable, "the database is not reachable"))
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, gongbuapi.Health{Status: gongbuapi.Ok})
}

// requireOwner lets through a caller whose token may read the operation of handle: Hubu, asked
// with that token, decides (an agent its own operations, an operator any); any other
// operation is not found. It also checks the handle's form.
func (s *Server) requireOwner(r *http.Request, handle string) error {
	token, err := ownerToken(r, handle)
	if err != nil {
		return err
	}
	if s.readCapable(r, token, handle) {
		return nil
	}
	return s.checkOwner(r.Context(), token, handle)
}

// readCapable reports whether the request carries Hubu's read capability for caller and the
// operation of handle (decisionsig.ReadHeader), which answers the question checkOwner would
// ask Hubu.
func (s *Server) readCapable(r *http.Request, caller gongbu.Caller, handle string) bool {
	return s.Executions.MayRead(r.Context(), r.Header.Get(decisionsig.ReadHeader), caller, handle)
}

// ownerToken returns the credential that requireOwner asks Hubu about (the bearer token and
// any OAuth grant a router acts for), once the token is there and the handle well formed.
func ownerToken(r *http.Request, handle string) (gongbu.Caller, error) {
	token := bearerToken(r)
	if token == "" {
		return gongbu.Caller{}, gongbu.Errorf(gongbu.CodeUnauthorized, "a bearer token is required")
	}
	if !contract.IsPublicHandle(handle) {
		return gongbu.Caller{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "public_handle must look like hubu:public-operation:v1:<uuid>")
	}
	return gongbu.Caller{Token: token, Grant: r.Header.Get(contract.GrantHeader)}, nil
}

// checkOwner asks Hubu whether caller may read the operation of handle.
func (s *Server) checkOwner(ctx context.Context, caller gongbu.Caller, handle string) error {
	owns, err := s.Authority.Owns(ctx, caller, handle)
	if err != nil {
		if gongbu.ErrorCode(err) == gongbu.CodeInternal {
			s.logger().WarnContext(ctx, "cannot check ownership with Hubu", "err", err)
			err = gongbu.Errorf(gongbu.CodeUnavailable, "Hubu cannot be reached to check the operation")
		}
		return err
	}
	if !owns {
		return gongbu.Errorf(gongbu.CodeNotFound, "no execution for that operation")
	}
	return nil
}

func decode(w http.ResponseWriter, r *http.Request, v any) error {
	err := httpjson.Decode(w, r, v, false)
	var de *httpjson.DecodeError
	if errors.As(err, &de) {
		code := map[httpjson.Kind]gongbu.Code{
			httpjson.Invalid: gongbu.CodeInvalidArguments, httpjson.TooLarge: gongbu.CodePayloadTooLarge,
			httpjson.UnsupportedMediaType: gongbu.CodeUnsupportedMediaType,
		}[de.Kind]
		return &gongbu.Error{Code: code, Message: de.Message}
	}
	return err
}

func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := routeOf(r)
		if route != "unmatched" {
			tracing.Route(r.Context(), r.Method, route) // the span's name, like the metrics' labels, never holds a path
		}
		s.requests.WithLabelValues(route, r.Method, strconv.Itoa(rec.status)).Inc()
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// allowedMethods lists the methods the route of r answers, for the Allow header of a 405
// (chi sets it only in its own plain-text handler).
func allowedMethods(r *http.Request) []string {
	rc := chi.RouteContext(r.Context())
	if rc == nil || rc.Routes == nil {
		return nil
	}
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if rc.Routes.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		return rc.RoutePattern()
	}
	return "unmatched"
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}
