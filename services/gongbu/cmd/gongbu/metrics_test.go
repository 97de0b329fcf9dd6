package main

import (
	"os"
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
	proctest.RequireMetricsAlone(t, p,
		`gongbu_executions{state="indeterminate"} 0`, "gongbu_executions_unreported 0", "gongbu_state_metrics_read_errors_total 0",
		"gongbu_state_metrics_age_seconds", "gongbu_http_requests_total{", "gongbu_build_info", // the API's counters too
	)
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
