package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/mockflux/internal/hooktest"
)

// By default mockflux is the real API: an Idempotency-Key is ignored, so a submit sent twice
// is two tasks, charged twice.
func TestKeysIgnoredByDefault(t *testing.T) {
	t.Parallel()
	b := setupWith(t, config{ignoresKeys: true, pendingPolls: 1})
	first := b.submitOK(t, "flux-pro-1.1", "decision-1", fox)
	second := b.submitOK(t, "flux-pro-1.1", "decision-1", fox)
	if first.Id == second.Id {
		t.Fatal("a key was honoured")
	}
	b.requireCharges(t, 2, 80_000)
	if f := b.faults(t); f.Idempotency {
		t.Fatalf("faults say idempotency is on: %+v", f)
	}
}

// FLUX.2 is charged per megapixel of output and of input images, as the submit answer states:
// cost in credits, input_mp and output_mp in megapixels of 2^20 pixels.
func TestFLUX2Cost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		body              string
		cost, outMP, inMP float64
	}{
		{`{"prompt":"fox"}`, 3, 1, 0},                                 // the default 1024x1024
		{`{"prompt":"fox","width":1920,"height":1072}`, 4.5, 1.96, 0}, // 2 MP, rounded up
		{`{"prompt":"fox","width":2048,"height":2048}`, 7.5, 4, 0},
		{`{"prompt":"fox","width":1024,"height":1024,"input_image":"` + tinyPNG + `"}`, 4.5, 1, 1},
		{`{"prompt":"fox","width":1024,"height":1024,"input_image":"` + tinyPNG + `","input_image_2":"` + tinyPNG + `"}`, 6, 1, 2},
	} {
		sub := b.submitOK(t, "flux-2-pro", "", c.body)
		if *sub.Cost != c.cost || *sub.OutputMp != c.outMP || *sub.InputMp != c.inMP {
			t.Errorf("%.60s: cost %v, output %v MP, input %v MP; want %v, %v, %v", c.body, *sub.Cost, *sub.OutputMp, *sub.InputMp, c.cost, c.outMP, c.inMP)
		}
	}
	b.requireCharges(t, 5, 30_000+45_000+75_000+45_000+60_000)
	if sub := b.submitOK(t, "flux-2-klein-4b", "", `{"prompt":"fox","width":2048,"height":1024}`); *sub.Cost != 1.5 {
		t.Errorf("klein 4B at 2 MP: cost %v, want 1.5", *sub.Cost)
	}
}

// The polling and delivery hosts are the ones configured, as with the real API's regional
// hosts.
func TestConfiguredHosts(t *testing.T) {
	t.Parallel()
	b := setupWith(t, config{pendingPolls: 0, pollingURL: "https://api.eu2.bfl.ai", deliveryURL: "https://delivery-eu2.bfl.ai"})
	sub := b.submitOK(t, "flux-2-pro", "", `{"prompt":"fox"}`)
	if sub.PollingUrl != "https://api.eu2.bfl.ai/v1/get_result?id="+sub.Id {
		t.Fatalf("polling URL %s", sub.PollingUrl)
	}
	if r := b.poll(t, sub.Id); r.Result == nil || !strings.HasPrefix(r.Result.Sample, "https://delivery-eu2.bfl.ai/samples/"+sub.Id+".jpeg?exp=") {
		t.Fatalf("poll %+v", r)
	}
}

// A task that ends moderated or in an error answers that status, without a result, and is not
// charged; its webhook says so.
func TestEndsWithoutAResult(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind    bflapi.FaultKind
		status  bflapi.ResultStatus
		reasons bool
	}{
		{bflapi.FaultKindRequestModerated, bflapi.ResultStatusRequestModerated, true},
		{bflapi.FaultKindContentModerated, bflapi.ResultStatusContentModerated, true},
		{bflapi.FaultKindTaskError, bflapi.ResultStatusError, false},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			t.Parallel()
			b := setupWith(t, config{pendingPolls: 0})
			rcv := hooktest.New(t, nil)
			b.armFault(t, c.kind, 1, 0)
			sub := b.submitOK(t, "flux-2-pro", "", `{"prompt":"fox","webhook_url":"`+rcv.URL+`","webhook_secret":"`+hookSecret+`"}`)
			if *sub.Cost != 3 {
				t.Fatalf("the answer states cost %v, want 3 (the refund comes at the end)", *sub.Cost)
			}
			r := b.poll(t, sub.Id)
			if r.Status != c.status || r.Result != nil || (r.Details != nil) != c.reasons {
				t.Fatalf("poll %+v", r)
			}
			charges := b.requireCharges(t, 0, 0)
			if len(charges.Charges) != 1 || charges.Charges[0].Refunded == nil || !*charges.Charges[0].Refunded {
				t.Fatalf("charges %+v, want the one refunded", charges)
			}
			n := rcv.Await(t, 1)[0]
			if want := `{"id":"` + sub.Id + `","status":"` + string(c.status) + `"}`; string(n.Body) != want {
				t.Fatalf("webhook %s, want %s", n.Body, want)
			}
			// The next task is Ready again.
			next := b.submitOK(t, "flux-2-pro", "", `{"prompt":"fox"}`)
			if r := b.poll(t, next.Id); r.Status != bflapi.ResultStatusReady {
				t.Fatalf("the next task: %+v", r)
			}
		})
	}
}

// 402 once the credits do not cover a task (refunds given back), and /v1/credits says what is
// left.
func TestCredits(t *testing.T) {
	t.Parallel()
	b := setupWith(t, config{pendingPolls: 0, credits: 100_000}) // 10 credits
	credits := func() float64 {
		t.Helper()
		r, err := b.client.GetCreditsWithResponse(context.Background())
		if err != nil || r.JSON200 == nil {
			t.Fatalf("credits: %v %v", err, r)
		}
		return r.JSON200.Credits
	}
	b.submitOK(t, "flux-2-pro", "", `{"prompt":"fox","width":2048,"height":2048}`) // 7.5 credits
	if got := credits(); got != 2.5 {
		t.Fatalf("credits %v, want 2.5", got)
	}
	if r := b.submitRaw(t, "flux-2-pro", "", `{"prompt":"fox"}`); r.StatusCode() != http.StatusPaymentRequired || r.JSON402 == nil {
		t.Fatalf("beyond the credits: %d %s", r.StatusCode(), r.Body)
	}
	b.armFault(t, bflapi.FaultKindContentModerated, 1, 0)
	b.submitOK(t, "flux-2-klein-4b", "", `{"prompt":"fox"}`) // 1.4 credits, refunded
	b.submitOK(t, "flux-2-klein-4b", "", `{"prompt":"fox"}`)
	if got := credits(); got != 1.1 {
		t.Fatalf("credits %v, want 1.1", got)
	}
	b.requireCharges(t, 2, 75_000+14_000)
	if r, err := b.anonymous.GetCreditsWithResponse(context.Background()); err != nil || r.StatusCode() != http.StatusUnauthorized {
		t.Fatalf("credits without a key: %v %v", err, r)
	}
}

// 429 beyond the tasks rendering at once; flux-kontext-max has a quarter of the limit.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	b := setupWith(t, config{pendingPolls: 0, renderTime: time.Minute, concurrency: 4})
	for range 4 {
		b.submitOK(t, "flux-2-pro", "", `{"prompt":"fox"}`)
	}
	if r := b.submitRaw(t, "flux-dev", "", fox); r.StatusCode() != http.StatusTooManyRequests {
		t.Fatalf("a fifth task at once: %d %s", r.StatusCode(), r.Body)
	}
	b.clock.Advance(time.Minute) // they have rendered
	b.submitOK(t, "flux-kontext-max", "", `{"prompt":"fox"}`)
	if r := b.submitRaw(t, "flux-kontext-max", "", `{"prompt":"fox"}`); r.StatusCode() != http.StatusTooManyRequests {
		t.Fatalf("a second flux-kontext-max at once: %d %s", r.StatusCode(), r.Body)
	}
	b.requireCharges(t, 5, 4*30_000+80_000)
}
