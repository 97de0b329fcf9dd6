package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hubu.dev/hubu/sql/sqltest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hubu-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "hubu")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("build hubu: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runHubu(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestBadSettings(t *testing.T) {
	t.Parallel()
	empty := sqltest.NewEmptyDatabase(t, "hubu")
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no command", nil, nil, "missing command"},
		{"unknown command", nil, []string{"launch"}, `unknown command "launch"`},
		{"no database", nil, []string{"serve"}, "--database-url (or HUBU_DATABASE_URL) is required"},
		{"not a postgres URL", nil, []string{"serve", "--database-url", "mysql://x"}, "must be a postgres:// URL"},
		{"bad approval ttl", []string{"HUBU_DATABASE_URL=" + empty}, []string{"serve", "--approval-ttl", "soon"}, "--approval-ttl"},
		{"gongbu without its token", []string{"HUBU_DATABASE_URL=" + empty, "HUBU_GONGBU_URL=http://127.0.0.1:1"}, []string{"serve"}, "--gongbu-token (or HUBU_GONGBU_TOKEN) is required"},
		{"gongbu not a URL", []string{"HUBU_DATABASE_URL=" + empty}, []string{"serve", "--gongbu-url", "gongbu:8082", "--gongbu-token", "t"}, "--gongbu-url must be an http(s) URL"},
		{"unmigrated database", []string{"HUBU_DATABASE_URL=" + empty}, []string{"serve", "--listen", "127.0.0.1:0"}, "run `hubu migrate up`"},
		{"unknown migrate action", []string{"HUBU_DATABASE_URL=" + empty}, []string{"migrate", "sideways"}, "unknown migrate action"},
		{"operator without name", []string{"HUBU_DATABASE_URL=" + empty}, []string{"operator", "create"}, "--name is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runHubu(t, c.env, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("the error is more than one line: %q", err)
			}
		})
	}
}

func TestMigrateAndCredentials(t *testing.T) {
	t.Parallel()
	env := []string{"HUBU_DATABASE_URL=" + sqltest.NewEmptyDatabase(t, "hubu")}
	if out, _, err := runHubu(t, env, "migrate", "version"); err != nil || out != "version 0\n" {
		t.Fatalf("version before: %q %v", out, err)
	}
	if out, _, err := runHubu(t, env, "migrate", "up"); err != nil || out != "version 3\n" {
		t.Fatalf("up: %q %v", out, err)
	}
	if out, _, err := runHubu(t, env, "migrate", "down"); err != nil || out != "version 2\n" {
		t.Fatalf("down: %q %v", out, err)
	}
	if _, _, err := runHubu(t, env, "migrate", "up"); err != nil {
		t.Fatal(err)
	}
	out, _, err := runHubu(t, env, "operator", "create", "--name", "alice")
	if err != nil || !strings.HasPrefix(out, "hubu_operator_") || strings.Count(out, "\n") != 1 {
		t.Fatalf("operator create: %q %v", out, err)
	}
	out, _, err = runHubu(t, env, "service", "create", "--name", "gongbu")
	if err != nil || !strings.HasPrefix(out, "hubu_service_") {
		t.Fatalf("service create: %q %v", out, err)
	}
}

// The real binary: serves on port 0, logs JSON with the bound address, answers the probes
// and metrics, and stops cleanly on SIGTERM.
func TestServeAndGracefulShutdown(t *testing.T) {
	t.Parallel()
	dbURL := sqltest.NewEmptyDatabase(t, "hubu")
	if _, _, err := runHubu(t, []string{"HUBU_DATABASE_URL=" + dbURL}, "migrate", "up"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "HUBU_DATABASE_URL="+dbURL)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	lines := make(chan map[string]any, 64)
	var logs bytes.Buffer
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(io.TeeReader(stderr, &logs))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				lines <- rec
			}
		}
	}()
	var addr string
	deadline := time.After(20 * time.Second)
	for addr == "" {
		select {
		case rec, ok := <-lines:
			if !ok {
				t.Fatalf("hubu exited before listening: %s", logs.String())
			}
			if rec["msg"] == "listening" {
				addr, _ = rec["addr"].(string)
			}
		case <-deadline:
			t.Fatal("hubu did not log its address within 20s")
		}
	}
	// /metrics last: its request counter exists once a request was served.
	for _, probe := range []struct{ path, want string }{
		{"/healthz", `"ok"`}, {"/readyz", `"ok"`}, {"/metrics", "hubu_http_requests_total"},
	} {
		path, want := probe.path, probe.want
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("hubu did not stop within 20s of SIGTERM")
	}
	if !strings.Contains(logs.String(), `"msg":"shutting down"`) {
		t.Fatalf("no shutdown line in the log: %s", logs.String())
	}
}

// Production binaries never link the test helpers.
func TestNoTestHelpersInBinaries(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "hubu.dev/hubu/services/hubu/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, helper := range []string{"hubu.dev/hubu/sql/sqltest", "hubu.dev/hubu/proto/apitest"} {
		if strings.Contains(string(out), helper+"\n") {
			t.Errorf("a binary imports %s", helper)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"migrate", "--help"}, {"operator", "create", "--help"}} {
		out, errOut, err := runHubu(t, nil, args...)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%v: %v", args, err)
		}
		if !strings.Contains(out+errOut, "usage") && !strings.Contains(out+errOut, "-database-url") {
			t.Errorf("%v printed no usage: %q %q", args, out, errOut)
		}
	}
}
