package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/kit/command/commandtest"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/router/routertest"
)

// runRouter is run with no input, as commandtest calls a main.
func runRouter(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return run(ctx, args, getenv, strings.NewReader(""), stdout, stderr)
}

// A value in the environment that does not parse stops the start and names the variable; it
// never falls back to the default.
func TestBadValuesInTheEnvironment(t *testing.T) {
	t.Parallel()
	args := []string{"--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", filepath.Join(t.TempDir(), "r.db")}
	for _, c := range []struct{ env, want string }{
		{"ROUTER_WAIT=5x", `ROUTER_WAIT must be a duration such as 90s or 10m, not "5x"`},
		{"ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS=yes", `ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS must be true or false, not "yes"`},
	} {
		commandtest.Refuses(t, runRouter, []string{"HUBU_AGENT_TOKEN=t", c.env}, args, c.want)
	}
}

// Both tokens may be given as files (X_FILE); X and X_FILE together are refused; and neither
// token reaches an error or the log.
func TestTokensFromFiles(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	dir := t.TempDir()
	const mcpToken = "router-mcp-not-to-show-6a7b"
	agentFile, mcpFile := commandtest.File(t, b.Token+"\n"), commandtest.File(t, mcpToken+"\n")
	args := []string{"--hubu-url", b.HubuURL, "--gongbu-url", b.GongbuURL, "--state", filepath.Join(dir, "r.db")}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"HUBU_AGENT_TOKEN=" + b.Token, "HUBU_AGENT_TOKEN_FILE=" + agentFile}, "HUBU_AGENT_TOKEN and HUBU_AGENT_TOKEN_FILE are both set: set one"},
		{[]string{"HUBU_AGENT_TOKEN_FILE=" + dir}, "HUBU_AGENT_TOKEN_FILE: read " + dir + ": is a directory"},
		{[]string{"HUBU_AGENT_TOKEN_FILE=" + agentFile, "ROUTER_MCP_TOKEN=" + mcpToken, "ROUTER_MCP_TOKEN_FILE=" + mcpFile}, "ROUTER_MCP_TOKEN and ROUTER_MCP_TOKEN_FILE are both set: set one"},
	} {
		commandtest.Refuses(t, runRouter, c.env, args, c.want, b.Token, mcpToken)
	}

	// The agent token from a file reaches Hubu: a spend succeeds.
	cmd := exec.Command(binary, append(args, "--wait", "5s", "--allow-private-image-hosts")...)
	cmd.Env = []string{"HUBU_AGENT_TOKEN_FILE=" + agentFile, "PATH=/usr/bin:/bin"}
	logs := &testlog.Buffer{}
	cmd.Stderr = logs
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "file-test"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs.String())
	}
	if got := call(t, cs, "generate_image", fox, map[string]any{"callId": "call_file1dvEjMnpZ63M8Iqv7zy"}); got["status"] != "succeeded" {
		t.Fatalf("with HUBU_AGENT_TOKEN_FILE: %v\n%s", got, logs.String())
	}
	cs.Close()
	checkLogs(t, logs.String(), b)

	// The MCP token from a file guards /mcp.
	addr, stop := commandtest.Start(t, runRouter, []string{"HUBU_AGENT_TOKEN_FILE=" + agentFile, "ROUTER_MCP_TOKEN_FILE=" + mcpFile},
		append(args, "--http", "127.0.0.1:0")...)
	for token, refused := range map[string]bool{"wrong": true, mcpToken: false} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if (resp.StatusCode == http.StatusUnauthorized) != refused {
			t.Errorf("bearer %q: %d", token, resp.StatusCode)
		}
	}
	stop(mcpToken, b.Token)
}

// OAuth mode needs all of its settings, and the router's own credential; it refuses to start
// without them, naming what is missing, and never shows a token.
func TestOAuthModeSettings(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "r.db")
	base := []string{"--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", state}
	oauth := append(append([]string{}, base...), "--http", "127.0.0.1:0", "--oauth-issuer", "http://127.0.0.1:1", "--resource", "http://127.0.0.1:2/mcp")
	const routerToken = "hubu_router_not_to_show_1f2e"
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"HUBU_ROUTER_TOKEN=" + routerToken}, append(append([]string{}, base...), "--oauth-issuer", "http://127.0.0.1:1"),
			"OAuth mode needs --http, --oauth-issuer (Hubu's issuer URL) and --resource (this router's /mcp URL)"},
		{nil, oauth, "OAuth mode needs HUBU_ROUTER_TOKEN: the router's own Hubu credential (hubu router create)"},
		{[]string{"HUBU_ROUTER_TOKEN=" + routerToken, "HUBU_AGENT_TOKEN=agent"}, oauth,
			"HUBU_AGENT_TOKEN and ROUTER_MCP_TOKEN go together: the static token acts for that agent"},
	} {
		commandtest.Refuses(t, runRouter, c.env, c.args, c.want, routerToken)
	}
}
