package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/bflapi"
)

// The spend path has no fixed polling: the provider's signed webhook wakes Gongbu, whose
// change wakes the router's held look. Each wake-up has a backstop; these scenarios take one
// wake-up away at a time and check that the spend still completes, charged once.

// newWakeupSuite starts a stack whose mockflux takes renderTime per job (and answers Ready
// at the first poll after it), with extra Gongbu settings.
func newWakeupSuite(t *testing.T, renderTime string, gongbuEnv ...string) *suite {
	t.Helper()
	server, id, dir, idConfig := stackPlace(t)
	return startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_e2e_" + id, GongbuDB: "gongbu_e2e_" + id, FluxIdempotent: true,
		Env: map[string][]string{
			"router":   {"ROUTER_IDENTITY_CONFIG=" + idConfig},
			"mockflux": {"MOCKFLUX_RENDER_TIME=" + renderTime, "MOCKFLUX_PENDING_POLLS=0"},
			"gongbu":   gongbuEnv,
		},
	})
}

// With Gongbu's own looks after the first and its background pass far off (20 s and 30 s),
// only the provider's webhook can finish the spend within the router's wait: it does, and
// the poll that found the image is the one the webhook triggered.
func TestSuiteWebhookWakesGongbu(t *testing.T) {
	t.Parallel()
	su := newWakeupSuite(t, "300ms", "GONGBU_FIRST_POLL=20s", "GONGBU_POLL_INTERVAL=30s")
	cs := su.routerWaiting(15 * time.Second)
	su.mustSucceed(cs, `{"prompt":"woken by the provider","model":"flux-2-klein-4b","width":512,"height":512}`,
		codexMeta("call_webhookWakesGongbu0000001"), "a spend the webhook finishes")
	gongbu, flux := su.s.Gongbu.URL(), su.s.Flux.URL()
	if n := metricSum(t, gongbu, "gongbu_provider_polls_total", `trigger="webhook"`, `result="ready"`); n != 1 {
		t.Fatalf("%d polls triggered by a webhook found the image, want 1", n)
	}
	// The submitting worker's first look, right after submitting, finds the job still rendering.
	if n := metricSum(t, gongbu, "gongbu_provider_polls_total", `result="ready"`); n != 1 {
		t.Fatalf("%d polls found the image, want 1 (the webhook's)", n)
	}
	if n := metricSum(t, gongbu, "gongbu_provider_polls_total", `trigger="pass"`); n != 0 {
		t.Fatalf("%d polls by the background pass, want none", n)
	}
	// mockflux counts the delivery once Gongbu answers it, which Gongbu does after recording
	// the result that already ended the spend.
	noError(t, poll(10*time.Second, 20*time.Millisecond, func() error {
		if n := metricSum(t, flux, "mockflux_webhooks_total", `outcome="delivered"`); n != 1 {
			return fmt.Errorf("mockflux delivered %d webhooks, want 1", n)
		}
		return nil
	}))
	su.settleAndReconcile(1)
}

// A lost webhook (mockflux drops it) costs latency, never the result: the submitting worker's
// own looks find the image.
func TestSuiteLostWebhook(t *testing.T) {
	t.Parallel()
	su := newWakeupSuite(t, "300ms")
	one := 1
	r, err := su.flux.ArmFaultWithResponse(context.Background(), bflapi.FaultRequest{Kind: bflapi.FaultKindWebhookDrop, Count: &one})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("arm webhook_drop: %v", err)
	}
	cs := su.routerWaiting(15 * time.Second)
	su.mustSucceed(cs, `{"prompt":"the webhook is lost","model":"flux-2-klein-4b","width":512,"height":512}`,
		codexMeta("call_lostWebhookStillDone0000001"), "a spend whose webhook was lost")
	gongbu, flux := su.s.Gongbu.URL(), su.s.Flux.URL()
	if n := metricSum(t, flux, "mockflux_webhooks_total", `outcome="dropped"`); n != 1 {
		t.Fatalf("mockflux dropped %d webhooks, want 1", n)
	}
	if n := metricSum(t, gongbu, "gongbu_provider_polls_total", `trigger="watch"`, `result="ready"`); n != 1 {
		t.Fatalf("%d of Gongbu's own looks found the image, want 1", n)
	}
	if n := metricSum(t, gongbu, "gongbu_provider_polls_total", `trigger="webhook"`); n != 0 {
		t.Fatalf("%d polls triggered by a webhook that was dropped", n)
	}
	su.settleAndReconcile(1)
}
