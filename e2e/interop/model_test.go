package interop_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// The fake models share one script: the test says which tool call the next conversation makes
// (its id and arguments); the fake answers the conversation's first request with that call and
// any request that carries the call's result with a short text, which ends the harness's turn.
// It keeps every tool result it is sent, by call id. Harness quirks (where the tool is listed,
// what it is called) are handled by each API's fake, never by the router.

// plannedCall is the tool call the fake makes next.
type plannedCall struct {
	ID   string // the tool-call id, as the model API issues it
	Args string // the arguments, JSON
}

// script is the state a fake model shares with the test.
type script struct {
	mu       sync.Mutex
	next     *plannedCall
	issued   []string          // call ids sent to the harness, in order
	results  map[string]string // call id -> the tool result the harness sent back (raw JSON)
	unknown  []string          // requests the fake could not answer, for the failure message
	searches int               // tool searches the fake made first (Claude Code's deferred tools)
}

// plan sets the call of the next conversation.
func (s *script) plan(id, args string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = &plannedCall{ID: id, Args: args}
}

// take hands out the planned call once.
func (s *script) take() *plannedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.next
	s.next = nil
	if c != nil {
		s.issued = append(s.issued, c.ID)
	}
	return c
}

func (s *script) recordResult(id, raw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.results == nil {
		s.results = map[string]string{}
	}
	s.results[id] = raw
}

func (s *script) recordUnknown(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unknown = append(s.unknown, what)
}

// summary says what the fake saw besides the planned calls, for the test's log.
func (s *script) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d calls issued, %d tool searches, requests not answered: %q", len(s.issued), s.searches, s.unknown)
}

// result is the tool result the harness sent back for a call, "" if none.
func (s *script) result(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.results[id]
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// sse writes Server-Sent Events, one data line of JSON each.
type sse struct {
	w http.ResponseWriter
}

func startSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w: w}
}

func (s sse) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// newID is prefix and n random letters and digits, the shape of the model APIs' ids
// (OpenAI's "call_" + 24, Anthropic's "toolu_" + 24).
func newID(prefix string, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		b[i] = alphabet[k.Int64()]
	}
	return prefix + string(b)
}
