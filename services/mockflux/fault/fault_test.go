package fault_test

import (
	"slices"
	"testing"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/bflspec"
	"hubu.dev/hubu/services/mockflux/fault"
)

func TestCountsAndClear(t *testing.T) {
	t.Parallel()
	var s fault.Set
	if e := s.Take(); e != (fault.Effects{}) {
		t.Fatalf("no faults armed, got %+v", e)
	}
	must(t, s.Arm(bflapi.FaultKindFailBeforeCharge, 2, 0))
	must(t, s.Arm(bflapi.FaultKindIdempotencyOff, 0, 0))
	must(t, s.Arm(bflapi.FaultKindSlow, 1, 5*time.Millisecond))

	want := []fault.Armed{{Kind: bflapi.FaultKindSlow, Remaining: 1, Delay: 5 * time.Millisecond}, {Kind: bflapi.FaultKindFailBeforeCharge, Remaining: 2}, {Kind: bflapi.FaultKindIdempotencyOff}}
	if got := s.Active(); !slices.Equal(got, want) {
		t.Fatalf("active %+v, want %+v", got, want)
	}
	if e := s.Take(); !e.FailBeforeCharge || !e.IdempotencyOff || e.Slow != 5*time.Millisecond {
		t.Fatalf("first take %+v", e)
	}
	if e := s.Take(); !e.FailBeforeCharge || !e.IdempotencyOff || e.Slow != 0 {
		t.Fatalf("second take %+v", e)
	}
	if e := s.Take(); e.FailBeforeCharge || !e.IdempotencyOff {
		t.Fatalf("third take %+v", e)
	}
	if got := s.Active(); !slices.Equal(got, []fault.Armed{{Kind: bflapi.FaultKindIdempotencyOff}}) {
		t.Fatalf("after the counts ran out: %+v", got)
	}
	s.Clear()
	if got := s.Active(); len(got) != 0 {
		t.Fatalf("after clear: %+v", got)
	}
}

// webhook_drop is used up by webhooks only, and submit faults by submits only: arming both
// for one webhook and one submit drops exactly one notice whatever the order of events.
func TestWebhookDropIsCountedByWebhooks(t *testing.T) {
	t.Parallel()
	var s fault.Set
	if s.TakeWebhookDrop() {
		t.Fatal("a webhook was dropped with nothing armed")
	}
	must(t, s.Arm(bflapi.FaultKindWebhookDrop, 2, 0))
	must(t, s.Arm(bflapi.FaultKindChargeThen500, 1, 0))
	for range 3 {
		if e := s.Take(); e != (fault.Effects{ChargeThen500: e.ChargeThen500}) {
			t.Fatalf("a submit suffered %+v", e)
		}
	}
	if got := s.Active(); !slices.Equal(got, []fault.Armed{{Kind: bflapi.FaultKindWebhookDrop, Remaining: 2}}) {
		t.Fatalf("submits used up webhook_drop: %+v", got)
	}
	for i, want := range []bool{true, true, false} {
		if got := s.TakeWebhookDrop(); got != want {
			t.Fatalf("webhook %d: dropped %v, want %v", i+1, got, want)
		}
	}
	must(t, s.Arm(bflapi.FaultKindWebhookDrop, 0, 0)) // until cleared
	for range 5 {
		if !s.TakeWebhookDrop() {
			t.Fatal("an until-cleared webhook_drop let a webhook through")
		}
	}
	s.Clear()
	if s.TakeWebhookDrop() {
		t.Fatal("dropped after clear")
	}
}

func TestArmReplacesTheSameKind(t *testing.T) {
	t.Parallel()
	var s fault.Set
	must(t, s.Arm(bflapi.FaultKindChargeThen500, 5, 0))
	must(t, s.Arm(bflapi.FaultKindChargeThen500, 1, 0))
	if got := s.Active(); !slices.Equal(got, []fault.Armed{{Kind: bflapi.FaultKindChargeThen500, Remaining: 1}}) {
		t.Fatalf("active %+v", got)
	}
}

func TestArmRefusesNonsense(t *testing.T) {
	t.Parallel()
	var s fault.Set
	for _, c := range []struct {
		kind  bflapi.FaultKind
		count int
		delay time.Duration
	}{
		{"explode", 1, 0},
		{bflapi.FaultKindChargeThenDrop, -1, 0},
		{bflapi.FaultKindSlow, 1, 0},
		{bflapi.FaultKindSlow, 1, fault.MaxDelay + time.Millisecond},
		{bflapi.FaultKindChargeThenDrop, 1, time.Second},
	} {
		if err := s.Arm(c.kind, c.count, c.delay); err == nil {
			t.Errorf("Arm(%q, %d, %v) succeeded", c.kind, c.count, c.delay)
		}
	}
	if got := s.Active(); len(got) != 0 {
		t.Fatalf("a refused fault was armed: %+v", got)
	}
}

// Every kind the spec names is one the set knows.
func TestKindsMatchTheSpec(t *testing.T) {
	t.Parallel()
	doc, err := bflspec.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas["FaultKind"].Value.Enum
	if len(enum) != len(fault.Kinds) {
		t.Fatalf("spec kinds %v, set kinds %v", enum, fault.Kinds)
	}
	for _, k := range enum {
		if !bflapi.FaultKind(k.(string)).Valid() {
			t.Errorf("kind %v", k)
		}
		if !slices.Contains(fault.Kinds, bflapi.FaultKind(k.(string))) {
			t.Errorf("the spec's kind %v is not in fault.Kinds", k)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
