package loadtest

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/proctest"
)

// TestParseEnvFile reads back what stack.WriteEnvFile writes, values with quotes, spaces and
// nested quoting (ROUTER_CMD, HUBUCTL_CMD) among them.
func TestParseEnvFile(t *testing.T) {
	dir := t.TempDir()
	s := &stack.Stack{
		Config: stack.Config{Dir: filepath.Join(dir, "it's a dir", "with  spaces")},
		Bin:    stack.Binaries(filepath.Join(dir, `bin "quoted" 'single'`)),
		Credentials: stack.Credentials{
			OperatorToken: `op'er"ator token`, RouterMCPToken: "router '' token\twith a tab", AgentToken: `a\b'c`,
		},
		Hubu: &proctest.Process{Addr: "127.0.0.1:8081"}, Gongbu: &proctest.Process{Addr: "127.0.0.1:8082"},
		Flux: &proctest.Process{Addr: "127.0.0.1:8083"}, Router: &proctest.Process{Addr: "127.0.0.1:8090"},
	}
	path := filepath.Join(dir, "stack.env")
	if err := s.WriteEnvFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseEnvFile(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if want := s.EnvFile(); !maps.Equal(got, want) {
		t.Errorf("read back\n%q\nwant\n%q", got, want)
	}
	if got["ROUTER_MCP_TOKEN"] != "router '' token\twith a tab" || got["HUBU_APPROVER_TOKEN"] != `op'er"ator token` {
		t.Errorf("tokens read back as %q and %q", got["ROUTER_MCP_TOKEN"], got["HUBU_APPROVER_TOKEN"])
	}

	for _, tc := range []struct{ text, key, want string }{
		{"K='it'\\''s'\n", "K", "it's"},
		{"export K='a b'\n", "K", "a b"},
		{"# a comment\n\nK=plain\n", "K", "plain"},
		{"K=''\n", "K", ""},
		{`K='x'\''y'"` + "\n", "", ""}, // an unquoted double quote: not as make up writes it
		{"K='never closed\n", "", ""},
		{"K='a' b\n", "", ""},
		{"no equals sign\n", "", ""},
	} {
		got, err := ParseEnvFile(tc.text)
		if tc.key == "" {
			if err == nil {
				t.Errorf("%q: read as %q, want an error", tc.text, got)
			}
			continue
		}
		if err != nil || got[tc.key] != tc.want {
			t.Errorf("%q: %q, %v; want %s=%q", tc.text, got, err, tc.key, tc.want)
		}
	}
}

// TestLoadRunningStack: the file's URLs become the addresses the processes are found by, and a
// stack on BFL's API (no mockflux) is refused in one line.
func TestLoadRunningStack(t *testing.T) {
	dir := t.TempDir()
	write := func(env map[string]string) string {
		var b strings.Builder
		for k, v := range env {
			b.WriteString(k + "=" + stack.ShellWord(v) + "\n")
		}
		path := filepath.Join(dir, "stack.env")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	env := map[string]string{
		"HUBU_URL": "http://localhost:8081", "GONGBU_URL": "http://127.0.0.1:8082", "MOCKFLUX_URL": "http://127.0.0.1:8083",
		"ROUTER_MCP_URL": "http://127.0.0.1:8090/mcp", "ROUTER_MCP_TOKEN": "r", "HUBU_APPROVER_TOKEN": "o", "HUBU_AGENT_TOKEN": "a",
	}
	rs, err := loadRunningStack(write(env))
	if err != nil {
		t.Fatal(err)
	}
	if rs.hubu != "127.0.0.1:8081" || rs.gongbu != "127.0.0.1:8082" || rs.flux != "127.0.0.1:8083" || rs.router != "127.0.0.1:8090" ||
		rs.routerMCPURL != env["ROUTER_MCP_URL"] || rs.floorDir != dir {
		t.Errorf("read as %+v", rs.target)
	}
	env["MOCKFLUX_URL"] = ""
	if _, err := loadRunningStack(write(env)); err == nil || !strings.Contains(err.Error(), "real money") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a stack on BFL's API: %v", err)
	}
}

func TestFlagValue(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		name    string
		boolean bool
		want    string
		found   bool
	}{
		{[]string{"mockflux", "serve", "--listen", "x", "--render-time", "2s"}, "render-time", false, "2s", true},
		{[]string{"mockflux", "serve", "-render-time=3s"}, "render-time", false, "3s", true},
		{[]string{"mockflux", "serve", "--honour-idempotency"}, "honour-idempotency", true, "true", true},
		{[]string{"mockflux", "serve", "--honour-idempotency=0"}, "honour-idempotency", true, "false", true},
		{[]string{"mockflux", "serve", "--data", "--render-time"}, "render-time", false, "", false},
		{[]string{"mockflux", "serve", "--listen", "x"}, "render-time", false, "", false},
		{[]string{"gongbu", "serve", "--pending-polls", "1", "--pending-polls", "4"}, "pending-polls", false, "4", true},
	} {
		got, found := flagValue(tc.args, tc.name, tc.boolean)
		if got != tc.want || found != tc.found {
			t.Errorf("%v: %s = %q, %v; want %q, %v", tc.args, tc.name, got, found, tc.want, tc.found)
		}
	}
}

// TestRunCharges counts the run's own charges among others': those of its jobs, and a second
// charge under the key of one of them, never another client's or a refunded one.
func TestRunCharges(t *testing.T) {
	key := func(k string) *string { return &k }
	charges := []charge{
		{JobID: "mine-1", IdempotencyKey: key("k1")},
		{JobID: "mine-2", IdempotencyKey: key("k2")},
		{JobID: "theirs", IdempotencyKey: key("k3")},
		{JobID: "resubmitted", IdempotencyKey: key("k1")}, // a second charge of mine-1's spend
		{JobID: "refunded", IdempotencyKey: key("k2"), Refunded: true},
		{JobID: "no key"},
	}
	if got := runCharges(charges, map[string]bool{"mine-1": true, "mine-2": true}); got != 3 {
		t.Errorf("%d charges of the run's, want 3", got)
	}
	if got := standing(charges); got != 5 {
		t.Errorf("%d charges stand, want 5", got)
	}
}

func TestParseArgsStack(t *testing.T) {
	parse := func(env map[string]string, args ...string) (Config, error) {
		env["HUBU_LOADTEST_DATABASE_URL"] = "postgres://x"
		return ParseArgs(args, func(k string) string { return env[k] }, io.Discard)
	}
	c, err := parse(map[string]string{"HUBU_LOADTEST_STACK": ".hubu/stack.env"})
	if err != nil || c.Stack != ".hubu/stack.env" || strings.Join(c.Scenarios, ",") != "latency,sessions" {
		t.Errorf("--stack by default: %+v, %v", c, err)
	}
	if c, err := parse(map[string]string{}); err != nil || strings.Join(c.Scenarios, ",") != "latency,hubu,sessions" {
		t.Errorf("without --stack: %v, %v", c.Scenarios, err)
	}
	for _, args := range [][]string{
		{"--stack", "f", "--scenarios", "latency,hubu"},
		{"--stack", "f", "--scenarios", "path"},
		{"--stack", "f", "--render-time", "1s"},
		{"--stack", "f", "--service-procs", "2"},
	} {
		if _, err := parse(map[string]string{}, args...); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line of error", args, err)
		}
	}
	if _, err := parse(map[string]string{"HUBU_LOADTEST_PROVIDER_IGNORES_KEYS": "true"}, "--stack", "f"); err == nil ||
		!strings.Contains(err.Error(), "HUBU_LOADTEST_PROVIDER_IGNORES_KEYS") {
		t.Errorf("a setting of the own stack from the environment: %v", err)
	}
}
