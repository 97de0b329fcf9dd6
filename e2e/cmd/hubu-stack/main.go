// Command hubu-stack runs the whole Hubu stack in the foreground on loopback: `make up`.
// It builds the binaries into bin/, starts mockflux, Gongbu, Hubu and the router (streamable
// HTTP), creates the demo agent and an operator once, writes .hubu/stack.env, prints how to
// connect Codex, Claude Code or any MCP client, and stops everything on Ctrl-C or SIGTERM.
// A second run reuses the same databases, registry, journal and credentials.
//
// With BFL_API_KEY set (or BFL_API_KEY_FILE naming a file that holds it), the stack spends on
// Black Forest Labs' API instead of mockflux, with real money: Gongbu is given the key and
// nothing else, and mockflux is not started. Gongbu runs as against the real API either way:
// mockflux ignores idempotency keys, as BFL does.
//
// With HUBU_STACK_NAME=x (`make up NAME=x`) it runs a stack of its own beside the default one:
// databases hubu_x and gongbu_x, the state directory .hubu/stacks/x/ and ports of its own
// (see addresses), so that two stacks never share data.
//
// Settings (environment): HUBU_STACK_DATABASE_URL (required; make up sets it),
// HUBU_STACK_NAME, HUBU_STACK_{HUBU,GONGBU,MOCKFLUX,ROUTER}_ADDR, BFL_API_KEY (or
// BFL_API_KEY_FILE), and HUBU_STACK_BIN, a directory of binaries already built (tests), which
// skips the build into bin/.
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
	"strings"
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
	place, err := stack.PlaceOf(root, getenv("HUBU_STACK_NAME"))
	if err != nil {
		return fmt.Errorf("HUBU_STACK_NAME: %v", err)
	}
	addrs, err := addresses(place, getenv)
	if err != nil {
		return err
	}
	bflKey, err := secret(getenv, "BFL_API_KEY")
	if err != nil {
		return err
	}
	bin := stack.Binaries(getenv("HUBU_STACK_BIN"))
	if bin == "" {
		fmt.Fprintln(out, "building the binaries into bin/ ...")
		if bin, err = stack.Build(ctx, root, filepath.Join(root, "bin"), false); err != nil {
			return err
		}
	}
	procs, err := serviceProcs(getenv)
	if err != nil {
		return err
	}
	s, err := stack.Start(ctx, bin, stack.Config{
		Dir: place.Dir, ServerURL: serverURL, HubuDB: place.HubuDB, GongbuDB: place.GongbuDB, BFLAPIKey: bflKey, Progress: out,
		HubuAddr: addrs["hubu"], GongbuAddr: addrs["gongbu"], FluxAddr: addrs["mockflux"], RouterAddr: addrs["router"],
		Env: stack.ProcsEnv(procs),
	})
	if err != nil {
		return err
	}
	defer s.Stop()
	envPath := place.EnvPath()
	if err := s.WriteEnvFile(envPath); err != nil {
		return err
	}
	if err := os.WriteFile(place.PIDPath(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(place.PIDPath())
	printConnect(out, s, place)

	<-ctx.Done()
	fmt.Fprintln(out, "stopping the stack ...")
	s.Stop()
	os.Remove(envPath)
	return nil
}

// serviceProcs is the GOMAXPROCS of each of the stack's Go services: GOMAXPROCS when the
// environment sets it, else an even share of the machine's cores (stack.SharedProcs), since the
// four services and Postgres share one machine.
func serviceProcs(getenv func(string) string) (int, error) {
	v := getenv("GOMAXPROCS")
	if v == "" {
		return stack.SharedProcs(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("GOMAXPROCS=%q: want a positive number (the GOMAXPROCS of each service)", v)
	}
	return n, nil
}

// printConnect says how to use the stack. Every indented command line works when pasted
// into bash or zsh from any directory (TestQuickStart runs them).
func printConnect(out io.Writer, s *stack.Stack, place stack.Place) {
	env, envPath := s.EnvFile(), place.EnvPath()
	w := stack.ShellWord
	router := s.Bin.Path("hubu-unified-mcp")
	state := filepath.Join(s.Config.Dir, "router.db")
	fmt.Fprintf(out, `
The Hubu stack is up%s. Its URLs and tokens are in %s.

  Hubu      %s      (approval console: %s)
  Gongbu    %s
  %s
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

  claude mcp add --scope user hubu --env HUBU_AGENT_TOKEN="$HUBU_AGENT_TOKEN" -- %s --hubu-url %s --gongbu-url %s --state %s --allow-private-image-hosts

(claude -p needs --allowedTools mcp__hubu__generate_image to call the tool without asking.)

Any MCP client over streamable HTTP: %s with the header "Authorization: Bearer $ROUTER_MCP_TOKEN".
Or with no token at all, signing in with OAuth (the MCP Inspector, VS Code, Claude Code's /mcp): the
client opens Hubu's sign-in page, which asks for a one-time code for the demo agent:

  %s agent invite %s


The demo agent auto-approves up to $0.05 an operation, has a ceiling of $1.00 and $5.00 a day;
flux-pro-1.1-ultra ($0.06) waits for your approval. make demo%s runs a scripted session
through it. Ctrl-C (or make down%s) stops everything.
`, stackName(place), envPath, env["HUBU_URL"], env["CONSOLE_URL"], env["GONGBU_URL"], provider(env["MOCKFLUX_URL"]), env["ROUTER_MCP_URL"],
		w(envPath), w(s.Bin.Path("hubuctl")),
		router, env["HUBU_URL"], env["GONGBU_URL"], state, envPath,
		w(router), w(env["HUBU_URL"]), w(env["GONGBU_URL"]), w(state), env["ROUTER_MCP_URL"],
		w(s.Bin.Path("hubuctl")), w(s.Credentials.AgentID), place.Flag(), place.Flag())
}

// provider is the banner's line about the provider: mockflux, or BFL's API with real money.
func provider(mockflux string) string {
	if mockflux == "" {
		return "FLUX      https://api.bfl.ai  (BFL's API, with BFL_API_KEY: every spend is charged to your BFL account)"
	}
	return fmt.Sprintf("mockflux  %s      (charges: %s/_mock/charges)", mockflux, mockflux)
}

// secret reads a secret setting from name, or from the file name_FILE names (not both).
func secret(getenv func(string) string, name string) (string, error) {
	value, file := getenv(name), getenv(name+"_FILE")
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("set %s or %s_FILE, not both", name, name)
	case file == "":
		return strings.TrimSpace(value), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %v", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// stackName is how the banner names a named stack.
func stackName(place stack.Place) string {
	if place.Name == "" {
		return ""
	}
	return fmt.Sprintf(" as %q", place.Name)
}
