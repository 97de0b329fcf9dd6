package flux_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/flux"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// A Ready job's sample is downloaded from a sample host without the API key, checked, and
// refused when it is not the image it says it is, too large, elsewhere or a redirect.
func TestFetchResult(t *testing.T) {
	t.Parallel()
	var withKey atomic.Int32
	samples := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-key") != "" {
			withKey.Add(1)
		}
		switch r.URL.Path {
		case "/ok.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(gongbutest.TinyPNG)
		case "/html.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("<html><body>expired</body></html>"))
		case "/big.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(gongbutest.TinyPNG)
			_, _ = w.Write(make([]byte, gongbu.MaxImageBytes))
		case "/expired.png":
			http.Error(w, "the sample URL has expired", http.StatusForbidden)
		case "/redirect.png":
			http.Redirect(w, r, "/ok.png", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(samples.Close)
	host := strings.TrimPrefix(samples.URL, "http://")
	a, err := flux.NewAdapter(flux.Config{BaseURL: "http://127.0.0.1:1", APIKey: apiKey, Timeout: 5 * time.Second, SampleHosts: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	img, err := a.FetchResult(ctx, samples.URL+"/ok.png?exp=1&sig=x")
	if err != nil || img.MIMEType != "image/png" || !bytes.Equal(img.Bytes, gongbutest.TinyPNG) {
		t.Fatalf("got %s (%d bytes), %v", img.MIMEType, len(img.Bytes), err)
	}
	for _, path := range []string{"/html.png", "/big.png", "/expired.png", "/redirect.png"} {
		if _, err := a.FetchResult(ctx, samples.URL+path); err == nil {
			t.Errorf("%s: downloaded", path)
		}
	}
	other, _ := url.Parse("https://delivery-eu1.bfl.ai/sample.png")
	if _, err := a.FetchResult(ctx, other.String()); err == nil || !strings.Contains(err.Error(), "sample") {
		t.Fatalf("a sample elsewhere: %v", err)
	}
	if n := withKey.Load(); n != 0 {
		t.Fatalf("the API key went with %d sample downloads", n)
	}
}
