package gongbuexec_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/gongbuexec"
)

func decision() hubu.Decision {
	return hubu.Decision{
		DecisionID: uuid.New(), PublicHandle: "hubu:public-operation:v1:" + uuid.NewString(), AgentID: uuid.New(),
		Tool: "generate_image", Scope: hubu.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"},
		Arguments:    json.RawMessage(`{"prompt":"a fox","model":"flux-dev","width":1024,"height":1024}`),
		AmountMicros: 25_000, Currency: "USD",
	}
}

// A hand-off succeeds only when Gongbu answers that it holds the decision; anything else,
// including a failure that may or may not have reached Gongbu, is an error (Hubu re-sends).
func TestHandOffOutcomes(t *testing.T) {
	t.Parallel()
	// A port nothing listens on.
	gone := httptest.NewServer(nil)
	closed := gone.URL
	gone.Close()

	answer := func(h http.HandlerFunc) string {
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		return ts.URL
	}
	cases := []struct {
		name string
		url  string
		ok   bool
	}{
		{"connection refused", closed, false},
		{"a 502 from a proxy", answer(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}), false},
		{"accepted", answer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{}`))
		}), true},
		{"a 500", answer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"code":"internal"}`))
		}), false},
		{"the connection dropped after the request", answer(func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x, err := gongbuexec.New(c.url, "token", &http.Client{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			err = x.Execute(context.Background(), decision())
			if (err == nil) != c.ok {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
