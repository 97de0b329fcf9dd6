package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/command/commandtest"
	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/mockflux/internal/hooktest"
	"hubu.dev/hubu/services/mockflux/journal"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.RunWithBinary(m, &binary)) }

func runMockflux(env map[string]string, args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestBadSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	corrupt := commandtest.File(t, "{\"type\":\"submit\"}\n")
	locked := filepath.Join(dir, "locked.jsonl")
	j, _, err := journal.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()

	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no command", nil, nil, "missing command"},
		{"unknown command", nil, []string{"launch"}, `unknown command "launch"`},
		{"unknown flag", nil, []string{"serve", "--port", "1"}, "flag provided but not defined: -port"},
		{"stray argument", nil, []string{"serve", "now"}, `unexpected argument "now"`},
		{"bad pending polls", nil, []string{"serve", "--pending-polls", "-1"}, "--pending-polls"},
		{"bad pending polls from env", map[string]string{"MOCKFLUX_PENDING_POLLS": "many"}, []string{"serve"}, `--pending-polls "many"`},
		{"bad sample ttl", nil, []string{"serve", "--sample-ttl", "0s"}, "--sample-ttl"},
		{"negative render time", nil, []string{"serve", "--render-time", "-5ms"}, `--render-time "-5ms" is not a duration of 0 or more`},
		{"render time without a unit", nil, []string{"serve", "--render-time", "10"}, `--render-time "10"`},
		{"bad listen address", nil, []string{"serve", "--listen", "no-such-host.invalid:x"}, "cannot listen on no-such-host.invalid:x"},
		{"data in a missing directory", nil, []string{"serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "nope", "d.jsonl")}, "cannot use --data"},
		{"corrupt data", map[string]string{"MOCKFLUX_DATA": corrupt}, []string{"serve", "--listen", "127.0.0.1:0"}, "record 1"},
		{"data in use", nil, []string{"serve", "--listen", "127.0.0.1:0", "--data", locked}, "in use by another process"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runMockflux(c.env, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("the error is more than one line: %q", err)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	out, _, err := runMockflux(nil, "--help")
	if err != nil || !strings.Contains(out, "mockflux serve --listen ADDR") {
		t.Fatalf("--help: %q %v", out, err)
	}
	_, errOut, err := runMockflux(nil, "serve", "--help")
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut, "-pending-polls") || !strings.Contains(errOut, "-render-time") ||
		!strings.Contains(errOut, "MOCKFLUX_RENDER_TIME") {
		t.Fatalf("serve --help: %q %v", errOut, err)
	}
	cmd := exec.Command(binary, "serve", "--help")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "MOCKFLUX_API_KEY") {
		t.Fatalf("the binary's serve --help: %v %s", err, out)
	}
}

// process is the real binary, started and stopped like an operator would.
type process struct {
	*proctest.Process
	t *testing.T
}

func start(t *testing.T, env []string) *process {
	t.Helper()
	p := &process{t: t, Process: &proctest.Process{Name: "mockflux", Path: binary, Args: []string{"serve"}, Env: append(os.Environ(), env...)}}
	proctest.Start(t, p.Process)
	return p
}

func (p *process) client(key string) *bflapi.ClientWithResponses {
	p.t.Helper()
	c, err := bflapi.NewClientWithResponses(p.URL(),
		bflapi.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}),
		bflapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("x-key", key)
			return nil
		}))
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

func (p *process) charges() bflapi.Charges {
	p.t.Helper()
	resp, err := p.client("").ListChargesWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		p.t.Fatalf("charges: %v %v", err, resp)
	}
	return *resp.JSON200
}

// Charges, tasks and their idempotency keys survive a restart of the real binary on the same
// data file (settings from the environment this time).
func TestRestartKeepsChargesAndKeys(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "mockflux.jsonl")
	env := []string{"MOCKFLUX_LISTEN=127.0.0.1:0", "MOCKFLUX_DATA=" + data, "MOCKFLUX_API_KEY=s3cret", "MOCKFLUX_PENDING_POLLS=0",
		"MOCKFLUX_HONOUR_IDEMPOTENCY=true"}
	ctx := context.Background()
	key := "decision-7"
	params := &bflapi.SubmitParams{IdempotencyKey: &key}
	w, h, seed := 1024, 768, int64(9)
	body := bflapi.FluxRequest{Prompt: "a red fox", Width: &w, Height: &h, Seed: &seed}

	first := start(t, env)
	if resp, err := first.client("wrong").SubmitWithResponse(ctx, "flux-pro-1.1", params, body); err != nil || resp.StatusCode() != http.StatusForbidden {
		t.Fatalf("the API key from the environment is not enforced: %v %v", err, resp)
	}
	sub, err := first.client("s3cret").SubmitWithResponse(ctx, "flux-pro-1.1", params, body)
	if err != nil || sub.JSON200 == nil {
		t.Fatalf("submit: %v %v", err, sub)
	}
	before := first.charges()
	if before.Count != 1 || before.TotalMicros != 40_000 {
		t.Fatalf("charges before: %+v", before)
	}
	proctest.Stop(t, first.Process)
	if strings.Contains(first.Log(), "s3cret") || strings.Contains(first.Log(), key) {
		t.Fatalf("a secret or idempotency key reached the log: %s", first.Log())
	}

	second := start(t, env)
	if second.Addr == first.Addr {
		t.Log("the same port was picked twice; the test still holds")
	}
	after := second.charges()
	if after.Count != 1 || after.TotalMicros != 40_000 || after.Charges[0].Id != before.Charges[0].Id || after.Charges[0].JobId != sub.JSON200.Id {
		t.Fatalf("charges after restart: %+v, before: %+v", after, before)
	}
	again, err := second.client("s3cret").SubmitWithResponse(ctx, "flux-pro-1.1", params, body)
	if err != nil || again.JSON200 == nil || again.JSON200.Id != sub.JSON200.Id {
		t.Fatalf("the same key after restart: %v %v", err, again)
	}
	if !strings.HasPrefix(again.JSON200.PollingUrl, strings.Replace(second.URL(), "127.0.0.1", "localhost", 1)+"/") {
		t.Fatalf("polling URL %s does not point at the running process", again.JSON200.PollingUrl)
	}
	result, err := second.client("s3cret").GetResultWithResponse(ctx, &bflapi.GetResultParams{Id: sub.JSON200.Id})
	if err != nil || result.JSON200 == nil || result.JSON200.Status != bflapi.ResultStatusReady {
		t.Fatalf("poll after restart: %v %v", err, result)
	}
	img, err := http.Get(result.JSON200.Result.Sample)
	if err != nil {
		t.Fatal(err)
	}
	jpeg, _ := io.ReadAll(img.Body)
	img.Body.Close()
	if img.StatusCode != http.StatusOK || !bytes.HasPrefix(jpeg, []byte("\xff\xd8\xff")) { // BFL's default output_format, JPEG
		t.Fatalf("sample after restart: %d", img.StatusCode)
	}
	other := "decision-8"
	if resp, err := second.client("s3cret").SubmitWithResponse(ctx, "flux-pro-1.1", &bflapi.SubmitParams{IdempotencyKey: &other}, body); err != nil || resp.JSON200 == nil {
		t.Fatalf("a new key: %v %v", err, resp)
	}
	if c := second.charges(); c.Count != 2 || c.TotalMicros != 80_000 {
		t.Fatalf("charges: %+v", c)
	}
	proctest.Stop(t, second.Process)
}

// Production binaries never link the test helpers.
func TestNoTestHelpersInBinaries(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "hubu.dev/hubu/services/mockflux/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, helper := range []string{"hubu.dev/hubu/proto/apitest", "hubu.dev/hubu/kit/testclock",
		"hubu.dev/hubu/services/mockflux/internal/hooktest", "hubu.dev/hubu/services/mockflux/internal/timertest"} {
		if strings.Contains(string(out), helper+"\n") {
			t.Errorf("a binary imports %s", helper)
		}
	}
}

// The real binary answers the probes and serves Prometheus metrics, the runtime's included,
// as Hubu and Gongbu do.
func TestProbesAndMetrics(t *testing.T) {
	t.Parallel()
	p := start(t, []string{"MOCKFLUX_LISTEN=127.0.0.1:0", "MOCKFLUX_DATA=" + filepath.Join(t.TempDir(), "mockflux.jsonl")})
	ready, err := p.client("").GetReadyzWithResponse(context.Background())
	if err != nil || ready.JSON200 == nil || ready.JSON200.Status != bflapi.Ok {
		t.Fatalf("readyz: %v %v", err, ready)
	}
	resp, err := http.Get(p.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"go_goroutines ", "process_cpu_seconds_total ", "mockflux_charges_total 0\n",
		`mockflux_http_requests_total{method="GET",route="/readyz",status="200"} 1`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("metrics (%d) lack %q:\n%s", resp.StatusCode, want, body)
		}
	}
	proctest.Stop(t, p.Process)
}

// A webhook still under way when mockflux stops (its receiver hangs) stays due, and the next
// start on the same data file sends it, signed with the secret kept in the journal (and never
// logged). --render-time from the environment holds it back and sets ready_at.
func TestWebhookDueAfterARestart(t *testing.T) {
	t.Parallel()
	const render = time.Second
	rcv := hooktest.New(t, func(n int) int {
		if n == 1 {
			return hooktest.Hang
		}
		return http.StatusNoContent
	})
	data := filepath.Join(t.TempDir(), "mockflux.jsonl")
	env := []string{"MOCKFLUX_LISTEN=127.0.0.1:0", "MOCKFLUX_DATA=" + data, "MOCKFLUX_RENDER_TIME=" + render.String(), "MOCKFLUX_PENDING_POLLS=0"}
	const secret = "whsec-restart-0123456789"
	w, h := 512, 512
	body := bflapi.FluxRequest{Prompt: "a red fox", Width: &w, Height: &h,
		WebhookUrl: new(rcv.URL + "/hook?token=query-credential"), WebhookSecret: new(secret)}

	first := start(t, env)
	sub, err := first.client("k").SubmitWithResponse(context.Background(), "flux-dev", &bflapi.SubmitParams{}, body)
	if err != nil || sub.JSON200 == nil {
		t.Fatalf("submit: %v %v", err, sub)
	}
	hung := rcv.Await(t, 1)[0]
	proctest.Stop(t, first.Process)

	second := start(t, env)
	got := rcv.Await(t, 2)[1]
	if string(got.Body) != string(hung.Body) {
		t.Fatalf("the restart sent %s, the first process %s", got.Body, hung.Body)
	}
	hooktest.Check(t, got, secret, sub.JSON200.Id)
	charge := second.charges().Charges[0]
	if charge.ReadyAt == nil || !charge.ReadyAt.Equal(charge.CreatedAt.Add(render)) {
		t.Fatalf("charge %+v, want ready_at %v", charge, charge.CreatedAt.Add(render))
	}
	if got.At.Before(*charge.ReadyAt) {
		t.Fatalf("sent at %v, before the render deadline %v", got.At, charge.ReadyAt)
	}
	proctest.Stop(t, second.Process)
	for _, log := range []string{first.Log(), second.Log()} {
		if strings.Contains(log, secret) || strings.Contains(log, "query-credential") {
			t.Fatalf("the secret or the URL's query reached the log: %s", log)
		}
	}
	if !strings.Contains(second.Log(), "webhook delivered") {
		t.Fatalf("the second process did not log the delivery: %s", second.Log())
	}
}
