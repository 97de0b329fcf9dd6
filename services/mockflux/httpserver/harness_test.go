package httpserver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/apitest"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/bflspec"
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/httpserver"
	"hubu.dev/hubu/services/mockflux/internal/timertest"
)

type config struct {
	apiKey       string
	ignoresKeys  bool // as the real API: Idempotency-Key is not honoured
	pendingPolls int
	renderTime   time.Duration
	ready        func() error // nil: the provider's own readiness
	credits      int64        // micros; 0 is no limit
	concurrency  int          // 0 is no limit
	pollingURL   string
	deliveryURL  string
}

type bundle struct {
	url   string
	clock *testclock.Clock
	// timers are the clock's, for webhooks; move the clock with timers.Advance.
	timers     *timertest.Timers
	validator  *apitest.Transport
	signingKey []byte
	logs       *testlog.Buffer
	// client sends x-key; anonymous does not. Both validate every response against the spec.
	client    *bflapi.ClientWithResponses
	anonymous *bflapi.ClientWithResponses
}

const testKey = "test-api-key"

// setup starts mockflux over real HTTP with an in-memory provider, a controlled clock, one
// pending poll per job and no render time, honouring Idempotency-Key (most of these tests are
// of that; config.ignoresKeys is the real API's way, and mockflux's default).
func setup(t *testing.T) *bundle { return setupWith(t, config{pendingPolls: 1}) }

func setupWith(t *testing.T, cfg config) *bundle {
	t.Helper()
	clk := testclock.New()
	timers := timertest.New(clk)
	provider, err := mockflux.Open(mockflux.Options{PendingPolls: cfg.pendingPolls, RenderTime: cfg.renderTime, Now: clk.Now,
		HonoursIdempotency: !cfg.ignoresKeys, CreditsMicros: cfg.credits, Concurrency: cfg.concurrency})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { provider.Close() })
	logs := &testlog.Buffer{}
	srv := &httpserver.Server{
		Provider: provider, APIKey: cfg.apiKey, SampleTTL: 10 * time.Minute,
		SigningKey: []byte("test signing key"), Now: clk.Now, After: timers.After,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Ready: cfg.ready, PollingURL: cfg.pollingURL, DeliveryURL: cfg.deliveryURL,
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // first: no webhook goroutine outlives the test

	doc, err := bflspec.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{url: ts.URL, clock: clk, timers: timers, signingKey: srv.SigningKey, logs: logs,
		validator: apitest.NewTransport(t, doc, http.DefaultTransport)}
	b.client = b.newClient(t, testKey)
	if cfg.apiKey != "" {
		b.client = b.newClient(t, cfg.apiKey)
	}
	b.anonymous = b.newClient(t, "")
	return b
}

func (b *bundle) newClient(t *testing.T, key string) *bflapi.ClientWithResponses {
	t.Helper()
	opts := []bflapi.ClientOption{bflapi.WithHTTPClient(&http.Client{Transport: b.validator, Timeout: 30 * time.Second})}
	if key != "" {
		opts = append(opts, bflapi.WithRequestEditorFn(withKey(key)))
	}
	c, err := bflapi.NewClientWithResponses(b.url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func withKey(key string) bflapi.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("x-key", key)
		return nil
	}
}

func idem(key string) *bflapi.SubmitParams {
	if key == "" {
		return &bflapi.SubmitParams{}
	}
	return &bflapi.SubmitParams{IdempotencyKey: &key}
}

// submitRaw posts body exactly as written.
func (b *bundle) submitRaw(t *testing.T, model, key, body string) *bflapi.SubmitHTTPResponse {
	t.Helper()
	resp, err := b.client.SubmitWithBodyWithResponse(context.Background(), model, idem(key), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return resp
}

// submitOK posts body and requires a 200.
func (b *bundle) submitOK(t *testing.T, model, key, body string) bflapi.SubmitResponse {
	t.Helper()
	resp := b.submitRaw(t, model, key, body)
	if resp.StatusCode() != http.StatusOK || resp.JSON200 == nil {
		t.Fatalf("submit %s %s: %d %s", model, body, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

func (b *bundle) charges(t *testing.T) bflapi.Charges {
	t.Helper()
	resp, err := b.anonymous.ListChargesWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("charges: %v %v", err, resp)
	}
	return *resp.JSON200
}

// requireCharges checks the charges that stand: count of them (refunded ones are listed
// besides) and their total.
func (b *bundle) requireCharges(t *testing.T, count int, total int64) bflapi.Charges {
	t.Helper()
	c := b.charges(t)
	standing := 0
	for _, ch := range c.Charges {
		if ch.Refunded == nil || !*ch.Refunded {
			standing++
		}
	}
	if c.Count != count || standing != count || c.TotalMicros != total {
		t.Fatalf("charges: count %d (%d listed) total %d, want %d and %d", c.Count, len(c.Charges), c.TotalMicros, count, total)
	}
	return c
}

func (b *bundle) poll(t *testing.T, id string) bflapi.ResultResponse {
	t.Helper()
	resp, err := b.client.GetResultWithResponse(context.Background(), &bflapi.GetResultParams{Id: id})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("poll: %v %v", err, resp)
	}
	return *resp.JSON200
}

// pollUntilReady polls at most max times.
func (b *bundle) pollUntilReady(t *testing.T, id string, max int) bflapi.Result {
	t.Helper()
	for range max {
		r := b.poll(t, id)
		if r.Status == bflapi.ResultStatusReady {
			if r.Result == nil {
				t.Fatal("Ready without a result")
			}
			return *r.Result
		}
		if r.Status != bflapi.ResultStatusPending {
			t.Fatalf("status %q", r.Status)
		}
	}
	t.Fatalf("not Ready after %d polls", max)
	return bflapi.Result{}
}

// get fetches a URL the server handed out, through the validating transport.
func (b *bundle) get(t *testing.T, url string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Transport: b.validator, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

func (b *bundle) armFault(t *testing.T, kind bflapi.FaultKind, count, delayMS int) bflapi.Faults {
	t.Helper()
	req := bflapi.FaultRequest{Kind: kind}
	if count != 0 {
		req.Count = &count
	}
	if delayMS != 0 {
		req.DelayMs = &delayMS
	}
	resp, err := b.anonymous.ArmFaultWithResponse(context.Background(), req)
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("arm %s: %v %s", kind, err, resp.Body)
	}
	return *resp.JSON200
}

func (b *bundle) faults(t *testing.T) bflapi.Faults {
	t.Helper()
	resp, err := b.anonymous.GetFaultsWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("faults: %v %v", err, resp)
	}
	return *resp.JSON200
}

func detail(t *testing.T, body []byte) string {
	t.Helper()
	var d bflapi.ErrorDetail
	if err := json.Unmarshal(body, &d); err != nil || d.Detail == "" {
		t.Fatalf("not an ErrorDetail: %s", body)
	}
	return d.Detail
}

const fox = `{"prompt":"a red fox in the snow","width":1024,"height":768,"seed":42}`

// metrics is the /metrics text (not in the spec, so not through the validating transport).
func (b *bundle) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(b.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// awaitMetric waits (at most 10 s) until /metrics has line, for what goroutines count.
func (b *bundle) awaitMetric(t *testing.T, line string) {
	t.Helper()
	if !waitfor.Within(10*time.Second, func() bool { return strings.Contains(b.metrics(t), line+"\n") }) {
		t.Fatalf("/metrics lacks %q after 10s:\n%s", line, b.metrics(t))
	}
}

// tinyPNG is base64 of a 1024x1024 PNG, an input image of one megapixel exactly.
var tinyPNG = func() string {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1024, 1024))); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}()
