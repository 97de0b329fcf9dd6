package main

import (
	"os"
	"strconv"
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
	"hubu.dev/hubu/kit/proctest"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

// With --metrics-listen (here from HUBU_METRICS_LISTEN), the real binary serves /metrics there,
// its state gauges included, and no longer on --listen; both stop on SIGTERM. The Go runtime's
// gauges say hubu serve runs at its own GC target and memory limit.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	dbURL := sqltest.NewDatabase(t, "hubu", hubusql.Migrations())
	p := &proctest.Process{Name: "hubu", Path: binary, Args: []string{"serve", "--listen", "127.0.0.1:0"},
		Env: append(os.Environ(), "HUBU_DATABASE_URL="+dbURL, "HUBU_METRICS_LISTEN=127.0.0.1:0")}
	proctest.Start(t, p)
	proctest.RequireMetricsAlone(t, p,
		`hubu_operations{state="executing"} 0`, "hubu_operations_dispatching_stuck 0", "hubu_state_metrics_read_errors_total 0",
		"hubu_state_metrics_age_seconds", "hubu_http_requests_total{", "hubu_build_info", // the API's counters too
		"\ngo_gc_gogc_percent "+strconv.Itoa(gcPercent)+"\n",
		"\ngo_gc_gomemlimit_bytes "+strconv.FormatFloat(memoryLimit, 'g', -1, 64)+"\n",
	)
	proctest.Stop(t, p)
}

func TestBadMetricsSettings(t *testing.T) {
	t.Parallel()
	migrated := sqltest.NewDatabase(t, "hubu", hubusql.Migrations())
	env := []string{"HUBU_DATABASE_URL=" + migrated}
	commandtest.Refuses(t, run, env, []string{"serve", "--metrics-refresh", "0s"}, "--metrics-refresh must be positive")
	commandtest.Refuses(t, run, append(env, "HUBU_METRICS_REFRESH=5x"), []string{"serve"},
		`HUBU_METRICS_REFRESH must be a duration such as 90s or 10m, not "5x"`)
	commandtest.Refuses(t, run, env, []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "256.0.0.1:0"},
		"cannot listen on 256.0.0.1:0: ")
}
