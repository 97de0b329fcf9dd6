package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// run runs a binary to completion.
func (s *Stack) run(ctx context.Context, name string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, s.Bin.Path(name), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args[:min(2, len(args))], " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (s *Stack) output(ctx context.Context, name string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.Bin.Path(name), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args[:min(2, len(args))], " "), err, strings.TrimSpace(string(stderr)))
	}
	return strings.TrimSpace(string(out)), nil
}

// loadOrMakeCredentials reads the credentials a previous start made, or makes them; tokens
// are shown once by Hubu, so they are kept (0600) next to the registry.
func (s *Stack) loadOrMakeCredentials(ctx context.Context) error {
	path := filepath.Join(s.Config.Dir, "credentials.json")
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &s.Credentials); err != nil {
			return err
		}
		if s.Credentials.WebhookKey == "" {
			s.Credentials.WebhookKey = randomToken("webhook-") // a state directory from before webhooks
		}
		if s.Credentials.RouterToken == "" { // a state directory from before OAuth mode
			if s.Credentials.RouterToken, err = s.routerCredential(ctx); err != nil {
				return err
			}
		}
		return s.saveCredentials()
	}
	c := Credentials{HubuAtGongbuToken: randomToken("hubu-to-gongbu-"), RouterMCPToken: randomToken("router-"), FluxKey: randomToken("flux-"),
		WebhookKey: randomToken("webhook-")}
	var err error
	if c.OperatorToken, err = s.output(ctx, "hubu", nil, "operator", "create", "--name", "operator", "--database-url", s.HubuDBURL); err != nil {
		return err
	}
	if c.GongbuAtHubuToken, err = s.output(ctx, "hubu", nil, "service", "create", "--name", "gongbu", "--database-url", s.HubuDBURL); err != nil {
		return err
	}
	if c.RouterToken, err = s.routerCredential(ctx); err != nil {
		return err
	}
	s.Credentials = c
	return s.saveCredentials()
}

// routerCredential makes the router's own Hubu credential; with the binaries of a release
// before OAuth mode (the upgrade test's) there is none, and the router runs with the static
// token alone.
func (s *Stack) routerCredential(ctx context.Context) (string, error) {
	token, err := s.output(ctx, "hubu", nil, "router", "create", "--name", "router", "--database-url", s.HubuDBURL)
	if err != nil && strings.Contains(err.Error(), `unknown command "router"`) {
		return "", nil
	}
	return token, err
}

func (s *Stack) saveCredentials() error {
	b, err := json.MarshalIndent(s.Credentials, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Config.Dir, "credentials.json"), b, 0o600)
}

// ensureAgent creates the demo agent once: auto-approve up to $0.05 an operation, a ceiling
// of $1.00 an operation, $5.00 a day.
func (s *Stack) ensureAgent(ctx context.Context) error {
	if s.Credentials.AgentToken != "" {
		return nil
	}
	out, err := s.output(ctx, "hubuctl", s.HubuctlEnv(), "agent", "create", "--name", "demo", "--json",
		"--auto-approve-micros", "50000", "--ceiling-micros", "1000000", "--budget-micros", "5000000", "--period", "day")
	if err != nil {
		return err
	}
	var created struct {
		Agent struct {
			ID string `json:"id"`
		} `json:"agent"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Token == "" {
		return fmt.Errorf("hubuctl agent create: unexpected output")
	}
	s.Credentials.AgentToken, s.Credentials.AgentID = created.Token, created.Agent.ID
	return s.saveCredentials()
}

// HubuctlEnv is the environment hubuctl needs against this stack.
func (s *Stack) HubuctlEnv() []string {
	return []string{"HUBU_URL=" + s.Hubu.URL(), "HUBU_APPROVER_TOKEN=" + s.Credentials.OperatorToken}
}

// EnvFile is .hubu/stack.env: shell KEY=value lines, single-quoted.
func (s *Stack) EnvFile() map[string]string {
	q := func(parts ...string) string {
		out := make([]string, len(parts))
		for i, p := range parts {
			out[i] = shellQuote(p)
		}
		return strings.Join(out, " ")
	}
	routerCmd := append([]string{"env", "HUBU_AGENT_TOKEN=" + s.Credentials.AgentToken, s.Bin.Path("hubu-unified-mcp")}, s.RouterArgs()...)
	mockflux := "" // against BFL's API there is none
	if s.Flux != nil {
		mockflux = s.Flux.URL()
	}
	return map[string]string{
		"HUBU_URL":            s.Hubu.URL(),
		"GONGBU_URL":          s.Gongbu.URL(),
		"MOCKFLUX_URL":        mockflux,
		"ROUTER_MCP_URL":      s.Router.URL() + "/mcp",
		"ROUTER_MCP_TOKEN":    s.Credentials.RouterMCPToken,
		"ROUTER_CMD":          q(routerCmd...),
		"HUBUCTL_CMD":         q(append([]string{"env"}, append(s.HubuctlEnv(), s.Bin.Path("hubuctl"))...)...),
		"HUBU_AGENT_TOKEN":    s.Credentials.AgentToken,
		"HUBU_APPROVER_TOKEN": s.Credentials.OperatorToken,
		"CONSOLE_URL":         s.Hubu.URL() + "/console",
	}
}

// WriteEnvFile writes EnvFile to path with 0600 permissions (it holds tokens).
func (s *Stack) WriteEnvFile(path string) error {
	env := s.EnvFile()
	var b strings.Builder
	b.WriteString("# Written by make up once every part was healthy. Holds tokens: keep it private.\n")
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "%s=%s\n", k, shellQuote(env[k]))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ShellWord is s as one word of a bash or zsh command line: as it is when that is safe,
// else single-quoted.
func ShellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@+,") == "" {
		return s
	}
	return shellQuote(s)
}
