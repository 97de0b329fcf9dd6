package gongbuexec_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/services/hubu/gongbuexec"
)

// Gongbu's answer is read up to a bound: one that sends more gets an error, not Hubu's
// memory.
func TestOversizedAnswer(t *testing.T) {
	t.Parallel()
	for _, declared := range []bool{false, true} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			// A valid 202 whose unknown field carries the bulk: without a cap it decodes.
			body := `{"padding":"` + strings.Repeat("x", httpjson.MaxResponse) + `"}`
			w.Header().Set("Content-Type", "application/json")
			if !declared {
				w.Header().Set("Transfer-Encoding", "chunked")
			}
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(ts.Close)
		x, err := gongbuexec.New(ts.URL, "token", &http.Client{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = x.Execute(context.Background(), decision())
		if _, ok := errors.AsType[*httpjson.ResponseTooLargeError](err); !ok {
			t.Fatalf("declared=%v: err = %v, want the answer refused for its size", declared, err)
		}
	}
}
