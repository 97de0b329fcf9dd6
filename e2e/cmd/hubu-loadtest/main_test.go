package main

import (
	"context"
	"strings"
	"testing"
)

// The exit status: 0 for help, 2 for a usage or settings error, before anything starts.
func TestRunExitStatus(t *testing.T) {
	noEnv := func(string) string { return "" }
	withDB := func(k string) string {
		if k == "HUBU_LOADTEST_DATABASE_URL" {
			return "postgres://127.0.0.1:1/postgres"
		}
		return ""
	}
	for _, tc := range []struct {
		name   string
		args   []string
		getenv func(string) string
		code   int
		stderr string
	}{
		{"help", []string{"--help"}, noEnv, 0, "usage: hubu-loadtest"},
		{"no database", nil, noEnv, 2, "--database-url"},
		{"unknown flag", []string{"--sesions", "3"}, withDB, 2, "flag provided but not defined"},
		{"bad size", []string{"--spends", "0"}, withDB, 2, "--spends must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := run(context.Background(), tc.args, tc.getenv, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q", code, tc.code, stderr.String(), tc.stderr)
			}
		})
	}
}
