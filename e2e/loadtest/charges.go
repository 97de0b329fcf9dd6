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
	if len(body.Charges) != resp.JSON200.Count {
		return nil, fmt.Errorf("mockflux charges: %d listed, count says %d", len(body.Charges), resp.JSON200.Count)
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
