// Package execution runs decisions: at most one provider call per decision, recorded as
// "submitting" before the call so that a crash is never silent; then polling with a
// deadline; then reporting the outcome to Hubu, which settles or releases the hold.
//
// Every open execution carries a lease. The worker that holds it is the only one acting on
// it; when a worker dies its lease runs out and Tick, in this or another process, takes it
// over: a submission is re-sent under the same idempotency key only when the provider
// honours keys, and otherwise becomes indeterminate, never a blind second charge.
//
// A provider's refusal proves that nothing was charged only when it answers a decision's
// first submission: any later one (a takeover, or a re-run after a record was lost) may follow
// a submission the provider charged for and answered with an error or not at all, and the
// refusal then says nothing of that charge. Such a refusal makes the execution indeterminate.
package execution

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/postgres"
)

// Defaults of the Service's optional settings.
const (
	DefaultMaxTakeovers   = 10
	DefaultSubmitDeadline = 30 * time.Minute
	DefaultCallTimeout    = 60 * time.Second
	DefaultFirstPoll      = 10 * time.Millisecond
)

// recordTimeout bounds each step around a provider call: recording the submission before it,
// and recording (and reporting) its answer after it, which gets time of its own so that a
// call that used up its bound is still recorded.
const recordTimeout = 30 * time.Second

// Service executes decisions.
type Service struct {
	Store     *postgres.Store
	Providers map[string]gongbu.Provider
	Authority gongbu.Authority
	Logger    *slog.Logger
	Now       func() time.Time
	// Lease is how long a worker owns an open execution before another may take it over.
	// It must be longer than SubmissionBound, or a submission in flight could be taken over.
	Lease time.Duration
	// PollInterval is how often the background pass (Tick) polls a job, and how long a worker
	// that watches a job it submitted holds it between two looks.
	PollInterval time.Duration
	// FirstPoll is the wait before the second look at a job its worker submitted (the first
	// is at once); each look that finds it pending doubles the wait, until the wait reaches
	// PollInterval and the background pass takes over. 0 means DefaultFirstPoll; negative
	// leaves every poll to the background pass (tests that drive Tick with a controllable
	// clock).
	FirstPoll time.Duration
	// PollDeadline is how long a job may stay pending before it becomes indeterminate.
	PollDeadline time.Duration
	// MaxTakeovers bounds how often a submission whose outcome stays unknown is re-sent under
	// its key (where the provider honours keys); once taken over more often it becomes
	// indeterminate. 0 means DefaultMaxTakeovers.
	MaxTakeovers int
	// SubmitDeadline is how long after it was recorded a submission may stay unknown before
	// it becomes indeterminate instead of being re-sent. 0 means DefaultSubmitDeadline.
	SubmitDeadline time.Duration
	// CallTimeout bounds one provider call of a submission (the adapter's own HTTP timeout
	// bounds it too; set this at least as long). 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// RecordPatience is how long a worker retries the record of a job the provider accepted
	// (see recordJob). 0 means DefaultRecordPatience.
	RecordPatience time.Duration
	// Metrics, when set, counts polls.
	Metrics *Metrics

	keys decisionKeys // Hubu's public keys for signed decisions

	mu       sync.Mutex
	inflight int           // Execute calls from their insert on
	draining bool          // Drain was called: no new execution starts
	idle     chan struct{} // closed when inflight drops to 0 while draining
	stop     chan struct{} // closed by Drain: watchers stop waiting for their next look
	traces   origins       // where each execution began, so that its later steps join its trace (tracing.go)
	// unrecorded are jobs the provider accepted whose record failed (jobrecord.go).
	unrecorded unrecordedJobs
	// watching are the jobs this process's workers watch, for the provider's notices (watchers.go).
	watching watchers
}

// SubmissionBound is the longest one submission can take, from recording it to recording
// its answer: a worker's Lease must be longer, and a shutdown waits this long for one.
func (s *Service) SubmissionBound() time.Duration {
	return recordTimeout + orDefault(s.CallTimeout, DefaultCallTimeout) + max(recordTimeout, orDefault(s.RecordPatience, DefaultRecordPatience))
}

// Drain stops new executions from starting (they are refused as unavailable) and waits until
// those in flight have recorded their outcome, or ctx ends. A server calls it after its HTTP
// server stopped and before it closes the database.
func (s *Service) Drain(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		close(s.stopping())
	}
	if s.inflight == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("executions still in flight: %w", ctx.Err())
	}
}

// stopping is closed once Drain is called. The caller holds s.mu.
func (s *Service) stopping() chan struct{} {
	if s.stop == nil {
		s.stop = make(chan struct{})
	}
	return s.stop
}

func (s *Service) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.inflight++
	return true
}

func (s *Service) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.inflight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// Get returns the execution of a decision.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (gongbu.Execution, error) {
	return s.Store.Get(ctx, id)
}

// orDefault is a setting's value, or def where it is not set (0 or less).
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
