package main

import (
	"bytes"
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

func runRouter(ctx context.Context, env map[string]string, stderr io.Writer, args ...string) error {
	return run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(""), &bytes.Buffer{}, stderr)
}

// A value in the environment that does not parse stops the start and names the variable; it
// never falls back to the default.
func TestBadValuesInTheEnvironment(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "r.db")
	for _, c := range []struct{ env, value, want string }{
		{"ROUTER_WAIT", "5x", `ROUTER_WAIT must be a duration such as 90s or 10m, not "5x"`},
		{"ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS", "yes", `ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS must be true or false, not "yes"`},
	} {
		err := runRouter(context.Background(), map[string]string{"HUBU_AGENT_TOKEN": "t", c.env: c.value}, io.Discard,
			"--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", state)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s=%s: %v, want %q", c.env, c.value, err, c.want)
		}
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
		env  map[string]string
		want string
	}{
		{map[string]string{"HUBU_AGENT_TOKEN": b.Token, "HUBU_AGENT_TOKEN_FILE": agentFile}, "HUBU_AGENT_TOKEN and HUBU_AGENT_TOKEN_FILE are both set: set one"},
		{map[string]string{"HUBU_AGENT_TOKEN_FILE": dir}, "HUBU_AGENT_TOKEN_FILE: read " + dir + ": is a directory"},
		{map[string]string{"HUBU_AGENT_TOKEN_FILE": agentFile, "ROUTER_MCP_TOKEN": mcpToken, "ROUTER_MCP_TOKEN_FILE": mcpFile}, "ROUTER_MCP_TOKEN and ROUTER_MCP_TOKEN_FILE are both set: set one"},
	} {
		var stderr bytes.Buffer
		err := runRouter(context.Background(), c.env, &stderr, args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.env, err, c.want)
		} else if all := err.Error() + stderr.String(); strings.Contains(all, b.Token) || strings.Contains(all, mcpToken) {
			t.Errorf("a token is shown: %s", all)
		}
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
	env := map[string]string{"HUBU_AGENT_TOKEN_FILE": agentFile, "ROUTER_MCP_TOKEN_FILE": mcpFile}
	addr, stop := commandtest.Start(t, func(ctx context.Context, stderr io.Writer) error {
		return runRouter(ctx, env, stderr, append(args, "--http", "127.0.0.1:0")...)
	})
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
	if logs, err := stop(); err != nil || strings.Contains(logs, mcpToken) || strings.Contains(logs, b.Token) {
		t.Fatalf("serving with the tokens from files: %v\n%s", err, logs)
	}
}
