package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/router/routertest"
	"hubu.dev/hubu/sql/sqltest"
)

// fleetState is a Postgres registry of the test's own, as a URL with a password in it (the test
// server trusts local connections, so any password does) that no output may show.
func fleetState(t *testing.T) (state, password string) {
	t.Helper()
	u, err := url.Parse(sqltest.NewEmptyDatabase(t, "router_fleet"))
	if err != nil {
		t.Fatal(err)
	}
	password, ok := u.User.Password()
	if !ok {
		password = "fleet-registry-secret-3c9e"
		u.User = url.UserPassword(u.User.Username(), password)
	}
	return u.String(), password
}

// httpRouter starts a real router binary on streamable HTTP with the registry at state.
func httpRouter(t *testing.T, b *routertest.Backend, name, state string) (*proctest.Process, *mcp.ClientSession) {
	t.Helper()
	p := &proctest.Process{Name: name, Path: binary, Args: []string{"--hubu-url", b.HubuURL, "--gongbu-url", b.GongbuURL,
		"--state", state, "--http", "127.0.0.1:0", "--wait", "5s", "--allow-private-image-hosts"},
		Env: []string{"HUBU_AGENT_TOKEN=" + b.Token, "ROUTER_MCP_TOKEN=router-secret-token", "PATH=/usr/bin:/bin"}}
	proctest.Start(t, p)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: p.URL() + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport("router-secret-token")}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v\n%s", name, err, p.Log())
	}
	t.Cleanup(func() { cs.Close() })
	return p, cs
}

// A router fleet: two router processes on one Postgres registry, as behind a load balancer. A
// call answered by one and delivered again to the other is replayed by the other, which touches
// no backend; a call whose router died while Hubu had it is continued by the other under the same
// operation key. Both have the one installation id, and neither logs the database's password.
func TestFleetSharesOnePostgresRegistry(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	state, password := fleetState(t)
	a, csA := httpRouter(t, b, "router-a", state)
	other, csB := httpRouter(t, b, "router-b", state)
	id := installationOf(t, a.Log())
	if idB := installationOf(t, other.Log()); id == "" || idB != id {
		t.Fatalf("installation ids %q and %q; want one for the fleet", id, idB)
	}
	// The operator reads it from the shared registry too (the audience of version 2 envelopes).
	if out, err := exec.Command(binary, "installation-id", "--state", state).Output(); err != nil || strings.TrimSpace(string(out)) != id {
		t.Fatalf("installation-id on the fleet's registry: %q %v, want %s", out, err, id)
	}

	answered := map[string]any{"callId": "call_fleetAnsweredQ7d1LxTz0c2e"}
	first := call(t, csA, "generate_image", fox, answered)
	again := call(t, csB, "generate_image", fox, answered)
	if first["status"] != "succeeded" || again["replayed"] != true || again["public_handle"] != first["public_handle"] {
		t.Fatalf("answered by a: %v; delivered again to b: %v", first, again)
	}
	if n := b.Calls("authorize"); n != 1 {
		t.Fatalf("%d authorizations; the redelivery to b must be answered from the registry", n)
	}

	// Router a dies while Hubu has the call; the client's retry lands on b.
	inFlight := map[string]any{"callId": "call_fleetInFlight5Ue2Kd8Wq1Rb"}
	release := b.Block()
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := csA.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate_image", Arguments: json.RawMessage(fox), Meta: inFlight})
		done <- err
	}()
	waitfor.True(t, 20*time.Second, "the delivery to a to reach Hubu", func() bool { return b.Calls("authorize") >= 2 })
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the killed router answered")
	}
	release()
	continued := call(t, csB, "generate_image", fox, inFlight)
	keys := b.Keys()
	if continued["status"] != "succeeded" || len(keys) != 3 || keys[1] != keys[2] || keys[1] == keys[0] {
		t.Fatalf("the retry on b: %v; %d authorizations, the same key as a's: %v", continued, len(keys), len(keys) == 3 && keys[1] == keys[2])
	}

	for _, p := range []*proctest.Process{a, other} {
		logs := p.Log()
		checkLogs(t, logs, b, password, "call_fleetAnsweredQ7d1LxTz0c2e", "call_fleetInFlight5Ue2Kd8Wq1Rb", "router-secret-token")
		if !strings.Contains(logs, `"state":"postgres`) {
			t.Fatalf("%s does not log its registry (redacted):\n%s", p.Name, logs)
		}
	}
}

// installationOf reads the installation id a router logged when it was ready.
func installationOf(t *testing.T, logs string) string {
	t.Helper()
	for line := range strings.Lines(logs) {
		var l struct {
			Msg            string `json:"msg"`
			InstallationID string `json:"installation_id"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "router ready" {
			return l.InstallationID
		}
	}
	t.Fatalf("no ready line in the log:\n%s", logs)
	return ""
}

// A registry URL that cannot be reached stops the start with one line that names the database
// without its password.
func TestUnreachablePostgresState(t *testing.T) {
	t.Parallel()
	const password = "unreachable-registry-secret-71aa"
	state := "postgres://router:" + password + "@127.0.0.1:1/registry?sslmode=disable&connect_timeout=5"
	cmd := exec.Command(binary, "--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", state)
	cmd.Env = []string{"HUBU_AGENT_TOKEN=t"}
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), password) || !strings.Contains(string(out), "--state postgres://router:xxxxx@127.0.0.1:1/registry") ||
		strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("%v %q; want one line naming the database without its password", err, out)
	}
}
