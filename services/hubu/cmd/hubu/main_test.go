package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
	"hubu.dev/hubu/kit/proctest"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/migrator"
	"hubu.dev/hubu/sql/sqltest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.RunWithBinary(m, &binary)) }

func runHubu(t *testing.T, env []string, args ...string) (string, string, error) {
	return commandtest.Run(run, env, args...)
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
		{"negative cache ttl", []string{"HUBU_DATABASE_URL=" + empty}, []string{"serve", "--cache-ttl", "-1s"}, "--cache-ttl must not be negative"},
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
	latest, err := migrator.Latest(hubusql.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := runHubu(t, env, "migrate", "up"); err != nil || out != fmt.Sprintf("version %d\n", latest) {
		t.Fatalf("up: %q %v", out, err)
	}
	if out, _, err := runHubu(t, env, "migrate", "down"); err != nil || out != fmt.Sprintf("version %d\n", latest-1) {
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
	p := &proctest.Process{Name: "hubu", Path: binary, Args: []string{"serve", "--listen", "127.0.0.1:0"},
		Env: append(os.Environ(), "HUBU_DATABASE_URL="+dbURL)}
	proctest.Start(t, p)
	// /metrics last: its request counter exists once a request was served.
	for _, probe := range []struct{ path, want string }{
		{"/healthz", `"ok"`}, {"/readyz", `"ok"`}, {"/metrics", "hubu_http_requests_total"},
	} {
		path, want := probe.path, probe.want
		resp, err := http.Get(p.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	proctest.Stop(t, p)
}

// Production binaries never link the test helpers.
func TestNoTestHelpersInBinaries(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "hubu.dev/hubu/services/hubu/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, helper := range []string{"hubu.dev/hubu/sql/sqltest", "hubu.dev/hubu/proto/apitest", "hubu.dev/hubu/services/hubu/hubutest",
		"hubu.dev/hubu/kit/command/commandtest", "hubu.dev/hubu/kit/proctest", "hubu.dev/hubu/kit/testclock", "hubu.dev/hubu/kit/testlog"} {
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
