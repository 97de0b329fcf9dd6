package httpjson

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// H2CTransport sends the requests for http:// URLs to a host that speaks cleartext HTTP/2
// (h2c with prior knowledge, as every server of this release does: kit/command.NewHTTPServer)
// over one connection per host, all requests in flight multiplexed on it, and to a host that
// does not (a server of an earlier release, during a rolling upgrade) over HTTP/1.1, a
// connection per request in flight. https:// URLs always take the HTTP/1.1 transport, which
// negotiates HTTP/2 over TLS on its own where the server offers it.
//
// Which a host speaks is found by a probe, GET /healthz, before the first request to it: any
// HTTP answer over h2c means h2c. A host that answers only over HTTP/1.1 gets HTTP/1.1 for
// http1For and is then probed again, so that a client started before its servers were upgraded
// moves to h2c once they are. A request over h2c that fails without an answer (the server may
// have been replaced by an earlier release, or is restarting) makes the next request probe
// again. The failed request is not sent again here: the caller sees its error, as it would
// over HTTP/1.1. A server of this release never needs the fallback; an earlier one sees the
// probe as a request for "PRI *", which it answers with an error.
//
// With a Logger, what a probe finds is logged when it differs from what was logged for the
// host before: a host's first answer, and each move between h2c and HTTP/1.1 (so that an
// operator sees a service that stays on HTTP/1.1 after an upgrade, or a proxy that does not
// pass h2c), never each minute's probe that finds the same.
type H2CTransport struct {
	Logger *slog.Logger // nil: nothing is logged

	h1, h2 *http.Transport
	now    func() time.Time

	mu    sync.Mutex
	hosts map[string]*h2cHost
}

// http1For is how long a host that answered only over HTTP/1.1 is sent HTTP/1.1 before it is
// probed again; probeTimeout bounds one probe over each protocol.
const (
	http1For     = time.Minute
	probeTimeout = 2 * time.Second
)

// h2cHost is what is known of one host: whether it speaks h2c, until when an HTTP/1.1-only
// answer holds, the probe in flight, whose channel is closed when it ends, and what was last
// logged of it.
type h2cHost struct {
	speaks  protocol
	until   time.Time
	probing chan struct{}
	logged  protocol
}

type protocol int

const (
	unknown protocol = iota
	h2c
	http1
)

// NewH2CTransport returns an H2CTransport that speaks HTTP/1.1 through h1, and h2c through a
// clone of it that pings a connection no frame arrived on for 5 s and closes it when the ping
// goes unanswered for 5 s more. With every request in flight on one connection, a connection
// that died silently (a peer gone without a reset, a network path that drops everything) must
// not hold them all, and every request after them, until their timeouts: over HTTP/1.1 a new
// request would have opened a connection of its own. A ping is a few bytes, sent only when a
// connection is quiet.
func NewH2CTransport(h1 *http.Transport) *H2CTransport {
	return newH2CTransport(h1, 5*time.Second, 5*time.Second)
}

// newH2CTransport is NewH2CTransport with the ping's timings.
func newH2CTransport(h1 *http.Transport, pingQuiet, pingTimeout time.Duration) *H2CTransport {
	h2 := h1.Clone()
	h2.Protocols = new(http.Protocols)
	h2.Protocols.SetUnencryptedHTTP2(true)
	h2.HTTP2 = &http.HTTP2Config{SendPingTimeout: pingQuiet, PingTimeout: pingTimeout}
	return &H2CTransport{h1: h1, h2: h2, now: time.Now, hosts: make(map[string]*h2cHost)}
}

func (t *H2CTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "http" || !t.speaksH2C(r.Context(), r.URL) {
		return t.h1.RoundTrip(r)
	}
	resp, err := t.h2.RoundTrip(r)
	if err != nil && r.Context().Err() == nil {
		t.forget(r.URL.Host)
	}
	return resp, err
}

// CloseIdleConnections closes both transports' idle connections, as http.Client expects.
func (t *H2CTransport) CloseIdleConnections() {
	t.h1.CloseIdleConnections()
	t.h2.CloseIdleConnections()
}

// speaksH2C says whether u's host speaks h2c, probing it when that is not known; requests to
// a host being probed wait for the probe.
func (t *H2CTransport) speaksH2C(ctx context.Context, u *url.URL) bool {
	t.mu.Lock()
	h := t.hosts[u.Host]
	if h == nil {
		h = &h2cHost{}
		t.hosts[u.Host] = h
	}
	switch {
	case h.probing != nil:
		// Wait for the probe in flight and take what it found. A host it found neither
		// way (down, or a path that drops everything) gets this request over HTTP/1.1
		// without another probe, so requests do not queue behind one probe after another.
		probing := h.probing
		t.mu.Unlock()
		select {
		case <-probing:
			t.mu.Lock()
			speaks := h.speaks
			t.mu.Unlock()
			return speaks == h2c
		case <-ctx.Done():
			return false // the request fails on its context over HTTP/1.1
		}
	case h.speaks == h2c:
		t.mu.Unlock()
		return true
	case h.speaks == http1 && t.now().Before(h.until):
		t.mu.Unlock()
		return false
	}
	probing := make(chan struct{})
	h.probing = probing
	t.mu.Unlock()

	speaks := t.probe(ctx, u)
	t.mu.Lock()
	h.speaks, h.until, h.probing = speaks, t.now().Add(http1For), nil
	news := speaks != unknown && speaks != h.logged
	if news {
		h.logged = speaks
	}
	t.mu.Unlock()
	close(probing)
	if news && t.Logger != nil {
		t.logFound(ctx, u.Host, speaks)
	}
	return speaks == h2c
}

func (t *H2CTransport) logFound(ctx context.Context, host string, speaks protocol) {
	if speaks == h2c {
		t.Logger.InfoContext(ctx, "backend speaks HTTP/2: every request in flight to it on one connection", "host", host)
		return
	}
	t.Logger.WarnContext(ctx, "backend answers only HTTP/1.1 (a release before h2c, or a proxy that does not pass it): "+
		"a connection per request in flight, and it is asked again each minute", "host", host)
}

// probe asks u's host for /healthz over h2c, then over HTTP/1.1; unknown when neither
// answered (the host is down: the request goes over HTTP/1.1 and gets its error).
func (t *H2CTransport) probe(ctx context.Context, u *url.URL) protocol {
	healthz := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/healthz"}).String()
	for _, p := range []struct {
		rt     http.RoundTripper
		speaks protocol
	}{{t.h2, h2c}, {t.h1, http1}} {
		if answers(ctx, p.rt, healthz) {
			return p.speaks
		}
	}
	return unknown
}

// answers says whether rt got any HTTP answer to a GET of target within probeTimeout.
func answers(ctx context.Context, rt http.RoundTripper, target string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return true
}

// forget makes the next request to host probe it again.
func (t *H2CTransport) forget(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.hosts[host]; h != nil && h.probing == nil {
		h.speaks = unknown
	}
}
