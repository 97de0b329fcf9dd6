package httpjson

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestLimitResponses(t *testing.T) {
	t.Parallel()
	const limit = 1 << 10
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("declared") == "" {
			w.Header().Set("Transfer-Encoding", "chunked") // no length to refuse up front
		} else {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		_, _ = io.WriteString(w, strings.Repeat("x", n))
	}))
	t.Cleanup(ts.Close)
	hc := WithResponseLimit(&http.Client{}, limit)
	cases := []struct {
		name  string
		query string
		ok    bool
	}{
		{"empty", "n=0", true},
		{"at the limit", "n=1024", true},
		{"one byte over", "n=1025", false},
		{"declared at the limit", "n=1024&declared=1", true},
		{"declared over", "n=1025&declared=1", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			resp, err := hc.Get(ts.URL + "?" + c.query)
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			var tooLarge *ResponseTooLargeError
			if !c.ok && (!errors.As(err, &tooLarge) || tooLarge.Limit != limit || !strings.Contains(err.Error(), "larger than 1024 bytes")) {
				t.Fatalf("err = %v, want a ResponseTooLargeError for 1024 bytes", err)
			}
			if len(body) > limit {
				t.Fatalf("read %d bytes past a limit of %d", len(body), limit)
			}
		})
	}
}

// An endless answer costs the reader no more than the limit. Not parallel: it measures the
// process's allocations.
func TestLimitResponsesBoundsAllocation(t *testing.T) {
	const limit, sent = 1 << 20, 64 << 20
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for n := 0; n < sent; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client gave up, as it should
			}
		}
	}))
	t.Cleanup(ts.Close)
	hc := WithResponseLimit(nil, limit)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := hc.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	var tooLarge *ResponseTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("read %d bytes, err %v: want a ResponseTooLargeError", len(body), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("reading a capped answer allocated %d MiB", got>>20)
	}
}

// The limit wraps the client's own transport and leaves the client it was given alone.
func TestWithResponseLimitKeepsTheClient(t *testing.T) {
	t.Parallel()
	inner := &countingTransport{}
	hc := &http.Client{Transport: inner, Timeout: 7}
	limited := WithResponseLimit(hc, 10)
	if limited == hc || hc.Transport != inner || limited.Timeout != 7 {
		t.Fatalf("the client was changed, or its settings lost")
	}
	resp, err := limited.Get("http://example.invalid/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if inner.n != 1 {
		t.Fatalf("the inner transport saw %d requests", inner.n)
	}
}

type countingTransport struct{ n int }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n++
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: r}, nil
}
