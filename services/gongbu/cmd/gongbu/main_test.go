package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/command/commandtest"
	"hubu.dev/hubu/kit/leaktest"
	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/postgres"
	"hubu.dev/hubu/services/gongbu/vendorkey"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/sqltest"
)

var binary string

// run is also called in-process (as the e2e harness does): it must leave nothing running.
func TestMain(m *testing.M) { os.Exit(leaktest.Check(proctest.RunWithBinary(m, &binary))) }

func runGongbu(t *testing.T, env []string, args ...string) (string, string, error) {
	return commandtest.Run(run, env, args...)
}

// serveEnv is every serve setting but the database, valid; the URLs need not answer.
var serveEnv = []string{
	"GONGBU_HUBU_URL=http://127.0.0.1:1", "GONGBU_HUBU_TOKEN=hubu_service_x", "GONGBU_SERVICE_TOKEN=service-token",
	"GONGBU_FLUX_URL=http://127.0.0.1:1", "GONGBU_FLUX_KEY=flux-key",
}

// without returns env minus the setting key.
func without(env []string, key string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func TestBadSettings(t *testing.T) {
	t.Parallel()
	empty := sqltest.NewEmptyDatabase(t, "gongbu")
	migrated := sqltest.NewDatabase(t, "gongbu", gongbusql.Migrations())
	db := func(url string) []string { return append([]string{"GONGBU_DATABASE_URL=" + url}, serveEnv...) }
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no command", nil, nil, "missing command"},
		{"unknown command", nil, []string{"launch"}, `unknown command "launch"`},
		{"no database", serveEnv, []string{"serve"}, "--database-url (or GONGBU_DATABASE_URL) is required"},
		{"not a postgres URL", serveEnv, []string{"serve", "--database-url", "mysql://x"}, "must be a postgres:// URL"},
		{"no Hubu URL", without(db(migrated), "GONGBU_HUBU_URL"), []string{"serve"}, "--hubu-url is required"},
		{"a Hubu URL that is no URL", db(migrated), []string{"serve", "--hubu-url", "127.0.0.1:8081"}, "--hubu-url must be an http(s) URL"},
		{"an empty FLUX URL", db(migrated), []string{"serve", "--flux-url", ""}, "--flux-url is required"},
		{"a FLUX URL that is not http", db(migrated), []string{"serve", "--flux-url", "ftp://flux"}, "--flux-url must be an http(s) URL"},
		{"no Hubu token", without(db(migrated), "GONGBU_HUBU_TOKEN"), []string{"serve"}, "--hubu-token is required"},
		{"no service token", without(db(migrated), "GONGBU_SERVICE_TOKEN"), []string{"serve"}, "--service-token is required"},
		{"no FLUX key", without(db(migrated), "GONGBU_FLUX_KEY"), []string{"serve"}, "--flux-key is required"},
		{"a poll interval that is no duration", db(migrated), []string{"serve", "--poll-interval", "soon"}, "-poll-interval"},
		{"a zero poll deadline", db(migrated), []string{"serve", "--poll-deadline", "0s"}, "must be positive"},
		// The environment is read, and a value in it that is no duration stops the start
		// rather than fall back to the default.
		{"a zero poll interval from the environment", append(db(migrated), "GONGBU_POLL_INTERVAL=0s"), []string{"serve"}, "must be positive"},
		{"a zero poll deadline from the environment", append(db(migrated), "GONGBU_POLL_DEADLINE=0s"), []string{"serve"}, "must be positive"},
		{"a poll interval in the environment that is no duration", append(db(migrated), "GONGBU_POLL_INTERVAL=soon"), []string{"serve"}, "GONGBU_POLL_INTERVAL must be a duration"},
		{"a poll deadline in the environment that is no duration", append(db(migrated), "GONGBU_POLL_DEADLINE=10"), []string{"serve"}, "GONGBU_POLL_DEADLINE must be a duration"},
		{"a lease in the environment that is no duration", append(db(migrated), "GONGBU_LEASE=long"), []string{"serve"}, "GONGBU_LEASE must be a duration"},
		{"a negative lease", db(migrated), []string{"serve", "--lease", "-1s"}, "--lease must not be negative"},
		{"a zero first poll", append(db(migrated), "GONGBU_FIRST_POLL=0s"), []string{"serve"}, "--first-poll must be positive"},
		{"a webhook URL that is no URL", db(migrated), []string{"serve", "--webhook-url", "127.0.0.1:8082/v1/webhooks/bfl"}, "--webhook-url must be an http(s) URL"},
		{"a webhook URL without a key", append(db(migrated), "GONGBU_WEBHOOK_URL=http://127.0.0.1:8082/v1/webhooks/bfl"), []string{"serve"}, "--webhook-url needs --webhook-key"},
		{"a webhook key too short", append(db(migrated), "GONGBU_WEBHOOK_URL=http://127.0.0.1:8082/v1/webhooks/bfl", "GONGBU_WEBHOOK_KEY=short"), []string{"serve"}, "of at least 32 bytes"},
		{"a FLUX timeout that is no duration", append(db(migrated), "GONGBU_FLUX_TIMEOUT=long"), []string{"serve"}, "GONGBU_FLUX_TIMEOUT must be a duration"},
		{"a zero FLUX timeout", db(migrated), []string{"serve", "--flux-timeout", "0s"}, "--flux-timeout must be positive"},
		{"an idempotency setting that is no boolean", append(db(migrated), "GONGBU_FLUX_IDEMPOTENT=maybe"), []string{"serve"}, "GONGBU_FLUX_IDEMPOTENT must be true or false"},
		// The FLUX host allow-lists are read before anything is started, and a bad entry is named.
		{"a polling host that is a URL", db(migrated), []string{"serve", "--flux-polling-hosts", "api.us1.bfl.ai,https://api.eu1.bfl.ai"}, `--flux-polling-hosts: "https://api.eu1.bfl.ai" is not a host`},
		{"a polling host that is a pattern", append(db(migrated), "GONGBU_FLUX_POLLING_HOSTS=*.bfl.ai"), []string{"serve"}, `--flux-polling-hosts: "*.bfl.ai" is not a host`},
		{"a sample host with a path", append(db(migrated), "GONGBU_FLUX_SAMPLE_HOSTS=delivery-us1.bfl.ai/results"), []string{"serve"}, `--flux-sample-hosts: "delivery-us1.bfl.ai/results" is not a host`},
		{"an unreachable database", db("postgres://postgres@127.0.0.1:1/gongbu?connect_timeout=2"), []string{"serve"}, "cannot reach the database"},
		{"an unmigrated database", db(empty), []string{"serve", "--listen", "127.0.0.1:0"}, "run `gongbu migrate up`"},
		{"an address it cannot listen on", db(migrated), []string{"serve", "--listen", "256.0.0.1:0"}, "cannot listen on 256.0.0.1:0"},
		{"migrate without an action", nil, []string{"migrate"}, "usage: gongbu migrate up|down|version"},
		{"unknown migrate action", []string{"GONGBU_DATABASE_URL=" + empty}, []string{"migrate", "sideways"}, "unknown migrate action"},
		{"migrate without a database", nil, []string{"migrate", "up"}, "--database-url (or GONGBU_DATABASE_URL) is required"},
		{"migrate down a negative number of steps", []string{"GONGBU_DATABASE_URL=" + empty}, []string{"migrate", "down", "--steps", "-1"}, "--steps must not be negative"},
		{"reconcile without URLs", nil, []string{"reconcile"}, "--hubu-url is required"},
		{"reconcile without tokens", []string{"GONGBU_HUBU_URL=http://h", "GONGBU_URL=http://g"}, []string{"reconcile"}, "--hubu-token, --service-token and --flux-key are required"},
		{"reconcile with a bad ledger URL", []string{"GONGBU_HUBU_URL=http://h", "GONGBU_URL=http://g"}, []string{"reconcile", "--mock-ledger", "ftp://x"}, "--mock-ledger"},
		{"resolve without a database", nil, []string{"resolve", "--decision", uuid.NewString(), "--not-charged"}, "--database-url (or GONGBU_DATABASE_URL) is required"},
		{"resolve on an unmigrated database", []string{"GONGBU_DATABASE_URL=" + empty}, []string{"resolve", "--decision", uuid.NewString(), "--not-charged"}, "run `gongbu migrate up`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := runGongbu(t, c.env, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("the error is more than one line: %q", err)
			}
		})
	}
}

// The binary itself says what is wrong in one line on stderr and exits non-zero.
func TestBinaryFailsInOneLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{serveEnv, []string{"serve"}, "gongbu: --database-url (or GONGBU_DATABASE_URL) is required\n"},
		{append(serveEnv, "GONGBU_DATABASE_URL=postgres://x/y", "GONGBU_FLUX_IDEMPOTENT=maybe"), []string{"serve"}, "gongbu: GONGBU_FLUX_IDEMPOTENT must be true or false, not \"maybe\"\n"},
		{nil, []string{"migrate", "sideways", "--database-url", "postgres://x/y"}, "gongbu: unknown migrate action \"sideways\": use up, down or version\n"},
		{nil, []string{"resolve", "--database-url", "postgres://x/y", "--decision", "d-1", "--not-charged"}, "gongbu: --decision must be a decision id (a UUID)\n"},
	} {
		cmd := exec.Command(binary, c.args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("%v: exit %v, want 2", c.args, err)
		}
		if stderr.String() != c.want || stdout.Len() != 0 {
			t.Fatalf("%v: stderr %q, want %q; stdout %q", c.args, stderr.String(), c.want, stdout.String())
		}
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	env := []string{"GONGBU_DATABASE_URL=" + sqltest.NewEmptyDatabase(t, "gongbu")}
	latest := fmt.Sprintf("version %d\n", latestMigration(t))
	previous := fmt.Sprintf("version %d\n", latestMigration(t)-1)
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "version"}, "version 0\n"},
		{[]string{"migrate", "up"}, latest},
		{[]string{"migrate", "up"}, latest},
		{[]string{"migrate", "version"}, latest},
		{[]string{"migrate", "down"}, previous},
		{[]string{"migrate", "up"}, latest},
		{[]string{"migrate", "down", "--steps", "0"}, "version 0\n"},
		{[]string{"migrate", "up"}, latest},
	} {
		out, _, err := runGongbu(t, env, step.args...)
		if err != nil || out != step.want {
			t.Fatalf("%v: %q %v, want %q", step.args, out, err, step.want)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"serve", "--help"}, {"migrate", "--help"}, {"migrate", "up", "--help"}, {"reconcile", "--help"}, {"resolve", "--help"}} {
		out, errOut, err := runGongbu(t, nil, args...)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%v: %v", args, err)
		}
		if !strings.Contains(out+errOut, "usage") && !strings.Contains(out+errOut, "-database-url") && !strings.Contains(out+errOut, "-hubu-url") {
			t.Errorf("%v printed no usage: %q %q", args, out, errOut)
		}
		cmd := exec.Command(binary, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%v: the binary exits with %v: %s", args, err, out)
		}
	}
	// The FLUX host allow-lists are in the usage and the flags' help.
	out, _, _ := runGongbu(t, nil, "--help")
	_, flags, _ := runGongbu(t, nil, "serve", "--help")
	for _, want := range []string{"--flux-polling-hosts", "--flux-sample-hosts", "GONGBU_FLUX_POLLING_HOSTS", "GONGBU_FLUX_SAMPLE_HOSTS"} {
		if !strings.Contains(out, want) {
			t.Errorf("the usage does not name %s", want)
		}
		if !strings.Contains(flags, strings.TrimPrefix(want, "-")) {
			t.Errorf("serve --help does not name %s", want)
		}
	}
}

// The real binary: serves on port 0, logs JSON with the bound address, answers the probes
// and metrics, and stops cleanly on SIGTERM.
func TestServeAndGracefulShutdown(t *testing.T) {
	t.Parallel()
	dbURL := sqltest.NewDatabase(t, "gongbu", gongbusql.Migrations())
	p := &proctest.Process{Name: "gongbu", Path: binary, Args: []string{"serve", "--listen", "127.0.0.1:0", "--hubu-url", "http://127.0.0.1:1",
		"--flux-url", "http://127.0.0.1:1", "--poll-interval", "50ms"},
		Env: append(os.Environ(), "GONGBU_DATABASE_URL="+dbURL, "GONGBU_HUBU_TOKEN=hubu_service_x",
			"GONGBU_SERVICE_TOKEN=service-token", "GONGBU_FLUX_KEY=flux-key", "GONGBU_FLUX_IDEMPOTENT=true")}
	proctest.Start(t, p)
	if rec := p.Listening(); rec["flux_idempotent"] != true {
		t.Errorf("the listening line does not say the FLUX endpoint honours keys: %v", rec)
	}
	// /metrics last: its request counter exists once a request was served.
	for _, probe := range []struct{ path, want string }{
		{"/healthz", `"ok"`}, {"/readyz", `"ok"`}, {"/metrics", "gongbu_http_requests_total"},
	} {
		resp, err := http.Get(p.URL() + probe.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), probe.want) {
			t.Fatalf("%s: %d %s", probe.path, resp.StatusCode, body)
		}
	}
	resp, err := http.Get(p.URL() + "/v1/executions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the execution list answers %d without a token", resp.StatusCode)
	}
	proctest.Stop(t, p)
	out := p.Log()
	for _, secret := range []string{"hubu_service_x", "service-token", "flux-key"} {
		if strings.Contains(out, secret) {
			t.Errorf("gongbu logged a secret (%s)", secret)
		}
	}
	if strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("errors in the log of a clean run: %s", out)
	}
}

// Production binaries never link the test helpers.
func TestNoTestHelpersInBinaries(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "hubu.dev/hubu/services/gongbu/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, helper := range []string{"hubu.dev/hubu/sql/sqltest", "hubu.dev/hubu/proto/apitest", "hubu.dev/hubu/services/gongbu/gongbutest", "go.uber.org/goleak",
		"hubu.dev/hubu/kit/command/commandtest", "hubu.dev/hubu/kit/proctest", "hubu.dev/hubu/kit/testclock", "hubu.dev/hubu/kit/testlog"} {
		if strings.Contains(string(out), helper+"\n") {
			t.Errorf("a binary imports %s", helper)
		}
	}
	// Nor any other component: Gongbu talks to Hubu and the provider only over the wire.
	for _, other := range []string{"hubu.dev/hubu/services/hubu", "hubu.dev/hubu/services/mockflux", "hubu.dev/hubu/router"} {
		if strings.Contains(string(out), other) {
			t.Errorf("a binary imports %s", other)
		}
	}
}

// A worker that is submitting when the process is told to stop finishes the call and records
// the job before serve returns and the pool closes; otherwise the provider's job (and charge)
// would be lost to Gongbu.
func TestShutdownWaitsForASubmissionInFlight(t *testing.T) {
	t.Parallel()
	pool, dbURL := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	store := postgres.NewStore(pool)
	d := gongbutest.NewDecision()
	now := time.Now()
	// Left by a worker that died while submitting a few minutes ago: its lease ran out.
	if _, _, _, err := store.Insert(context.Background(), d, vendorkey.For("bfl", d.DecisionID), now.Add(-time.Minute), now.Add(-5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	shutdownWithSubmissionInFlight(t, store, d, []string{"--database-url", dbURL, "--hubu-url", "http://127.0.0.1:1", "--flux-idempotent"},
		nil, func(log *testlog.Buffer) {
			// The answer comes once Gongbu has begun to shut down (or, should it never, after 10 s).
			waitfor.Within(10*time.Second, func() bool { return strings.Contains(log.String(), `"shutting down"`) })
		}, 20*time.Second)
}

// Hubu hands a decision over and the provider takes its time; the process is told to stop
// meanwhile. Gongbu waits for the submission — longer than an HTTP server's usual grace of a
// few seconds, up to the provider's timeout — and records the job before the pool closes.
func TestShutdownWaitsForAnExecuteInFlight(t *testing.T) {
	t.Parallel()
	pool, dbURL := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	store := postgres.NewStore(pool)
	d := gongbutest.NewDecision()
	hubuSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/decisions/"+d.DecisionID.String() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(hubuapi.Decision{
			DecisionId: d.DecisionID, PublicHandle: d.PublicHandle, AgentId: d.AgentID, Tool: hubuapi.GenerateImage,
			Scope:        hubuapi.Scope{Provider: d.Scope.Provider, Model: d.Scope.Model, Size: d.Scope.Size},
			Arguments:    d.Arguments,
			AmountMicros: d.AmountMicros, Currency: d.Currency, State: hubuapi.OperationStateDispatching, DispatchAttempts: 1,
			IssuedAt: time.Now(),
		})
	}))
	t.Cleanup(hubuSrv.Close)
	const late = 16 * time.Second // the answer comes after the signal, later than the old 15 s grace
	handOff := func(log *testlog.Buffer) {
		var addr string
		if !waitfor.Within(20*time.Second, func() bool {
			for line := range strings.SplitSeq(log.String(), "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "listening" {
					addr, _ = rec["addr"].(string)
				}
			}
			return addr != ""
		}) {
			t.Fatalf("gongbu did not listen within 20s\n%s", log.String())
		}
		// Hubu's hand-off; its client gives up long before the provider answers.
		body, _ := json.Marshal(map[string]any{
			"decision_id": d.DecisionID, "public_handle": d.PublicHandle, "agent_id": d.AgentID, "tool": "generate_image",
			"scope":     map[string]any{"provider": "bfl", "model": d.Scope.Model, "size": d.Scope.Size},
			"arguments": d.Arguments, "amount_micros": d.AmountMicros, "currency": d.Currency,
		})
		go func() {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/executions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer s")
			req.Header.Set("Content-Type", "application/json")
			if resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	shutdownWithSubmissionInFlight(t, store, d, []string{"--database-url", dbURL, "--hubu-url", hubuSrv.URL, "--flux-timeout", "40s"},
		handOff, func(*testlog.Buffer) { time.Sleep(late) }, late+30*time.Second)
}

// shutdownWithSubmissionInFlight runs serve in-process (with args) against a FLUX endpoint that
// holds the submission of d. Once the submission arrived (sent by handOff, given serve's log,
// or else by serve's own worker), serve is told to stop, the provider answers when answer
// returns, and serve must return within limit with the job recorded.
func shutdownWithSubmissionInFlight(t *testing.T, store *postgres.Store, d gongbu.Decision, args []string,
	handOff, answer func(log *testlog.Buffer), limit time.Duration) {
	t.Helper()
	var stderr testlog.Buffer
	arrived, stopped := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fluxSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost {
			_, _ = io.WriteString(w, `{"id":"task-1","status":"Pending"}`)
			return
		}
		once.Do(func() { close(arrived) })
		select {
		case <-stopped:
			answer(&stderr)
		case <-time.After(60 * time.Second):
		}
		_, _ = io.WriteString(w, `{"id":"task-1","polling_url":"http://`+r.Host+`/v1/get_result?id=task-1"}`)
	}))
	t.Cleanup(fluxSrv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--hubu-token", "t", "--service-token", "s",
			"--flux-url", fluxSrv.URL, "--flux-key", "k"}, args...), func(string) string { return "" }, io.Discard, &stderr)
	}()
	if handOff != nil {
		handOff(&stderr)
	}
	select {
	case <-arrived:
	case err := <-done:
		t.Fatalf("serve returned before the submission reached the provider: %v\n%s", err, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("the submission did not reach the provider within 20s\n%s", stderr.String())
	}
	cancel() // SIGTERM
	close(stopped)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
	case <-time.After(limit):
		t.Fatalf("serve did not return within %v of the signal", limit)
	}
	x, err := store.Get(context.Background(), d.DecisionID)
	if err != nil {
		t.Fatal(err)
	}
	if x.State != gongbu.StateSubmitted || x.ProviderJobID == nil || *x.ProviderJobID != "task-1" {
		t.Fatalf("after shutdown: %s (job %v); want the job recorded\n%s", x.State, x.ProviderJobID, stderr.String())
	}
}
