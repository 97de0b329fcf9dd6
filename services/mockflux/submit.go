package mockflux

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"
)

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
