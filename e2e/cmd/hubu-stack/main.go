// Command hubu-stack runs the whole Hubu stack in the foreground on loopback: `make up`.
// It builds the binaries into bin/, starts mockflux, Gongbu, Hubu and the router (streamable
// HTTP), creates the demo agent and an operator once, writes .hubu/stack.env, prints how to
// connect Codex, Claude Code or any MCP client, and stops everything on Ctrl-C or SIGTERM.
// A second run reuses the same databases, registry, journal and credentials.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
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
	addr := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	s, err := stack.Start(ctx, bin, stack.Config{
		Dir: dir, ServerURL: serverURL, HubuDB: "hubu", GongbuDB: "gongbu", FluxIdempotent: true, Progress: out,
		HubuAddr: addr("HUBU_STACK_HUBU_ADDR", "127.0.0.1:8081"), GongbuAddr: addr("HUBU_STACK_GONGBU_ADDR", "127.0.0.1:8082"),
		FluxAddr: addr("HUBU_STACK_MOCKFLUX_ADDR", "127.0.0.1:8083"), RouterAddr: addr("HUBU_STACK_ROUTER_ADDR", "127.0.0.1:8090"),
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

func printConnect(out io.Writer, s *stack.Stack, envPath string) {
	env := s.EnvFile()
	router := s.Bin.Path("hubu-unified-mcp")
	fmt.Fprintf(out, `
The Hubu stack is up. Everything is in %s (source it: . %s).

  Hubu      %s      (operator CLI: $HUBUCTL_CMD approvals | approve HANDLE | deny HANDLE)
  Gongbu    %s
  mockflux  %s      (charges: %s/_mock/charges)
  router    %s  (streamable HTTP; Authorization: Bearer $ROUTER_MCP_TOKEN)
  console   %s  (sign in with HUBU_APPROVER_TOKEN from the env file)

Codex (~/.codex/config.toml):

  [mcp_servers.hubu]
  command = %q
  args = ["--hubu-url", %q, "--gongbu-url", %q, "--state", %q, "--allow-private-image-hosts"]
  env = { HUBU_AGENT_TOKEN = "<HUBU_AGENT_TOKEN from %s>" }

Claude Code:

  claude mcp add hubu --env HUBU_AGENT_TOKEN="$HUBU_AGENT_TOKEN" -- %s --hubu-url %s --gongbu-url %s --state %s --allow-private-image-hosts

Any MCP client over streamable HTTP: %s with the header "Authorization: Bearer $ROUTER_MCP_TOKEN".

The demo agent auto-approves up to $0.05 an operation, has a ceiling of $1.00 and $5.00 a day;
flux-pro-1.1-ultra ($0.06) waits for your approval. Ctrl-C stops everything.
`, envPath, envPath, env["HUBU_URL"], env["GONGBU_URL"], env["MOCKFLUX_URL"], env["MOCKFLUX_URL"], env["ROUTER_MCP_URL"], env["CONSOLE_URL"],
		router, env["HUBU_URL"], env["GONGBU_URL"], filepath.Join(s.Config.Dir, "router.db"), envPath,
		router, env["HUBU_URL"], env["GONGBU_URL"], filepath.Join(s.Config.Dir, "router.db"), env["ROUTER_MCP_URL"])
}
