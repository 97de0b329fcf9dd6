package proctest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// RequireMetricsAlone checks a started service whose settings gave it a metrics listener of its
// own (--metrics-listen): its "listening" line names that address, /metrics there answers with
// every one of want, and /metrics on the API's listener is not found.
func RequireMetricsAlone(t testing.TB, p *Process, want ...string) {
	t.Helper()
	addr, _ := p.Listening()["metrics_addr"].(string)
	if addr == "" || addr == p.Addr {
		t.Fatalf("the listening line names no metrics address of its own: %v", p.Listening())
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := get(p.URL() + "/metrics"); status != http.StatusNotFound {
		t.Fatalf("/metrics on --listen: %d %s, want 404", status, body)
	}
	status, body := get("http://" + addr + "/metrics")
	for _, w := range want {
		if status != http.StatusOK || !strings.Contains(body, w) {
			t.Fatalf("/metrics on --metrics-listen: %d, no %q in\n%s", status, w, body)
		}
	}
}
