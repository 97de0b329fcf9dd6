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

// Options configure a Provider. The zero value keeps everything in memory, reports every
// job Ready at its first poll, and uses the wall clock.
type Options struct {
	// DataFile, when set, is the journal every job and charge is appended (and fsynced) to
	// before a submit is answered, and replayed from at Open.
	DataFile string
	// PendingPolls is how many polls of a job answer Pending before it is Ready.
	PendingPolls int
	// Now is the clock.
	Now func() time.Time
}

// Provider is the mock's bookkeeping: jobs, their idempotency keys and their charges. It is
// safe for concurrent use; submits are serialised, so a key can never be charged twice.
type Provider struct {
	now          func() time.Time
	pendingPolls int
	journal      *journal.File

	mu      sync.Mutex
	jobs    map[string]*jobState
	byKey   map[string]string // idempotency key → job id
	charges []Charge
	micros  int64 // the sum of charges
}

type jobState struct {
	job     Job
	polls   int
	readyAt time.Time // zero until the first poll that answered Ready
}

// record is one journal line: a job and the charge for it, written together so a charge
// never exists without its job or the other way round.
type record struct {
	Type   string `json:"type"`
	Job    Job    `json:"job"`
	Charge Charge `json:"charge"`
}

const recordSubmit = "submit"

// Open returns a Provider, replaying the data file's journal if there is one.
func Open(opts Options) (*Provider, error) {
	if opts.PendingPolls < 0 {
		return nil, errors.New("PendingPolls must not be negative")
	}
	p := &Provider{
		now:          opts.Now,
		pendingPolls: opts.PendingPolls,
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
	if rec.Type != recordSubmit {
		return fmt.Errorf("unknown record type %q", rec.Type)
	}
	if rec.Job.ID == "" || rec.Charge.JobID != rec.Job.ID {
		return errors.New("a charge that does not belong to its job")
	}
	if _, dup := p.jobs[rec.Job.ID]; dup {
		return fmt.Errorf("job %s recorded twice", rec.Job.ID)
	}
	p.apply(rec)
	return nil
}

func (p *Provider) apply(rec record) {
	p.jobs[rec.Job.ID] = &jobState{job: rec.Job}
	if rec.Job.IdempotencyKey != "" {
		if _, taken := p.byKey[rec.Job.IdempotencyKey]; !taken {
			p.byKey[rec.Job.IdempotencyKey] = rec.Job.ID
		}
	}
	p.charges = append(p.charges, rec.Charge)
	p.micros += rec.Charge.AmountMicros
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
	// idempotency_off fault); the key is still noted on the charge.
	IgnoreKey bool
}

// Submit accepts a task and charges for it, or, for a key already used with the same model
// and body, returns the earlier job and charges nothing (replayed is then true).
func (p *Provider) Submit(req SubmitRequest) (job Job, replayed bool, err error) {
	model, ok := Models[req.Model]
	if !ok {
		return Job{}, false, errorf(CodeNotFound, "Not Found: unknown model %q", req.Model)
	}
	if len(req.IdempotencyKey) > MaxIdempotencyKey {
		return Job{}, false, errorf(CodeInvalid, "Idempotency-Key is longer than %d bytes", MaxIdempotencyKey)
	}
	canonical, err := canonicalObject(req.Body)
	if err != nil {
		return Job{}, false, errorf(CodeInvalid, "%v", err)
	}
	in, err := validate(model, canonical)
	if err != nil {
		return Job{}, false, err
	}
	hash := requestHash(model.Name, canonical)
	key := req.IdempotencyKey
	if req.IgnoreKey {
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
		Format: in.format, IdempotencyKey: key, RequestHash: hash, CreatedAt: now,
	}
	if in.seed != nil {
		job.Seed = *in.seed
	} else {
		job.Seed = seedFor(job.ID)
	}
	charge := Charge{ID: uuid.NewString(), JobID: job.ID, Model: model.Name, AmountMicros: model.PriceMicros, CreatedAt: now}
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

// Poll is a job's state as one poll of it sees it.
type Poll struct {
	Job      Job
	Ready    bool
	Progress float64   // while pending, the share of the pending polls already made
	ReadyAt  time.Time // when the job was first reported Ready
}

// Poll counts one poll of the job and reports its state; ok is false for an unknown id.
func (p *Provider) Poll(id string) (poll Poll, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.jobs[id]
	if !ok {
		return Poll{}, false
	}
	st.polls++
	if st.polls <= p.pendingPolls {
		return Poll{Job: st.job, Progress: float64(st.polls-1) / float64(p.pendingPolls)}, true
	}
	if st.readyAt.IsZero() {
		st.readyAt = p.now().UTC()
	}
	return Poll{Job: st.job, Ready: true, ReadyAt: st.readyAt}, true
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

// Charges returns every charge, oldest first, and their total.
func (p *Provider) Charges() ([]Charge, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.charges), p.micros
}

// ChargeTotals is how many charges there are and their total, without copying them.
func (p *Provider) ChargeTotals() (count int, micros int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.charges), p.micros
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
