// Package reconcile compares the three records of money: Hubu's captures, Gongbu's
// executions and the provider's charges. Every charge must belong to one execution of one
// decision, and every decision must have captured exactly what the provider charged for it
// and what Gongbu says it charged. Operations still under way on a live system are listed as
// in flight, not as mismatches, as long as nothing about their money is wrong already.
package reconcile

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// ProviderCurrency is the currency of the provider's charge ledger (mockflux charges
// micro-USD). A decision in another currency cannot be compared with it.
const ProviderCurrency = "USD"

// Decision is Hubu's record of one decision.
type Decision struct {
	ID             uuid.UUID
	PublicHandle   string
	State          string
	Currency       string
	HeldMicros     int64
	CapturedMicros int64
}

// Execution is Gongbu's record of one decision.
type Execution struct {
	DecisionID    uuid.UUID
	Provider      string
	State         string
	JobID         string
	ChargedMicros int64
	Reported      bool
}

// Charge is one charge in the provider's ledger.
type Charge struct {
	ID             string
	JobID          string
	IdempotencyKey string
	AmountMicros   int64
}

// Sources reads the three records.
type Sources interface {
	Decisions(ctx context.Context) ([]Decision, error)
	Executions(ctx context.Context) ([]Execution, error)
	Charges(ctx context.Context) ([]Charge, error)
}

// Report is the outcome: every mismatch named, the operations still in flight, and the totals.
type Report struct {
	Decisions, Executions, Charges int
	CapturedMicros, ChargedMicros  int64
	Mismatches                     []string
	// InFlight are operations still under way (being handed off, submitted, polled, or
	// waiting for their report to Hubu) whose records agree so far. They are information:
	// run the reconciliation again once they are done.
	InFlight []string
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decisions %d, executions %d, provider charges %d; Hubu captured %d micros, the provider charged %d micros\n",
		r.Decisions, r.Executions, r.Charges, r.CapturedMicros, r.ChargedMicros)
	for _, f := range r.InFlight {
		b.WriteString("in flight: " + f + "\n")
	}
	if len(r.Mismatches) == 0 {
		if len(r.InFlight) > 0 {
			fmt.Fprintf(&b, "in agreement (%d still in flight)\n", len(r.InFlight))
		} else {
			b.WriteString("in agreement\n")
		}
	}
	for _, m := range r.Mismatches {
		b.WriteString("MISMATCH: " + m + "\n")
	}
	return b.String()
}

// Run reads the sources and compares them.
func Run(ctx context.Context, src Sources) (Report, error) {
	ds, err := src.Decisions(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("read decisions from Hubu: %w", err)
	}
	es, err := src.Executions(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("read executions from Gongbu: %w", err)
	}
	cs, err := src.Charges(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("read the provider charges: %w", err)
	}
	return Compare(ds, es, cs), nil
}

// Compare is the reconciliation itself.
func Compare(ds []Decision, es []Execution, cs []Charge) Report {
	r := Report{Decisions: len(ds), Executions: len(es), Charges: len(cs)}
	var miss, flight []string
	add := func(format string, args ...any) { miss = append(miss, fmt.Sprintf(format, args...)) }
	inFlight := func(format string, args ...any) { flight = append(flight, fmt.Sprintf(format, args...)) }

	byJob := map[string]uuid.UUID{}
	byKey := map[string]uuid.UUID{}
	execs := map[uuid.UUID]Execution{}
	for _, e := range es {
		execs[e.DecisionID] = e
		if e.JobID != "" {
			byJob[e.JobID] = e.DecisionID
		}
		byKey[vendorkey.For(e.Provider, e.DecisionID)] = e.DecisionID
	}
	charged := map[uuid.UUID]int64{}
	chargeCount := map[uuid.UUID]int{}
	for _, c := range cs {
		r.ChargedMicros += c.AmountMicros
		id, ok := byJob[c.JobID]
		if !ok && c.IdempotencyKey != "" {
			id, ok = byKey[c.IdempotencyKey]
		}
		if !ok {
			add("provider charge %s (job %s, %d micros) belongs to no Gongbu execution", c.ID, c.JobID, c.AmountMicros)
			continue
		}
		charged[id] += c.AmountMicros
		chargeCount[id]++
	}

	decisions := map[uuid.UUID]Decision{}
	for _, d := range ds {
		decisions[d.ID] = d
		r.CapturedMicros += d.CapturedMicros
		dec := fmt.Sprintf("decision %s (%s)", d.ID, d.PublicHandle)
		e, hasExec := execs[d.ID]
		final := d.State == "succeeded" || d.State == "failed"
		handedOff := d.State == "dispatching" || d.State == "executing"
		gongbuOpen := hasExec && (e.State == "submitting" || e.State == "submitted")
		gongbuFinal := hasExec && (e.State == "succeeded" || e.State == "failed")
		switch {
		case d.Currency != ProviderCurrency && (hasExec || d.CapturedMicros > 0 || charged[d.ID] > 0):
			add("%s is in %s, but the provider charges micro-%s: compare it by hand", dec, d.Currency, ProviderCurrency)
		case chargeCount[d.ID] > 1:
			add("%s was charged %d times by the provider", dec, chargeCount[d.ID])
		case !hasExec && (d.CapturedMicros > 0 || charged[d.ID] > 0):
			add("%s captured %d micros in Hubu but Gongbu has no execution", dec, d.CapturedMicros)
		case hasExec && e.State == "indeterminate":
			add("%s is indeterminate at Gongbu (provider charged %d micros, Hubu holds %d): an operator must resolve it (gongbu resolve)", dec, charged[d.ID], d.HeldMicros)
		case final && d.HeldMicros != 0:
			add("%s is %s in Hubu but still holds %d micros", dec, d.State, d.HeldMicros)
		case final && d.CapturedMicros != charged[d.ID]:
			add("%s: Hubu captured %d micros, the provider charged %d", dec, d.CapturedMicros, charged[d.ID])
		case final && gongbuFinal && d.CapturedMicros != e.ChargedMicros:
			add("%s: Hubu captured %d micros, Gongbu says the provider charged %d", dec, d.CapturedMicros, e.ChargedMicros)
		case final && gongbuFinal && d.State != e.State:
			add("%s is %s in Hubu but %s at Gongbu", dec, d.State, e.State)
		case final && gongbuOpen:
			// Gongbu lost its record of a settled decision and runs it again under the same key.
			inFlight("%s: Hubu %s, Gongbu running it again (%s)", dec, d.State, e.State)
		case final:
			// Settled, and every record agrees (a final Gongbu execution not yet marked
			// reported is one whose report Hubu took just before this reading).
		case !final && hasExec && e.Reported:
			add("%s is %s in Hubu but Gongbu reported it %s", dec, d.State, e.State)
		case handedOff && (d.CapturedMicros > 0 || charged[d.ID] > d.HeldMicros):
			add("%s is %s in Hubu with %d micros captured and %d held, but the provider charged %d", dec, d.State, d.CapturedMicros, d.HeldMicros, charged[d.ID])
		case handedOff && gongbuOpen:
			inFlight("%s: Hubu %s, Gongbu %s, provider charged %d micros", dec, d.State, e.State, charged[d.ID])
		case handedOff && gongbuFinal:
			inFlight("%s: Hubu %s, Gongbu %s and reporting it", dec, d.State, e.State)
		case d.State == "dispatching" && !hasExec:
			inFlight("%s: Hubu dispatching, not yet at Gongbu", dec)
		case d.State == "executing" && !hasExec:
			add("%s is executing in Hubu but Gongbu has no execution of it", dec)
		case hasExec:
			add("%s is %s in Hubu but Gongbu has an execution (%s)", dec, d.State, e.State)
		}
	}
	for _, e := range es {
		if _, ok := decisions[e.DecisionID]; !ok {
			add("Gongbu execution %s has no decision in Hubu", e.DecisionID)
		}
	}
	sort.Strings(miss)
	sort.Strings(flight)
	r.Mismatches, r.InFlight = miss, flight
	return r
}

// HTTPSources reads the records over the services' generated clients.
type HTTPSources struct {
	hubu   *hubuapi.ClientWithResponses
	gongbu *gongbuapi.ClientWithResponses
	flux   *bflapi.ClientWithResponses
}

// NewSources returns sources for a stack: Hubu with a service token, Gongbu with the token it
// accepts from Hubu, and mockflux's charge ledger.
func NewSources(hubuURL, hubuToken, gongbuURL, gongbuToken, fluxURL string, hc *http.Client) (*HTTPSources, error) {
	auth := func(token string) func(context.Context, *http.Request) error {
		return func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}
	}
	h, err := hubuapi.NewClientWithResponses(hubuURL, hubuapi.WithHTTPClient(hc), hubuapi.WithRequestEditorFn(auth(hubuToken)))
	if err != nil {
		return nil, err
	}
	g, err := gongbuapi.NewClientWithResponses(gongbuURL, gongbuapi.WithHTTPClient(hc), gongbuapi.WithRequestEditorFn(auth(gongbuToken)))
	if err != nil {
		return nil, err
	}
	f, err := bflapi.NewClientWithResponses(fluxURL, bflapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return &HTTPSources{hubu: h, gongbu: g, flux: f}, nil
}

// Decisions reads Hubu's decisions.
func (s *HTTPSources) Decisions(ctx context.Context) ([]Decision, error) {
	resp, err := s.hubu.ListDecisionsWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("status %d", resp.StatusCode())
	}
	out := make([]Decision, 0, len(resp.JSON200.Decisions))
	for _, d := range resp.JSON200.Decisions {
		out = append(out, Decision{
			ID: d.DecisionId, PublicHandle: d.PublicHandle, State: string(d.State), Currency: d.Currency,
			HeldMicros: d.HeldMicros, CapturedMicros: d.CapturedMicros,
		})
	}
	return out, nil
}

// Executions reads Gongbu's executions.
func (s *HTTPSources) Executions(ctx context.Context) ([]Execution, error) {
	resp, err := s.gongbu.ListExecutionsWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("status %d", resp.StatusCode())
	}
	out := make([]Execution, 0, len(resp.JSON200.Executions))
	for _, e := range resp.JSON200.Executions {
		out = append(out, Execution{
			DecisionID: e.DecisionId, Provider: e.Scope.Provider, State: string(e.State),
			JobID: deref(e.ProviderJobId), ChargedMicros: deref(e.ChargedMicros), Reported: deref(e.Reported),
		})
	}
	return out, nil
}

// Charges reads mockflux's charge ledger.
func (s *HTTPSources) Charges(ctx context.Context) ([]Charge, error) {
	resp, err := s.flux.ListChargesWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("status %d", resp.StatusCode())
	}
	out := make([]Charge, 0, len(resp.JSON200.Charges))
	for _, c := range resp.JSON200.Charges {
		if deref(c.Refunded) {
			continue // the task ended without a result: the provider gave the charge back
		}
		out = append(out, Charge{ID: c.Id, JobID: c.JobId, AmountMicros: c.AmountMicros, IdempotencyKey: deref(c.IdempotencyKey)})
	}
	return out, nil
}

// deref is *p, or the zero value for an absent optional field.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
