package mockflux

import (
	"errors"
	"fmt"
	"time"
)

// Poll is a job's state as one poll of it sees it.
type Poll struct {
	Job Job
	// Ready says the job has ended: Ready, or (Job.Outcome) without a result.
	Ready bool
	// Progress, while pending, is the smaller of the share of its pending polls already made
	// and the share of its render time already past.
	Progress float64
	// ReadyAt is when the job became Ready (see Provider.Charges).
	ReadyAt time.Time
	// FirstReady is when a poll first answered Ready: a sample URL works for a while from
	// then, however long the job waited to be polled.
	FirstReady time.Time
}

// Poll counts one poll of the job and reports its state; ok is false for an unknown id. A job
// is Ready once its render time has passed and its pending polls are used up; every poll
// counts towards them, also one made while the job renders.
func (p *Provider) Poll(id string) (poll Poll, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.jobs[id]
	if !ok {
		return Poll{}, false
	}
	now := p.now().UTC()
	st.polls++
	if st.job.Outcome == OutcomeRequestModerated {
		// Flagged before processing: it never renders.
		return Poll{Job: st.job, Ready: true}, true
	}
	if st.polls == p.pendingPolls {
		st.renderBound = now.Before(st.job.RenderedAt)
	}
	if st.polls <= p.pendingPolls || now.Before(st.job.RenderedAt) {
		return Poll{Job: st.job, Progress: p.progress(st, now)}, true
	}
	if st.firstReady.IsZero() {
		st.firstReady = now
	}
	return Poll{Job: st.job, Ready: true, ReadyAt: readyAt(st, now), FirstReady: st.firstReady}, true
}

// progress is a pending job's progress: the smaller of its two shares, below 1.
func (p *Provider) progress(st *jobState, now time.Time) float64 {
	share := 1.0
	if p.pendingPolls > 0 {
		share = min(share, float64(st.polls-1)/float64(p.pendingPolls))
	}
	if total := st.job.RenderedAt.Sub(st.job.CreatedAt); total > 0 {
		share = min(share, float64(now.Sub(st.job.CreatedAt))/float64(total))
	}
	return max(share, 0)
}

// readyAt is when the job became Ready, zero while it is not known: its RenderedAt, once past,
// when its pending polls were used up before it (always without pending polls); otherwise,
// when polls held it back, the time of the first poll that answered Ready.
func readyAt(st *jobState, now time.Time) time.Time {
	if !st.renderBound {
		return st.firstReady
	}
	if now.Before(st.job.RenderedAt) {
		return time.Time{}
	}
	return st.job.RenderedAt
}

// PendingWebhooks returns the jobs whose webhook has no outcome yet, oldest first: after a
// restart with a data file, the ones to deliver again.
func (p *Provider) PendingWebhooks() []Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Job
	for _, c := range p.charges { // the charges keep the jobs' order
		if st := p.jobs[c.JobID]; st.job.Webhook.URL != "" && st.webhookOutcome == "" {
			out = append(out, st.job)
		}
	}
	return out
}

// RecordWebhook notes (and journals) how a job's webhook ended. A job's first outcome stands:
// a later one is ignored. An error means the outcome could not be journaled: it holds in
// memory, and a restart would deliver the webhook again.
func (p *Provider) RecordWebhook(jobID, outcome string) error {
	if outcome == "" {
		return errors.New("an empty webhook outcome")
	}
	p.mu.Lock()
	st, ok := p.jobs[jobID]
	if !ok || st.job.Webhook.URL == "" {
		p.mu.Unlock()
		return fmt.Errorf("job %q has no webhook", jobID)
	}
	first := st.webhookOutcome == ""
	if first {
		st.webhookOutcome = outcome
	}
	p.mu.Unlock()
	if !first || p.journal == nil {
		return nil
	}
	// Outside p.mu, so that submits and polls do not wait for this fsync; the job's own
	// record is already in the journal (a job is known only once it is), so this one follows it.
	return p.journal.Append(record{Type: recordWebhook, JobID: jobID, Outcome: outcome})
}
