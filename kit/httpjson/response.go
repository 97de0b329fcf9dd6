package httpjson

import (
	"fmt"
	"io"
	"net/http"
)

// MaxResponse bounds a JSON answer one service reads from another or from a provider; their
// answers are small, and a peer that sends more is not trusted to stop.
const MaxResponse = 1 << 20

// ResponseTooLargeError is a response body refused for its size.
type ResponseTooLargeError struct{ Limit int64 }

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("the response body is larger than %d bytes", e.Limit)
}

// WithResponseLimit returns a copy of hc (a default client when nil) whose response bodies
// fail with a *ResponseTooLargeError past limit bytes. It caps what generated clients read,
// which read whole bodies, without touching them.
func WithResponseLimit(hc *http.Client, limit int64) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	c.Transport = LimitResponses(c.Transport, limit)
	return c
}

// LimitResponses wraps next (http.DefaultTransport when nil) so that no response body yields
// more than limit bytes: a declared length above it fails at once, anything else when
// reading passes it.
func LimitResponses(next http.RoundTripper, limit int64) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &limitTransport{next: next, limit: limit}
}

type limitTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t *limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.limit {
		resp.Body.Close()
		return nil, &ResponseTooLargeError{Limit: t.limit}
	}
	resp.Body = &limitBody{rc: resp.Body, left: t.limit, limit: t.limit}
	return resp, nil
}

// CloseIdleConnections reaches the wrapped transport, as http.Client expects of one.
func (t *limitTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type limitBody struct {
	rc    io.ReadCloser
	left  int64 // bytes still allowed; negative once the limit was passed
	limit int64
}

func (b *limitBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &ResponseTooLargeError{Limit: b.limit}
	}
	// One byte more than allowed tells a body that ends at the limit from one that goes on.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		n, b.left = int(b.left), -1
		return n, &ResponseTooLargeError{Limit: b.limit}
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitBody) Close() error { return b.rc.Close() }

// MaxIdleConnsPerHost is how many idle keep-alive connections a PooledTransport keeps to one
// host: about as many as a busy service has calls in flight to another.
const MaxIdleConnsPerHost = 256

// PooledTransport returns a transport for calls between the services (and to a provider that
// honours idempotency keys). Go's default keeps only 2 idle connections per host, so under
// concurrency most calls would dial a connection of their own and close it after: a TCP
// handshake and a goroutine pair per call, and a port in TIME_WAIT.
func PooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * MaxIdleConnsPerHost
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
}
