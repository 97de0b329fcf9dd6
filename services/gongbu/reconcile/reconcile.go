// Package reconcile compares the records of money: Hubu's decisions and captures, Gongbu's
// executions, and what the provider says of each execution's job, looked up by its id (the
// real API has no list of charges to read). Where a ledger of the provider's charges can be
// read (mockflux's), it is compared too: every charge must belong to one execution of one
// decision, and every decision must have captured exactly what it was charged.
//
// Operations still under way on a live system are listed as in flight, not as mismatches,
// as long as nothing about their money is wrong already and they are not older than the
// staleness bound: an operation in flight for longer than that is stuck, and a mismatch.
package reconcile

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// ProviderCurrency is the currency the provider charges in (BFL's credits are US cents;
// mockflux charges micro-USD). A decision in another currency cannot be compared with it.
const ProviderCurrency = "USD"

// The provider's job statuses (BFL's get_result) that reconciliation reads.
const (
	JobReady            = "Ready"
	JobPending          = "Pending"
	JobNotFound         = "Task not found"
	jobError            = "Error"
	jobRequestModerated = "Request Moderated"
	jobContentModerated = "Content Moderated"
)

// uncharged says the provider charges nothing for a job that ended so: BFL charges only a
// job that is Ready.
func uncharged(status string) bool {
	return status == jobError || status == jobRequestModerated || status == jobContentModerated
}

// Decision is Hubu's record of one decision.
type Decision struct {
	ID             uuid.UUID
	PublicHandle   string
	State          string
	Currency       string
	AmountMicros   int64
	HeldMicros     int64
	CapturedMicros int64
	// ProviderCostMicros is the provider's stated cost as Gongbu reported it at settlement.
	ProviderCostMicros *int64
	CreatedAt          time.Time
}

// Execution is Gongbu's record of one decision.
type Execution struct {
	DecisionID    uuid.UUID
	Provider      string
	State         string
	JobID         string
	PollingURL    string
	AmountMicros  int64
	ChargedMicros int64
	// ProviderCostMicros is what the provider stated the job costs when it took it.
	ProviderCostMicros *int64
	Reported           bool
	UpdatedAt          time.Time
}

func (e Execution) final() bool { return e.State == "succeeded" || e.State == "failed" }

// Job is what the provider said of an execution's job when asked.
type Job struct {
	// Status is the provider's status (JobReady, JobPending, …), empty when asking failed.
	Status string
	// Err is why asking failed.
	Err error
}

// Charge is one charge in a ledger of the provider's charges (mockflux's).
type Charge struct {
	ID             string
	JobID          string
	IdempotencyKey string
	AmountMicros   int64
}

// Records reads Hubu's and Gongbu's records.
type Records interface {
	Decisions(ctx context.Context) ([]Decision, error)
	Executions(ctx context.Context) ([]Execution, error)
}

// Provider looks jobs up at the provider (flux.Adapter).
type Provider interface {
	// Status is the provider's status of the job.
	Status(ctx context.Context, job gongbu.Job) (string, error)
	// Credits is the balance left at the provider, in micro-USD.
	Credits(ctx context.Context) (int64, error)
}

// Ledger reads the provider's charges, where the provider keeps a readable list (mockflux).
type Ledger interface {
	Charges(ctx context.Context) ([]Charge, error)
}

// Options say what Run reads besides Hubu's and Gongbu's records, and how.
type Options struct {
	// Provider, when set, is asked for the job of every execution not yet final and of every
	// one changed within Since.
	Provider Provider
	// Since bounds the provider lookups of final executions (the provider forgets jobs in
	// time, and a long history is many requests). Zero looks up every one.
	Since time.Duration
	// Ledger, when set, is compared charge by charge.
	Ledger Ledger
	// Stale is how long an operation may stay in flight before it is a mismatch. Zero: never.
	Stale time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// lookups is how many provider lookups run at once.
const lookups = 8

// Input is everything Compare compares.
type Input struct {
	Decisions  []Decision
	Executions []Execution
	// Jobs is what the provider said of the jobs looked up, by decision id.
	Jobs map[uuid.UUID]Job
	// Charges is the provider's ledger; nil when none was read (the real API has none).
	Charges []Charge
	// CreditsMicros is the provider's balance, where it was read; CreditsError why not.
	CreditsMicros *int64
	CreditsError  string
	Now           time.Time
	Stale         time.Duration
}

// Report is the outcome: every mismatch named, the operations still in flight, and the totals.
type Report struct {
	Decisions, Executions, JobsLookedUp int
	// Charges is the number of ledger charges; -1 when no ledger was read.
	Charges                       int
	CapturedMicros, ChargedMicros int64
	CreditsMicros                 *int64
	CreditsError                  string
	Mismatches                    []string
	// InFlight are operations still under way (being handed off, submitted, polled, or
	// waiting for their report to Hubu) whose records agree so far. They are information:
	// run the reconciliation again once they are done.
	InFlight []string
	// Unverified are final executions whose job the provider no longer knows (it forgets
	// jobs in time): Hubu's and Gongbu's records of them were compared, the provider's not.
	Unverified []string
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decisions %d, executions %d, provider jobs looked up %d", r.Decisions, r.Executions, r.JobsLookedUp)
	if r.Charges >= 0 {
		fmt.Fprintf(&b, ", provider charges %d", r.Charges)
	}
	fmt.Fprintf(&b, "; Hubu captured %d micros", r.CapturedMicros)
	if r.Charges >= 0 {
		fmt.Fprintf(&b, ", the provider charged %d micros", r.ChargedMicros)
	}
	if r.CreditsMicros != nil {
		fmt.Fprintf(&b, "; the provider's balance is %d micros", *r.CreditsMicros)
	} else if r.CreditsError != "" {
		fmt.Fprintf(&b, "; the provider's balance could not be read (%s)", r.CreditsError)
	}
	b.WriteString("\n")
	for _, u := range r.Unverified {
		b.WriteString("unverified: " + u + "\n")
	}
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

// Run reads the records, asks the provider about the jobs opts say, and compares.
func Run(ctx context.Context, records Records, opts Options) (Report, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	in := Input{Now: now(), Stale: opts.Stale}
	var err error
	if in.Decisions, err = records.Decisions(ctx); err != nil {
		return Report{}, fmt.Errorf("read decisions from Hubu: %w", err)
	}
	if in.Executions, err = records.Executions(ctx); err != nil {
		return Report{}, fmt.Errorf("read executions from Gongbu: %w", err)
	}
	if opts.Provider != nil {
		// The balance is information for the report, not a record compared: a provider that
		// cannot say it (an older mockflux) fails nothing.
		if credits, err := opts.Provider.Credits(ctx); err == nil {
			in.CreditsMicros = &credits
		} else {
			in.CreditsError = err.Error()
		}
		in.Jobs = lookUp(ctx, opts.Provider, in.Executions, func(e Execution) bool {
			return !e.final() || opts.Since == 0 || in.Now.Sub(e.UpdatedAt) <= opts.Since
		})
	}
	// The ledger is read last, so that a charge for any execution read above is in it.
	if opts.Ledger != nil {
		if in.Charges, err = opts.Ledger.Charges(ctx); err != nil {
			return Report{}, fmt.Errorf("read the provider's charges: %w", err)
		}
		if in.Charges == nil {
			in.Charges = []Charge{}
		}
	}
	return Compare(in), nil
}

// lookUp asks the provider for the job of each execution that has one and that want takes.
func lookUp(ctx context.Context, p Provider, es []Execution, want func(Execution) bool) map[uuid.UUID]Job {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		sem  = make(chan struct{}, lookups)
		jobs = map[uuid.UUID]Job{}
	)
	for _, e := range es {
		if e.JobID == "" || !want(e) {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			status, err := p.Status(ctx, gongbu.Job{ID: e.JobID, PollingURL: e.PollingURL})
			mu.Lock()
			jobs[e.DecisionID] = Job{Status: status, Err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return jobs
}

// Compare is the reconciliation itself.
func Compare(in Input) Report {
	r := Report{Decisions: len(in.Decisions), Executions: len(in.Executions), JobsLookedUp: len(in.Jobs), Charges: -1,
		CreditsMicros: in.CreditsMicros, CreditsError: in.CreditsError}
	var miss, flight, unverified []string
	add := func(format string, args ...any) { miss = append(miss, fmt.Sprintf(format, args...)) }
	ledger := in.Charges != nil

	byJob := map[string]uuid.UUID{}
	byKey := map[string]uuid.UUID{}
	execs := map[uuid.UUID]Execution{}
	for _, e := range in.Executions {
		execs[e.DecisionID] = e
		if e.JobID != "" {
			byJob[e.JobID] = e.DecisionID
		}
		byKey[vendorkey.For(e.Provider, e.DecisionID)] = e.DecisionID
	}
	charged := map[uuid.UUID]int64{}
	chargeCount := map[uuid.UUID]int{}
	if ledger {
		r.Charges = len(in.Charges)
	}
	for _, c := range in.Charges {
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
	// providerCharged says what the ledger shows charged, for messages.
	providerCharged := func(id uuid.UUID) string {
		if !ledger {
			return ""
		}
		return fmt.Sprintf(", provider charged %d micros", charged[id])
	}

	decisions := map[uuid.UUID]Decision{}
	for _, d := range in.Decisions {
		decisions[d.ID] = d
		r.CapturedMicros += d.CapturedMicros
		dec := fmt.Sprintf("decision %s (%s)", d.ID, d.PublicHandle)
		e, hasExec := execs[d.ID]
		job, lookedUp := in.Jobs[d.ID]
		final := d.State == "succeeded" || d.State == "failed"
		handedOff := d.State == "dispatching" || d.State == "executing"
		gongbuOpen := hasExec && (e.State == "submitting" || e.State == "submitted")
		gongbuFinal := hasExec && e.final()
		stuck := in.Stale > 0 && !d.CreatedAt.IsZero() && in.Now.Sub(d.CreatedAt) > in.Stale
		inFlight := func(format string, args ...any) {
			line := fmt.Sprintf(format, args...)
			if lookedUp && job.Err == nil {
				line += fmt.Sprintf(" (the provider says %s)", job.Status)
			}
			if stuck {
				add("%s has been in flight for %s, longer than %s: %s", dec, in.Now.Sub(d.CreatedAt).Round(time.Second), in.Stale, line)
				return
			}
			flight = append(flight, line)
		}
		switch {
		case d.Currency != ProviderCurrency && (hasExec || d.CapturedMicros > 0 || charged[d.ID] > 0):
			add("%s is in %s, but the provider charges in %s: compare it by hand", dec, d.Currency, ProviderCurrency)
		case chargeCount[d.ID] > 1:
			add("%s was charged %d times by the provider", dec, chargeCount[d.ID])
		case !hasExec && (d.CapturedMicros > 0 || charged[d.ID] > 0):
			add("%s captured %d micros in Hubu but Gongbu has no execution", dec, d.CapturedMicros)
		case hasExec && e.State == "indeterminate":
			add("%s is indeterminate at Gongbu (Hubu holds %d%s%s): an operator must resolve it (gongbu resolve)",
				dec, d.HeldMicros, providerCharged(d.ID), providerSays(e, job, lookedUp))
		case lookedUp && job.Err != nil:
			add("%s: could not ask the provider about job %s: %v", dec, e.JobID, job.Err)
		case final && d.HeldMicros != 0:
			add("%s is %s in Hubu but still holds %d micros", dec, d.State, d.HeldMicros)
		case final && ledger && d.CapturedMicros != charged[d.ID]:
			add("%s: Hubu captured %d micros, the provider charged %d", dec, d.CapturedMicros, charged[d.ID])
		case final && gongbuFinal && d.CapturedMicros != e.ChargedMicros:
			add("%s: Hubu captured %d micros, Gongbu says the provider charged %d", dec, d.CapturedMicros, e.ChargedMicros)
		case final && gongbuFinal && d.State != e.State:
			add("%s is %s in Hubu but %s at Gongbu", dec, d.State, e.State)
		case final && gongbuFinal && lookedUp && jobDisagrees(e, job.Status) != "":
			add("%s: %s", dec, jobDisagrees(e, job.Status))
		case final && gongbuFinal && costDisagrees(d, e) != "":
			add("%s: %s", dec, costDisagrees(d, e))
		case final && gongbuOpen:
			// Gongbu lost its record of a settled decision and runs it again under the same key.
			inFlight("%s: Hubu %s, Gongbu running it again (%s)", dec, d.State, e.State)
		case final:
			// Settled, and every record agrees (a final Gongbu execution not yet marked
			// reported is one whose report Hubu took just before this reading).
			if lookedUp && job.Status == JobNotFound {
				unverified = append(unverified, fmt.Sprintf("%s: the provider no longer knows job %s", dec, e.JobID))
			}
		case !final && hasExec && e.Reported:
			add("%s is %s in Hubu but Gongbu reported it %s", dec, d.State, e.State)
		case handedOff && (d.CapturedMicros > 0 || charged[d.ID] > d.HeldMicros):
			add("%s is %s in Hubu with %d micros captured and %d held, but the provider charged %d", dec, d.State, d.CapturedMicros, d.HeldMicros, charged[d.ID])
		case handedOff && gongbuFinal && lookedUp && jobDisagrees(e, job.Status) != "":
			add("%s: %s", dec, jobDisagrees(e, job.Status))
		case handedOff && gongbuOpen:
			inFlight("%s: Hubu %s, Gongbu %s%s", dec, d.State, e.State, providerCharged(d.ID))
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
	for _, e := range in.Executions {
		if _, ok := decisions[e.DecisionID]; !ok {
			add("Gongbu execution %s has no decision in Hubu", e.DecisionID)
		}
	}
	sort.Strings(miss)
	sort.Strings(flight)
	sort.Strings(unverified)
	r.Mismatches, r.InFlight, r.Unverified = miss, flight, unverified
	return r
}

// jobDisagrees says how Gongbu's final record of an execution contradicts the provider's
// status of its job, or "" when it does not.
func jobDisagrees(e Execution, status string) string {
	switch {
	case status == JobNotFound:
		return "" // forgotten by the provider: nothing to compare
	case status == JobReady && e.State == "failed" && e.ChargedMicros == 0:
		return fmt.Sprintf("Gongbu failed it without a charge, but the provider finished job %s (Ready, which it charges for)", e.JobID)
	case uncharged(status) && e.ChargedMicros > 0:
		return fmt.Sprintf("Gongbu charged %d micros for job %s, which the provider ended as %q (which it does not charge for)", e.ChargedMicros, e.JobID, status)
	case uncharged(status) && e.State == "succeeded":
		return fmt.Sprintf("Gongbu succeeded it, but the provider ended job %s as %q", e.JobID, status)
	case status != JobReady && !uncharged(status):
		return fmt.Sprintf("Gongbu %s it, but the provider says job %s is %q", e.State, e.JobID, status)
	}
	return ""
}

// costDisagrees says how a final execution's charge contradicts the cost the provider stated
// for its job, or "" when it does not: Gongbu charges the stated cost, capped at the hold.
func costDisagrees(d Decision, e Execution) string {
	if e.ProviderCostMicros == nil || e.ChargedMicros == 0 {
		return ""
	}
	cost := *e.ProviderCostMicros
	if want := min(cost, e.AmountMicros); e.ChargedMicros != want {
		return fmt.Sprintf("Gongbu charged %d micros, but the provider stated job %s costs %d (and the hold was %d)", e.ChargedMicros, e.JobID, cost, e.AmountMicros)
	}
	if d.ProviderCostMicros != nil && *d.ProviderCostMicros != cost {
		return fmt.Sprintf("Hubu recorded the provider's cost as %d micros, Gongbu as %d", *d.ProviderCostMicros, cost)
	}
	return ""
}

// providerSays is what the provider said of an execution's job, for a message.
func providerSays(e Execution, job Job, lookedUp bool) string {
	switch {
	case e.JobID == "":
		return "; no job id was recorded"
	case !lookedUp:
		return ""
	case job.Err != nil:
		return fmt.Sprintf("; could not ask the provider about job %s: %v", e.JobID, job.Err)
	case job.Status == JobReady:
		return fmt.Sprintf("; the provider says job %s is Ready, which it charges for", e.JobID)
	case uncharged(job.Status):
		return fmt.Sprintf("; the provider says job %s ended %q, which it does not charge for", e.JobID, job.Status)
	}
	return fmt.Sprintf("; the provider says job %s is %q", e.JobID, job.Status)
}
