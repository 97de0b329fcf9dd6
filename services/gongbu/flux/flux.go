// Package flux is Gongbu's adapter for Black Forest Labs' FLUX API (and mockflux, which has
// its shape), through the client generated from proto/bfl.openapi.yaml.
package flux

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/kit/netguard"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/gongbu"
)

// Adapter implements gongbu.Provider for FLUX.
type Adapter struct {
	submits     *bflapi.ClientWithResponses // on submitTransport: a submit can charge
	api         *bflapi.ClientWithResponses // polls at the base URL, which charge nothing
	base        *url.URL
	reads       *http.Client // polls, on the reused connections of newTransport
	images      *http.Client // downloads results, on the same connections: no API key, no JSON limit
	apiKey      string
	idempotency bool
	polling     []host // where the API key may go to poll, the base URL's host first
	bflAPI      bool   // the base URL is BFL's API: every one of BFL's API hosts may be polled too
	samples     []host // where a sample URL may point; nil: any public HTTPS host
	webhookURL  string // where the provider tells Gongbu that a job is done; empty: it is not told
	webhookKey  []byte // derives each job's webhook secret
}

var _ gongbu.Provider = (*Adapter)(nil)

// Config is an adapter's settings.
type Config struct {
	// BaseURL is the FLUX API's (or mockflux's) base URL; the API key goes to its host.
	BaseURL string
	APIKey  string
	// HonoursIdempotency must be true only for a deployment that honours the Idempotency-Key
	// header as mockflux does; the real BFL API documents no such header, so against it
	// Gongbu never resubmits.
	HonoursIdempotency bool
	// Timeout bounds each request; zero is none.
	Timeout time.Duration
	// PollingHosts are hosts besides the base URL's (host or host:port, matched exactly, see
	// ParseHosts) whose polling URLs the adapter follows, sending them the API key. With BFL's
	// API as the base URL, BFL's API hosts are followed besides (BFLAPIHost): the regional ones
	// its answers name, such as api.eu2.bfl.ai. Default: none.
	PollingHosts []string
	// SampleHosts, when set, are the only hosts a result's sample URL may be on, downloaded
	// from whatever address they resolve to: an operator's allow-list. Empty (the default): a
	// sample URL may be on any HTTPS host (BFL moves its delivery hosts, and says not to rely on
	// their names), downloaded only from a public address (kit/netguard).
	SampleHosts []string
	// WebhookURL, when set, is sent with every submission: the provider POSTs there, signed,
	// when the job is done, and Gongbu polls it at once instead of at its next look.
	// WebhookKey (required with it, at least 32 bytes, the same in every replica) derives each
	// job's signing secret.
	WebhookURL string
	WebhookKey []byte
}

// maxBody bounds every body read from the provider; its answers are small JSON.
const maxBody = httpjson.MaxResponse

// BFL states costs in credits: 1 credit is $0.01, 10,000 US micro-dollars. A stated cost of a
// million credits or more ($10,000 for one image) is not believed, and not recorded.
const (
	microsPerCredit = 10_000
	maxCredits      = 1_000_000
)

// New returns an adapter for the FLUX API at baseURL with an API key that polls and takes
// samples on baseURL's host only; NewAdapter takes the rest of Config.
func New(baseURL, apiKey string, honoursIdempotency bool, timeout time.Duration) (*Adapter, error) {
	return NewAdapter(Config{BaseURL: baseURL, APIKey: apiKey, HonoursIdempotency: honoursIdempotency, Timeout: timeout})
}

// NewAdapter returns an adapter configured by cfg.
func NewAdapter(cfg Config) (*Adapter, error) {
	return newAdapter(cfg, newTransport())
}

// newTransport is the HTTP transport of an adapter's reads: its polls and its downloads of
// results. A read charges nothing, so reads reuse connections and speak HTTP/2 where the
// provider offers it, whatever the provider does with idempotency keys: a read that Go's
// transport sends again on its own only asks again. Against a provider over TLS this spares
// every poll and download a handshake of its own.
func newTransport() *http.Transport { return httpjson.PooledTransport() }

// submitTransport is the transport of an adapter's submits, made from the one of its reads
// (whose dialer and TLS settings it keeps).
//
// Go's HTTP transport silently re-sends a request on its own in two cases: HTTP/1.1 re-sends
// a POST that carries an Idempotency-Key when a reused connection breaks before the answer,
// and HTTP/2 re-sends a request after some stream resets and GOAWAYs. That is safe only where
// the key is honoured, so for any other provider a submit never reuses a connection and never
// speaks HTTP/2: each submit dials its own.
func submitTransport(reads *http.Transport, honoursIdempotency bool) *http.Transport {
	if honoursIdempotency {
		return reads
	}
	t := reads.Clone()
	t.DisableKeepAlives = true
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP1(true)
	if t.TLSClientConfig != nil {
		// Clone set the reads' transport up for HTTP/2 first, and that offers h2 in the TLS
		// handshake: a server that took the offer would get HTTP/1.1 it cannot read.
		t.TLSClientConfig.NextProtos = nil
	}
	return t
}

func newAdapter(cfg Config, reads *http.Transport) (*Adapter, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("the FLUX base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.WebhookURL != "" {
		u, err := url.Parse(cfg.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("the webhook URL %q is not an http(s) URL", cfg.WebhookURL)
		}
		if len(cfg.WebhookKey) < 32 {
			return nil, errors.New("a webhook URL needs a webhook key of at least 32 bytes")
		}
	}
	api := func(t *http.Transport, name string) *http.Client {
		return &http.Client{Transport: httpjson.Timeout(tracing.Transport(httpjson.LimitResponses(t, maxBody), name), cfg.Timeout), CheckRedirect: refuseRedirect}
	}
	a := &Adapter{base: base, apiKey: cfg.APIKey, idempotency: cfg.HonoursIdempotency, webhookURL: cfg.WebhookURL, webhookKey: cfg.WebhookKey,
		reads:  api(reads, "flux"),
		images: &http.Client{Transport: httpjson.Timeout(tracing.Transport(downloads(reads, len(cfg.SampleHosts) > 0), "flux-samples"), cfg.Timeout), CheckRedirect: refuseRedirect},
		bflAPI: base.Scheme == "https" && BFLAPIHost(base.Host)}
	self := host{name: hostName(base), port: cmp.Or(base.Port(), defaultPort(base.Scheme))}
	a.polling = []host{self}
	if len(cfg.SampleHosts) > 0 {
		a.samples = []host{self}
	}
	for _, list := range []struct {
		what  string
		hosts []string
		into  *[]host
	}{{"polling", cfg.PollingHosts, &a.polling}, {"sample", cfg.SampleHosts, &a.samples}} {
		for _, h := range list.hosts {
			parsed, err := parseHost(h)
			if err != nil {
				return nil, fmt.Errorf("FLUX %s hosts: %w", list.what, err)
			}
			*list.into = append(*list.into, parsed)
		}
	}
	if a.api, err = a.client(cfg.BaseURL, a.reads); err != nil {
		return nil, err
	}
	if a.submits, err = a.client(cfg.BaseURL, api(submitTransport(reads, cfg.HonoursIdempotency), "flux")); err != nil {
		return nil, err
	}
	return a, nil
}

// downloads is the transport of an adapter's downloads of results, made from its reads'
// (whose TLS settings it keeps). A sample URL is the provider's, not an operator's: unless the
// operator allow-listed the hosts it may be on, a download connects to public addresses only,
// judged on the address it dials, never through a proxy (whose address would be judged).
func downloads(reads *http.Transport, allowListed bool) *http.Transport {
	if allowListed {
		return reads
	}
	t := reads.Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: netguard.Control}).DialContext
	return t
}

// bflAPIHostRE is BFL's API hosts: api.bfl.ai and the regional ones (api.eu.bfl.ai,
// api.us.bfl.ai, api.eu1.bfl.ai, …, api.us4.bfl.ai and those yet to come).
var bflAPIHostRE = regexp.MustCompile(`^api(\.[a-z]{2,8}[0-9]{0,3})?\.bfl\.ai$`)

// BFLAPIHost reports whether host (a URL's host, with an optional port) is one of BFL's API
// hosts on the HTTPS port: where the API key may go. BFL's delivery hosts never are.
func BFLAPIHost(host string) bool {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = host, "443"
	}
	return port == "443" && bflAPIHostRE.MatchString(strings.ToLower(strings.TrimSuffix(name, ".")))
}

// refuseRedirect follows no redirect: Go's client would carry the x-key header along to
// wherever it points, and the API has no reason to send one.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("the FLUX API answered with a redirect (to host %q); not followed, so the API key goes nowhere else", req.URL.Host)
}

func (a *Adapter) client(server string, hc *http.Client) (*bflapi.ClientWithResponses, error) {
	return bflapi.NewClientWithResponses(server, bflapi.WithHTTPClient(hc),
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

// pollingServer returns the server (scheme, host and any path before /v1/get_result) and the
// task id of a polling URL the key may be sent to: the base URL's scheme or https, and a
// polling host, or (with BFL's API as the base URL) an HTTPS URL on one of BFL's API hosts.
func (a *Adapter) pollingServer(pollingURL string) (server, id string, err error) {
	u, err := a.checkURL("polling", pollingURL, a.polling)
	if err != nil && a.bflAPI {
		if bu, perr := url.Parse(pollingURL); perr == nil && bu.Scheme == "https" && bu.User == nil && BFLAPIHost(bu.Host) {
			u, err = bu, nil
		}
	}
	if err != nil {
		return "", "", err
	}
	prefix, found := strings.CutSuffix(u.Path, "/v1/get_result")
	id = u.Query().Get("id")
	if !found || id == "" {
		return "", "", fmt.Errorf("the polling URL on host %q is not of the form /v1/get_result?id=ID", u.Host)
	}
	return u.Scheme + "://" + u.Host + prefix, id, nil
}

// sampleURL parses a result's sample URL and checks Gongbu may download it: on an
// allow-listed host where the operator gave some (checkURL), else an HTTPS URL without
// credentials on any host (the download connects to public addresses only).
func (a *Adapter) sampleURL(raw string) (*url.URL, error) {
	if a.samples != nil {
		return a.checkURL("sample", raw, a.samples)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, errors.New("the sample URL is not an https URL without credentials")
	}
	return u, nil
}

// checkURL parses a URL the provider returned and checks it is the base URL's scheme or https,
// carries no credentials, and is on one of hosts.
func (a *Adapter) checkURL(what, raw string, hosts []host) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && u.Scheme != a.base.Scheme) {
		return nil, fmt.Errorf("the %s URL is not an https URL (or one of the API's scheme) without credentials", what)
	}
	for _, h := range hosts {
		if h.matches(u) {
			return u, nil
		}
	}
	return nil, fmt.Errorf("the %s URL's host %q is neither the API's nor one allowed for %s URLs", what, u.Host, what)
}

// host is an allowed host; an empty port is the URL scheme's default.
type host struct{ name, port string }

func (h host) matches(u *url.URL) bool {
	port := defaultPort(u.Scheme)
	return hostName(u) == h.name && cmp.Or(u.Port(), port) == cmp.Or(h.port, port)
}

func hostName(u *url.URL) string { return strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")) }

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// ParseHosts reads a comma-separated list of hosts, each a host name or IP address with an
// optional port (api.us1.bfl.ai, 127.0.0.1:8080, [::1]:9000), matched exactly: no schemes,
// paths or wildcards. It returns them in their canonical form; empty entries are skipped.
func ParseHosts(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		h, err := parseHost(s)
		if err != nil {
			return nil, err
		}
		out = append(out, h.String())
	}
	return out, nil
}

func (h host) String() string {
	if h.port == "" {
		if strings.Contains(h.name, ":") {
			return "[" + h.name + "]"
		}
		return h.name
	}
	return net.JoinHostPort(h.name, h.port)
}

func parseHost(s string) (host, error) {
	bad := fmt.Errorf("%q is not a host name or address with an optional port (such as api.us1.bfl.ai or 127.0.0.1:8080)", s)
	u, err := url.Parse("//" + strings.TrimSpace(s))
	if err != nil || u.Host != strings.TrimSpace(s) || strings.HasSuffix(u.Host, ":") || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return host{}, bad
	}
	h := host{name: hostName(u), port: u.Port()}
	if h.port != "" {
		if n, err := strconv.Atoi(h.port); err != nil || n < 1 || n > 65535 {
			return host{}, bad
		}
	}
	if net.ParseIP(h.name) != nil {
		return h, nil
	}
	for _, label := range strings.Split(h.name, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") ||
			strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return host{}, bad
		}
	}
	return h, nil
}
