package mockflux

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"hubu.dev/hubu/services/mockflux/journal"
)

// MaxIdempotencyKey is the longest Idempotency-Key accepted, in bytes.
const MaxIdempotencyKey = 255

// Options configure a Provider. The zero value keeps everything in memory, renders every
// job at once, reports it Ready at its first poll, ignores idempotency keys as the real API
// does, has no limit of credits or concurrency, and uses the wall clock.
type Options struct {
	// HonoursIdempotency makes the provider honour an Idempotency-Key like a payment API (the
	// real API documents none): for the tests of a provider that does.
	HonoursIdempotency bool
	// CreditsMicros is the account's balance at start, in micro-US-dollars (a credit is 10,000);
	// a submit that costs more than is left answers 402. 0 is no limit. The balance is what is
	// left after every charge the journal holds, refunds given back.
	CreditsMicros int64
	// Concurrency bounds the tasks rendering at once (BFL: 24, and 6 for flux-kontext-max); a
	// submit beyond it answers 429. 0 is no limit.
	Concurrency int
	// DataFile, when set, is the journal every job and charge is appended (and fsynced) to
	// before a submit is answered, and every webhook outcome once known; replayed at Open.
	DataFile string
	// PendingPolls is how many polls of a job answer Pending before it can be Ready.
	PendingPolls int
	// RenderTime is how long a job takes: it is Ready no sooner than RenderTime after it was
	// accepted (and its pending polls used up), and its webhook is due then.
	RenderTime time.Duration
	// Now is the clock.
	Now func() time.Time
}

// Provider is the mock's bookkeeping: jobs, their idempotency keys, their charges and
// whether their webhooks were dealt with. It is safe for concurrent use; submits are
// serialised, so a key can never be charged twice.
type Provider struct {
	now          func() time.Time
	pendingPolls int
	renderTime   time.Duration
	honours      bool
	credits      int64 // the balance at start; 0 is no limit
	concurrency  int
	journal      *journal.File

	mu      sync.Mutex
	jobs    map[string]*jobState
	byKey   map[string]string // idempotency key → job id
	charges []Charge
	micros  int64 // the sum of charges
}

// jobState is a job and what polls and webhooks did to it. Only the job and its webhook
// outcome are journaled; polls start again after a restart, as a client's would.
type jobState struct {
	job   Job
	polls int
	// renderBound is true when the job's pending polls were used up before it rendered (or
	// there are none): its render time, not a poll, is then what made it Ready.
	renderBound bool
	// firstReady is when a poll first answered Ready; zero until then.
	firstReady time.Time
	// webhookOutcome is how the job's webhook ended (delivered, failed, dropped); empty
	// while it is due or under way, and for a job without one.
	webhookOutcome string
}

// record is one journal line. A "submit" record holds a job and the charge for it, written
// together so a charge never exists without its job or the other way round; a "webhook"
// record says how a job's webhook ended, so that a restart delivers only the ones that never
// were.
type record struct {
	Type    string `json:"type"`
	Job     Job    `json:"job,omitzero"`
	Charge  Charge `json:"charge,omitzero"`
	JobID   string `json:"job_id,omitempty"`
	Outcome string `json:"outcome,omitempty"`
}

const (
	recordSubmit  = "submit"
	recordWebhook = "webhook"
)

// Open returns a Provider, replaying the data file's journal if there is one.
func Open(opts Options) (*Provider, error) {
	if opts.PendingPolls < 0 {
		return nil, errors.New("PendingPolls must not be negative")
	}
	if opts.RenderTime < 0 {
		return nil, errors.New("RenderTime must not be negative")
	}
	if opts.CreditsMicros < 0 || opts.Concurrency < 0 {
		return nil, errors.New("CreditsMicros and Concurrency must not be negative")
	}
	p := &Provider{
		now:          opts.Now,
		pendingPolls: opts.PendingPolls,
		renderTime:   opts.RenderTime,
		honours:      opts.HonoursIdempotency,
		credits:      opts.CreditsMicros,
		concurrency:  opts.Concurrency,
		jobs:         make(map[string]*jobState),
		byKey:        make(map[string]string),
	}
	if p.now == nil {
		p.now = time.Now
	}
	if opts.DataFile == "" {
		return p, nil
	}
	j, lines, err := journal.Open(opts.DataFile)
	if err != nil {
		return nil, err
	}
	for i, line := range lines {
		if err := p.replay(line); err != nil {
			j.Close()
			return nil, fmt.Errorf("%s: record %d: %v", opts.DataFile, i+1, err)
		}
	}
	p.journal = j
	return p, nil
}

func (p *Provider) replay(line json.RawMessage) error {
	var rec record
	if err := json.Unmarshal(line, &rec); err != nil {
		return err
	}
	switch rec.Type {
	case recordSubmit:
		if rec.Job.ID == "" || rec.Charge.JobID != rec.Job.ID {
			return errors.New("a charge that does not belong to its job")
		}
		if _, dup := p.jobs[rec.Job.ID]; dup {
			return fmt.Errorf("job %s recorded twice", rec.Job.ID)
		}
		if rec.Job.RenderedAt.IsZero() {
			rec.Job.RenderedAt = rec.Job.CreatedAt
		}
		p.apply(rec)
	case recordWebhook:
		st, ok := p.jobs[rec.JobID]
		switch {
		case !ok:
			return fmt.Errorf("a webhook outcome for job %q, which is not recorded before it", rec.JobID)
		case st.job.Webhook.URL == "":
			return fmt.Errorf("a webhook outcome for job %s, which has no webhook", rec.JobID)
		case st.webhookOutcome != "":
			return fmt.Errorf("job %s's webhook outcome recorded twice", rec.JobID)
		case rec.Outcome == "":
			return fmt.Errorf("job %s's webhook outcome is empty", rec.JobID)
		}
		st.webhookOutcome = rec.Outcome
	default:
		return fmt.Errorf("unknown record type %q", rec.Type)
	}
	return nil
}

func (p *Provider) apply(rec record) {
	p.jobs[rec.Job.ID] = &jobState{job: rec.Job, renderBound: p.pendingPolls == 0}
	if rec.Job.IdempotencyKey != "" {
		if _, taken := p.byKey[rec.Job.IdempotencyKey]; !taken {
			p.byKey[rec.Job.IdempotencyKey] = rec.Job.ID
		}
	}
	p.charges = append(p.charges, rec.Charge)
	if !rec.Charge.Refunded {
		p.micros += rec.Charge.AmountMicros
	}
}

// Ready reports why the provider cannot take charges: its journal refuses appends after a
// write it could not roll back, so every submit would fail. nil when it can.
func (p *Provider) Ready() error {
	if p.journal == nil {
		return nil
	}
	return p.journal.Err()
}

// Close closes the journal.
func (p *Provider) Close() error {
	if p.journal == nil {
		return nil
	}
	return p.journal.Close()
}

// HonoursIdempotency says whether the provider honours Idempotency-Key (Options).
func (p *Provider) HonoursIdempotency() bool { return p.honours }

// Credits is the balance left, in micros; ok is false when the provider has no limit.
func (p *Provider) Credits() (micros int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.credits - p.micros, p.credits > 0
}

// Job returns a job by id without counting a poll.
func (p *Provider) Job(id string) (Job, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.jobs[id]
	if !ok {
		return Job{}, false
	}
	return st.job, true
}

// Charges returns every charge, oldest first, with the time its job became Ready (ReadyAt,
// zero while not known), and their total.
func (p *Provider) Charges() ([]Charge, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now().UTC()
	out := slices.Clone(p.charges)
	for i := range out {
		out[i].ReadyAt = readyAt(p.jobs[out[i].JobID], now)
	}
	return out, p.micros
}

// ChargeTotals is how many charges stand (refunds not counted) and their total, without
// copying them.
func (p *Provider) ChargeTotals() (count int, micros int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.charges {
		if !c.Refunded {
			count++
		}
	}
	return count, p.micros
}
