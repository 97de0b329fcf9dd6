package httpjson

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// A request through Timeout ends after its bound, also while its body is being read; one that
// answers in time is read whole.
func TestTimeoutBoundsTheRequestAndItsBody(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow-headers":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/slow-body":
			_, _ = io.WriteString(w, "start")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	defer close(release)
	client := &http.Client{Transport: Timeout(LimitResponses(srv.Client().Transport, 1<<10), 200*time.Millisecond)}
	defer client.CloseIdleConnections()

	getOK(t, client, srv.URL+"/fast")

	start := time.Now()
	if _, err := client.Get(srv.URL + "/slow-headers"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow headers: %v", err)
	}
	resp, err := client.Get(srv.URL + "/slow-body")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow body: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the two slow requests took %s", took)
	}
}

// The requests that follow redirects share the first one's deadline, as http.Client's Timeout
// bounds the whole exchange: three hops of 150 ms each do not fit in 300 ms, though each would.
func TestTimeoutSpansRedirects(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hop, _ := strconv.Atoi(r.URL.Query().Get("hop"))
		select {
		case <-time.After(150 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		if hop < 3 {
			http.Redirect(w, r, "/hop?hop="+strconv.Itoa(hop+1), http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	client := &http.Client{Transport: Timeout(srv.Client().Transport, 300*time.Millisecond)}
	defer client.CloseIdleConnections()
	if resp, err := client.Get(srv.URL + "/hop?hop=1"); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("three hops of 150 ms within 300 ms: %v", err)
	}
	client = &http.Client{Transport: Timeout(srv.Client().Transport, 5*time.Second)}
	defer client.CloseIdleConnections()
	getOK(t, client, srv.URL+"/hop?hop=1")
}

// getOK fails the test unless a GET of url through client is answered "ok" in whole.
func getOK(t *testing.T, client *http.Client, url string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "ok" {
		t.Fatalf("%s: %q %v", url, body, err)
	}
}
