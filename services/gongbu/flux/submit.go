package flux

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/gongbu"
)

// Submit sends the generation request under the idempotency key.
func (a *Adapter) Submit(ctx context.Context, key string, d gongbu.Decision) (gongbu.Job, error) {
	body, err := requestOf(d)
	if err != nil {
		return gongbu.Job{}, &gongbu.Rejected{Reason: err.Error()} // nothing was sent
	}
	if a.webhookURL != "" {
		body.WebhookUrl, body.WebhookSecret = &a.webhookURL, new(a.webhookSecret(d.DecisionID))
	}
	resp, err := a.submits.SubmitWithResponse(ctx, d.Scope.Model, &bflapi.SubmitParams{IdempotencyKey: &key}, body)
	if err != nil {
		return gongbu.Job{}, fmt.Errorf("submit to FLUX: %w", err) // the request may have arrived: unknown outcome
	}
	if r := resp.JSON200; r != nil {
		job := gongbu.Job{ID: r.Id, PollingURL: r.PollingUrl}
		if r.Cost != nil && *r.Cost >= 0 && *r.Cost < maxCredits {
			job.CostMicros = new(int64(math.Round(*r.Cost * microsPerCredit)))
		}
		return job, nil
	}
	status := resp.StatusCode()
	if status == http.StatusUnprocessableEntity && keyReused(resp.Body) {
		// The key was used before, by a request the provider took (and charged): this is no
		// refusal of the work, and whether this decision was charged is unknown.
		return gongbu.Job{}, fmt.Errorf("submit to FLUX: status %d: the idempotency key was used before for another request", status)
	}
	if refusals[status] {
		return gongbu.Job{}, &gongbu.Rejected{Reason: fmt.Sprintf("FLUX answered %d", status)}
	}
	return gongbu.Job{}, fmt.Errorf("submit to FLUX: status %d", status) // may have charged
}

// requestOf is the body that asks the provider for exactly the decision's work: the size its
// scope states (which Hubu priced, resolved from the model's defaults where the agent named
// none), and the format and safety level with BFL's defaults stated, so that nothing the
// provider might default otherwise changes what was bought.
func requestOf(d gongbu.Decision) (bflapi.FluxRequest, error) {
	args := d.Arguments
	format := bflapi.FluxRequestOutputFormat(args.OutputFormatOf())
	body := bflapi.FluxRequest{Prompt: args.Prompt, Seed: args.Seed, Raw: args.Raw, OutputFormat: &format, SafetyTolerance: new(args.SafetyOf())}
	if dims, pixels := contract.ParseSize(d.Scope.Size); pixels {
		body.Width, body.Height = &dims.Width, &dims.Height
	} else if contract.ValidAspectRatio(d.Scope.Size) {
		body.AspectRatio = &d.Scope.Size
	} else {
		return bflapi.FluxRequest{}, fmt.Errorf("the decision's size %q is neither WxH nor an aspect ratio", d.Scope.Size)
	}
	if len(d.Inputs) != len(args.InputImages) || len(d.Inputs) > len(inputFields(&body)) {
		return bflapi.FluxRequest{}, fmt.Errorf("the edit names %d input images and %d were read", len(args.InputImages), len(d.Inputs))
	}
	for i, field := range inputFields(&body)[:len(d.Inputs)] {
		*field = new(base64.StdEncoding.EncodeToString(d.Inputs[i].Bytes))
	}
	return body, nil
}

// inputFields are a request's input image fields in order: input_image, input_image_2, ….
func inputFields(b *bflapi.FluxRequest) []**string {
	return []**string{&b.InputImage, &b.InputImage2, &b.InputImage3, &b.InputImage4, &b.InputImage5, &b.InputImage6, &b.InputImage7, &b.InputImage8}
}

// refusals are the answers that mean the provider refused the request before any work, so
// the request charged nothing: malformed, authentication, no credits, unknown model,
// validation, rate limiting. Any other status — 5xx, and 4xx such as 408 or 409 (by the
// Idempotency-Key draft: a request under this key is still in flight) — leaves the outcome
// unknown, and a possible charge is never released as if it had not happened.
var refusals = map[int]bool{
	http.StatusBadRequest: true, http.StatusUnauthorized: true, http.StatusPaymentRequired: true,
	http.StatusForbidden: true, http.StatusNotFound: true, http.StatusRequestEntityTooLarge: true,
	http.StatusUnsupportedMediaType: true, http.StatusUnprocessableEntity: true, http.StatusTooManyRequests: true,
}

// keyReused reports whether a 422's detail says the idempotency key was already used for
// another request (mockflux: "Idempotency-Key was already used for another request ..."). Any
// 422 that speaks of the idempotency key is taken so: the safe side.
func keyReused(body []byte) bool {
	var d bflapi.ErrorDetail
	if json.Unmarshal(body, &d) != nil {
		return false
	}
	return strings.Contains(strings.ToLower(d.Detail), "idempotency")
}
