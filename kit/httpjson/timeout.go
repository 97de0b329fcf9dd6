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
// whose context ends sooner ends then. As with that field, the bound is the whole exchange:
// the requests an http.Client makes to follow redirects share the first one's deadline. A d of
// zero or less bounds nothing: next is returned.
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
	deadline := time.Now().Add(t.d)
	// A redirect's request carries the response that caused it, and that response the request
	// this transport sent, with the deadline it set.
	if prev := r.Response; prev != nil && prev.Request != nil {
		if first, ok := prev.Request.Context().Deadline(); ok && first.Before(deadline) {
			deadline = first
		}
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
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
