package reconcile

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
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
	if r := Compare(Input{Decisions: a.ds, Executions: a.es, Charges: a.cs}); len(r.Mismatches) != 0 || len(r.InFlight) != 0 || r.CapturedMicros != 25_000 || r.ChargedMicros != 25_000 ||
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
		{"a decision in another currency than the provider's", func(r *records) { r.ds[0].Currency = "EUR" }, "is in EUR, but the provider charges in USD"},
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
			r := Compare(Input{Decisions: a.ds, Executions: a.es, Charges: a.cs})
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
	r := Compare(Input{Decisions: ds, Executions: es, Charges: cs})
	if len(r.Mismatches) != 0 || len(r.InFlight) != 4 || !strings.Contains(r.String(), "in agreement (4 still in flight)") {
		t.Fatalf("%s", r)
	}
	for _, want := range []string{"Hubu dispatching, not yet at Gongbu", "Hubu dispatching, Gongbu submitting, provider charged 25000 micros",
		"Hubu executing, Gongbu submitted", "Gongbu succeeded and reporting it"} {
		if !strings.Contains(strings.Join(r.InFlight, "\n"), want) {
			t.Errorf("in flight %q, want one saying %q", r.InFlight, want)
		}
	}
}

// Against the real API there is no ledger to read: each execution's job is looked up by its
// id, and the provider's status must agree with Gongbu's record and Hubu's capture.
func TestCompareWithTheProvidersJobs(t *testing.T) {
	t.Parallel()
	d1, d2 := uuid.New(), uuid.New()
	cost := int64(30_000)
	agree := func() Input {
		return Input{Decisions: []Decision{
			{ID: d1, PublicHandle: "h1", State: "succeeded", Currency: "USD", AmountMicros: 45_000, CapturedMicros: 30_000, ProviderCostMicros: &cost},
			{ID: d2, PublicHandle: "h2", State: "failed", Currency: "USD", AmountMicros: 30_000},
		}, Executions: []Execution{
			{DecisionID: d1, Provider: "bfl", State: "succeeded", JobID: "job-1", AmountMicros: 45_000, ChargedMicros: 30_000, ProviderCostMicros: &cost, Reported: true},
			{DecisionID: d2, Provider: "bfl", State: "failed", JobID: "job-2", AmountMicros: 30_000, Reported: true},
		}, Jobs: map[uuid.UUID]Job{d1: {Status: JobReady}, d2: {Status: "Content Moderated"}}}
	}
	if r := Compare(agree()); len(r.Mismatches) != 0 || len(r.InFlight) != 0 || r.JobsLookedUp != 2 ||
		strings.Contains(r.String(), "provider charges") || !strings.HasSuffix(r.String(), "in agreement\n") {
		t.Fatalf("agreeing records: %s", r)
	}
	cases := []struct {
		name   string
		change func(in *Input)
		want   string
	}{
		{"a failure the provider charged for", func(in *Input) { in.Jobs[d2] = Job{Status: JobReady} }, "Gongbu failed it without a charge, but the provider finished job job-2"},
		{"a success the provider did not charge for", func(in *Input) { in.Jobs[d1] = Job{Status: "Error"} }, `Gongbu charged 30000 micros for job job-1, which the provider ended as "Error"`},
		{"a final execution the provider still runs", func(in *Input) { in.Jobs[d1] = Job{Status: JobPending} }, `the provider says job job-1 is "Pending"`},
		{"a lookup that failed", func(in *Input) { in.Jobs[d1] = Job{Err: errors.New("status 401")} }, "could not ask the provider about job job-1: status 401"},
		{"a charge other than the stated cost", func(in *Input) {
			in.Decisions[0].CapturedMicros, in.Executions[0].ChargedMicros = 45_000, 45_000
		}, "Gongbu charged 45000 micros, but the provider stated job job-1 costs 30000"},
		{"Hubu and Gongbu recording different costs", func(in *Input) {
			other := int64(20_000)
			in.Decisions[0].ProviderCostMicros = &other
		}, "Hubu recorded the provider's cost as 20000 micros, Gongbu as 30000"},
		{"an indeterminate execution the provider finished", func(in *Input) {
			in.Decisions[1].State, in.Decisions[1].HeldMicros = "executing", 30_000
			in.Executions[1].State, in.Executions[1].Reported = "indeterminate", false
			in.Jobs[d2] = Job{Status: JobReady}
		}, "is indeterminate at Gongbu (Hubu holds 30000; the provider says job job-2 is Ready, which it charges for)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := agree()
			c.change(&in)
			r := Compare(in)
			if len(r.Mismatches) != 1 || !strings.Contains(r.Mismatches[0], c.want) {
				t.Fatalf("mismatches %q, want one saying %q", r.Mismatches, c.want)
			}
		})
	}

	// A cost above the hold is captured at the hold.
	in := agree()
	high := int64(60_000)
	in.Decisions[0].ProviderCostMicros, in.Executions[0].ProviderCostMicros = &high, &high
	in.Decisions[0].CapturedMicros, in.Executions[0].ChargedMicros = 45_000, 45_000
	if r := Compare(in); len(r.Mismatches) != 0 {
		t.Fatalf("a cost above the hold, captured at the hold: %s", r)
	}
	// A job the provider has forgotten is unverified, not a mismatch.
	in = agree()
	in.Jobs[d1] = Job{Status: JobNotFound}
	if r := Compare(in); len(r.Mismatches) != 0 || len(r.Unverified) != 1 || !strings.Contains(r.String(), "unverified: decision "+d1.String()) {
		t.Fatalf("a forgotten job: %s", r)
	}
}

// An operation in flight for longer than the staleness bound is stuck: a mismatch.
func TestCompareStale(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	polling := uuid.New()
	in := Input{Decisions: []Decision{
		{ID: polling, PublicHandle: "h1", State: "executing", Currency: "USD", HeldMicros: 25_000, CreatedAt: now.Add(-10 * time.Minute)},
	}, Executions: []Execution{
		{DecisionID: polling, Provider: "bfl", State: "submitted", JobID: "job-1"},
	}, Jobs: map[uuid.UUID]Job{polling: {Status: JobPending}}, Now: now, Stale: 30 * time.Minute}
	r := Compare(in)
	if len(r.Mismatches) != 0 || len(r.InFlight) != 1 || !strings.Contains(r.InFlight[0], "(the provider says Pending)") {
		t.Fatalf("ten minutes in flight: %s", r)
	}
	in.Now = now.Add(time.Hour)
	r = Compare(in)
	if len(r.Mismatches) != 1 || len(r.InFlight) != 0 || !strings.Contains(r.Mismatches[0], "has been in flight for 1h10m0s, longer than 30m0s") {
		t.Fatalf("seventy minutes in flight: %s", r)
	}
}

// fakeProvider answers each job id with a status and counts the lookups.
type fakeProvider struct {
	mu     sync.Mutex
	status map[string]string
	asked  []string
}

func (p *fakeProvider) Status(_ context.Context, job gongbu.Job) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, job.ID+" "+job.PollingURL)
	return p.status[job.ID], nil
}

func (p *fakeProvider) Credits(context.Context) (int64, error) { return 1_234_500, nil }

type fakeRecords struct {
	ds []Decision
	es []Execution
}

func (f fakeRecords) Decisions(context.Context) ([]Decision, error)   { return f.ds, nil }
func (f fakeRecords) Executions(context.Context) ([]Execution, error) { return f.es, nil }

// Run looks up every job not yet final, and the final ones changed within Since, each at its
// polling URL; and reports the provider's balance.
func TestRunLooksUpJobs(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	old, recent, open := uuid.New(), uuid.New(), uuid.New()
	rec := fakeRecords{[]Decision{
		{ID: old, PublicHandle: "h1", State: "succeeded", Currency: "USD", CapturedMicros: 10_000},
		{ID: recent, PublicHandle: "h2", State: "succeeded", Currency: "USD", CapturedMicros: 10_000},
		{ID: open, PublicHandle: "h3", State: "executing", Currency: "USD", HeldMicros: 10_000},
	}, []Execution{
		{DecisionID: old, Provider: "bfl", State: "succeeded", JobID: "j1", ChargedMicros: 10_000, Reported: true, UpdatedAt: now.Add(-48 * time.Hour)},
		{DecisionID: recent, Provider: "bfl", State: "succeeded", JobID: "j2", PollingURL: "https://api.eu2.bfl.ai/v1/get_result?id=j2", ChargedMicros: 10_000, Reported: true, UpdatedAt: now.Add(-time.Hour)},
		{DecisionID: open, Provider: "bfl", State: "submitted", JobID: "j3", UpdatedAt: now.Add(-72 * time.Hour)},
	}}
	p := &fakeProvider{status: map[string]string{"j1": JobReady, "j2": JobReady, "j3": JobPending}}
	r, err := Run(context.Background(), rec, Options{Provider: p, Since: 24 * time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(p.asked)
	if want := []string{"j2 https://api.eu2.bfl.ai/v1/get_result?id=j2", "j3 "}; !slices.Equal(p.asked, want) {
		t.Fatalf("asked the provider about %q, want %q", p.asked, want)
	}
	if len(r.Mismatches) != 0 || r.JobsLookedUp != 2 || !strings.Contains(r.String(), "the provider's balance is 1234500 micros") {
		t.Fatalf("%s", r)
	}
}
