// Package flux is Gongbu's adapter for Black Forest Labs' FLUX API (and mockflux, which has
// its shape), through the client generated from proto/bfl.openapi.yaml.
package flux

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/gongbu"
)

// Adapter implements gongbu.Provider for FLUX.
type Adapter struct {
	api         *bflapi.ClientWithResponses
	base        *url.URL
	hc          *http.Client
	apiKey      string
	idempotency bool
}

var _ gongbu.Provider = (*Adapter)(nil)

// New returns an adapter for the FLUX API at baseURL with an API key. honoursIdempotency
// must be true only for a deployment that honours the Idempotency-Key header as mockflux
// does; the real BFL API documents no such header, so against it Gongbu never resubmits.
// timeout bounds each request.
func New(baseURL, apiKey string, honoursIdempotency bool, timeout time.Duration) (*Adapter, error) {
	return newAdapter(baseURL, apiKey, honoursIdempotency, timeout, newTransport(honoursIdempotency))
}

// newTransport is the HTTP transport of an adapter.
//
// Go's HTTP transport silently re-sends a request on its own in two cases: HTTP/1.1 re-sends
// a POST that carries an Idempotency-Key when a reused connection breaks before the answer,
// and HTTP/2 re-sends a request after some stream resets and GOAWAYs. That is safe only where
// the key is honoured, so for any other provider the adapter never reuses a connection and
// never speaks HTTP/2 (an empty, non-nil TLSNextProto turns it off).
func newTransport(honoursIdempotency bool) *http.Transport {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if !honoursIdempotency {
		transport.DisableKeepAlives = true
		transport.ForceAttemptHTTP2 = false
		transport.TLSNextProto = map[string]func(authority string, c *tls.Conn) http.RoundTripper{}
	}
	return transport
}

func newAdapter(baseURL, apiKey string, honoursIdempotency bool, timeout time.Duration, transport *http.Transport) (*Adapter, error) {
	base, err := url.Parse(baseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("the FLUX base URL %q is not an http(s) URL", baseURL)
	}
	a := &Adapter{base: base, hc: &http.Client{Transport: transport, Timeout: timeout}, apiKey: apiKey, idempotency: honoursIdempotency}
	if a.api, err = a.client(baseURL); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Adapter) client(server string) (*bflapi.ClientWithResponses, error) {
	return bflapi.NewClientWithResponses(server, bflapi.WithHTTPClient(a.hc),
		bflapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("x-key", a.apiKey)
			return nil
		}))
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

// Poll asks for the job's result at the polling URL the provider returned with it (the real
// API answers regional ones, such as https://api.us1.bfl.ai/v1/get_result?id=...). The API
// key goes only to the base URL's host or a host of the same parent domain; any other
// polling URL is ignored, and the job is polled at the base URL.
func (a *Adapter) Poll(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error) {
	api, id := a.api, job.ID
	if server, pollID, ok := a.pollingServer(job.PollingURL); ok && server != a.base.String() {
		c, err := a.client(server)
		if err != nil {
			return gongbu.PollResult{}, err
		}
		api, id = c, pollID
	} else if ok {
		id = pollID
	}
	resp, err := api.GetResultWithResponse(ctx, &bflapi.GetResultParams{Id: id})
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

// pollingServer returns the server (scheme, host and any path before /v1/get_result) and the
// task id of a polling URL the key may be sent to: the base URL's scheme or https, and the
// base URL's host or one that shares its parent domain (its last two labels). ok is false
// for any other.
func (a *Adapter) pollingServer(pollingURL string) (server, id string, ok bool) {
	u, err := url.Parse(pollingURL)
	if err != nil || u.Host == "" || u.User != nil {
		return "", "", false
	}
	prefix, found := strings.CutSuffix(u.Path, "/v1/get_result")
	id = u.Query().Get("id")
	if !found || id == "" || (u.Scheme != "https" && u.Scheme != a.base.Scheme) || !sameSite(u, a.base) {
		return "", "", false
	}
	return u.Scheme + "://" + u.Host + prefix, id, true
}

// sameSite reports whether u's host is base's (port included) or shares its registrable
// parent domain, taken as the last two labels (api.us1.bfl.ai and api.bfl.ai share bfl.ai).
// IP addresses and one-label names must match exactly.
func sameSite(u, base *url.URL) bool {
	if strings.EqualFold(u.Host, base.Host) {
		return true
	}
	h, b := strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), strings.ToLower(strings.TrimSuffix(base.Hostname(), "."))
	if net.ParseIP(h) != nil || net.ParseIP(b) != nil {
		return false
	}
	parent := func(host string) string {
		labels := strings.Split(host, ".")
		if len(labels) < 2 {
			return ""
		}
		return strings.Join(labels[len(labels)-2:], ".")
	}
	return parent(h) != "" && parent(h) == parent(b)
}
