package httpserver_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/mockflux/internal/hooktest"
)

const hookSecret = "whsec-test-0123456789abcdef"

// hooked is fox with a webhook to url under secret.
func hooked(url, secret string) string {
	return fmt.Sprintf(`{"prompt":"a red fox in the snow","width":1024,"height":768,"seed":42,"webhook_url":%q,"webhook_secret":%q}`, url, secret)
}

// With no render time the webhook goes out at once, in the wire format the spec gives and
// signed as it says; pending polls do not hold it back.
func TestWebhookDelivered(t *testing.T) {
	t.Parallel()
	rcv := hooktest.New(t, nil)
	b := setup(t)
	sub := b.submitOK(t, "flux-dev", "", hooked(rcv.URL+"/hooks/flux?token=query-credential", hookSecret))
	got := rcv.Await(t, 1)
	hooktest.Check(t, got[0], hookSecret, sub.Id)
	if r := b.poll(t, sub.Id); r.Status != bflapi.ResultStatusPending {
		t.Fatalf("the poll after the webhook: %+v (its pending poll is still due)", r)
	}
	b.awaitMetric(t, `mockflux_webhooks_total{outcome="delivered"} 1`)
	for _, line := range []string{`mockflux_webhooks_total{outcome="failed"} 0`, `mockflux_webhooks_total{outcome="dropped"} 0`} {
		if !strings.Contains(b.metrics(t), line+"\n") {
			t.Fatalf("/metrics lacks %s", line)
		}
	}
	if logs := b.logs.String(); strings.Contains(logs, hookSecret) || strings.Contains(logs, "query-credential") {
		t.Fatalf("the secret or the URL's query reached the log: %s", logs)
	}
	if len(rcv.Notices()) != 1 {
		t.Fatalf("%d notices", len(rcv.Notices()))
	}
}

// The render time holds Ready, the webhook and ready_at back; then ready_at - created_at is
// exactly the render time, also in the poll's start and end times.
func TestRenderTime(t *testing.T) {
	t.Parallel()
	const render = 30 * time.Second
	rcv := hooktest.New(t, nil)
	b := setupWith(t, config{pendingPolls: 1, renderTime: render})
	b.timers.Advance(123456789 * time.Nanosecond) // ready_at keeps its nanoseconds
	created := b.clock.Now()
	sub := b.submitOK(t, "flux-dev", "", hooked(rcv.URL, hookSecret))
	if b.timers.Waiting() != 1 {
		t.Fatalf("%d timers, want the webhook's", b.timers.Waiting())
	}
	if r := b.poll(t, sub.Id); r.Status != bflapi.ResultStatusPending || *r.Progress != 0 {
		t.Fatalf("first poll %+v", r)
	}
	b.timers.Advance(render - time.Second)
	if r := b.poll(t, sub.Id); r.Status != bflapi.ResultStatusPending {
		t.Fatalf("a second early: %+v", r)
	}
	if c := b.charges(t).Charges[0]; c.ReadyAt != nil || len(rcv.Notices()) != 0 {
		t.Fatalf("a second early: ready_at %v, %d notices", c.ReadyAt, len(rcv.Notices()))
	}
	b.timers.Advance(time.Second)
	hooktest.Check(t, rcv.Await(t, 1)[0], hookSecret, sub.Id)

	c := b.charges(t).Charges[0]
	if c.ReadyAt == nil || !c.ReadyAt.Equal(created.Add(render)) || !c.CreatedAt.Equal(created) {
		t.Fatalf("charge %+v, want ready_at %v", c, created.Add(render))
	}
	status, _, raw := b.get(t, b.url+"/_mock/charges", nil)
	if status != http.StatusOK || !strings.Contains(string(raw), `"ready_at":"2026-11-30T10:00:30.123456789Z"`) {
		t.Fatalf("charges: %d %s", status, raw)
	}
	b.timers.Advance(time.Minute) // a late poll does not move ready_at
	res := b.pollUntilReady(t, sub.Id, 1)
	if *res.Duration != render.Seconds() {
		t.Fatalf("result %+v, want a duration of %v", res, render)
	}
	if c := b.charges(t).Charges[0]; !c.ReadyAt.Equal(created.Add(render)) {
		t.Fatalf("ready_at moved to %v", c.ReadyAt)
	}
}

// The webhook fields are not part of the request the idempotency key stands for: the same
// key and body with another webhook is the first job, charged once, and only the first
// job's webhook goes out.
func TestWebhookIsNotPartOfTheIdempotencyHash(t *testing.T) {
	t.Parallel()
	first, second := hooktest.New(t, nil), hooktest.New(t, nil)
	b := setupWith(t, config{pendingPolls: 1, renderTime: 10 * time.Second})
	sub := b.submitOK(t, "flux-pro-1.1", "decision-1", hooked(first.URL, hookSecret))
	again := b.submitOK(t, "flux-pro-1.1", "decision-1", hooked(second.URL, "another-secret-0123456789"))
	if !reflect.DeepEqual(again, sub) {
		t.Fatalf("the resubmission answered %+v, want %+v", again, sub)
	}
	b.requireCharges(t, 1, 40_000)
	// One notice is scheduled: a submit's timer exists by the time it is answered.
	if n := b.timers.Waiting(); n != 1 {
		t.Fatalf("%d webhooks scheduled, want 1", n)
	}
	b.timers.Advance(10 * time.Second)
	hooktest.Check(t, first.Await(t, 1)[0], hookSecret, sub.Id)
	b.awaitMetric(t, `mockflux_webhooks_total{outcome="delivered"} 1`)
	if n := len(second.Notices()); n != 0 {
		t.Fatalf("the resubmission's webhook got %d notices", n)
	}
	// A different body under the key is still refused, webhook or not.
	if resp := b.submitRaw(t, "flux-pro-1.1", "decision-1", strings.Replace(hooked(first.URL, hookSecret), "42", "43", 1)); resp.StatusCode() != http.StatusUnprocessableEntity {
		t.Fatalf("another seed: %d", resp.StatusCode())
	}
}

func TestBadWebhookFieldsAreRefused(t *testing.T) {
	t.Parallel()
	rcv := hooktest.New(t, nil)
	b := setup(t)
	for _, c := range []struct{ body, want string }{
		{`{"prompt":"fox","width":1024,"height":768,"webhook_url":"` + rcv.URL + `"}`, "webhook_url and webhook_secret: send both or neither"},
		{`{"prompt":"fox","width":1024,"height":768,"webhook_secret":"` + hookSecret + `"}`, "send both or neither"},
		{hooked("file:///etc/passwd", hookSecret), "webhook_url: must be an absolute http or https URL"},
		{hooked(rcv.URL, "too-short"), "webhook_secret: must be 16 to 256 bytes"},
	} {
		resp := b.submitRaw(t, "flux-dev", "decision-1", c.body)
		if resp.StatusCode() != http.StatusUnprocessableEntity || resp.JSON422 == nil || !strings.Contains(resp.JSON422.Detail, c.want) {
			t.Errorf("%s: %d %s, want 422 saying %q", c.body, resp.StatusCode(), resp.Body, c.want)
		}
		if strings.Contains(string(resp.Body), hookSecret) {
			t.Errorf("the answer quotes the secret: %s", resp.Body)
		}
	}
	b.requireCharges(t, 0, 0)
	// The key was not taken by a refused request.
	sub := b.submitOK(t, "flux-dev", "decision-1", hooked(rcv.URL, hookSecret))
	hooktest.Check(t, rcv.Await(t, 1)[0], hookSecret, sub.Id)
}

// A receiver that answers 500 gets the notice again 100 ms later (on the clock), signed
// afresh; its 2xx ends the delivery.
func TestWebhookRetriedAfter500(t *testing.T) {
	t.Parallel()
	rcv := hooktest.New(t, func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	b := setup(t)
	sub := b.submitOK(t, "flux-dev", "", hooked(rcv.URL, hookSecret))
	first := rcv.Await(t, 1)[0]
	b.timers.AwaitWaiting(t, 1)
	b.timers.Advance(time.Second)
	b.awaitMetric(t, `mockflux_webhooks_total{outcome="delivered"} 1`)
	got := rcv.Notices()
	if len(got) != 2 {
		t.Fatalf("%d attempts, want 2", len(got))
	}
	hooktest.Check(t, first, hookSecret, sub.Id)
	hooktest.Check(t, got[1], hookSecret, sub.Id)
	if asked := b.timers.Asked(); len(asked) != 1 || asked[0] != 100*time.Millisecond {
		t.Fatalf("waited %v, want 100ms", asked)
	}
}

// webhook_drop drops exactly the next N webhooks (submits do not use it up), each counted as
// dropped; the next one goes out.
func TestWebhookDrop(t *testing.T) {
	t.Parallel()
	rcv := hooktest.New(t, nil)
	b := setupWith(t, config{pendingPolls: 1, renderTime: time.Second})
	faults := b.armFault(t, bflapi.FaultKindWebhookDrop, 2, 0)
	if len(faults.Active) != 1 || faults.Active[0].Kind != bflapi.FaultKindWebhookDrop || faults.Active[0].Count != 2 {
		t.Fatalf("armed: %+v", faults)
	}
	ids := map[string]bool{}
	for i := range 3 {
		ids[b.submitOK(t, "flux-dev", "", hooked(rcv.URL+fmt.Sprint("/", i), hookSecret)).Id] = true
	}
	if f := b.faults(t); len(f.Active) != 1 || f.Active[0].Count != 2 {
		t.Fatalf("submits used up webhook_drop: %+v", f)
	}
	b.timers.Advance(time.Second)
	b.awaitMetric(t, `mockflux_webhooks_total{outcome="dropped"} 2`)
	b.awaitMetric(t, `mockflux_webhooks_total{outcome="delivered"} 1`)
	got := rcv.Notices()
	if len(got) != 1 {
		t.Fatalf("%d notices, want the one not dropped", len(got))
	}
	if f := b.faults(t); len(f.Active) != 0 {
		t.Fatalf("webhook_drop still armed: %+v", f)
	}
	// The jobs themselves are fine: every one is charged and becomes Ready.
	b.requireCharges(t, 3, 75_000)
	for id := range ids {
		b.pollUntilReady(t, id, 2)
	}
	sub := b.submitOK(t, "flux-dev", "", hooked(rcv.URL, hookSecret))
	b.timers.Advance(time.Second)
	hooktest.Check(t, rcv.Await(t, 2)[1], hookSecret, sub.Id)
}

// A submit whose answer a fault hides still made a job, and its webhook goes out.
func TestWebhookAfterChargeThen500(t *testing.T) {
	t.Parallel()
	rcv := hooktest.New(t, nil)
	b := setup(t)
	b.armFault(t, bflapi.FaultKindChargeThen500, 1, 0)
	if resp := b.submitRaw(t, "flux-dev", "d-1", hooked(rcv.URL, hookSecret)); resp.StatusCode() != http.StatusInternalServerError {
		t.Fatalf("%d", resp.StatusCode())
	}
	charged := b.requireCharges(t, 1, 25_000).Charges[0]
	hooktest.Check(t, rcv.Await(t, 1)[0], hookSecret, charged.JobId)
}
