package execution

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
)

// Once a provider accepted a job it has charged (or will), and the job's id is the only way to
// its result and to what it cost. A worker that cannot record it (a dropped connection, a
// Postgres restart or failover while the provider answered) must not let the id go with its
// memory: recordJob retries, logs the id with the execution when it still fails, and keeps it
// for this process's recovery (recoverSubmission), so the lease running out finds the job
// instead of calling the execution indeterminate.

// DefaultRecordPatience is how long a worker retries the record of a job by default: longer
// than a Postgres restart or a failover usually takes.
const DefaultRecordPatience = 20 * time.Second

// recordBackoff is the first wait between two tries of a record; it doubles up to recordBackoffMax.
const (
	recordBackoff    = 20 * time.Millisecond
	recordBackoffMax = 2 * time.Second
)

// recordJob records the job the provider accepted for exec, which this worker holds in
// submitting, retrying a failed write for RecordPatience. A try whose answer was lost but
// whose write committed is recognised by the job id it left. When the job could not be
// recorded the error says why; the job is then in the log line "could not record a submitted
// job" and, unless another worker holds the execution now, in s.unrecorded.
func (s *Service) recordJob(ctx context.Context, exec gongbu.Execution, job gongbu.Job) (gongbu.Execution, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(s.RecordPatience, DefaultRecordPatience))
	defer cancel()
	var err error
	for wait := recordBackoff; ; wait = min(2*wait, recordBackoffMax) {
		var next gongbu.Execution
		now := s.Now()
		nextPoll := now
		if s.FirstPoll >= 0 {
			// A worker that watches its job keeps the lease for a poll interval; should it die,
			// the background pass takes the job over when the lease runs out. Without a
			// watcher, the background pass polls it from now on.
			nextPoll = now.Add(s.PollInterval)
		}
		next, err = s.Store.MarkSubmitted(ctx, exec, job, now.Add(s.PollDeadline), nextPoll, now)
		if err == nil {
			s.unrecorded.forget(exec.DecisionID)
			return next, nil
		}
		if errors.Is(err, gongbu.ErrLeaseLost) {
			if cur, getErr := s.Store.Get(ctx, exec.DecisionID); getErr == nil && cur.ProviderJobID != nil && *cur.ProviderJobID == job.ID {
				s.unrecorded.forget(exec.DecisionID)
				return cur, nil // an earlier try committed; its answer was lost
			}
			break // another worker holds the execution: it decides, with this log line to go by
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
			continue
		}
		break
	}
	if !errors.Is(err, gongbu.ErrLeaseLost) {
		s.unrecorded.keep(exec.DecisionID, job)
	}
	s.logger().ErrorContext(ctx, "could not record a submitted job; the provider has it, so its id is kept here for recovery "+
		"(`gongbu resolve --decision ID --job-id JOB --polling-url URL` should the execution become indeterminate)",
		"decision_id", exec.DecisionID, "public_handle", exec.PublicHandle, "provider", exec.Scope.Provider,
		"job_id", job.ID, "polling_url", job.PollingURL, "err", err)
	return gongbu.Execution{}, err
}

// unrecordedJobs are the jobs a provider accepted that this process could not record: by
// decision, until a recovery records them.
type unrecordedJobs struct {
	mu   sync.Mutex
	jobs map[uuid.UUID]gongbu.Job
}

func (u *unrecordedJobs) keep(id uuid.UUID, job gongbu.Job) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.jobs == nil {
		u.jobs = map[uuid.UUID]gongbu.Job{}
	}
	u.jobs[id] = job
}

func (u *unrecordedJobs) forget(id uuid.UUID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.jobs, id)
}

func (u *unrecordedJobs) find(id uuid.UUID) (gongbu.Job, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	job, ok := u.jobs[id]
	return job, ok
}
