package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/router/routertest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.RunWithBinary(m, &binary)) }

const fox = `{"prompt":"an origami fox","model":"flux-dev","width":1024,"height":1024}`

// routerCmd runs the real router binary against the fake, on the registry file state.
func routerCmd(b *routertest.Backend, state string, extra ...string) *exec.Cmd {
	cmd := exec.Command(binary, append([]string{"--hubu-url", b.HubuURL, "--gongbu-url", b.GongbuURL, "--state", state, "--wait", "5s"}, extra...)...)
	cmd.Env = []string{"HUBU_AGENT_TOKEN=" + b.Token, "PATH=/usr/bin:/bin"}
	return cmd
}

// connect starts cmd as an MCP subprocess and collects what it logs.
func connect(t *testing.T, cmd *exec.Cmd) (*mcp.ClientSession, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	cmd.Stderr = logs
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs, logs
}

// stdio starts the real router binary as an MCP subprocess on the registry file state. The
// fake serves images on loopback, which the router reaches only when allowed to.
func stdio(t *testing.T, b *routertest.Backend, state string, extra ...string) (*mcp.ClientSession, *testlog.Buffer) {
	t.Helper()
	return connect(t, routerCmd(b, state, append([]string{"--diagnose-meta", "--allow-private-image-hosts"}, extra...)...))
}

func call(t *testing.T, cs *mcp.ClientSession, tool, args string, meta map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

func errorCode(o map[string]any) string {
	e, _ := o["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// checkLogs fails when a process log holds a private key, a token or a raw _meta value.
func checkLogs(t *testing.T, logs string, b *routertest.Backend, raw ...string) {
	t.Helper()
	secrets := append(append([]string{b.Token}, b.Keys()...), raw...)
	if leaks := routertest.LeaksIn(logs, secrets...); len(leaks) > 0 || strings.Contains(logs, "hubu:operation:v1:") {
		t.Fatalf("the router's log holds a secret:\n%s", logs)
	}
}

func TestStdioSubprocess(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	state := filepath.Join(t.TempDir(), "router.db")
	cs, logs := stdio(t, b, state)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = true
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"additionalProperties":false`) {
			t.Errorf("%s: schema allows extra properties: %s", tool.Name, schema)
		}
	}
	for _, want := range []string{"generate_image", "resume_operation", "operation_status", "capabilities", "get_execution"} {
		if !names[want] {
			t.Errorf("tool %s missing", want)
		}
	}
	meta := map[string]any{"callId": "call_abc1232EADPR86qPkTXrm7ZS", "openai/session": "sess-secret-1"}
	first := call(t, cs, "generate_image", fox, meta)
	again := call(t, cs, "generate_image", fox, meta)
	if first["status"] != "succeeded" || again["replayed"] != true || again["public_handle"] != first["public_handle"] {
		t.Fatalf("first %v, again %v", first, again)
	}
	if n := b.Calls("authorize"); n != 1 {
		t.Fatalf("%d authorizations", n)
	}
	if c := errorCode(call(t, cs, "generate_image", fox, map[string]any{"openai/session": "sess-secret-1"})); c != "identity_required" {
		t.Fatalf("without a call id: %s", c)
	}
	if caps := call(t, cs, "capabilities", `{}`, nil); caps["status"] != "ok" {
		t.Fatalf("capabilities: %v", caps)
	}
	cs.Close()
	logText := logs.String()
	if !strings.Contains(logText, `"verdict":"accepted:codex"`) || !strings.Contains(logText, `"key":"callId"`) || !strings.Contains(logText, `"verdict":"identity_required"`) {
		t.Fatalf("the diagnostic lines are missing:\n%s", logText)
	}
	checkLogs(t, logText, b, "call_abc1232EADPR86qPkTXrm7ZS", "sess-secret-1")
}

// The router is killed (SIGKILL) while its first delivery of a call is on its way to Hubu:
// the row was committed before the request left. The restarted router continues the same
// operation under the same key, and Hubu sees a replay, not a new operation.
func TestKillBetweenRecordAndAnswer(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	state := filepath.Join(t.TempDir(), "router.db")
	release := b.Block()
	defer release()
	cmd := routerCmd(b, state, "--allow-private-image-hosts")
	cs, _ := connect(t, cmd)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate_image", Arguments: json.RawMessage(fox), Meta: map[string]any{"callId": "call_kill1KWhLFD1WtOyhkG0GDA0"}})
		done <- err
	}()
	waitfor.True(t, 20*time.Second, "the first delivery to reach Hubu", func() bool { return b.Calls("authorize") > 0 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the killed router answered")
	}
	release()

	cs2, logs := stdio(t, b, state)
	again := call(t, cs2, "generate_image", fox, map[string]any{"callId": "call_kill1KWhLFD1WtOyhkG0GDA0"})
	keys := b.Keys()
	if again["status"] != "succeeded" || again["replayed"] != true || len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("after the restart: %v; %d authorizations, same key: %v", again, len(keys), len(keys) == 2 && keys[0] == keys[1])
	}
	cs2.Close()
	checkLogs(t, logs.String(), b, "call_kill1KWhLFD1WtOyhkG0GDA0")
}

// An unreachable Hubu: the call is recorded; the retry after Hubu is back continues it.
func TestBackendDownThenUp(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	state := filepath.Join(t.TempDir(), "router.db")
	b.SetDown(true)
	cs, _ := stdio(t, b, state)
	first := call(t, cs, "generate_image", fox, map[string]any{"callId": "call_downup15jScU7h3UAnhYHAAT"})
	if errorCode(first) != "backend_unavailable" {
		t.Fatalf("first: %v", first)
	}
	b.SetDown(false)
	again := call(t, cs, "generate_image", fox, map[string]any{"callId": "call_downup15jScU7h3UAnhYHAAT"})
	if again["status"] != "succeeded" || again["public_handle"] != first["public_handle"] || again["replayed"] != false {
		t.Fatalf("after Hubu came back: %v (first %v); Hubu saw the call first now, so it is no replay", again, first)
	}
}

// Two router processes on one registry file: a call delivered to both is one operation.
func TestTwoProcessesOneRegistry(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	state := filepath.Join(t.TempDir(), "router.db")
	a, _ := stdio(t, b, state)
	c, _ := stdio(t, b, state)
	var wg sync.WaitGroup
	results := make([]map[string]any, 20)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = c
			}
			results[i] = call(t, s, "generate_image", fox, map[string]any{"callId": "call_shared1JiGAiXcGuP2zyGnR0"})
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r["public_handle"] != results[0]["public_handle"] {
			t.Fatalf("processes disagree: %v vs %v", r, results[0])
		}
	}
	keys := map[string]bool{}
	for _, k := range b.Keys() {
		keys[k] = true
	}
	if len(keys) != 1 {
		t.Fatalf("%d operation keys for one call", len(keys))
	}
	// A second installation (its own file) seeing the same call id is another operation.
	other, _ := stdio(t, b, filepath.Join(t.TempDir(), "other.db"))
	if r := call(t, other, "generate_image", fox, map[string]any{"callId": "call_shared1JiGAiXcGuP2zyGnR0"}); r["public_handle"] == results[0]["public_handle"] {
		t.Fatal("two installations merged one call id")
	}
}

// Streamable HTTP refuses clients without the router's token.
func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	p := &proctest.Process{Name: "router", Path: binary, Args: []string{"--hubu-url", b.HubuURL, "--gongbu-url", b.GongbuURL,
		"--state", filepath.Join(t.TempDir(), "r.db"), "--http", "127.0.0.1:0", "--allow-private-image-hosts"},
		Env: []string{"HUBU_AGENT_TOKEN=" + b.Token, "ROUTER_MCP_TOKEN=router-secret-token", "PATH=/usr/bin:/bin"}}
	proctest.Start(t, p)
	endpoint := p.URL() + "/mcp"

	resp, err := http.Post(endpoint, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
	wrong := &http.Client{Transport: bearerTransport("not-the-token")}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "x"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: wrong, MaxRetries: -1}, nil); err == nil {
		t.Fatal("a client with the wrong token connected")
	}
	right := &http.Client{Transport: bearerTransport("router-secret-token")}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: right}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	o := call(t, cs, "generate_image", fox, map[string]any{"claudecode/toolUseId": "toolu_01http1in2jJZqn2VwqYXMgh"})
	if o["status"] != "succeeded" {
		t.Fatalf("over HTTP: %v", o)
	}
	if n := b.Calls("authorize"); n != 1 {
		t.Fatalf("%d authorizations", n)
	}
	checkLogs(t, p.Log(), b, "toolu_01http1in2jJZqn2VwqYXMgh", "router-secret-token")
}

// Over streamable HTTP a session that no request uses for --session-timeout is closed: a
// request in it is then answered 404 (the client starts a new session), while a session in
// use, and a new one, go on. The SDK times sessions on the real clock, so the test does too,
// with margins of a timeout's nine tenths either way: a request in the idle session would
// count as its use, so it can only be looked at once, at the end.
func TestSessionTimeout(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	const timeout = time.Second
	p := &proctest.Process{Name: "router", Path: binary, Args: []string{"--hubu-url", b.HubuURL, "--gongbu-url", b.GongbuURL,
		"--state", filepath.Join(t.TempDir(), "r.db"), "--http", "127.0.0.1:0", "--session-timeout", timeout.String()},
		Env: []string{"HUBU_AGENT_TOKEN=" + b.Token, "ROUTER_MCP_TOKEN=router-secret-token", "PATH=/usr/bin:/bin"}}
	proctest.Start(t, p)
	endpoint := p.URL() + "/mcp"
	connect := func() *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "timeout-test"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport("router-secret-token")},
				DisableStandaloneSSE: true, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	// status sends tools/list in the session id's session, as a client that kept the id would.
	status := func(id string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := bearerTransport("router-secret-token").RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	idle, busy := connect(), connect()
	if got := status(idle.ID()); got != http.StatusOK {
		t.Fatalf("a new session: %d", got)
	}
	// The busy session is used every tenth of a timeout for three timeouts, in which the idle
	// one must go.
	for deadline := time.Now().Add(3 * timeout); time.Now().Before(deadline); time.Sleep(timeout / 10) {
		if _, err := busy.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("a session in use was closed: %v", err)
		}
	}
	if got := status(idle.ID()); got != http.StatusNotFound {
		t.Fatalf("a session idle for 3 timeouts answered %d, want 404", got)
	}
	if _, err := connect().ListTools(context.Background(), nil); err != nil {
		t.Fatalf("a new session after the timeout: %v", err)
	}
}

type bearerTransport string

func (tok bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(tok))
	return http.DefaultTransport.RoundTrip(r)
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--gongbu-url", "http://x"}, "--hubu-url is required"},
		{nil, []string{"--hubu-url", "ftp://x", "--gongbu-url", "http://x"}, "--hubu-url must be an http(s) URL"},
		{nil, []string{"--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", dir + "/r.db"}, "HUBU_AGENT_TOKEN is not set"},
		{[]string{"HUBU_AGENT_TOKEN=t"}, []string{"--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", dir + "/r.db", "--http", "127.0.0.1:0"}, "--http needs ROUTER_MCP_TOKEN"},
		{[]string{"HUBU_AGENT_TOKEN=t"}, []string{"--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", dir + "/r.db", "--identity-config", dir + "/missing.json"}, "--identity-config"},
		{[]string{"HUBU_AGENT_TOKEN=t", "ROUTER_MCP_TOKEN=m"}, []string{"--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", dir + "/r.db", "--http", "127.0.0.1:0", "--session-timeout", "-1s"}, "--session-timeout must not be negative"},
	}
	for _, c := range cases {
		cmd := exec.Command(binary, c.args...)
		cmd.Env = c.env
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%v: %v %q, want one line saying %q", c.args, err, out, c.want)
		}
	}
	// An unreachable Hubu is not a start error: the router starts and answers backend_unavailable.
	b := routertest.New(t)
	b.HubuURL, b.GongbuURL = "http://127.0.0.1:1", "http://127.0.0.1:1"
	cs, _ := stdio(t, b, filepath.Join(dir, "down.db"))
	if c := errorCode(call(t, cs, "generate_image", fox, map[string]any{"callId": "call_down1HD1XEBKGDZTbX5zDpBt"})); c != "backend_unavailable" {
		t.Fatalf("with Hubu down: %s", c)
	}
	if out, err := exec.Command(binary, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "usage") {
		t.Fatalf("--help: %v %s", err, out)
	}
}

func TestDefaultState(t *testing.T) {
	t.Parallel()
	got, err := statePath("", func(k string) string { return map[string]string{"HOME": "/home/u"}[k] })
	if err != nil || got != "/home/u/.local/state/hubu/router.db" {
		t.Fatalf("%s %v", got, err)
	}
	got, _ = statePath("", func(k string) string { return map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/home/u"}[k] })
	if got != "/s/hubu/router.db" {
		t.Fatal(got)
	}
}
