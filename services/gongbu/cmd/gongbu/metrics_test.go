package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
	"hubu.dev/hubu/kit/proctest"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/sqltest"
)

// With --metrics-listen (here from GONGBU_METRICS_LISTEN), the real binary serves /metrics
// there, its state gauges included, and no longer on --listen; both stop on SIGTERM.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	dbURL := sqltest.NewDatabase(t, "gongbu", gongbusql.Migrations())
	p := &proctest.Process{Name: "gongbu", Path: binary, Args: []string{"serve", "--listen", "127.0.0.1:0"},
		Env: append(append(os.Environ(), serveEnv...), "GONGBU_DATABASE_URL="+dbURL, "GONGBU_METRICS_LISTEN=127.0.0.1:0")}
	proctest.Start(t, p)
	metricsAddr, _ := p.Listening()["metrics_addr"].(string)
	if metricsAddr == "" || metricsAddr == p.Addr {
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
	status, body := get("http://" + metricsAddr + "/metrics")
	for _, want := range []string{
		`gongbu_executions{state="indeterminate"} 0`, "gongbu_executions_unreported 0", "gongbu_state_metrics_read_errors_total 0",
		"gongbu_state_metrics_age_seconds", "gongbu_http_requests_total{", "gongbu_build_info", // the API's counters too
	} {
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("/metrics on --metrics-listen: %d, no %q in\n%s", status, want, body)
		}
	}
	proctest.Stop(t, p)
}

func TestBadMetricsSettings(t *testing.T) {
	t.Parallel()
	migrated := sqltest.NewDatabase(t, "gongbu", gongbusql.Migrations())
	env := append([]string{"GONGBU_DATABASE_URL=" + migrated}, serveEnv...)
	commandtest.Refuses(t, run, env, []string{"serve", "--metrics-refresh", "0s"}, "--metrics-refresh must be positive")
	commandtest.Refuses(t, run, append(env, "GONGBU_METRICS_REFRESH=5x"), []string{"serve"},
		`GONGBU_METRICS_REFRESH must be a duration such as 90s or 10m, not "5x"`)
	commandtest.Refuses(t, run, env, []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "256.0.0.1:0"},
		"cannot listen on 256.0.0.1:0: ")
}
