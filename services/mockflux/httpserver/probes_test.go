package httpserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/bflapi"
)

// mockflux has the probes and metrics of the other services: /readyz says whether a submit
// can be charged and recorded, /metrics counts requests by route and the charges made.
func TestReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	b := setupWith(t, config{pendingPolls: 1, ready: func() error {
		if broken.Load() {
			return errors.New("journal unusable (test)")
		}
		return nil
	}})
	ctx := context.Background()
	if r, err := b.anonymous.GetReadyzWithResponse(ctx); err != nil || r.JSON200 == nil || r.JSON200.Status != bflapi.Ok {
		t.Fatalf("readyz: %v %d %s", err, r.StatusCode(), r.Body)
	}
	broken.Store(true)
	r, err := b.anonymous.GetReadyzWithResponse(ctx)
	if err != nil || r.StatusCode() != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), `"detail"`) {
		t.Fatalf("readyz with the journal broken: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if h, err := b.anonymous.GetHealthzWithResponse(ctx); err != nil || h.JSON200 == nil {
		t.Fatalf("healthz does not depend on the journal: %v", err)
	}
	if !strings.Contains(b.logs.String(), "journal unusable (test)") {
		t.Fatalf("the cause of not being ready was not logged: %s", b.logs.String())
	}

	job := b.submitOK(t, "flux-dev", "d-metrics", fox)
	b.submitOK(t, "flux-dev", "d-metrics", fox) // replayed: no second charge
	b.pollUntilReady(t, job.Id, 3)
	b.armFault(t, bflapi.FaultKindChargeThenDrop, 1, 0)
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/flux-dev", strings.NewReader(fox))
	req.Header.Set("x-key", testKey)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := fresh.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("charge_then_drop answered %d", resp.StatusCode)
	}

	// The dropped request is counted once its handler returns, which may be after the client
	// saw the connection close: wait (bounded) until it is.
	const dropped = `mockflux_http_requests_total{method="POST",route="/v1/{model}",status="none"} 1`
	var metrics string
	waitfor.Within(5*time.Second, func() bool {
		metrics = b.metrics(t)
		return strings.Contains(metrics, dropped)
	})
	for _, want := range []string{
		"mockflux_charges_total 2\n",
		"mockflux_charged_micros_total 50000\n", // flux-dev 25000 and the dropped one 25000
		`mockflux_http_requests_total{method="GET",route="/readyz",status="200"} 1`,
		`mockflux_http_requests_total{method="GET",route="/readyz",status="503"} 1`,
		`mockflux_http_requests_total{method="POST",route="/v1/{model}",status="200"} 2`,
		dropped,
		`mockflux_http_requests_total{method="GET",route="/v1/get_result",status="200"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics)
		}
	}
	// Labels are route patterns: no job id, idempotency key or sample signature.
	for _, secret := range []string{job.Id, "d-metrics", "sig="} {
		if strings.Contains(metrics, secret) {
			t.Errorf("metrics carry %q", secret)
		}
	}
}
