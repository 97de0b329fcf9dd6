package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"hubu.dev/hubu/proto/bflapi"
)

// charge is one of mockflux's charges as the load test reads it.
type charge struct {
	JobID     string    `json:"job_id"`
	CreatedAt time.Time `json:"created_at"`
	// ReadyAt is when the job became Ready; mockflux reports it from its --render-time on, and
	// nil is a mockflux (or a job) that does not say.
	ReadyAt *time.Time `json:"ready_at"`
	// IdempotencyKey is the key the submit carried: Gongbu's, one per decision, so that a
	// second submit of one spend carries the key of the first.
	IdempotencyKey *string `json:"idempotency_key"`
	// Refunded charges were given back and count in no total.
	Refunded bool `json:"refunded"`
}

// providerTime is how long the provider took to make the image, when the charge says.
func (c charge) providerTime() (time.Duration, bool) {
	if c.ReadyAt == nil {
		return 0, false
	}
	return c.ReadyAt.Sub(c.CreatedAt), true
}

// listCharges reads mockflux's charges through the generated client. The body is decoded
// here rather than through bflapi.Charge, so that ready_at is read whether or not the spec
// in this tree declares it yet, and its absence is seen (and said) instead of hidden.
func listCharges(ctx context.Context, flux *bflapi.ClientWithResponses) ([]charge, error) {
	resp, err := flux.ListChargesWithResponse(ctx)
	if err != nil {
		return nil, fmt.Errorf("mockflux charges: %v", err)
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("mockflux charges: HTTP %d", resp.StatusCode())
	}
	var body struct {
		Charges []charge `json:"charges"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("mockflux charges: %v", err)
	}
	if n := standing(body.Charges); n != resp.JSON200.Count {
		return nil, fmt.Errorf("mockflux charges: %d listed that stand, count says %d", n, resp.JSON200.Count)
	}
	return body.Charges, nil
}

// chargeCount is how many charges mockflux has made.
func chargeCount(ctx context.Context, flux *bflapi.ClientWithResponses) (int, error) {
	resp, err := flux.ListChargesWithResponse(ctx)
	if err != nil {
		return 0, fmt.Errorf("mockflux charges: %v", err)
	}
	if resp.JSON200 == nil {
		return 0, fmt.Errorf("mockflux charges: HTTP %d", resp.StatusCode())
	}
	return resp.JSON200.Count, nil
}

// standing is how many of the charges stand (were not refunded): what mockflux's count counts.
func standing(charges []charge) int {
	n := 0
	for _, c := range charges {
		if !c.Refunded {
			n++
		}
	}
	return n
}

// runCharges counts the standing charges that are the run's own, among charges others' spends
// may have made too (a running stack): the charges of the jobs the run's answers named, and
// every other charge under the idempotency key of one of those, which is a second submit of
// the same spend. A spend charged twice, each charge under a job its answer did not name and a
// key of its own, goes unseen: Gongbu gives one decision one key, so that is not how it goes.
func runCharges(charges []charge, jobs map[string]bool) int {
	keys := map[string]bool{}
	for _, c := range charges {
		if jobs[c.JobID] && c.IdempotencyKey != nil && *c.IdempotencyKey != "" {
			keys[*c.IdempotencyKey] = true
		}
	}
	n := 0
	for _, c := range charges {
		if c.Refunded {
			continue
		}
		if jobs[c.JobID] || (c.IdempotencyKey != nil && keys[*c.IdempotencyKey]) {
			n++
		}
	}
	return n
}
