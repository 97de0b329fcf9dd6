package gongbutest

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"hubu.dev/hubu/services/gongbu"
)

// SubmitFunc scripts one Submit call.
type SubmitFunc func(ctx context.Context, key string, d gongbu.Decision) (gongbu.Job, error)

// PollFunc scripts one Poll call.
type PollFunc func(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error)

// Provider is a scripted fake paid provider named "bfl". Each Submit and Poll takes the next
// scripted answer; with none left, Submit accepts a job (the same job for the same key, as a
// provider that honours keys would) and Poll answers Pending.
type Provider struct {
	honours bool

	mu      sync.Mutex
	submits []SubmitFunc
	polls   []PollFunc
	keys    map[string]int // submits per key
	jobs    map[string]string
	nSubmit int
	nPoll   int
	polled  []gongbu.Job
}

// NewProvider returns a fake provider that honours idempotency keys or not.
func NewProvider(honours bool) *Provider {
	return &Provider{honours: honours, keys: map[string]int{}, jobs: map[string]string{}}
}

func (p *Provider) Name() string                 { return "bfl" }
func (p *Provider) HonoursIdempotencyKeys() bool { return p.honours }

// OnSubmit scripts the next Submit calls, in order.
func (p *Provider) OnSubmit(fs ...SubmitFunc) {
	under(&p.mu, func() { p.submits = append(p.submits, fs...) })
}

// OnPoll scripts the next Poll calls, in order.
func (p *Provider) OnPoll(fs ...PollFunc) { under(&p.mu, func() { p.polls = append(p.polls, fs...) }) }

// Submits is how many times Submit was called.
func (p *Provider) Submits() int { return locked(&p.mu, func() int { return p.nSubmit }) }

// SubmitsFor is how many times Submit was called with this idempotency key.
func (p *Provider) SubmitsFor(key string) int {
	return locked(&p.mu, func() int { return p.keys[key] })
}

// Polls is how many times Poll was called.
func (p *Provider) Polls() int { return locked(&p.mu, func() int { return p.nPoll }) }

// Polled returns the jobs polled, in order.
func (p *Provider) Polled() []gongbu.Job {
	return locked(&p.mu, func() []gongbu.Job { return append([]gongbu.Job(nil), p.polled...) })
}

func (p *Provider) Submit(ctx context.Context, key string, d gongbu.Decision) (gongbu.Job, error) {
	p.mu.Lock()
	p.nSubmit++
	p.keys[key]++
	var f SubmitFunc
	if len(p.submits) > 0 {
		f, p.submits = p.submits[0], p.submits[1:]
	}
	p.mu.Unlock()
	if f != nil {
		return f(ctx, key, d)
	}
	return p.accept(key), nil
}

// accept is a provider's success: one job per key.
func (p *Provider) accept(key string) gongbu.Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.jobs[key]
	if !ok {
		id = "job-" + strconv.Itoa(len(p.jobs)+1)
		p.jobs[key] = id
	}
	return gongbu.Job{ID: id, PollingURL: "https://provider.test/v1/get_result?id=" + id}
}

// Accept scripts a successful Submit.
func (p *Provider) Accept() SubmitFunc {
	return func(_ context.Context, key string, _ gongbu.Decision) (gongbu.Job, error) { return p.accept(key), nil }
}

// AcceptCosting scripts a successful Submit whose provider states the job costs micros.
func (p *Provider) AcceptCosting(micros int64) SubmitFunc {
	return func(_ context.Context, key string, _ gongbu.Decision) (gongbu.Job, error) {
		job := p.accept(key)
		job.CostMicros = &micros
		return job, nil
	}
}

// Reject scripts a definite refusal.
func Reject(reason string) SubmitFunc {
	return func(context.Context, string, gongbu.Decision) (gongbu.Job, error) {
		return gongbu.Job{}, &gongbu.Rejected{Reason: reason}
	}
}

// Ambiguous scripts a call whose outcome is unknown (a dropped connection, a 500).
func Ambiguous() SubmitFunc {
	return func(context.Context, string, gongbu.Decision) (gongbu.Job, error) {
		return gongbu.Job{}, errors.New("connection reset by peer (fake)")
	}
}

// Answer scripts a poll answer.
func Answer(status gongbu.PollStatus, imageURL, detail string) PollFunc {
	return func(context.Context, gongbu.Job) (gongbu.PollResult, error) {
		return gongbu.PollResult{Status: status, ImageURL: imageURL, Detail: detail}, nil
	}
}

// PollError scripts a failed poll.
func PollError() PollFunc {
	return func(context.Context, gongbu.Job) (gongbu.PollResult, error) {
		return gongbu.PollResult{}, errors.New("poll timed out (fake)")
	}
}

func (p *Provider) Poll(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error) {
	p.mu.Lock()
	p.nPoll++
	p.polled = append(p.polled, job)
	var f PollFunc
	if len(p.polls) > 0 {
		f, p.polls = p.polls[0], p.polls[1:]
	}
	p.mu.Unlock()
	if f != nil {
		return f(ctx, job)
	}
	return gongbu.PollResult{Status: gongbu.JobPending}, nil
}
