// Package flux is Gongbu's adapter for Black Forest Labs' FLUX API (and mockflux, which has
// its shape), through the client generated from proto/bfl.openapi.yaml.
package flux

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/kit/netguard"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/bflapi"
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
