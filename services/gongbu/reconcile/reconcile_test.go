package reconcile

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu/vendorkey"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	d1, d2 := uuid.New(), uuid.New()
	agree := func() ([]Decision, []Execution, []Charge) {
		return []Decision{
				{ID: d1, PublicHandle: "h1", State: "succeeded", CapturedMicros: 25_000},
				{ID: d2, PublicHandle: "h2", State: "failed"},
			}, []Execution{
				{DecisionID: d1, Provider: "bfl", State: "succeeded", JobID: "job-1", ChargedMicros: 25_000, Reported: true},
				{DecisionID: d2, Provider: "bfl", State: "failed", Reported: true},
			}, []Charge{
				{ID: "c1", JobID: "job-1", IdempotencyKey: vendorkey.For("bfl", d1), AmountMicros: 25_000},
			}
	}
	ds, es, cs := agree()
	if r := Compare(ds, es, cs); len(r.Mismatches) != 0 || r.CapturedMicros != 25_000 || r.ChargedMicros != 25_000 {
		t.Fatalf("agreeing records: %s", r)
	}

	cases := []struct {
		name   string
		change func(ds []Decision, es []Execution, cs []Charge) ([]Decision, []Execution, []Charge)
		want   string
	}{
		{"a second charge for one decision, found by its vendor key", func(ds []Decision, es []Execution, cs []Charge) ([]Decision, []Execution, []Charge) {
			return ds, es, append(cs, Charge{ID: "c2", JobID: "job-9", IdempotencyKey: vendorkey.For("bfl", d1), AmountMicros: 25_000})
		}, "charged 2 times"},
		{"a charge no execution explains", func(ds []Decision, es []Execution, cs []Charge) ([]Decision, []Execution, []Charge) {
			return ds, es, append(cs, Charge{ID: "c3", JobID: "job-x", AmountMicros: 3_000})
		}, "belongs to no Gongbu execution"},
		{"a capture the provider never charged", func(ds []Decision, es []Execution, cs []Charge) ([]Decision, []Execution, []Charge) {
			ds[1].CapturedMicros = 25_000
			return ds, es, cs
		}, "Hubu captured 25000 micros, the provider charged 0"},
		{"a charge Hubu released", func(ds []Decision, es []Execution, cs []Charge) ([]Decision, []Execution, []Charge) {
			ds[0].CapturedMicros = 0
			return ds, es, cs
		}, "Hubu captured 0 micros, the provider charged 25000"},
		{"an indeterminate execution", func(ds []Decision, es []Execution, cs []Charge) ([]Decision, []Execution, []Charge) {
			ds[1].State, ds[1].HeldMicros = "executing", 25_000
			es[1].State, es[1].Reported = "indeterminate", false
			return ds, es, cs
		}, "is indeterminate at Gongbu"},
		{"an execution Hubu never issued", func(ds []Decision, es []Execution, cs []Charge) ([]Decision, []Execution, []Charge) {
			return ds, append(es, Execution{DecisionID: uuid.New(), Provider: "bfl", State: "failed"}), cs
		}, "has no decision in Hubu"},
		{"an outcome Hubu was never told", func(ds []Decision, es []Execution, cs []Charge) ([]Decision, []Execution, []Charge) {
			ds[0].State, ds[0].CapturedMicros, ds[0].HeldMicros = "executing", 0, 25_000
			return ds, es, cs
		}, "but Gongbu reported it succeeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds, es, cs := c.change(agree())
			r := Compare(ds, es, cs)
			if len(r.Mismatches) == 0 || !strings.Contains(strings.Join(r.Mismatches, "\n"), c.want) {
				t.Fatalf("mismatches %q, want one saying %q", r.Mismatches, c.want)
			}
		})
	}
}
