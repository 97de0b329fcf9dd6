package hubulink_test

import (
	"context"
	"encoding/json"
	"errors"
	"hubu.dev/hubu/services/gongbu"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/httpjson"
)

// Every answer from Hubu is read up to a bound: a Hubu (or whatever answers in its place) that
// sends more gets an error, not Gongbu's memory.
func TestOversizedAnswers(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	issued := decision(id)
	// A valid answer with an unknown field that carries the bulk: without a cap it decodes.
	padded := func(v any) map[string]any {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		m["padding"] = strings.Repeat("x", httpjson.MaxResponse)
		return m
	}
	var tooLarge *httpjson.ResponseTooLargeError
	_, c := newHubu(t, http.StatusOK, padded(issued))
	if _, err := c.Decision(context.Background(), id); !errors.As(err, &tooLarge) {
		t.Fatalf("decision: err = %v, want the answer refused for its size", err)
	}
	_, c = newHubu(t, http.StatusOK, padded(map[string]any{"state": "succeeded"}))
	if err := c.Settle(context.Background(), id, 25_000, false, "", nil); !errors.As(err, &tooLarge) {
		t.Fatalf("settle: err = %v, want the answer refused for its size", err)
	}
	if err := c.Release(context.Background(), id, ""); !errors.As(err, &tooLarge) {
		t.Fatalf("release: err = %v, want the answer refused for its size", err)
	}
	if _, err := c.Owns(context.Background(), gongbu.Caller{Token: "agent-token"}, issued.PublicHandle); !errors.As(err, &tooLarge) {
		t.Fatalf("owns: err = %v, want the answer refused for its size", err)
	}
}
