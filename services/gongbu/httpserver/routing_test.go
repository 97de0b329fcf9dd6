package httpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"hubu.dev/hubu/proto/gongbuspec"
)

// Every error is problem+json with a stable code, also for a route Gongbu does not have or
// a method a route does not take (chi's own answers are plain text).
func TestUnknownRoutesAndMethodsAreProblems(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc, err := gongbuspec.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	problem := doc.Components.Schemas["Problem"].Value
	// The validator must see at least one response; the probe is one.
	if r, err := b.anonymous.GetHealthzWithResponse(t.Context()); err != nil || r.JSON200 == nil {
		t.Fatalf("healthz: %v", err)
	}

	for _, c := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, "not_found", ""},
		{http.MethodGet, "/v1/nope", http.StatusNotFound, "not_found", ""},
		{http.MethodPost, "/v1/operations/hubu:public-operation:v1:00000000-0000-4000-8000-000000000000/nope", http.StatusNotFound, "not_found", ""},
		{http.MethodDelete, "/v1/executions", http.StatusMethodNotAllowed, "method_not_allowed", "GET, POST"},
		{http.MethodPut, "/v1/executions/00000000-0000-4000-8000-000000000000", http.StatusMethodNotAllowed, "method_not_allowed", "GET"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "method_not_allowed", "GET"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), c.method, b.url+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+serviceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d %q, want %d problem+json: %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.status, body)
			continue
		}
		if got := problemCode(t, body); got != c.code {
			t.Errorf("%s %s: code %q, want %q", c.method, c.path, got, c.code)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if err := problem.VisitJSON(v); err != nil {
			t.Errorf("%s %s: the body is not the spec's Problem: %v: %s", c.method, c.path, err, body)
		}
		if got := resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if c.status == http.StatusMethodNotAllowed && !strings.Contains(string(body), c.method) {
			t.Errorf("%s %s: the detail does not name the method: %s", c.method, c.path, body)
		}
	}
}
