// Package httpserver serves Gongbu's HTTP API, the chi server interface generated from
// proto/gongbu.openapi.yaml.
package httpserver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/kit/httpjson"
	kitmetrics "hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/changefeed"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/preview"
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

// Webhook is a provider adapter the provider can tell, with a signed notice, that a job is done.
type Webhook interface {
	// WebhookJob returns the job a notice names, not yet trusted.
	WebhookJob(body []byte) (string, error)
	// VerifyWebhook checks that a notice carries the secret of the decision whose job it names.
	VerifyWebhook(header http.Header, body []byte, decisionID uuid.UUID) error
}

// maxWebhookBody bounds a provider's notice; the real ones are a few dozen bytes.
const maxWebhookBody = 4 << 10

// DefaultWaitBackstop is how often a waiting request reads its execution again on its own: a
// lost notification costs at most this much latency.
const DefaultWaitBackstop = 2 * time.Second

// MaxWait is the longest a request may wait for an execution to change, in seconds.
const MaxWait = 30

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

func (s *Server) Execute(w http.ResponseWriter, r *http.Request) {
	if err := s.requireService(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var body gongbuapi.ExecutionRequest
	if err := decode(w, r, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := decisionOf(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	exec, created, err := s.Executions.Execute(r.Context(), d)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
		s.logger().InfoContext(r.Context(), "execution accepted", "decision_id", exec.DecisionID, "public_handle", exec.PublicHandle,
			"state", exec.State)
	}
	httpjson.WriteJSON(w, status, executionOf(exec))
}

func (s *Server) ListExecutions(w http.ResponseWriter, r *http.Request) {
	if err := s.requireService(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	all, err := s.Executions.Store.List(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := gongbuapi.ExecutionList{Executions: []gongbuapi.Execution{}}
	for _, e := range all {
		out.Executions = append(out.Executions, executionOf(e))
	}
	httpjson.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) GetExecution(w http.ResponseWriter, r *http.Request, id uuid.UUID) {
	if err := s.requireService(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	exec, err := s.Executions.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, executionOf(exec))
}

// GetOperationExecution serves an agent its own operation's execution. Hubu, asked with the
// agent's token, decides what is the agent's; any other operation is not found. With wait,
// the answer waits for the execution to change (see awaitChange).
func (s *Server) GetOperationExecution(w http.ResponseWriter, r *http.Request, handle string, params gongbuapi.GetOperationExecutionParams) {
	if !contract.IsPublicHandle(handle) {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "public_handle must look like hubu:public-operation:v1:<uuid>"))
		return
	}
	wait := 0
	if params.Wait != nil {
		wait = *params.Wait
	}
	if wait < 0 || wait > MaxWait {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "wait must be between 0 and %d seconds", MaxWait))
		return
	}
	if params.State != nil && !params.State.Valid() {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "state must be one of the execution states"))
		return
	}
	var embed int64
	if params.EmbedImage != nil {
		embed = *params.EmbedImage
	}
	if embed < 0 || embed > gongbu.MaxImageBytes {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "embed_image must be between 0 and %d bytes", gongbu.MaxImageBytes))
		return
	}
	exec, img, err := s.awaitOwned(r, handle, time.Duration(wait)*time.Second, params.State, embed)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := executionOf(exec)
	embedImage(&out, exec, img, embed)
	httpjson.WriteJSON(w, http.StatusOK, out)
}

// embedImage puts emb, the kept image of a succeeded execution or its preview, read with it,
// into out when it is what an answer that embeds up to limit bytes takes. It is a saving, not
// part of the answer's meaning: an image that was not read with the execution (pruned a moment
// ago) is left out, and the caller fetches it by GetOperationImage as it would without
// embed_image.
func embedImage(out *gongbuapi.Execution, exec gongbu.Execution, emb *gongbu.Embedded, limit int64) {
	if emb == nil || !embeddable(exec, limit) || out.Result == nil || out.Result.Image == nil {
		return
	}
	img := emb.Bytes
	switch kept := exec.Image; {
	case !emb.Preview && len(img) == kept.Size && int64(kept.Size) <= limit:
		out.Result.Image.Data = &img
	case emb.Preview && kept.Preview != nil && len(img) == kept.Preview.Size && out.Result.Image.Preview != nil:
		out.Result.Image.Preview.Data = &img
	}
}

// awaitOwned is awaitChange for a caller whose token may read the operation of handle
// (see requireOwner). The check with Hubu is a round trip of its own, so it runs beside the
// first read and the wait instead of before them: a long-poll whose execution is final by the
// time it arrives answers once both are done, not one after the other. Nothing that was read
// is answered before the check has passed, and a check that fails ends the wait at once, so
// the answer to a caller who may not read the operation is the same, and as soon, as it would
// be without the execution.
//
// Reads bring the image along (embed) only once the check has passed, so no image is ever
// read for a caller who may not see it. A read after a wait waits for the check first (it
// began before the wait, and has answered by then as a rule), so the read that finds the
// execution changed brings its image in the same statement; an execution found final by the
// first read, before the check answered, is read once more with its image.
//
// A refusal ends the wait, not a read already on its way to Postgres: that read finishes
// (a fraction of a millisecond as a rule) and its connection goes back to the pool. Cancelling
// it would make pgx close the connection, and a stream of refused callers would then cost
// Gongbu's pool, which hand-offs share, a new connection each.
func (s *Server) awaitOwned(r *http.Request, handle string, wait time.Duration, seen *gongbuapi.ExecutionState, embed int64) (gongbu.Execution, *gongbu.Embedded, error) {
	token, err := ownerToken(r, handle)
	if err != nil {
		return gongbu.Execution{}, nil, err
	}
	ctx := r.Context()
	var owned atomic.Bool
	answered := make(chan struct{}) // closed once the check has answered, owned set before
	refused := make(chan struct{})  // closed, before answered, if the check did not pass
	checked := make(chan error, 1)
	go func() {
		err := s.checkOwner(ctx, token, handle)
		if err != nil {
			close(refused) // the wait is for nobody
		} else {
			owned.Store(true)
		}
		close(answered)
		checked <- err
	}()
	embedFor := func(afterWait bool) int64 {
		if embed <= 0 {
			return 0
		}
		if afterWait {
			select {
			case <-answered:
			case <-ctx.Done():
			}
		}
		if owned.Load() {
			return embed
		}
		return 0
	}
	exec, img, err := s.awaitChange(ctx, handle, wait, seen, embedFor, refused)
	if ownerErr := <-checked; ownerErr != nil {
		return gongbu.Execution{}, nil, ownerErr
	}
	if err == nil && img == nil && embeddable(exec, embed) {
		if again, withImage, err := s.Executions.Store.GetByHandleWithImage(r.Context(), handle, embed); err == nil {
			exec, img = again, withImage
		} else {
			// The image is a saving: without it the caller fetches it by GetOperationImage.
			s.logger().WarnContext(r.Context(), "cannot read a kept image to embed it", "public_handle", handle, "err", err)
		}
	}
	return exec, img, err
}

// embeddable reports whether exec's kept image, or else its preview, goes into an answer that
// embeds images of up to limit bytes.
func embeddable(exec gongbu.Execution, limit int64) bool {
	if limit <= 0 || exec.State != gongbu.StateSucceeded || exec.Image == nil {
		return false
	}
	return int64(exec.Image.Size) <= limit || (exec.Image.Preview != nil && int64(exec.Image.Preview.Size) <= limit)
}

// requireOwner lets through a caller whose token may read the operation of handle: Hubu, asked
// with that token, decides (an agent its own operations, an operator any); any other
// operation is not found. It also checks the handle's form.
func (s *Server) requireOwner(r *http.Request, handle string) error {
	token, err := ownerToken(r, handle)
	if err != nil {
		return err
	}
	return s.checkOwner(r.Context(), token, handle)
}

// ownerToken returns the bearer token that requireOwner asks Hubu about, once the token is
// there and the handle well formed.
func ownerToken(r *http.Request, handle string) (string, error) {
	token := bearerToken(r)
	if token == "" {
		return "", gongbu.Errorf(gongbu.CodeUnauthorized, "a bearer token is required")
	}
	if !contract.IsPublicHandle(handle) {
		return "", gongbu.Errorf(gongbu.CodeInvalidArguments, "public_handle must look like hubu:public-operation:v1:<uuid>")
	}
	return token, nil
}

// checkOwner asks Hubu whether token may read the operation of handle.
func (s *Server) checkOwner(ctx context.Context, token, handle string) error {
	owns, err := s.Authority.Owns(ctx, token, handle)
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

// GetOperationImage serves the image Gongbu keeps for an operation to whom may read the
// operation. An image never changes, so its digest is a strong ETag, and http.ServeContent
// answers If-None-Match (304) and Range.
func (s *Server) GetOperationImage(w http.ResponseWriter, r *http.Request, handle string, params gongbuapi.GetOperationImageParams) {
	// Hubu reads any operation's image with its service credential, for its operators (hubuctl
	// image, the console); anyone else needs Hubu's word that the token may read the operation.
	if s.requireService(r) != nil {
		if err := s.requireOwner(r, handle); err != nil {
			s.writeError(w, r, err)
			return
		}
	} else if !contract.IsPublicHandle(handle) {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "public_handle must look like hubu:public-operation:v1:<uuid>"))
		return
	}
	var (
		img    gongbu.Image
		digest [sha256.Size]byte
		err    error
	)
	if params.Preview != nil && *params.Preview {
		var p gongbu.Preview
		p, digest, err = s.Executions.Store.PreviewByHandle(r.Context(), handle)
		img = gongbu.Image{MIMEType: preview.MIMEType, Bytes: p.Bytes}
	} else {
		img, digest, err = s.Executions.Store.ImageByHandle(r.Context(), handle)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", img.MIMEType)
	h.Set("ETag", `"`+hex.EncodeToString(digest[:])+`"`)
	h.Set("Cache-Control", "private, max-age=86400, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(&rangeRefusal{ResponseWriter: w}, r, "", time.Time{}, bytes.NewReader(img.Bytes))
}

// rangeRefusal turns http.ServeContent's answer to a Range it cannot serve (416, as plain
// text) into a problem with a stable code, as every other refusal is; the Content-Range it
// sets for a Range past the image's end (the image's size) stays.
type rangeRefusal struct {
	http.ResponseWriter
	refused bool
}

func (w *rangeRefusal) WriteHeader(status int) {
	if status != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.refused = true
	w.Header().Del("Content-Length")
	httpjson.WriteProblem(w.ResponseWriter, status, string(gongbu.CodeInvalidArguments),
		"the Range header is malformed or asks for no byte of the image")
}

func (w *rangeRefusal) Write(b []byte) (int, error) {
	if w.refused {
		return len(b), nil // ServeContent's plain-text message, already replaced
	}
	return w.ResponseWriter.Write(b)
}

// awaitChange reads the execution of handle, and while it does not exist, or is still in
// state seen, waits up to wait for it to change: woken by Changes the moment any replica
// records a change, and reading again every WaitBackstop besides. Each read brings the kept
// image of a succeeded execution along with it when it is no larger than embed(afterWait)
// bytes, as embed says for that read (0: no image); afterWait is false for the first. The
// wait ends early when stop is closed.
func (s *Server) awaitChange(ctx context.Context, handle string, wait time.Duration, seen *gongbuapi.ExecutionState, embed func(afterWait bool) int64, stop <-chan struct{}) (gongbu.Execution, *gongbu.Embedded, error) {
	afterWait := false
	read := func() (gongbu.Execution, *gongbu.Embedded, error) {
		if limit := embed(afterWait); limit > 0 {
			return s.Executions.Store.GetByHandleWithImage(ctx, handle, limit)
		}
		exec, err := s.Executions.Store.GetByHandle(ctx, handle)
		return exec, nil, err
	}
	if wait <= 0 {
		return read()
	}
	var woken <-chan struct{}
	if s.Changes != nil {
		var unsubscribe func()
		woken, unsubscribe = s.Changes.Subscribe(handle) // before the read: no change goes unseen
		defer unsubscribe()
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	backstop := time.NewTicker(cmp.Or(s.WaitBackstop, DefaultWaitBackstop))
	defer backstop.Stop()
	for {
		exec, img, err := read()
		switch {
		case err != nil && gongbu.ErrorCode(err) != gongbu.CodeNotFound:
			return exec, nil, err
		case err == nil && (seen == nil || exec.State != gongbu.State(*seen)):
			return exec, img, nil
		}
		select {
		case <-woken:
		case <-backstop.C:
		case <-deadline.C:
			return exec, img, err
		case <-stop:
			return exec, img, err
		case <-ctx.Done():
			return exec, img, err // the caller left; nobody reads the answer
		}
		afterWait = true
	}
}

// ProviderWebhook takes a provider's signed notice that a job is done and polls the job at
// once. The notice is only a wake-up (the result comes from polling), so its answer says
// nothing about the job: a notice about a job already finished is taken as well.
func (s *Server) ProviderWebhook(w http.ResponseWriter, r *http.Request, provider string) {
	hook, ok := s.Webhooks[provider]
	if !ok {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeNotFound, "this Gongbu takes no webhooks from %q", provider))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodePayloadTooLarge, "the notice is larger than %d bytes", maxWebhookBody))
		return
	}
	job, err := hook.WebhookJob(body)
	if err != nil {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "%s", err.Error()))
		return
	}
	exec, err := s.Executions.Store.GetByJob(r.Context(), provider, job)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := hook.VerifyWebhook(r.Header, body, exec.DecisionID); err != nil {
		s.logger().WarnContext(r.Context(), "webhook refused", "provider", provider, "decision_id", exec.DecisionID, "err", err)
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeUnauthorized, "%s", err.Error()))
		return
	}
	if exec.State == gongbu.StateSubmitted {
		if _, err := s.Executions.Nudge(r.Context(), exec); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
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

func decisionOf(b gongbuapi.ExecutionRequest) (gongbu.Decision, error) {
	if !contract.IsPublicHandle(b.PublicHandle) {
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "public_handle must look like hubu:public-operation:v1:<uuid>")
	}
	// The decoder does not apply the schema's required fields and enums; a missing id or an
	// unknown tool is the caller's mistake (400), not a disagreement with Hubu (409).
	switch {
	case b.DecisionId == uuid.Nil || b.AgentId == uuid.Nil:
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "decision_id and agent_id are required")
	case !b.Tool.Valid():
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "tool must be generate_image or edit_image")
	}
	if err := b.Arguments.CheckShape(); err != nil {
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "arguments: %s", err.Error())
	}
	if string(b.Tool) != gongbu.ToolOf(b.Arguments) {
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "an edit_image decision names input_images, and only it does")
	}
	d := gongbu.Decision{
		DecisionID: b.DecisionId, PublicHandle: b.PublicHandle, AgentID: b.AgentId, Tool: string(b.Tool),
		Scope:        gongbu.Scope{Provider: b.Scope.Provider, Model: b.Scope.Model, Size: b.Scope.Size},
		Arguments:    b.Arguments,
		AmountMicros: b.AmountMicros, Currency: b.Currency,
	}
	// The scope must describe the arguments; the decision check with Hubu does the rest.
	if !scopeDescribes(d.Scope, d.Arguments) {
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeDecisionMismatch, "the scope does not match the arguments")
	}
	return d, nil
}

// scopeDescribes reports whether scope is the model and size that args make: the size they
// name, or (where they name none) a size the model makes, which Hubu resolved from the model's
// defaults or an edit's first input.
func scopeDescribes(scope gongbu.Scope, args gongbu.ImageArguments) bool {
	m, known := contract.ModelNamed(args.Model)
	dims, pixels := contract.ParseSize(scope.Size)
	switch {
	case scope.Model != args.Model:
		return false
	case args.Width != 0:
		return scope.Size == strconv.Itoa(args.Width)+"x"+strconv.Itoa(args.Height)
	case args.AspectRatio != "":
		return scope.Size == args.AspectRatio
	case !known:
		return false
	case m.Sizing == contract.SizeInPixels:
		return pixels && m.ValidSize(dims.Width, dims.Height)
	}
	return contract.ValidAspectRatio(scope.Size)
}

func executionOf(e gongbu.Execution) gongbuapi.Execution {
	out := gongbuapi.Execution{
		DecisionId: e.DecisionID, PublicHandle: e.PublicHandle, AgentId: e.AgentID,
		Scope:        gongbuapi.Scope{Provider: e.Scope.Provider, Model: e.Scope.Model, Size: e.Scope.Size},
		State:        gongbuapi.ExecutionState(e.State),
		AmountMicros: e.AmountMicros, Currency: e.Currency, ProviderJobId: e.ProviderJobID, PollingUrl: e.PollingURL, Error: e.Error,
		ChargedMicros: e.ChargedMicros, ProviderCostMicros: e.ProviderCostMicros, Attempts: e.Attempts, ResolvedAt: e.ResolvedAt, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
	reported := e.Reported
	out.Reported = &reported
	if e.ResultURL != nil {
		out.Result = &gongbuapi.ExecutionResult{ImageUrl: *e.ResultURL}
		if i := e.Image; i != nil {
			out.Result.Image = &gongbuapi.KeptImage{MimeType: gongbuapi.KeptImageMimeType(i.MIMEType),
				SizeBytes: int64(i.Size), Sha256: hex.EncodeToString(i.SHA256[:]), Width: positive(i.Width), Height: positive(i.Height)}
			if p := i.Preview; p != nil {
				out.Result.Image.Preview = &gongbuapi.KeptPreview{MimeType: gongbuapi.KeptPreviewMimeTypeImagejpeg, SizeBytes: int64(p.Size),
					Sha256: hex.EncodeToString(p.SHA256[:]), Width: p.Width, Height: p.Height}
			}
		}
	}
	return out
}

// positive is &v, or nil for 0 (a side Gongbu did not record).
func positive(v int) *int {
	if v <= 0 {
		return nil
	}
	return &v
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
