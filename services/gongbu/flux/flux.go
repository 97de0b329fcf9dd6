// Package flux is Gongbu's adapter for Black Forest Labs' FLUX API (and mockflux, which has
// its shape), through the client generated from proto/bfl.openapi.yaml.
package flux

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/gongbu"
)

// Adapter implements gongbu.Provider for FLUX.
type Adapter struct {
	api         *bflapi.ClientWithResponses
	idempotency bool
}

var _ gongbu.Provider = (*Adapter)(nil)

// New returns an adapter for the FLUX API at baseURL with an API key. honoursIdempotency
// must be true only for a deployment that honours the Idempotency-Key header as mockflux
// does; the real BFL API documents no such header, so against it Gongbu never resubmits.
//
// Go's HTTP transport silently re-sends a POST that carries an Idempotency-Key when a reused
// connection breaks before the answer. That is safe only where the key is honoured, so for
// any other provider the adapter's requests never reuse a connection.
func New(baseURL, apiKey string, honoursIdempotency bool, timeout time.Duration) (*Adapter, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DisableKeepAlives = !honoursIdempotency
	hc := &http.Client{Transport: transport, Timeout: timeout}
	api, err := bflapi.NewClientWithResponses(baseURL, bflapi.WithHTTPClient(hc),
		bflapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("x-key", apiKey)
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return &Adapter{api: api, idempotency: honoursIdempotency}, nil
}

// Name is the provider's name in scopes and vendor keys.
func (a *Adapter) Name() string { return "bfl" }

// HonoursIdempotencyKeys is what the operator configured for this deployment.
func (a *Adapter) HonoursIdempotencyKeys() bool { return a.idempotency }

// Submit sends the generation request under the idempotency key.
func (a *Adapter) Submit(ctx context.Context, key string, d gongbu.Decision) (gongbu.Job, error) {
	args := d.Arguments
	body := bflapi.FluxRequest{Prompt: args.Prompt, Width: &args.Width, Height: &args.Height, Seed: args.Seed}
	if args.OutputFormat != nil {
		f := bflapi.FluxRequestOutputFormat(*args.OutputFormat)
		body.OutputFormat = &f
	}
	resp, err := a.api.SubmitWithResponse(ctx, d.Scope.Model, &bflapi.SubmitParams{IdempotencyKey: &key}, body)
	if err != nil {
		return gongbu.Job{}, fmt.Errorf("submit to FLUX: %w", err) // the request may have arrived: unknown outcome
	}
	if resp.JSON200 != nil {
		return gongbu.Job{ID: resp.JSON200.Id, PollingURL: resp.JSON200.PollingUrl}, nil
	}
	status := resp.StatusCode()
	if refusals[status] {
		return gongbu.Job{}, &gongbu.Rejected{Reason: fmt.Sprintf("FLUX answered %d", status)}
	}
	return gongbu.Job{}, fmt.Errorf("submit to FLUX: status %d", status) // may have charged
}

// refusals are the answers that mean the provider refused the request before any work, so
// nothing was charged: malformed, authentication, no credits, unknown model, validation or
// a key reused for another body, rate limiting. Any other status — 5xx, and 4xx such as 408
// or 409 (by the Idempotency-Key draft: a request under this key is still in flight) — leaves
// the outcome unknown, and a possible charge is never released as if it had not happened.
var refusals = map[int]bool{
	http.StatusBadRequest: true, http.StatusUnauthorized: true, http.StatusPaymentRequired: true,
	http.StatusForbidden: true, http.StatusNotFound: true, http.StatusRequestEntityTooLarge: true,
	http.StatusUnsupportedMediaType: true, http.StatusUnprocessableEntity: true, http.StatusTooManyRequests: true,
}

// Poll asks for the job's result.
func (a *Adapter) Poll(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error) {
	resp, err := a.api.GetResultWithResponse(ctx, &bflapi.GetResultParams{Id: job.ID})
	if err != nil {
		return gongbu.PollResult{}, fmt.Errorf("poll FLUX: %w", err)
	}
	if resp.JSON200 == nil {
		return gongbu.PollResult{}, fmt.Errorf("poll FLUX: status %d", resp.StatusCode())
	}
	r := resp.JSON200
	switch r.Status {
	case bflapi.Pending:
		return gongbu.PollResult{Status: gongbu.JobPending}, nil
	case bflapi.Ready:
		if r.Result == nil || r.Result.Sample == "" {
			return gongbu.PollResult{}, fmt.Errorf("poll FLUX: Ready without a sample")
		}
		return gongbu.PollResult{Status: gongbu.JobReady, ImageURL: r.Result.Sample}, nil
	case bflapi.TaskNotFound:
		return gongbu.PollResult{Status: gongbu.JobLost}, nil
	case bflapi.Error, bflapi.ContentModerated, bflapi.RequestModerated:
		return gongbu.PollResult{Status: gongbu.JobFailed, Detail: string(r.Status)}, nil
	}
	return gongbu.PollResult{}, fmt.Errorf("poll FLUX: unknown status %q", r.Status)
}
