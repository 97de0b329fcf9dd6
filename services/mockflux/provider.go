package mockflux

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

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

// SubmitRequest is one POST /v1/{model}.
type SubmitRequest struct {
	Model string
	Body  []byte // the JSON body as sent
	// IdempotencyKey is the header's value, empty when absent.
	IdempotencyKey string
	// IgnoreKey makes the submit behave as if the provider had no idempotency support (the
	// idempotency_off fault), also where it honours keys; the key is still noted on the charge.
	IgnoreKey bool
	// Outcome is how the task is to end: "" (Ready), or one of the statuses of a task that ends
	// without a result and is not charged (OutcomeRequestModerated, OutcomeContentModerated,
	// OutcomeError): the moderation and error faults.
	Outcome string
}

// The ends of a task without a result; BFL charges none of them ("only successful generations
// (status: Ready) consume credits"), so each one's charge is refunded.
const (
	OutcomeRequestModerated = "Request Moderated" // its input was flagged before processing
	OutcomeContentModerated = "Content Moderated" // its output was flagged
	OutcomeError            = "Error"             // processing failed
)

// ErrNoCredits and ErrTooManyTasks are a submit the account cannot take: 402 and 429.
var (
	ErrNoCredits    = &Error{Code: CodeNoCredits, Detail: "Insufficient credits: add credits to your account, then retry"}
	ErrTooManyTasks = &Error{Code: CodeTooMany, Detail: "Too many active tasks: wait for one of your tasks to finish"}
)

// Submit accepts a task and charges for it, or, for a key already used with the same model
// and body, returns the earlier job and charges nothing (replayed is then true). The body's
// webhook fields are not part of "the same body": a replay answers the earlier job, whose
// webhook (if any) is the one delivered.
func (p *Provider) Submit(req SubmitRequest) (job Job, replayed bool, err error) {
	model, ok := Models[req.Model]
	if !ok {
		return Job{}, false, errorf(CodeNotFound, "Not Found: unknown model %q", req.Model)
	}
	if len(req.IdempotencyKey) > MaxIdempotencyKey {
		return Job{}, false, errorf(CodeInvalid, "Idempotency-Key is longer than %d bytes", MaxIdempotencyKey)
	}
	obj, err := parseObject(req.Body)
	if err != nil {
		return Job{}, false, errorf(CodeInvalid, "%v", err)
	}
	hook, err := takeWebhook(obj)
	if err != nil {
		return Job{}, false, err
	}
	canonical, err := canonicalJSON(obj)
	if err != nil {
		return Job{}, false, errorf(CodeInvalid, "%v", err)
	}
	in, err := validate(model, canonical)
	if err != nil {
		return Job{}, false, err
	}
	hash := requestHash(model.Name, canonical)
	key := req.IdempotencyKey
	if req.IgnoreKey || !p.honours {
		key = ""
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if key != "" {
		if id, ok := p.byKey[key]; ok {
			earlier := p.jobs[id].job
			if earlier.RequestHash != hash {
				return Job{}, false, errorf(CodeKeyReused,
					"Idempotency-Key was already used for another request (a different model or body); use a new key for a new request")
			}
			return earlier, true, nil
		}
	}

	now := p.now().UTC()
	job = Job{
		ID: uuid.NewString(), Model: model.Name, Prompt: in.prompt, Width: in.width, Height: in.height,
		Format: in.format, InputPixels: in.inputPixels, IdempotencyKey: key, RequestHash: hash, CreatedAt: now,
		RenderedAt: now.Add(p.renderTime), Webhook: hook, Outcome: req.Outcome,
		CostMicros: model.Price.Cost(int64(in.width)*int64(in.height), in.inputPixels),
	}
	if p.credits > 0 && job.CostMicros > p.credits-p.micros {
		return Job{}, false, ErrNoCredits
	}
	if p.concurrency > 0 && p.rendering(now, model.Name) >= concurrencyOf(model.Name, p.concurrency) {
		return Job{}, false, ErrTooManyTasks
	}
	if in.seed != nil {
		job.Seed = *in.seed
	} else {
		job.Seed = seedFor(job.ID)
	}
	// A task that will end without a result is refunded as it ends; mockflux knows its end
	// from the start, so its charge is given back at once.
	charge := Charge{ID: uuid.NewString(), JobID: job.ID, Model: model.Name, AmountMicros: job.CostMicros, CreatedAt: now, Refunded: job.Outcome != ""}
	if req.IdempotencyKey != "" {
		charge.IdempotencyKey = new(req.IdempotencyKey)
	}
	rec := record{Type: recordSubmit, Job: job, Charge: charge}
	if p.journal != nil {
		if err := p.journal.Append(rec); err != nil {
			return Job{}, false, fmt.Errorf("record the charge: %w", err)
		}
	}
	p.apply(rec)
	return job, false, nil
}

// rendering counts the tasks still rendering at now (of model alone for a model with a limit
// of its own); p.mu is held.
func (p *Provider) rendering(now time.Time, model string) int {
	n := 0
	for _, st := range p.jobs {
		if now.Before(st.job.RenderedAt) && (model != "flux-kontext-max" || st.job.Model == model) {
			n++
		}
	}
	return n
}

// concurrencyOf is the limit of tasks at once for model: BFL allows flux-kontext-max 6 where
// the others have 24, so it gets a quarter of the provider's limit.
func concurrencyOf(model string, limit int) int {
	if model == "flux-kontext-max" {
		return max(1, limit/4)
	}
	return limit
}

// HonoursIdempotency says whether the provider honours Idempotency-Key (Options).
func (p *Provider) HonoursIdempotency() bool { return p.honours }

// Credits is the balance left, in micros; ok is false when the provider has no limit.
func (p *Provider) Credits() (micros int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.credits - p.micros, p.credits > 0
}

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

func requestHash(model string, canonical []byte) string {
	sum := sha256.Sum256(append([]byte(model+"\x00"), canonical...))
	return hex.EncodeToString(sum[:])
}

// seedFor picks the seed of a request that named none, as the real API does, but from the
// job id so that it is fixed once the job exists.
func seedFor(jobID string) int64 {
	sum := sha256.Sum256([]byte(jobID))
	return int64(binary.BigEndian.Uint32(sum[:4]))
}
