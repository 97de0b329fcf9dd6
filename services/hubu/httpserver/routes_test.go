package httpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/hubuapi"
)

// Unknown paths and methods a route does not take answer problem details with their own
// codes, like every other error.
func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodGet, "/v1/nothing-here", http.StatusNotFound, "not_found", ""},
		{http.MethodGet, "/nothing-here", http.StatusNotFound, "not_found", ""},
		{http.MethodDelete, "/v1/agents", http.StatusMethodNotAllowed, "method_not_allowed", "GET, POST"},
		{http.MethodGet, "/v1/authorizations", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{http.MethodPut, "/v1/credentials/" + uuid.NewString() + "/revoke", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "method_not_allowed", "GET"},
	} {
		req, err := http.NewRequest(c.method, b.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.OperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p hubuapi.Problem
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(body, &p) != nil || string(p.Code) != c.code || p.Status != c.status || !p.Code.Valid() {
			t.Errorf("%s %s: %d %s %s, want %d %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.status, c.code)
		}
		if got := resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
}
