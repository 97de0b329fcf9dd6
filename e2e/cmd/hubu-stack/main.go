// Command hubu-stack runs the whole Hubu stack in the foreground on loopback: `make up`.
// It builds the binaries into bin/, starts mockflux, Gongbu, Hubu and the router (streamable
// HTTP), creates the demo agent and an operator once, writes .hubu/stack.env, prints how to
// connect Codex, Claude Code or any MCP client, and stops everything on Ctrl-C or SIGTERM.
// A second run reuses the same databases, registry, journal and credentials.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"

	"hubu.dev/hubu/e2e/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "make up:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, out io.Writer) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	serverURL := getenv("HUBU_STACK_DATABASE_URL")
	if serverURL == "" {
		return errors.New("HUBU_STACK_DATABASE_URL is not set; run `make up`, which finds or starts a Postgres")
	}
	dir := filepath.Join(root, ".hubu")
	fmt.Fprintln(out, "building the binaries into bin/ ...")
	bin, err := stack.Build(ctx, root, filepath.Join(root, "bin"), false)
	if err != nil {
		return err
	}
	hubuDB, gongbuDB, err := databaseNames(getenv("HUBU_STACK_NAME"))
	if err != nil {
		return err
	}
	s, err := stack.Start(ctx, bin, stack.Config{
		Dir: dir, ServerURL: serverURL, HubuDB: hubuDB, GongbuDB: gongbuDB, FluxIdempotent: true, Progress: out,
		HubuAddr: cmp.Or(getenv("HUBU_STACK_HUBU_ADDR"), "127.0.0.1:8081"), GongbuAddr: cmp.Or(getenv("HUBU_STACK_GONGBU_ADDR"), "127.0.0.1:8082"),
		FluxAddr: cmp.Or(getenv("HUBU_STACK_MOCKFLUX_ADDR"), "127.0.0.1:8083"), RouterAddr: cmp.Or(getenv("HUBU_STACK_ROUTER_ADDR"), "127.0.0.1:8090"),
	})
	if err != nil {
		return err
	}
	defer s.Stop()
	envPath := filepath.Join(dir, "stack.env")
	if err := s.WriteEnvFile(envPath); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "stack.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(dir, "stack.pid"))
	printConnect(out, s, envPath)

	<-ctx.Done()
	fmt.Fprintln(out, "stopping the stack ...")
	s.Stop()
	os.Remove(envPath)
	return nil
}

// databaseNames are the stack's databases: hubu and gongbu, or hubu_NAME and gongbu_NAME when
// HUBU_STACK_NAME is set, so that two stacks can share one Postgres server.
func databaseNames(name string) (hubu, gongbu string, err error) {
	if name == "" {
		return "hubu", "gongbu", nil
	}
	if !validName.MatchString(name) {
		return "", "", fmt.Errorf("HUBU_STACK_NAME=%q: use 1 to 40 lower-case letters, digits and underscores", name)
	}
	return "hubu_" + name, "gongbu_" + name, nil
}

var validName = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)

// printConnect says how to use the stack. Every indented command line works when pasted
// into bash or zsh from any directory (TestQuickStart runs them).
func printConnect(out io.Writer, s *stack.Stack, envPath string) {
	env := s.EnvFile()
	w := stack.ShellWord
	router := s.Bin.Path("hubu-unified-mcp")
	state := filepath.Join(s.Config.Dir, "router.db")
	fmt.Fprintf(out, `
The Hubu stack is up. Its URLs and tokens are in %s.

  Hubu      %s      (approval console: %s)
  Gongbu    %s
  mockflux  %s      (charges: %s/_mock/charges)
  router    %s  (streamable HTTP; Authorization: Bearer $ROUTER_MCP_TOKEN)

In another terminal (bash or zsh), the operator CLI:

  set -a; . %s; set +a
  %s approvals

Codex (~/.codex/config.toml):

  [mcp_servers.hubu]
  command = %q
  args = ["--hubu-url", %q, "--gongbu-url", %q, "--state", %q, "--allow-private-image-hosts"]
  env = { HUBU_AGENT_TOKEN = "<HUBU_AGENT_TOKEN from %s>" }
  default_tools_approval_mode = "approve"

Claude Code (after the set -a line above):

  claude mcp add hubu --env HUBU_AGENT_TOKEN="$HUBU_AGENT_TOKEN" -- %s --hubu-url %s --gongbu-url %s --state %s --allow-private-image-hosts

(claude -p needs --allowedTools mcp__hubu__generate_image to call the tool without asking.)

Any MCP client over streamable HTTP: %s with the header "Authorization: Bearer $ROUTER_MCP_TOKEN".

The demo agent auto-approves up to $0.05 an operation, has a ceiling of $1.00 and $5.00 a day;
flux-pro-1.1-ultra ($0.06) waits for your approval. Ctrl-C stops everything.
`, envPath, env["HUBU_URL"], env["CONSOLE_URL"], env["GONGBU_URL"], env["MOCKFLUX_URL"], env["MOCKFLUX_URL"], env["ROUTER_MCP_URL"],
		w(envPath), w(s.Bin.Path("hubuctl")),
		router, env["HUBU_URL"], env["GONGBU_URL"], state, envPath,
		w(router), w(env["HUBU_URL"]), w(env["GONGBU_URL"]), w(state), env["ROUTER_MCP_URL"])
}
