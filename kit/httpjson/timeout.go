package httpjson

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Timeout wraps next so that each request made through it, the reading of its response body
// included, ends after d, as http.Client's Timeout does. Use it in place of that field when
// the transport is not an *http.Transport (one wrapped by tracing.Transport or
// LimitResponses): http.Client then enforces its Timeout with two goroutines and a timer per
// request, which a router with a few hundred calls in flight paid for in memory. A request
// whose context ends sooner ends then. A d of zero or less bounds nothing: next is returned.
func Timeout(next http.RoundTripper, d time.Duration) http.RoundTripper {
	if d <= 0 {
		return next
	}
	return &timeoutTransport{next: next, d: d}
}

type timeoutTransport struct {
	next http.RoundTripper
	d    time.Duration
}

func (t *timeoutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(r.Context(), t.d)
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// CloseIdleConnections reaches the wrapped transport, as http.Client expects of one.
func (t *timeoutTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// cancelOnClose ends a request's timeout once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
