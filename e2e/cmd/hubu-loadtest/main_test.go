package main

import (
	"context"
	"os"
	"path/filepath"
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
		{"a scenario of its own processes against a running stack", []string{"--stack", "stack.env", "--scenarios", "latency,hubu"}, withDB, 2,
			"hubu starts processes of its own and does not run with --stack"},
		{"an own stack's setting against a running stack", []string{"--stack", "stack.env", "--render-time", "2s"}, withDB, 2,
			"--render-time (HUBU_LOADTEST_RENDER_TIME) set up the load test's own stack"},
		{"a stack on BFL's API", []string{"--stack", bflStack(t)}, withDB, 1, "would spend real money"},
		{"no such env file", []string{"--stack", "/nonexistent/stack.env"}, withDB, 1, "make up writes it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := run(context.Background(), tc.args, tc.getenv, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q", code, tc.code, stderr.String(), tc.stderr)
			}
		})
	}
}

// bflStack writes the env file of a stack that spends on BFL's API: no mockflux.
func bflStack(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "stack.env")
	env := "HUBU_URL='http://127.0.0.1:8081'\nGONGBU_URL='http://127.0.0.1:8082'\nMOCKFLUX_URL=''\nROUTER_MCP_URL='http://127.0.0.1:8090/mcp'\n" +
		"ROUTER_MCP_TOKEN='r'\nHUBU_APPROVER_TOKEN='o'\nHUBU_AGENT_TOKEN='a'\n"
	if err := os.WriteFile(path, []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
