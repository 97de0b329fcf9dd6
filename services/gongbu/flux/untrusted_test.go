package flux_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/flux"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// redirect answers with a redirect to url.
func redirect(status int, url string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, url, status) }
}

// A provider's redirect is never followed: Go's client would carry the x-key header along to
// wherever it points. The outcome of a submit answered so is unknown (the provider may have
// taken it), never a refusal.
func TestNoRedirectIsFollowed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		submit bool
		to     func(base, foreign *bfl) string
		status int
	}{
		{"submit redirected to another host", true, func(_, f *bfl) string { return f.url + "/v1/flux-dev" }, http.StatusTemporaryRedirect},
		{"submit redirected on the same host", true, func(b, _ *bfl) string { return b.url + "/v1/flux-dev" }, http.StatusPermanentRedirect},
		{"poll redirected to another host", false, func(_, f *bfl) string { return f.url + "/v1/get_result?id=task-1" }, http.StatusFound},
		{"poll redirected on the same host", false, func(b, _ *bfl) string { return b.url + "/v1/get_result?id=task-1" }, http.StatusFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			base, foreign := newBFL(t), newBFL(t)
			// Were the redirect followed, this is what its target would answer.
			followed := accepted("task-1")
			if !c.submit {
				followed = reply(http.StatusOK, bflapi.ResultResponse{Id: "task-1", Status: bflapi.ResultStatusPending})
			}
			base.answer(redirect(c.status, c.to(base, foreign)), followed)
			foreign.answer(followed)
			a := newAdapter(t, base, false)
			var err error
			if c.submit {
				_, err = a.Submit(context.Background(), "k", gongbutest.NewDecision())
			} else {
				_, err = a.Poll(context.Background(), gongbu.Job{ID: "task-1", PollingURL: base.url + "/v1/get_result?id=task-1"})
			}
			if err == nil || gongbu.IsRejected(err) || !strings.Contains(err.Error(), "redirect") {
				t.Fatalf("err = %v, want a redirect refused as an unknown outcome", err)
			}
			if n := len(base.requests()); n != 1 {
				t.Fatalf("the API host got %d requests, want 1", n)
			}
			for _, r := range foreign.requests() {
				t.Fatalf("the redirect was followed to another host, with x-key %q", r.header.Get("x-key"))
			}
		})
	}
}

// A sample URL is passed on (to the router, which downloads it) only on the API host or a
// host allow-listed for samples.
func TestSampleURLAllowList(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		sample func(base *bfl) string
		ok     bool
	}{
		{"the API host", func(b *bfl) string { return b.url + "/samples/task-1.png?exp=1&sig=x" }, true},
		{"an allow-listed host", func(*bfl) string { return "https://delivery-us1.bfl.ai/results/task-1/sample.png?sig=x" }, true},
		{"an allow-listed host in another letter case", func(*bfl) string { return "https://Delivery-US1.bfl.ai/results/task-1/sample.png" }, true},
		{"a host of the same parent domain, not allow-listed", func(*bfl) string { return "https://delivery-eu1.bfl.ai/results/task-1/sample.png" }, false},
		{"a host that only begins the same", func(*bfl) string { return "https://delivery-us1.bfl.ai.evil.example/sample.png" }, false},
		{"an allow-listed host on another port", func(*bfl) string { return "https://delivery-us1.bfl.ai:8443/sample.png" }, false},
		{"a link-local address", func(*bfl) string { return "http://169.254.169.254/latest/meta-data/" }, false},
		{"credentials in the URL", func(*bfl) string { return "https://user:pw@delivery-us1.bfl.ai/sample.png" }, false},
		{"a file URL", func(*bfl) string { return "file:///etc/passwd" }, false},
		{"not a URL", func(*bfl) string { return "::not a url" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBFL(t)
			sample := c.sample(b)
			b.answer(reply(http.StatusOK, bflapi.ResultResponse{Id: "task-1", Status: bflapi.ResultStatusReady, Result: &bflapi.Result{Sample: sample}}))
			a, err := flux.NewAdapter(flux.Config{BaseURL: b.url, APIKey: apiKey, Timeout: 5 * time.Second, SampleHosts: []string{"delivery-us1.bfl.ai"}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Poll(context.Background(), gongbu.Job{ID: "task-1"})
			if c.ok && (err != nil || got.Status != gongbu.JobReady || got.ImageURL != sample) {
				t.Fatalf("got %+v err %v, want the sample", got, err)
			}
			if !c.ok && (err == nil || got.ImageURL != "" || !strings.Contains(err.Error(), "sample")) {
				t.Fatalf("got %+v err %v, want the sample URL refused", got, err)
			}
		})
	}
}

// Every body read from the provider is capped: a bigger one is an error, never decoded; for a
// submit that is an unknown outcome (the provider may have charged), never a refusal.
func TestOversizedBodies(t *testing.T) {
	t.Parallel()
	padded := func(status int, fields string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Transfer-Encoding", "chunked") // no declared length to refuse up front
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{`+fields+`,"padding":"`+strings.Repeat("x", httpjson.MaxResponse)+`"}`)
		}
	}
	cases := []struct {
		name   string
		submit bool
		answer http.HandlerFunc
	}{
		{"a submit's answer", true, padded(http.StatusOK, `"id":"task-1","polling_url":"https://api.bfl.ai/v1/get_result?id=task-1"`)},
		{"a submit's refusal", true, padded(http.StatusUnprocessableEntity, `"detail":"width must be a multiple of 32"`)},
		{"a poll's answer", false, padded(http.StatusOK, `"id":"task-1","status":"Pending"`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBFL(t)
			b.answer(c.answer)
			a := newAdapter(t, b, false)
			var err error
			if c.submit {
				_, err = a.Submit(context.Background(), "k", gongbutest.NewDecision())
			} else {
				_, err = a.Poll(context.Background(), gongbu.Job{ID: "task-1"})
			}
			var tooLarge *httpjson.ResponseTooLargeError
			if !errors.As(err, &tooLarge) || gongbu.IsRejected(err) {
				t.Fatalf("err = %v, want the body refused for its size, as an unknown outcome", err)
			}
		})
	}
}

func TestHostSettings(t *testing.T) {
	t.Parallel()
	good, err := flux.ParseHosts(" api.us1.bfl.ai, API.EU1.bfl.ai. ,127.0.0.1:8080,[::1]:9000,,")
	if err != nil || strings.Join(good, " ") != "api.us1.bfl.ai api.eu1.bfl.ai 127.0.0.1:8080 [::1]:9000" {
		t.Fatalf("ParseHosts: %q %v", good, err)
	}
	if none, err := flux.ParseHosts(""); err != nil || len(none) != 0 {
		t.Fatalf("ParseHosts of nothing: %q %v", none, err)
	}
	for _, bad := range []string{"https://api.bfl.ai", "api.bfl.ai/v1", "*.bfl.ai", "user@api.bfl.ai", "api.bfl.ai:http", "api.bfl.ai:0", "api.bfl.ai:70000", "api bfl.ai", "?"} {
		if _, err := flux.ParseHosts(bad); err == nil {
			t.Errorf("ParseHosts(%q) took it", bad)
		}
		if _, err := flux.NewAdapter(flux.Config{BaseURL: "https://api.bfl.ai", APIKey: apiKey, SampleHosts: []string{bad}}); err == nil {
			t.Errorf("an adapter took the sample host %q", bad)
		}
		if _, err := flux.NewAdapter(flux.Config{BaseURL: "https://api.bfl.ai", APIKey: apiKey, PollingHosts: []string{bad}}); err == nil {
			t.Errorf("an adapter took the polling host %q", bad)
		}
	}
}
