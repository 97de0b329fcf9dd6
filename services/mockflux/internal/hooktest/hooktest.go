// Package hooktest is a webhook receiver for mockflux's tests: a real HTTP server that takes
// notices through the callback handler generated from proto/bfl.openapi.yaml, records them
// byte for byte, and checks their signatures with crypto/hmac on its own, so that a test
// does not trust the code it tests to sign. Production code never imports it.
package hooktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"hubu.dev/hubu/proto/bflapi"
)

// Hang, as an answer, holds the request until the sender gives up.
const Hang = -1

// Notice is one request the receiver took.
type Notice struct {
	Header http.Header
	Params bflapi.TaskReadyParams
	Body   []byte
	// At is when the receiver took it, on the wall clock.
	At time.Time
}

// Receiver records the notices POSTed to URL.
type Receiver struct {
	URL string

	answer  func(n int) int
	mu      sync.Mutex
	notices []Notice
}

// New starts a receiver, closed at the end of the test. answer gives the status of the n-th
// request (from 1): a 3xx comes with a Location on the same receiver, Hang holds it; nil
// answers 204 to every one.
func New(t testing.TB, answer func(n int) int) *Receiver {
	t.Helper()
	r := &Receiver{answer: answer}
	if r.answer == nil {
		r.answer = func(int) int { return http.StatusNoContent }
	}
	srv := httptest.NewServer(bflapi.TaskReadyCallbackHandler(r, nil))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// HandleTaskReadyCallback implements bflapi.CallbackReceiverInterface.
func (r *Receiver) HandleTaskReadyCallback(w http.ResponseWriter, req *http.Request, params bflapi.TaskReadyParams) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.notices = append(r.notices, Notice{Header: req.Header.Clone(), Params: params, Body: body, At: time.Now()})
	n := len(r.notices)
	r.mu.Unlock()
	status := r.answer(n)
	switch {
	case status == Hang:
		<-req.Context().Done()
		return
	case status >= 300 && status < 400:
		w.Header().Set("Location", "/moved")
	}
	w.WriteHeader(status)
}

// Notices returns what has arrived so far.
func (r *Receiver) Notices() []Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Notice(nil), r.notices...)
}

// Await waits (at most 10 s) until n notices have arrived and returns them.
func (r *Receiver) Await(t testing.TB, n int) []Notice {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.Notices()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d notices after 10s, want %d", len(got), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Check fails the test unless n is the notice of job id that ended Ready, in the wire format
// of the spec's taskReady callback, carrying secret as BFL does: in X-Webhook-Secret, and as
// the HMAC of the body in X-BFL-Signature.
func Check(t testing.TB, n Notice, secret, id string) {
	t.Helper()
	if want := `{"id":"` + id + `","status":"Ready"}`; string(n.Body) != want {
		t.Errorf("body %s, want %s", n.Body, want)
	}
	if ct := n.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if n.Params.XWebhookSecret != secret || n.Header.Get("X-Webhook-Secret") != secret {
		t.Errorf("X-Webhook-Secret is not the submit's secret")
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(n.Body)
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); n.Params.XBFLSignature != want || n.Header.Get("X-BFL-Signature") != want {
		t.Errorf("signature %q, want %q", n.Params.XBFLSignature, want)
	}
}
