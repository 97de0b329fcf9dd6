package e2e_test

// Two named stacks at once on one Postgres (`make up NAME=a` and `make up NAME=b`): each has
// its own databases, ports and state directory, a spend in one is invisible in the other, and
// make demo and make down find each by its name. The stacks run the hubu-stack command of make
// up with the binaries this package already built (HUBU_STACK_BIN), so the test builds only
// that one command.

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/sql/sqltest"
)

func TestTwoNamedStacks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	repo := must(filepath.Abs(".."))(t)
	tools := t.TempDir()
	noError(t, proctest.Build(ctx, repo, tools, "./e2e/cmd/hubu-stack"))

	// A checkout of its own: make down reads the Makefile and the stacks' pid files there.
	root := t.TempDir()
	noError(t, os.Symlink(filepath.Join(repo, "Makefile"), filepath.Join(root, "Makefile")))
	server := sqltest.ServerURL(t)
	id := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	a, b := must(harness.PlaceOf(root, "two_a_"+id))(t), must(harness.PlaceOf(root, "two_b_"+id))(t)
	t.Cleanup(func() {
		_ = harness.DropDatabases(context.Background(), server, a.HubuDB, a.GongbuDB, b.HubuDB, b.GongbuDB)
	})
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "HUBU_STACK_DATABASE_URL=" + server,
		"HUBU_STACK_BIN=" + string(bin)}

	upA := startNamedStack(t, filepath.Join(tools, "hubu-stack"), root, a, env)
	// b starts once a has been given its ports, which b must then leave alone.
	waitfor.True(t, 30*time.Second, "a's ports", func() bool { _, err := os.Stat(filepath.Join(a.Dir, "addresses.json")); return err == nil })
	upB := startNamedStack(t, filepath.Join(tools, "hubu-stack"), root, b, env)
	upA.waitUp(t)
	upB.waitUp(t)
	envA, envB := readStackEnv(t, a.EnvPath()), readStackEnv(t, b.EnvPath())

	// No port in common, and none of the default stack's.
	ports := map[string]string{}
	for _, s := range []struct {
		name string
		env  map[string]string
	}{{"a", envA}, {"b", envB}} {
		for _, k := range []string{"HUBU_URL", "GONGBU_URL", "MOCKFLUX_URL", "ROUTER_MCP_URL"} {
			port := must(url.Parse(s.env[k]))(t).Port()
			if other, ok := ports[port]; ok {
				t.Errorf("port %s is %s's %s and also %s", port, s.name, k, other)
			}
			switch port {
			case "8081", "8082", "8083", "8090":
				t.Errorf("%s's %s uses the default stack's port %s", s.name, k, port)
			}
			ports[port] = s.name + "'s " + k
		}
	}
	// No file in common: each stack's state is in its own directory, and the default stack's
	// is untouched.
	for _, s := range []struct {
		place harness.Place
		env   map[string]string
	}{{a, envA}, {b, envB}} {
		for _, f := range []string{"stack.env", "stack.pid", "credentials.json", "router.db", "mockflux.jsonl", "hubu.log"} {
			if _, err := os.Stat(filepath.Join(s.place.Dir, f)); err != nil {
				t.Errorf("stack %s: %v", s.place.Name, err)
			}
		}
		if !strings.Contains(s.env["ROUTER_CMD"], filepath.Join(s.place.Dir, "router.db")) {
			t.Errorf("stack %s's router does not keep its registry in %s: %s", s.place.Name, s.place.Dir, s.env["ROUTER_CMD"])
		}
	}
	if _, err := os.Stat(filepath.Join(root, ".hubu", "stack.env")); !os.IsNotExist(err) {
		t.Errorf("a named stack wrote the default stack's .hubu/stack.env (%v)", err)
	}
	if envA["HUBU_AGENT_TOKEN"] == envB["HUBU_AGENT_TOKEN"] || envA["ROUTER_MCP_TOKEN"] == envB["ROUTER_MCP_TOKEN"] {
		t.Error("the two stacks share credentials")
	}

	// make demo NAME=a spends in a (the demo binary finds the stack by its name as make demo does).
	demo := exec.CommandContext(ctx, bin.Path("hubu-demo"))
	demo.Dir, demo.Env = root, append(env, "HUBU_STACK_NAME="+a.Name)
	out, err := demo.CombinedOutput()
	if err != nil {
		t.Fatalf("the demo against stack a: %v\n%s", err, out)
	}
	handle := publicHandle.FindString(string(out))
	if handle == "" {
		t.Fatalf("the demo printed no public handle:\n%s", out)
	}
	if n := mockCharges(t, envA); n == 0 {
		t.Fatal("the demo's spend charged nothing at a's mockflux")
	}
	if n := mockCharges(t, envB); n != 0 {
		t.Errorf("b's mockflux has %d charges after a spend in a", n)
	}
	for _, c := range []struct{ db, table string }{{a.HubuDB, "operations"}, {a.GongbuDB, "executions"}} {
		if n := countRows(t, server, c.db, c.table); n == 0 {
			t.Errorf("%s.%s is empty after a's spend: a does not use its own database", c.db, c.table)
		}
	}
	for _, c := range []struct{ db, table string }{{b.HubuDB, "operations"}, {b.GongbuDB, "executions"}} {
		if n := countRows(t, server, c.db, c.table); n != 0 {
			t.Errorf("%s.%s has %d rows after a spend in a", c.db, c.table, n)
		}
	}
	if code := operationStatusCode(t, ctx, envB, handle); code != "not_found" {
		t.Errorf("b's router answered a's operation %s with %q, want not_found", handle, code)
	}

	// make down NAME=a stops a alone; HUBU_STACK_NAME=b make down stops b.
	runMake(t, root, env, "down", "NAME="+a.Name)
	upA.waitExit(t)
	if resp, err := http.Get(envB["HUBU_URL"] + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("b's Hubu is not healthy after make down NAME=a: %v", err)
	}
	runMake(t, root, append(env, "HUBU_STACK_NAME="+b.Name), "down")
	upB.waitExit(t)
	for _, p := range []harness.Place{a, b} {
		if _, err := os.Stat(p.EnvPath()); !os.IsNotExist(err) {
			t.Errorf("%s is still there after make down", p.EnvPath())
		}
	}
}

// namedStack is one `make up NAME=x` (the hubu-stack command) running in the background.
type namedStack struct {
	place harness.Place
	cmd   *exec.Cmd
	out   *testlog.Buffer
	done  chan error
}

func startNamedStack(t *testing.T, command, root string, place harness.Place, env []string) *namedStack {
	t.Helper()
	s := &namedStack{place: place, cmd: exec.Command(command), out: &testlog.Buffer{}, done: make(chan error, 1)}
	s.cmd.Dir, s.cmd.Env = root, append(env, "HUBU_STACK_NAME="+place.Name)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	noError(t, s.cmd.Start())
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("stack %s said:\n%s", place.Name, s.out.String())
		}
	})
	return s
}

func (s *namedStack) waitUp(t *testing.T) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(s.out.String(), "The Hubu stack is up") {
		select {
		case err := <-s.done:
			t.Fatalf("stack %s ended before it was up: %v\n%s", s.place.Name, err, s.out.String())
		case <-deadline:
			t.Fatalf("stack %s was not up within 2 minutes\n%s", s.place.Name, s.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *namedStack) waitExit(t *testing.T) {
	t.Helper()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("stack %s did not stop cleanly: %v", s.place.Name, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("stack %s still runs a minute after make down", s.place.Name)
	}
}

func runMake(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("make", args...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// readStackEnv reads the KEY='value' lines make up writes.
func readStackEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f := must(os.Open(path))(t)
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'"), `'\''`, "'")
		}
	}
	noError(t, sc.Err())
	return env
}

func mockCharges(t *testing.T, env map[string]string) int {
	t.Helper()
	resp := must(http.Get(env["MOCKFLUX_URL"] + "/_mock/charges"))(t)
	defer resp.Body.Close()
	var body struct {
		Count int `json:"count"`
	}
	noError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.Count
}

func countRows(t *testing.T, server, db, table string) int {
	t.Helper()
	u := must(url.Parse(server))(t)
	u.Path = "/" + db
	conn := must(pgx.Connect(context.Background(), u.String()))(t)
	defer conn.Close(context.Background())
	var n int
	noError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n))
	return n
}

// operationStatusCode asks a stack's router (streamable HTTP) for an operation by its public
// handle and returns the error code it answered with ("" when it found the operation).
func operationStatusCode(t *testing.T, ctx context.Context, env map[string]string, handle string) string {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "two-stacks"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: env["ROUTER_MCP_URL"], HTTPClient: &http.Client{Transport: harness.Bearer(env["ROUTER_MCP_TOKEN"])}, DisableStandaloneSSE: true,
	}, nil)
	noError(t, err)
	defer cs.Close()
	res := must(cs.CallTool(ctx, &mcp.CallToolParams{Name: "operation_status", Arguments: map[string]any{"public_handle": handle}}))(t)
	raw := must(json.Marshal(res.StructuredContent))(t)
	var sc struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	noError(t, json.Unmarshal(raw, &sc))
	return sc.Error.Code
}
