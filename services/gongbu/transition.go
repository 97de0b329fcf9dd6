package gongbu

import (
	"errors"
	"fmt"
	"time"
)

// State is where an execution stands.
type State string

const (
	// StateSubmitting is recorded before the provider is called, so a crash is never silent.
	StateSubmitting State = "submitting"
	// StateSubmitted: the provider accepted the job; Gongbu polls it.
	StateSubmitted State = "submitted"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	// StateIndeterminate: the provider may have charged and Gongbu cannot find out. It is
	// never retried nor reported; Hubu keeps the hold until an operator resolves it
	// (`gongbu resolve`) as succeeded with what was charged, or failed with nothing charged.
	StateIndeterminate State = "indeterminate"
)

// Event is what moves an execution.
type Event string

const (
	EventAccept  Event = "accept"  // Hubu's hand-off is recorded, before any provider call
	EventClaim   Event = "claim"   // a worker takes over an open execution: a new lease generation
	EventSubmit  Event = "submit"  // the provider accepted the job
	EventFinish  Event = "finish"  // the outcome is known
	EventResolve Event = "resolve" // an operator's verdict on an indeterminate execution
	EventReport  Event = "report"  // Hubu has the outcome
)

// transition is one legal move of an execution: from "" is an execution not yet recorded, to
// "" one with nothing left to do.
type transition struct {
	from  State
	event Event
	to    State
	why   string // when it happens, as the diagram in docs/spend-lifecycle.md says
}

// transitions is Gongbu's execution state machine: the store writes no other move, and the
// diagram in docs/spend-lifecycle.md is drawn from it (TestDiagram).
var transitions = []transition{
	{"", EventAccept, StateSubmitting, "Hubu's hand-off accepted (row committed before any provider call)"},

	{StateSubmitting, EventClaim, StateSubmitting, "outcome unknown, provider honours keys (lease runs out, takeover resubmits under the same key)"},
	{StateSubmitting, EventSubmit, StateSubmitted, "provider accepted the job"},
	{StateSubmitting, EventFinish, StateFailed, "definite refusal of the decision's first submission (nothing charged)"},
	{StateSubmitting, EventFinish, StateIndeterminate, "provider ignores keys and the outcome is unknown or the decision possibly submitted before (then not submitted), refusal of a resubmission, over 10 takeovers or 30 min, no adapter"},

	{StateSubmitted, EventClaim, StateSubmitted, "job pending, poll failed, or a polling or sample URL on a host not allowed (looked at again by its worker, or by the background pass after --poll-interval under a new lease)"},
	{StateSubmitted, EventFinish, StateSucceeded, "job Ready (charged = decision amount)"},
	{StateSubmitted, EventFinish, StateFailed, "provider failed the job (charged = decision amount)"},
	{StateSubmitted, EventFinish, StateIndeterminate, "provider no longer knows the job, --poll-deadline passed, or no adapter"},

	{StateIndeterminate, EventResolve, StateSucceeded, "operator gongbu resolve --charged-micros N (resolved_at set)"},
	{StateIndeterminate, EventResolve, StateFailed, "operator gongbu resolve --not-charged (resolved_at set)"},
	{StateIndeterminate, EventResolve, StateSubmitted, "operator gongbu resolve --job-id JOB: the provider's job, from the log line of a record that failed (polled again)"},

	{StateSucceeded, EventReport, "", "reported to Hubu (settle)"},
	{StateFailed, EventReport, "", "reported to Hubu (settle failed, or release)"},
}

// ErrLeaseLost says a worker's write was refused because another worker claimed the execution
// (or it became final) meanwhile: the worker holding the lease now decides its outcome.
var ErrLeaseLost = errors.New("the execution's lease passed to another worker")

// CheckMove returns nil when ev takes an execution from from to to. A worker's write under its
// lease (submit, finish) on an execution no longer open finds ErrLeaseLost, as its fenced
// statement would.
func CheckMove(from State, ev Event, to State) error {
	for _, t := range transitions {
		if t.from == from && t.event == ev && t.to == to {
			return nil
		}
	}
	if (ev == EventSubmit || ev == EventFinish) && CheckMove(from, EventClaim, from) != nil {
		return ErrLeaseLost
	}
	return fmt.Errorf("no transition of an execution from %q to %q on %s", from, to, ev)
}

// Accept is the execution of a decision Hubu handed off, recorded before the provider is called.
func Accept(d Decision, vendorKey string, now time.Time) Execution {
	return Execution{Decision: d, VendorKey: vendorKey, State: StateSubmitting, CreatedAt: now, UpdatedAt: now}
}

// Submit is e once the provider accepted its job, to be polled until pollDeadline.
func (e Execution) Submit(job Job, pollDeadline, now time.Time) (Execution, error) {
	if err := CheckMove(e.State, EventSubmit, StateSubmitted); err != nil {
		return Execution{}, err
	}
	e.State, e.ProviderJobID, e.PollingURL, e.PollDeadline, e.UpdatedAt = StateSubmitted, &job.ID, &job.PollingURL, &pollDeadline, now
	e.ProviderCostMicros = job.CostMicros
	return e, nil
}

// Finish is e ended with the outcome o.
func (e Execution) Finish(o Outcome, now time.Time) (Execution, error) {
	if err := CheckMove(e.State, EventFinish, o.State); err != nil {
		return Execution{}, err
	}
	e.State, e.ResultURL, e.Error, e.ChargedMicros, e.UpdatedAt = o.State, o.ResultURL, o.Error, o.ChargedMicros, now
	if o.Image != nil {
		info := o.Image.Info()
		e.Image = &info
	}
	return e, nil
}

// Resolve is an operator's verdict on an indeterminate execution: charged > 0 (at most the
// authorized amount) makes it succeeded with that charge, 0 failed with nothing charged. The
// outcome is unreported, so a running Gongbu reports it to Hubu, which captures the charge
// and releases the rest of the hold.
func (e Execution) Resolve(charged int64, now time.Time) (Execution, error) {
	to, verdict := StateFailed, "resolved by an operator: nothing was charged"
	if charged > 0 {
		to, verdict = StateSucceeded, fmt.Sprintf("resolved by an operator: the provider charged %d micros", charged)
	}
	if CheckMove(e.State, EventResolve, to) != nil {
		return Execution{}, Errorf(CodeInvalidArguments,
			"the execution of decision %s is %s, not indeterminate: only an indeterminate execution can be resolved", e.DecisionID, e.State)
	}
	if charged < 0 || charged > e.AmountMicros {
		return Execution{}, Errorf(CodeInvalidArguments, "the charge must be between 0 and the decision's authorized %d micros", e.AmountMicros)
	}
	if e.Error != nil {
		verdict = *e.Error + "; " + verdict
	}
	e.State, e.ChargedMicros, e.Error, e.ResolvedAt, e.UpdatedAt, e.Reported = to, &charged, &verdict, &now, now, false
	return e, nil
}

// ResumeJob is an operator's verdict on an indeterminate execution that the provider did take:
// its job, which Gongbu could not record (the log line "could not record a submitted job"
// names it), is recorded, and the execution is submitted again, to be polled until
// pollDeadline, its lease free for the background pass to take at once. Only an execution
// that has no job of its own can be given one.
func (e Execution) ResumeJob(job Job, pollDeadline, now time.Time) (Execution, error) {
	if CheckMove(e.State, EventResolve, StateSubmitted) != nil {
		return Execution{}, Errorf(CodeInvalidArguments,
			"the execution of decision %s is %s, not indeterminate: only an indeterminate execution can be resolved", e.DecisionID, e.State)
	}
	if e.ProviderJobID != nil {
		return Execution{}, Errorf(CodeInvalidArguments,
			"the execution of decision %s has a job of its own (%s); only one whose job was never recorded can be given one", e.DecisionID, *e.ProviderJobID)
	}
	if job.ID == "" {
		return Execution{}, Errorf(CodeInvalidArguments, "the job id is empty")
	}
	e.State, e.ProviderJobID, e.PollingURL, e.PollDeadline, e.Error, e.ResolvedAt, e.UpdatedAt = StateSubmitted, &job.ID, &job.PollingURL, &pollDeadline, nil, &now, now
	return e, nil
}

// Outcome is how an open execution ends. Build one with Succeeded, Failed or Indeterminate, so
// only legal combinations of state, result and charge are written.
type Outcome struct {
	State         State
	ResultURL     *string
	Error         *string
	ChargedMicros *int64
	// Image is what a success delivered, when it could be downloaded (see WithImage).
	Image *Image
}

// Succeeded: the provider delivered the image at url and charged charged micros.
func Succeeded(url string, charged int64) Outcome {
	return Outcome{State: StateSucceeded, ResultURL: &url, ChargedMicros: &charged}
}

// Failed: the work failed; charged is what the provider charged for it (0 when its refusal
// proves nothing was charged).
func Failed(reason string, charged int64) Outcome {
	return Outcome{State: StateFailed, Error: &reason, ChargedMicros: &charged}
}

// Indeterminate: the provider may have charged and Gongbu cannot find out; the hold stays
// until an operator resolves it.
func Indeterminate(reason string) Outcome {
	return Outcome{State: StateIndeterminate, Error: &reason}
}
