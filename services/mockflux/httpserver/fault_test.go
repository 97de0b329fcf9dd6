package httpserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/proto/bflapi"
)

func TestFailBeforeCharge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	faults := b.armFault(t, bflapi.FaultKindFailBeforeCharge, 2, 0)
	if len(faults.Active) != 1 || faults.Active[0].Count != 2 || !faults.Idempotency {
		t.Fatalf("armed: %+v", faults)
	}
	for i := range 2 {
		resp := b.submitRaw(t, "flux-dev", "d-1", fox)
		if resp.StatusCode() != http.StatusInternalServerError || resp.JSON500 == nil {
			t.Fatalf("submit %d: %d %s", i+1, resp.StatusCode(), resp.Body)
		}
		if i == 0 {
			if f := b.faults(t); len(f.Active) != 1 || f.Active[0].Count != 1 {
				t.Fatalf("after one submit: %+v", f)
			}
		}
	}
	b.requireCharges(t, 0, 0)
	if f := b.faults(t); len(f.Active) != 0 {
		t.Fatalf("the count ran out but the fault is armed: %+v", f)
	}
	b.submitOK(t, "flux-dev", "d-1", fox) // the retry under the same key is the first charge
	b.requireCharges(t, 1, 25_000)
}

// The provider charges, then the connection dies before any response: the client cannot know
// whether it was charged. A retry under the same key finds the charged task.
func TestChargeThenDrop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.armFault(t, bflapi.FaultKindChargeThenDrop, 1, 0)
	// A fresh connection per request: Go's transport would otherwise retry a POST that
	// carries an Idempotency-Key on a reused connection by itself, hiding the drop.
	fresh, err := bflapi.NewClientWithResponses(b.url,
		bflapi.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}),
		bflapi.WithRequestEditorFn(withKey(testKey)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := fresh.SubmitWithBodyWithResponse(context.Background(), "flux-dev", idem("d-1"), "application/json", strings.NewReader(fox))
	if err == nil {
		t.Fatalf("the client got a response: %d %s", resp.StatusCode(), resp.Body)
	}
	charged := b.requireCharges(t, 1, 25_000).Charges[0]

	retry := b.submitOK(t, "flux-dev", "d-1", fox)
	if retry.Id != charged.JobId {
		t.Fatalf("the retry answered task %s, the charge is for %s", retry.Id, charged.JobId)
	}
	b.requireCharges(t, 1, 25_000)
}

func TestChargeThen500(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.armFault(t, bflapi.FaultKindChargeThen500, 1, 0)
	resp := b.submitRaw(t, "flux-pro-1.1", "d-1", fox)
	if resp.StatusCode() != http.StatusInternalServerError || resp.JSON500 == nil {
		t.Fatalf("%d %s", resp.StatusCode(), resp.Body)
	}
	charged := b.requireCharges(t, 1, 40_000).Charges[0]
	if retry := b.submitOK(t, "flux-pro-1.1", "d-1", fox); retry.Id != charged.JobId {
		t.Fatalf("retry answered %s, charge is for %s", retry.Id, charged.JobId)
	}
	b.requireCharges(t, 1, 40_000)
	// The task itself is fine.
	b.pollUntilReady(t, charged.JobId, 2)
}

func TestSlow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	faults := b.armFault(t, bflapi.FaultKindSlow, 1, 50)
	if faults.Active[0].DelayMs == nil || *faults.Active[0].DelayMs != 50 {
		t.Fatalf("armed: %+v", faults)
	}
	start := time.Now()
	b.submitOK(t, "flux-dev", "", fox)
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Fatalf("answered after %v", elapsed)
	}
	b.requireCharges(t, 1, 25_000)

	// A client that gives up while the server waits is not charged, and the handler ends.
	b.armFault(t, bflapi.FaultKindSlow, 0, int((10 * time.Minute).Milliseconds()))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := b.client.SubmitWithBodyWithResponse(ctx, "flux-dev", idem(""), "application/json", strings.NewReader(fox))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the client's deadline", err)
	}
	b.requireCharges(t, 1, 25_000)
	if f := b.faults(t); len(f.Active) != 1 || f.Active[0].Count != 0 {
		t.Fatalf("an until-cleared fault: %+v", f)
	}
}

// With idempotency off, the key is ignored: the same request twice is charged twice. That is
// the provider Gongbu must protect itself against.
func TestIdempotencyOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if f := b.armFault(t, bflapi.FaultKindIdempotencyOff, 0, 0); f.Idempotency {
		t.Fatalf("armed: %+v", f)
	}
	first := b.submitOK(t, "flux-dev", "d-1", fox)
	second := b.submitOK(t, "flux-dev", "d-1", fox)
	if first.Id == second.Id {
		t.Fatal("idempotency off, yet one task")
	}
	for _, c := range b.requireCharges(t, 2, 50_000).Charges {
		if c.IdempotencyKey == nil || *c.IdempotencyKey != "d-1" {
			t.Fatalf("charge %+v does not note the key it was sent with", c)
		}
	}

	resp, err := b.anonymous.ClearFaultsWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil || !resp.JSON200.Idempotency || len(resp.JSON200.Active) != 0 {
		t.Fatalf("clear: %v %v", err, resp)
	}
	third := b.submitOK(t, "flux-dev", "d-2", fox)
	if again := b.submitOK(t, "flux-dev", "d-2", fox); again.Id != third.Id {
		t.Fatal("idempotency is not back on after DELETE")
	}
	b.requireCharges(t, 3, 75_000)
}

func TestFaultsUntilClearedAndCombined(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.armFault(t, bflapi.FaultKindChargeThen500, 0, 0)
	b.armFault(t, bflapi.FaultKindIdempotencyOff, 1, 0)
	for i := range 3 {
		if resp := b.submitRaw(t, "flux-dev", "d-1", fox); resp.StatusCode() != http.StatusInternalServerError {
			t.Fatalf("submit %d: %d", i+1, resp.StatusCode())
		}
	}
	// The first submit ignored its key; the next two shared one task.
	b.requireCharges(t, 2, 50_000)
	f := b.faults(t)
	if len(f.Active) != 1 || f.Active[0].Kind != bflapi.FaultKindChargeThen500 || f.Active[0].Count != 0 || !f.Idempotency {
		t.Fatalf("faults: %+v", f)
	}
	// Requests refused for auth do not use up a fault; refused bodies do.
	b.armFault(t, bflapi.FaultKindFailBeforeCharge, 1, 0)
	_, _ = b.anonymous.SubmitWithBodyWithResponse(context.Background(), "flux-dev", idem(""), "application/json", strings.NewReader(fox))
	if f := b.faults(t); len(f.Active) != 2 {
		t.Fatalf("an unauthenticated request used up a fault: %+v", f)
	}
	b.submitRaw(t, "flux-dev", "", `{}`)
	if f := b.faults(t); len(f.Active) != 1 {
		t.Fatalf("a refused submit did not use up a fault: %+v", f)
	}

	resp, err := b.anonymous.ClearFaultsWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil || len(resp.JSON200.Active) != 0 {
		t.Fatalf("clear: %v %v", err, resp)
	}
	b.submitOK(t, "flux-dev", "d-1", fox)
	b.requireCharges(t, 2, 50_000)
}

func TestArmFaultRefusesNonsense(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, body := range []string{
		`{"kind":"explode"}`,
		`{"kind":"slow"}`,
		`{"kind":"slow","delay_ms":600001}`,
		`{"kind":"charge_then_drop","count":-1}`,
		`{"kind":"charge_then_drop","delay_ms":10}`,
		`{"kind":"charge_then_drop","extra":1}`,
		`{}`,
		`not json`,
	} {
		resp, err := b.anonymous.ArmFaultWithBodyWithResponse(context.Background(), "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode() != http.StatusUnprocessableEntity || resp.JSON422 == nil {
			t.Errorf("%s: %v %v", body, err, resp)
		}
	}
	if f := b.faults(t); len(f.Active) != 0 {
		t.Fatalf("armed: %+v", f)
	}
}
