package flux_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"hubu.dev/hubu/kit/leaktest"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/bflspec"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/flux"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}

const apiKey = "bfl-test-key"

// bfl plays the BFL API with canned answers, one per request in order, and keeps what it
// was sent. Every request is checked against proto/bfl.openapi.yaml.
type bfl struct {
	t       *testing.T
	router  routers.Router
	mu      sync.Mutex
	answers []http.HandlerFunc
	got     []recorded
	conns   atomic.Int64 // connections accepted
	url     string
}

type recorded struct {
	method, path, query string
	header              http.Header
	body                []byte
}

func newBFL(t *testing.T) *bfl {
	t.Helper()
	doc, err := bflspec.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = nil
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	b := &bfl{t: t, router: r}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	b.url = ts.URL
	return b
}

func (b *bfl) answer(hs ...http.HandlerFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answers = append(b.answers, hs...)
}

// dials is how many connections the server has accepted.
func (b *bfl) dials() int { return int(b.conns.Load()) }

func (b *bfl) requests() []recorded {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]recorded(nil), b.got...)
}

func (b *bfl) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if route, params, err := b.router.FindRoute(r); err != nil {
		b.t.Errorf("%s %s is not in the BFL spec: %v", r.Method, r.URL.Path, err)
	} else if err := openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}); err != nil {
		b.t.Errorf("the adapter sent a request the BFL spec does not allow: %v\n%s", err, body)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.mu.Lock()
	b.got = append(b.got, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
	var h http.HandlerFunc
	if len(b.answers) > 0 {
		h, b.answers = b.answers[0], b.answers[1:]
	}
	b.mu.Unlock()
	if h == nil {
		b.t.Errorf("unexpected request %s %s", r.Method, r.URL)
		http.Error(w, "unexpected", http.StatusTeapot)
		return
	}
	h(w, r)
}

func reply(status int, v any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
}

func accepted(id string) http.HandlerFunc {
	return reply(http.StatusOK, bflapi.SubmitResponse{Id: id, PollingUrl: "https://api.bfl.ai/v1/get_result?id=" + id})
}

// drop reads the request and closes the connection without an answer, as a provider that
// charged and then lost the connection would.
func drop(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func newAdapter(t *testing.T, b *bfl, honours bool) *flux.Adapter {
	t.Helper()
	a, err := flux.New(b.url, apiKey, honours, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSubmitRequest(t *testing.T) {
	t.Parallel()
	b := newBFL(t)
	a := newAdapter(t, b, false)
	if a.Name() != "bfl" || a.HonoursIdempotencyKeys() {
		t.Fatalf("name %q honours %v", a.Name(), a.HonoursIdempotencyKeys())
	}
	b.answer(reply(http.StatusOK, bflapi.SubmitResponse{Id: "task-1", PollingUrl: "https://api.bfl.ai/v1/get_result?id=task-1", Cost: new(2.5)}))
	d := gongbutest.NewDecision()
	job, err := a.Submit(context.Background(), "the-derived-key", d)
	if err != nil || job.ID != "task-1" || job.PollingURL != "https://api.bfl.ai/v1/get_result?id=task-1" || job.CostMicros == nil || *job.CostMicros != 25_000 {
		t.Fatalf("job %+v err %v", job, err)
	}
	reqs := b.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || r.path != "/v1/flux-dev" || r.header.Get("x-key") != apiKey ||
		r.header.Get("Idempotency-Key") != "the-derived-key" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("request %s %s, headers %v", r.method, r.path, r.header)
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	// BFL's defaults are stated, so that nothing it might default otherwise changes what was bought.
	want := map[string]any{"prompt": "an origami fox", "width": 1024.0, "height": 1024.0, "seed": 42.0, "output_format": "jpeg", "safety_tolerance": 2.0}
	if !maps.Equal(body, want) {
		t.Fatalf("body %v, want %v", body, want)
	}
	if a2 := newAdapter(t, b, true); !a2.HonoursIdempotencyKeys() {
		t.Fatal("an adapter configured as honouring keys says it does not")
	}
}

// Each model is asked for the size its decision's scope states (the size Hubu priced, with the
// model's defaults resolved), with its own parameters and nothing else.
func TestSubmitBodies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		args  gongbu.ImageArguments
		size  string
		want  map[string]any
		costs *float64
	}{
		{"FLUX.2 at its default size", gongbu.ImageArguments{Prompt: "fox", Model: "flux-2-pro"}, "1024x1024",
			map[string]any{"prompt": "fox", "width": 1024.0, "height": 1024.0, "output_format": "jpeg", "safety_tolerance": 2.0}, new(3.0)},
		{"FLUX.2 with everything", gongbu.ImageArguments{Prompt: "fox", Model: "flux-2-max", Width: 2048, Height: 1024, Seed: new(int64(7)),
			OutputFormat: new("png"), SafetyTolerance: new(5)}, "2048x1024",
			map[string]any{"prompt": "fox", "width": 2048.0, "height": 1024.0, "seed": 7.0, "output_format": "png", "safety_tolerance": 5.0}, nil},
		{"Ultra raw at 21:9", gongbu.ImageArguments{Prompt: "fox", Model: "flux-pro-1.1-ultra", AspectRatio: "21:9", Raw: new(true)}, "21:9",
			map[string]any{"prompt": "fox", "aspect_ratio": "21:9", "raw": true, "output_format": "jpeg", "safety_tolerance": 2.0}, new(6.0)},
		{"Kontext at its default ratio", gongbu.ImageArguments{Prompt: "fox", Model: "flux-kontext-pro"}, "1:1",
			map[string]any{"prompt": "fox", "aspect_ratio": "1:1", "output_format": "jpeg", "safety_tolerance": 2.0}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBFL(t)
			a := newAdapter(t, b, false)
			b.answer(reply(http.StatusOK, bflapi.SubmitResponse{Id: "task-1", PollingUrl: "https://api.bfl.ai/v1/get_result?id=task-1", Cost: c.costs}))
			d := gongbutest.NewDecision()
			d.Arguments, d.Scope.Model, d.Scope.Size = c.args, c.args.Model, c.size
			job, err := a.Submit(context.Background(), "k", d)
			if err != nil || (job.CostMicros == nil) != (c.costs == nil) {
				t.Fatalf("job %+v err %v", job, err)
			}
			r := b.requests()[0]
			var body map[string]any
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatal(err)
			}
			if r.path != "/v1/"+c.args.Model || !reflect.DeepEqual(body, c.want) {
				t.Fatalf("%s %v, want /v1/%s %v", r.path, body, c.args.Model, c.want)
			}
		})
	}
}

// An edit sends its input images as BFL takes them: base64 of their bytes in input_image,
// input_image_2, … in the order the edit names them.
func TestSubmitAnEdit(t *testing.T) {
	t.Parallel()
	b := newBFL(t)
	a := newAdapter(t, b, false)
	b.answer(reply(http.StatusOK, bflapi.SubmitResponse{Id: "task-1", PollingUrl: "https://api.bfl.ai/v1/get_result?id=task-1"}))
	d := gongbutest.NewDecision()
	d.Tool = gongbu.ToolEditImage
	d.Arguments = gongbu.ImageArguments{Prompt: "make it blue", Model: "flux-2-pro", InputImages: []string{"hubu:public-operation:v1:1", "hubu:public-operation:v1:2"}}
	d.Scope.Model, d.Scope.Size = "flux-2-pro", "1024x1024"
	d.Inputs = []gongbu.Image{{MIMEType: "image/png", Bytes: []byte("first")}, {MIMEType: "image/jpeg", Bytes: []byte("second")}}
	if _, err := a.Submit(context.Background(), "k", d); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b.requests()[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if body["input_image"] != base64.StdEncoding.EncodeToString([]byte("first")) || body["input_image_2"] != base64.StdEncoding.EncodeToString([]byte("second")) ||
		body["input_image_3"] != nil || body["input_images"] != nil {
		t.Fatalf("the edit's body: %v", body)
	}
	// Input images not read are never sent as nothing.
	d.Inputs = d.Inputs[:1]
	if _, err := a.Submit(context.Background(), "k2", d); err == nil || len(b.requests()) != 1 {
		t.Fatalf("an edit missing an input was sent: %v", err)
	}
}

func TestSubmitOutcomes(t *testing.T) {
	t.Parallel()
	detail := func(status int) http.HandlerFunc {
		return reply(status, bflapi.ErrorDetail{Detail: http.StatusText(status)})
	}
	cases := []struct {
		name     string
		answer   http.HandlerFunc
		rejected bool
	}{
		{"bad request", detail(http.StatusBadRequest), true},
		{"unauthenticated", detail(http.StatusUnauthorized), true},
		{"no credits", detail(http.StatusPaymentRequired), true},
		{"bad key", detail(http.StatusForbidden), true},
		{"unknown model", detail(http.StatusNotFound), true},
		{"validation", reply(http.StatusUnprocessableEntity, bflapi.ErrorDetail{Detail: "width must be a multiple of 32"}), true},
		{"rate limited", detail(http.StatusTooManyRequests), true},
		// Unknown outcomes: the provider may have charged.
		{"request timeout", detail(http.StatusRequestTimeout), false},
		{"a request under this key in flight", detail(http.StatusConflict), false},
		{"server error", detail(http.StatusInternalServerError), false},
		{"bad gateway", detail(http.StatusBadGateway), false},
		{"unavailable", detail(http.StatusServiceUnavailable), false},
		{"200 without a job", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>ok</html>")
		}, false},
		{"connection dropped", drop, false},
		// mockflux's 422 for a key used before with another body: a request under the key was
		// taken (and charged), so this is no refusal of the work.
		{"idempotency key reused", reply(http.StatusUnprocessableEntity, bflapi.ErrorDetail{
			Detail: "Idempotency-Key was already used for another request (a different model or body); use a new key for a new request",
		}), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, honours := range []bool{false, true} {
				b := newBFL(t)
				b.answer(c.answer, accepted("task-retried"))
				_, err := newAdapter(t, b, honours).Submit(context.Background(), "k", gongbutest.NewDecision())
				if err == nil {
					t.Fatalf("honours=%v: no error", honours)
				}
				if gongbu.IsRejected(err) != c.rejected {
					t.Fatalf("honours=%v: rejected=%v, want %v (%v)", honours, gongbu.IsRejected(err), c.rejected, err)
				}
			}
		})
	}
}

func TestSubmitTimeoutIsNotARefusal(t *testing.T) {
	t.Parallel()
	b := newBFL(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	b.answer(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	a, err := flux.New(b.url, apiKey, false, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Submit(context.Background(), "k", gongbutest.NewDecision())
	if err == nil || gongbu.IsRejected(err) {
		t.Fatalf("err = %v, want an unknown outcome", err)
	}
}

// Go's transport re-sends a request carrying an Idempotency-Key on its own when a reused
// connection breaks before the answer. Against a provider that does not honour the key that
// would be a second charge nobody decided; the adapter must not let it happen.
func TestNoSilentResendWithoutIdempotency(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		honours bool
		hits    int
	}{
		{false, 1}, // the error comes back; Gongbu marks the execution indeterminate
		{true, 2},  // the transport's replay is safe under an honoured key (and proves this test reaches it)
	} {
		b := newBFL(t)
		a := newAdapter(t, b, c.honours)
		// A first request leaves a connection to reuse.
		b.answer(reply(http.StatusOK, bflapi.ResultResponse{Id: "task-0", Status: bflapi.ResultStatusPending}))
		if _, err := a.Poll(context.Background(), gongbu.Job{ID: "task-0"}); err != nil {
			t.Fatal(err)
		}
		b.answer(drop, accepted("task-1"))
		_, err := a.Submit(context.Background(), "k", gongbutest.NewDecision())
		submits := 0
		for _, r := range b.requests() {
			if r.method == http.MethodPost {
				submits++
			}
		}
		if submits != c.hits {
			t.Fatalf("honours=%v: the provider saw %d submits, want %d (err %v)", c.honours, submits, c.hits, err)
		}
		if !c.honours && (err == nil || gongbu.IsRejected(err)) {
			t.Fatalf("honours=false: err = %v, want an unknown outcome", err)
		}
	}
}

func TestPoll(t *testing.T) {
	t.Parallel()
	sample := "https://delivery.bfl.ai/results/task-1/sample.png?sig=x"
	result := func(status bflapi.ResultStatus, res *bflapi.Result) http.HandlerFunc {
		return reply(http.StatusOK, bflapi.ResultResponse{Id: "task-1", Status: status, Result: res})
	}
	cases := []struct {
		name   string
		answer http.HandlerFunc
		want   gongbu.PollResult
		err    bool
	}{
		{"pending", result(bflapi.ResultStatusPending, nil), gongbu.PollResult{Status: gongbu.JobPending}, false},
		{"ready", result(bflapi.ResultStatusReady, &bflapi.Result{Sample: sample}), gongbu.PollResult{Status: gongbu.JobReady, ImageURL: sample}, false},
		{"ready without a sample", result(bflapi.ResultStatusReady, nil), gongbu.PollResult{}, true},
		// BFL charges none of these.
		{"error", result(bflapi.ResultStatusError, nil), gongbu.PollResult{Status: gongbu.JobFailed, Detail: "Error", Uncharged: true}, false},
		{"request moderated", result(bflapi.ResultStatusRequestModerated, nil), gongbu.PollResult{Status: gongbu.JobFailed, Detail: "Request Moderated", Uncharged: true}, false},
		{"content moderated", result(bflapi.ResultStatusContentModerated, nil), gongbu.PollResult{Status: gongbu.JobFailed, Detail: "Content Moderated", Uncharged: true}, false},
		{"task not found", result(bflapi.ResultStatusTaskNotFound, nil), gongbu.PollResult{Status: gongbu.JobLost}, false},
		{"server error", reply(http.StatusInternalServerError, bflapi.ErrorDetail{Detail: "Internal Server Error"}), gongbu.PollResult{}, true},
		{"unauthenticated", reply(http.StatusUnauthorized, bflapi.ErrorDetail{Detail: "Not authenticated"}), gongbu.PollResult{}, true},
		{"connection dropped", drop, gongbu.PollResult{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBFL(t)
			b.answer(c.answer)
			a, err := flux.NewAdapter(flux.Config{BaseURL: b.url, APIKey: apiKey, Timeout: 5 * time.Second, SampleHosts: []string{"delivery.bfl.ai"}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Poll(context.Background(), gongbu.Job{ID: "task-1", PollingURL: b.url + "/v1/get_result?id=task-1"})
			if (err != nil) != c.err || got != c.want {
				t.Fatalf("got %+v err %v, want %+v (error %v)", got, err, c.want, c.err)
			}
			r := b.requests()[0]
			if r.method != http.MethodGet || r.path != "/v1/get_result" || r.query != "id=task-1" || r.header.Get("x-key") != apiKey {
				t.Fatalf("request %s %s?%s, x-key %q", r.method, r.path, r.query, r.header.Get("x-key"))
			}
		})
	}
	// A status the adapter does not know is no end it can settle, never a guess: it polls on
	// (until the poll deadline makes the execution indeterminate).
	for _, status := range []string{"Generating", "Failed"} {
		b := newBFL(t)
		b.answer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"task-1","status":"`+status+`"}`)
		})
		got, err := newAdapter(t, b, false).Poll(context.Background(), gongbu.Job{ID: "task-1"})
		if err != nil || got != (gongbu.PollResult{Status: gongbu.JobPending, Detail: status}) {
			t.Fatalf("unknown status %s: %+v %v", status, got, err)
		}
	}
}

// HTTP/2's transport re-sends a request on its own after some stream resets and GOAWAYs.
// Against a provider that does not honour keys a submit must never speak it. A poll may: it
// charges nothing.
func TestNoHTTP2SubmitWithoutIdempotency(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	protos := map[string]int{} // the HTTP version of the last request, by method
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos[r.Method] = r.ProtoMajor
		mu.Unlock()
		if r.Method == http.MethodPost {
			accepted("task-1")(w, r)
			return
		}
		reply(http.StatusOK, bflapi.ResultResponse{Id: "task-1", Status: bflapi.ResultStatusPending})(w, r)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	for _, c := range []struct {
		honours      bool
		submit, poll int
	}{
		{false, 1, 2},
		{true, 2, 2}, // the same server and client setup does reach HTTP/2 where it is allowed
	} {
		tr := flux.NewTransport()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
		a, err := flux.NewAdapterWithTransport(flux.Config{BaseURL: ts.URL, APIKey: apiKey, HonoursIdempotency: c.honours, Timeout: 5 * time.Second}, tr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Submit(context.Background(), "k", gongbutest.NewDecision()); err != nil {
			t.Fatalf("honours=%v: submit: %v", c.honours, err)
		}
		if _, err := a.Poll(context.Background(), gongbu.Job{ID: "task-1"}); err != nil {
			t.Fatalf("honours=%v: poll: %v", c.honours, err)
		}
		mu.Lock()
		submit, poll := protos[http.MethodPost], protos[http.MethodGet]
		mu.Unlock()
		if submit != c.submit || poll != c.poll {
			t.Fatalf("honours=%v: the submit used HTTP/%d and the poll HTTP/%d, want HTTP/%d and HTTP/%d", c.honours, submit, poll, c.submit, c.poll)
		}
		tr.CloseIdleConnections()
	}
}

// Polls charge nothing, so they reuse one connection whatever the provider does with keys; a
// submit to a provider that does not honour them dials a connection of its own every time.
func TestOnlySubmitsForgoConnectionReuse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		honours bool
		dials   int
	}{
		{false, 3}, // one for the polls, one per submit
		{true, 1},
	} {
		b := newBFL(t)
		a := newAdapter(t, b, c.honours)
		for i := range 2 {
			b.answer(reply(http.StatusOK, bflapi.ResultResponse{Id: "task-0", Status: bflapi.ResultStatusPending}))
			if _, err := a.Poll(context.Background(), gongbu.Job{ID: "task-0"}); err != nil {
				t.Fatal(err)
			}
			b.answer(accepted(fmt.Sprintf("task-%d", i+1)))
			if _, err := a.Submit(context.Background(), "k", gongbutest.NewDecision()); err != nil {
				t.Fatal(err)
			}
		}
		b.answer(reply(http.StatusOK, bflapi.ResultResponse{Id: "task-0", Status: bflapi.ResultStatusPending}))
		if _, err := a.Poll(context.Background(), gongbu.Job{ID: "task-0"}); err != nil {
			t.Fatal(err)
		}
		if got := b.dials(); got != c.dials {
			t.Fatalf("honours=%v: the provider saw %d connections for 3 polls and 2 submits, want %d", c.honours, got, c.dials)
		}
	}
}

// The adapter polls the polling URL the provider returned with the job (the real API answers
// regional hosts), but only on the base URL's host or a host allow-listed for polling: the
// API key goes nowhere else. Any other polling URL is refused without a request anywhere.
func TestPollFollowsThePollingURL(t *testing.T) {
	t.Parallel()
	port := func(b *bfl) string {
		u, err := url.Parse(b.url)
		if err != nil {
			t.Fatal(err)
		}
		return u.Port()
	}
	pending := reply(http.StatusOK, bflapi.ResultResponse{Id: "task-1", Status: bflapi.ResultStatusPending})
	const (
		polledBase = iota
		polledRegional
		refused
	)
	// In a polling URL, BASE, REGIONAL and FOREIGN stand for those servers' ports.
	cases := []struct {
		name       string
		pollingURL string
		polled     int
		query      string // the query the polled server gets
	}{
		{"an allow-listed regional host", "http://api.us1.bfl.test:REGIONAL/v1/get_result?id=task-7", polledRegional, "id=task-7"},
		{"an allow-listed host in another letter case", "http://API.US1.bfl.test:REGIONAL/v1/get_result?id=task-7", polledRegional, "id=task-7"},
		{"the base URL's own host", "http://api.bfl.test:BASE/v1/get_result?id=task-8", polledBase, "id=task-8"},
		{"none", "", polledBase, "id=task-1"},
		// Sharing a parent domain is no permission: only the allow-list is.
		{"a host of the same parent domain, not allow-listed", "http://api.eu1.bfl.test:FOREIGN/v1/get_result?id=task-9", refused, ""},
		{"an allow-listed host on another port", "http://api.us1.bfl.test:FOREIGN/v1/get_result?id=task-9", refused, ""},
		{"a host of another domain", "http://api.bfl.example:FOREIGN/v1/get_result?id=task-9", refused, ""},
		{"a parent domain that only ends the same", "http://api.notbfl.test.evil:FOREIGN/v1/get_result?id=task-9", refused, ""},
		{"an IP address", "http://127.0.0.1:FOREIGN/v1/get_result?id=task-9", refused, ""},
		{"credentials in the URL", "http://user:pw@api.us1.bfl.test:REGIONAL/v1/get_result?id=task-9", refused, ""},
		{"another scheme", "ftp://api.us1.bfl.test:REGIONAL/v1/get_result?id=task-9", refused, ""},
		{"another path", "http://api.us1.bfl.test:REGIONAL/v2/result?id=task-9", refused, ""},
		{"no id", "http://api.us1.bfl.test:REGIONAL/v1/get_result", refused, ""},
		{"not a URL", "::not a url", refused, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			base, regional, foreign := newBFL(t), newBFL(t), newBFL(t)
			a, err := flux.NewAdapterWithTransport(flux.Config{
				BaseURL: "http://api.bfl.test:" + port(base), APIKey: apiKey, Timeout: 5 * time.Second,
				PollingHosts: []string{"api.us1.bfl.test:" + port(regional)},
			}, anyNameToLoopback(t))
			if err != nil {
				t.Fatal(err)
			}
			servers := []*bfl{base, regional, foreign}
			var polled *bfl
			if c.polled != refused {
				polled = servers[c.polled]
				polled.answer(pending)
			}
			pollingURL := strings.NewReplacer("BASE", port(base), "REGIONAL", port(regional), "FOREIGN", port(foreign)).Replace(c.pollingURL)
			_, err = a.Poll(context.Background(), gongbu.Job{ID: "task-1", PollingURL: pollingURL})
			if (err != nil) != (c.polled == refused) {
				t.Fatalf("err = %v, want refused=%v", err, c.polled == refused)
			}
			if polled != nil {
				reqs := polled.requests()
				if len(reqs) != 1 || reqs[0].path != "/v1/get_result" || reqs[0].query != c.query || reqs[0].header.Get("x-key") != apiKey {
					t.Fatalf("requests %+v, want one poll with %s", reqs, c.query)
				}
			}
			for _, other := range servers {
				if other != polled && len(other.requests()) != 0 {
					t.Fatalf("another server got %+v; the API key went where it must not", other.requests())
				}
			}
		})
	}
}

// anyNameToLoopback is an adapter transport on which every name reaches the local server
// listening on the URL's port.
func anyNameToLoopback(t *testing.T) *http.Transport {
	t.Helper()
	tr := flux.NewTransport()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+p)
	}
	return tr
}
