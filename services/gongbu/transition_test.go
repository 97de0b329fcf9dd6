package gongbu

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Every (state, event, state) is tried: the legal moves, written out here apart from the table,
// pass; a write under a lease on an execution that is no longer open finds ErrLeaseLost, as its
// fenced statement does; anything else is refused.
func TestCheckMove(t *testing.T) {
	t.Parallel()
	legal := []string{
		"-accept->submitting",
		"submitting-claim->submitting", "submitting-submit->submitted", "submitting-finish->failed", "submitting-finish->indeterminate",
		"submitted-claim->submitted", "submitted-finish->succeeded", "submitted-finish->failed", "submitted-finish->indeterminate",
		"indeterminate-resolve->succeeded", "indeterminate-resolve->failed", "indeterminate-resolve->submitted",
		"succeeded-report->", "failed-report->",
	}
	states := []State{"", StateSubmitting, StateSubmitted, StateSucceeded, StateFailed, StateIndeterminate}
	for _, from := range states {
		for _, ev := range []Event{EventAccept, EventClaim, EventSubmit, EventFinish, EventResolve, EventReport} {
			for _, to := range states {
				move := fmt.Sprintf("%s-%s->%s", from, ev, to)
				err := CheckMove(from, ev, to)
				open := from == StateSubmitting || from == StateSubmitted
				switch {
				case slices.Contains(legal, move):
					if err != nil {
						t.Errorf("%s: %v", move, err)
					}
				case (ev == EventSubmit || ev == EventFinish) && !open:
					if !errors.Is(err, ErrLeaseLost) {
						t.Errorf("%s: %v, want the lease lost", move, err)
					}
				case err == nil || errors.Is(err, ErrLeaseLost):
					t.Errorf("%s: %v, want it refused", move, err)
				}
			}
		}
	}
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now, deadline := created.Add(time.Minute), created.Add(time.Hour)
	d := Decision{DecisionID: uuid.MustParse("7a0f7f0e-5d1c-4c55-9c55-2d0c3f6b9a01"), Tool: "generate_image", AmountMicros: 25_000, Currency: "USD"}
	str := func(s string) *string { return &s }
	i64 := func(n int64) *int64 { return &n }
	at := func(s State, reason *string) Execution {
		return Execution{Decision: d, VendorKey: "k", State: s, Error: reason, Attempts: 2, LeaseGeneration: 3, CreatedAt: created, UpdatedAt: created}
	}
	with := func(e Execution, f func(*Execution)) Execution { f(&e); return e }
	job := Job{ID: "job-1", PollingURL: "https://poll/1"}
	submit := func(e Execution) (Execution, error) { return e.Submit(job, deadline, now) }
	finish := func(o Outcome) func(Execution) (Execution, error) {
		return func(e Execution) (Execution, error) { return e.Finish(o, now) }
	}
	resolve := func(charged int64) func(Execution) (Execution, error) {
		return func(e Execution) (Execution, error) { return e.Resolve(charged, now) }
	}
	resume := func(j Job) func(Execution) (Execution, error) {
		return func(e Execution) (Execution, error) { return e.ResumeJob(j, deadline, now) }
	}
	notIndeterminate := func(s State) error {
		return Errorf(CodeInvalidArguments, "the execution of decision %s is %s, not indeterminate: only an indeterminate execution can be resolved", d.DecisionID, s)
	}
	badCharge := Errorf(CodeInvalidArguments, "the charge must be between 0 and the decision's authorized 25000 micros")
	refused := func(from, to State, ev Event) error {
		return fmt.Errorf("no transition of an execution from %q to %q on %s", from, to, ev)
	}
	unknown := "the provider call failed"
	for _, c := range []struct {
		name string
		from Execution
		move func(Execution) (Execution, error)
		want Execution
		err  error
	}{
		{"a hand-off accepted", Execution{}, func(Execution) (Execution, error) { return Accept(d, "k", now), nil },
			Execution{Decision: d, VendorKey: "k", State: StateSubmitting, CreatedAt: now, UpdatedAt: now}, nil},

		{"a job accepted", at(StateSubmitting, nil), submit, with(at(StateSubmitting, nil), func(e *Execution) {
			e.State, e.ProviderJobID, e.PollingURL, e.PollDeadline, e.UpdatedAt = StateSubmitted, str("job-1"), str("https://poll/1"), &deadline, now
		}), nil},
		{"a job recorded twice", at(StateSubmitted, nil), submit, Execution{}, refused(StateSubmitted, StateSubmitted, EventSubmit)},
		{"a job for a final execution", at(StateFailed, nil), submit, Execution{}, ErrLeaseLost},
		{"a job for an indeterminate execution", at(StateIndeterminate, nil), submit, Execution{}, ErrLeaseLost},

		{"a first submission refused", at(StateSubmitting, nil), finish(Failed("no", 0)), with(at(StateSubmitting, nil), func(e *Execution) {
			e.State, e.Error, e.ChargedMicros, e.UpdatedAt = StateFailed, str("no"), i64(0), now
		}), nil},
		{"a submission unknown", at(StateSubmitting, nil), finish(Indeterminate(unknown)), with(at(StateSubmitting, nil), func(e *Execution) {
			e.State, e.Error, e.UpdatedAt = StateIndeterminate, &unknown, now
		}), nil},
		{"a success without a job", at(StateSubmitting, nil), finish(Succeeded("https://x/a.png", 25_000)), Execution{},
			refused(StateSubmitting, StateSucceeded, EventFinish)},
		{"a job ready", at(StateSubmitted, nil), finish(Succeeded("https://x/a.png", 25_000)), with(at(StateSubmitted, nil), func(e *Execution) {
			e.State, e.ResultURL, e.ChargedMicros, e.UpdatedAt = StateSucceeded, str("https://x/a.png"), i64(25_000), now
		}), nil},
		{"a job failed", at(StateSubmitted, nil), finish(Failed("bad", 25_000)), with(at(StateSubmitted, nil), func(e *Execution) {
			e.State, e.Error, e.ChargedMicros, e.UpdatedAt = StateFailed, str("bad"), i64(25_000), now
		}), nil},
		{"a job lost", at(StateSubmitted, nil), finish(Indeterminate("lost")), with(at(StateSubmitted, nil), func(e *Execution) {
			e.State, e.Error, e.UpdatedAt = StateIndeterminate, str("lost"), now
		}), nil},
		{"an outcome that is no end", at(StateSubmitting, nil), finish(Outcome{State: StateSubmitted}), Execution{},
			refused(StateSubmitting, StateSubmitted, EventFinish)},
		{"a final execution finished again", at(StateSucceeded, nil), finish(Indeterminate("late")), Execution{}, ErrLeaseLost},
		{"an indeterminate execution finished", at(StateIndeterminate, nil), finish(Failed("late", 0)), Execution{}, ErrLeaseLost},

		{"resolved as charged", at(StateIndeterminate, &unknown), resolve(20_000), with(at(StateIndeterminate, nil), func(e *Execution) {
			e.State, e.ChargedMicros, e.ResolvedAt, e.UpdatedAt = StateSucceeded, i64(20_000), &now, now
			e.Error = str("the provider call failed; resolved by an operator: the provider charged 20000 micros")
		}), nil},
		{"resolved as charged in full", at(StateIndeterminate, nil), resolve(25_000), with(at(StateIndeterminate, nil), func(e *Execution) {
			e.State, e.ChargedMicros, e.ResolvedAt, e.UpdatedAt = StateSucceeded, i64(25_000), &now, now
			e.Error = str("resolved by an operator: the provider charged 25000 micros")
		}), nil},
		{"resolved as not charged", at(StateIndeterminate, &unknown), resolve(0), with(at(StateIndeterminate, nil), func(e *Execution) {
			e.State, e.ChargedMicros, e.ResolvedAt, e.UpdatedAt = StateFailed, i64(0), &now, now
			e.Error = str("the provider call failed; resolved by an operator: nothing was charged")
		}), nil},
		{"resolved above the authorized amount", at(StateIndeterminate, nil), resolve(25_001), Execution{}, badCharge},
		{"resolved with a negative charge", at(StateIndeterminate, nil), resolve(-1), Execution{}, badCharge},
		{"a submission resolved", at(StateSubmitting, nil), resolve(0), Execution{}, notIndeterminate(StateSubmitting)},
		{"a submitted job resolved", at(StateSubmitted, nil), resolve(-1), Execution{}, notIndeterminate(StateSubmitted)},
		{"a resolved execution resolved again", at(StateSucceeded, nil), resolve(25_000), Execution{}, notIndeterminate(StateSucceeded)},
		{"a failure resolved", at(StateFailed, nil), resolve(0), Execution{}, notIndeterminate(StateFailed)},

		{"given its job", at(StateIndeterminate, &unknown), resume(job), with(at(StateIndeterminate, nil), func(e *Execution) {
			e.State, e.ProviderJobID, e.PollingURL, e.PollDeadline, e.ResolvedAt, e.UpdatedAt = StateSubmitted, str("job-1"), str("https://poll/1"), &deadline, &now, now
		}), nil},
		{"given an empty job", at(StateIndeterminate, nil), resume(Job{}), Execution{}, Errorf(CodeInvalidArguments, "the job id is empty")},
		{"given a job besides its own", with(at(StateIndeterminate, nil), func(e *Execution) { e.ProviderJobID = str("job-0") }), resume(job), Execution{},
			Errorf(CodeInvalidArguments, "the execution of decision %s has a job of its own (job-0); only one whose job was never recorded can be given one", d.DecisionID)},
		{"a submission given a job", at(StateSubmitting, nil), resume(job), Execution{}, notIndeterminate(StateSubmitting)},
		{"a success given a job", at(StateSucceeded, nil), resume(job), Execution{}, notIndeterminate(StateSucceeded)},
	} {
		got, err := c.move(c.from)
		switch {
		case c.err == ErrLeaseLost && !errors.Is(err, ErrLeaseLost),
			c.err != nil && fmt.Sprint(err) != c.err.Error(),
			c.err == nil && err != nil:
			t.Errorf("%s: err %v, want %v", c.name, err, c.err)
		case ErrorCode(err) != ErrorCode(c.err):
			t.Errorf("%s: code %s, want %s", c.name, ErrorCode(err), ErrorCode(c.err))
		case !reflect.DeepEqual(got, c.want):
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// The Gongbu state diagram in docs/spend-lifecycle.md is drawn from the transition table.
// HUBU_UPDATE_DOCS=1 rewrites it.
func TestDiagram(t *testing.T) {
	const path = "../../docs/spend-lifecycle.md"
	const marker = "<!-- generated by services/gongbu: execution states; do not edit by hand -->\n"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, after, ok := strings.Cut(string(doc), marker)
	if !ok {
		t.Fatalf("%s has no line %q", path, marker)
	}
	end := strings.Index(after, "\n```\n") + len("\n```\n")
	if end < len("\n```\n") {
		end = 0
	}
	want := "```mermaid\n" + mermaid() + "```\n"
	if after[:end] == want {
		return
	}
	if os.Getenv("HUBU_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(before+marker+want+after[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the block after %q in %s is not the transition table's diagram; run with HUBU_UPDATE_DOCS=1, or write:\n%s", marker, path, want)
}

func mermaid() string {
	node := func(s State) string {
		if s == "" {
			return "[*]"
		}
		return string(s)
	}
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	for i, t := range transitions {
		if i > 0 && t.from != transitions[i-1].from {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "    %s --> %s: %s\n", node(t.from), node(t.to), t.why)
	}
	return b.String()
}

// A decision Gongbu has no row for is in doubt when Hubu saw it accepted, when it is no
// younger than the database's record, or when the epoch was not read at all: only a decision
// still dispatching and issued after the epoch began can have been submitted by nobody.
func TestPossiblySubmitted(t *testing.T) {
	t.Parallel()
	began := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	epoch := Epoch{ID: uuid.New(), BeganAt: began}
	for _, c := range []struct {
		name  string
		state string
		at    time.Time
		epoch Epoch
		doubt bool
	}{
		{"dispatching, issued after the epoch began", "dispatching", began.Add(time.Second), epoch, false},
		{"accepted by an executor", "executing", began.Add(time.Second), epoch, true},
		{"issued when the epoch began", "dispatching", began, epoch, true},
		{"issued before the epoch", "dispatching", began.Add(-time.Second), epoch, true},
		{"no epoch read", "dispatching", began.Add(time.Second), Epoch{}, true},
		{"an epoch without its start", "dispatching", began.Add(time.Second), Epoch{ID: epoch.ID}, true},
	} {
		doubt, why := Issued{State: c.state, IssuedAt: c.at}.PossiblySubmitted(c.epoch)
		if doubt != c.doubt || (doubt && why == "") {
			t.Errorf("%s: doubt %v (%q), want %v", c.name, doubt, why, c.doubt)
		}
	}
}
