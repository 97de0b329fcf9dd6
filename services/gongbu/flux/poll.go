package flux

import (
	"context"
	"fmt"
	"math"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/gongbu"
)

// Poll asks for the job's result at the polling URL the provider returned with it (the real
// API answers regional ones, such as https://api.us1.bfl.ai/v1/get_result?id=...), or at the
// base URL for a job without one. The API key goes only to the base URL's host or a host
// allow-listed for polling: any other polling URL is refused, without a request anywhere.
func (a *Adapter) Poll(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error) {
	r, err := a.result(ctx, job)
	if err != nil {
		return gongbu.PollResult{}, fmt.Errorf("poll FLUX: %w", err)
	}
	switch r.Status {
	case bflapi.ResultStatusPending:
		return gongbu.PollResult{Status: gongbu.JobPending}, nil
	case bflapi.ResultStatusReady:
		if r.Result == nil || r.Result.Sample == "" {
			return gongbu.PollResult{}, fmt.Errorf("poll FLUX: Ready without a sample")
		}
		// The sample URL must be one Gongbu may download from (and hand on).
		if _, err := a.sampleURL(r.Result.Sample); err != nil {
			return gongbu.PollResult{}, fmt.Errorf("poll FLUX: %w", err)
		}
		return gongbu.PollResult{Status: gongbu.JobReady, ImageURL: r.Result.Sample}, nil
	case bflapi.ResultStatusTaskNotFound:
		return gongbu.PollResult{Status: gongbu.JobLost}, nil
	case bflapi.ResultStatusError, bflapi.ResultStatusContentModerated, bflapi.ResultStatusRequestModerated:
		// BFL: "only successful generations (status: Ready) consume credits".
		return gongbu.PollResult{Status: gongbu.JobFailed, Detail: string(r.Status), Uncharged: true}, nil
	}
	// A status BFL has not documented (its answers have named in-progress ones, such as
	// "Generating"): not an end Gongbu can settle, so it polls on, and --poll-deadline makes the
	// execution indeterminate should it never end in a known way.
	return gongbu.PollResult{Status: gongbu.JobPending, Detail: string(r.Status)}, nil
}

// Status is the provider's status of the job (Ready, Pending, Error, Request Moderated,
// Content Moderated, Task not found, or one BFL has not documented), asked for as Poll asks:
// for reconciliation, which compares it with Gongbu's record.
func (a *Adapter) Status(ctx context.Context, job gongbu.Job) (string, error) {
	r, err := a.result(ctx, job)
	if err != nil {
		return "", err
	}
	return string(r.Status), nil
}

// result asks for the job's result where Poll says.
func (a *Adapter) result(ctx context.Context, job gongbu.Job) (*bflapi.ResultResponse, error) {
	api, id := a.api, job.ID
	if job.PollingURL != "" {
		server, pollID, err := a.pollingServer(job.PollingURL)
		if err != nil {
			return nil, err
		}
		if server != a.base.String() {
			if api, err = a.client(server, a.reads); err != nil {
				return nil, err
			}
		}
		id = pollID
	}
	resp, err := api.GetResultWithResponse(ctx, &bflapi.GetResultParams{Id: id})
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("status %d", resp.StatusCode())
	}
	return resp.JSON200, nil
}

// Credits is the account's balance at the provider (GET /v1/credits), in micro-USD.
func (a *Adapter) Credits(ctx context.Context) (int64, error) {
	resp, err := a.api.GetCreditsWithResponse(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the FLUX credits: %w", err)
	}
	if resp.JSON200 == nil {
		return 0, fmt.Errorf("read the FLUX credits: status %d", resp.StatusCode())
	}
	return int64(math.Round(resp.JSON200.Credits * microsPerCredit)), nil
}
