package reconcile

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// records are the three ledgers Compare reads.
type records struct {
	ds []Decision
	es []Execution
	cs []Charge
}

func TestCompare(t *testing.T) {
	t.Parallel()
	d1, d2 := uuid.New(), uuid.New()
	agree := func() *records {
		return &records{[]Decision{
			{ID: d1, PublicHandle: "h1", State: "succeeded", Currency: "USD", CapturedMicros: 25_000},
			{ID: d2, PublicHandle: "h2", State: "failed", Currency: "USD"},
		}, []Execution{
			{DecisionID: d1, Provider: "bfl", State: "succeeded", JobID: "job-1", ChargedMicros: 25_000, Reported: true},
			{DecisionID: d2, Provider: "bfl", State: "failed", Reported: true},
		}, []Charge{
			{ID: "c1", JobID: "job-1", IdempotencyKey: vendorkey.For("bfl", d1), AmountMicros: 25_000},
		}}
	}
	a := agree()
	if r := Compare(a.ds, a.es, a.cs); len(r.Mismatches) != 0 || len(r.InFlight) != 0 || r.CapturedMicros != 25_000 || r.ChargedMicros != 25_000 ||
		!strings.HasSuffix(r.String(), "in agreement\n") {
		t.Fatalf("agreeing records: %s", r)
	}

	cases := []struct {
		name   string
		change func(r *records)
		want   string
	}{
		{"a second charge for one decision, found by its vendor key", func(r *records) {
			r.cs = append(r.cs, Charge{ID: "c2", JobID: "job-9", IdempotencyKey: vendorkey.For("bfl", d1), AmountMicros: 25_000})
		}, "charged 2 times"},
		{"a charge no execution explains", func(r *records) { r.cs = append(r.cs, Charge{ID: "c3", JobID: "job-x", AmountMicros: 3_000}) }, "belongs to no Gongbu execution"},
		{"a capture the provider never charged", func(r *records) { r.ds[1].CapturedMicros = 25_000 }, "Hubu captured 25000 micros, the provider charged 0"},
		{"a hold left on a settled decision", func(r *records) { r.ds[1].HeldMicros = 25_000 }, "still holds 25000 micros"},
		{"a charge Hubu released", func(r *records) { r.ds[0].CapturedMicros = 0 }, "Hubu captured 0 micros, the provider charged 25000"},
		{"an indeterminate execution", func(r *records) {
			r.ds[1].State, r.ds[1].HeldMicros = "executing", 25_000
			r.es[1].State, r.es[1].Reported = "indeterminate", false
		}, "is indeterminate at Gongbu"},
		{"an execution Hubu never issued", func(r *records) {
			r.es = append(r.es, Execution{DecisionID: uuid.New(), Provider: "bfl", State: "failed"})
		}, "has no decision in Hubu"},
		{"an outcome Hubu was never told", func(r *records) { r.ds[0].State, r.ds[0].CapturedMicros, r.ds[0].HeldMicros = "executing", 0, 25_000 }, "but Gongbu reported it succeeded"},
		{"a capture that differs from Gongbu's charge", func(r *records) { r.es[0].ChargedMicros = 20_000 }, "Hubu captured 25000 micros, Gongbu says the provider charged 20000"},
		{"a failure Hubu recorded as a success", func(r *records) { r.es[0].State = "failed" }, "is succeeded in Hubu but failed at Gongbu"},
		{"a decision in another currency than the provider's", func(r *records) { r.ds[0].Currency = "EUR" }, "is in EUR, but the provider charges micro-USD"},
		{"a decision Hubu accepted that Gongbu lost", func(r *records) {
			r.ds = append(r.ds, Decision{ID: uuid.New(), PublicHandle: "h3", State: "executing", Currency: "USD", HeldMicros: 25_000})
		}, "is executing in Hubu but Gongbu has no execution"},
		{"a decision in flight charged more than it holds", func(r *records) {
			d3 := uuid.New()
			r.ds = append(r.ds, Decision{ID: d3, PublicHandle: "h3", State: "executing", Currency: "USD", HeldMicros: 3_000})
			r.es = append(r.es, Execution{DecisionID: d3, Provider: "bfl", State: "submitted", JobID: "job-3"})
			r.cs = append(r.cs, Charge{ID: "c3", JobID: "job-3", AmountMicros: 25_000})
		}, "the provider charged 25000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := agree()
			c.change(a)
			r := Compare(a.ds, a.es, a.cs)
			if len(r.Mismatches) == 0 || !strings.Contains(strings.Join(r.Mismatches, "\n"), c.want) {
				t.Fatalf("mismatches %q, want one saying %q", r.Mismatches, c.want)
			}
		})
	}
}

// A live system has operations under way: they are listed as in flight, not as mismatches,
// and the records still agree.
func TestCompareInFlight(t *testing.T) {
	t.Parallel()
	handing, submitting, polling, reporting := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	ds := []Decision{
		{ID: handing, PublicHandle: "h1", State: "dispatching", Currency: "USD", HeldMicros: 25_000},
		{ID: submitting, PublicHandle: "h2", State: "dispatching", Currency: "USD", HeldMicros: 25_000},
		{ID: polling, PublicHandle: "h3", State: "executing", Currency: "USD", HeldMicros: 25_000},
		{ID: reporting, PublicHandle: "h4", State: "executing", Currency: "USD", HeldMicros: 25_000},
	}
	es := []Execution{
		{DecisionID: submitting, Provider: "bfl", State: "submitting"},
		{DecisionID: polling, Provider: "bfl", State: "submitted", JobID: "job-3"},
		{DecisionID: reporting, Provider: "bfl", State: "succeeded", JobID: "job-4", ChargedMicros: 25_000},
	}
	cs := []Charge{
		// Charged, answered with a 500: the submission is still being re-sent.
		{ID: "c2", JobID: "job-2", IdempotencyKey: vendorkey.For("bfl", submitting), AmountMicros: 25_000},
		{ID: "c3", JobID: "job-3", AmountMicros: 25_000},
		{ID: "c4", JobID: "job-4", AmountMicros: 25_000},
	}
	r := Compare(ds, es, cs)
	if len(r.Mismatches) != 0 || len(r.InFlight) != 4 || !strings.Contains(r.String(), "in agreement (4 still in flight)") {
		t.Fatalf("%s", r)
	}
	for _, want := range []string{"Hubu dispatching, not yet at Gongbu", "Hubu dispatching, Gongbu submitting, provider charged 25000",
		"Hubu executing, Gongbu submitted", "Gongbu succeeded and reporting it"} {
		if !strings.Contains(strings.Join(r.InFlight, "\n"), want) {
			t.Errorf("in flight %q, want one saying %q", r.InFlight, want)
		}
	}
}
