package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/gongbu/flux"
	"hubu.dev/hubu/services/gongbu/reconcile"
	"hubu.dev/hubu/sql/sqltest"
)

// The double-charge suite: the real binaries (built with failpoints), real Postgres, real
// HTTP between the services, and the real router over stdio driven by the Go SDK's client
// with the _meta real harnesses send.

// suite is one stack for one scenario.
type suite struct {
	t     *testing.T
	s     *harness.Stack
	flux  *bflapi.ClientWithResponses
	mu    sync.Mutex
	texts []string // every MCP response, for the secret scan
	// extraSecrets are tokens made after the stack started (more agents), for the scan.
	extraSecrets []string
}

// newSuite starts a stack as against the real BFL API: mockflux ignores idempotency keys, and
// Gongbu is told so, so "charged once" rests on Gongbu alone.
func newSuite(t *testing.T) *suite {
	t.Helper()
	return newSuiteWith(t, false)
}

// newSuiteWith starts a stack whose provider honours idempotency keys (mockflux's
// --honour-idempotency, and Gongbu told so), or, with idempotent false, one that ignores them
// as the real BFL API does.
func newSuiteWith(t *testing.T, idempotent bool) *suite {
	t.Helper()
	server, id, dir, idConfig := stackPlace(t)
	su := startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_e2e_" + id, GongbuDB: "gongbu_e2e_" + id, FluxIdempotent: idempotent,
		Env: map[string][]string{
			"router": {"ROUTER_IDENTITY_CONFIG=" + idConfig},
			// Short leases and retries, so recoveries happen within a test's time.
			"gongbu": {"GONGBU_LEASE=1s"},
			"hubu":   {"HUBU_RETRY_AFTER=1s"},
		},
	})
	return su
}

// startSuite starts the stack cfg describes; when the test ends it stops the stack, scans
// for secrets and drops the stack's databases.
func startSuite(t *testing.T, cfg harness.Config) *suite {
	t.Helper()
	return startSuiteWith(t, bin, cfg)
}

// startSuiteWith is startSuite with the services of other binaries (a previous release).
func startSuiteWith(t *testing.T, b harness.Binaries, cfg harness.Config) *suite {
	t.Helper()
	s := must(harness.Start(context.Background(), b, cfg))(t)
	su := &suite{t: t, s: s}
	t.Cleanup(func() {
		s.Stop()
		su.scanForSecrets()
		_ = harness.DropDatabases(context.Background(), cfg.ServerURL, cfg.HubuDB, cfg.GongbuDB)
	})
	if s.Flux != nil {
		su.flux, _ = bflapi.NewClientWithResponses(s.Flux.URL())
	}
	return su
}

// stackPlace is what a stack of one test needs before it starts: the Postgres server, a
// unique suffix for its databases, its state directory, and an identity config that knows
// the platform "acme".
func stackPlace(t *testing.T) (server, id, dir, idConfig string) {
	t.Helper()
	server = sqltest.ServerURL(t)
	id = strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	dir = t.TempDir()
	idConfig = filepath.Join(dir, "identity.json")
	noError(t, os.WriteFile(idConfig, []byte(`{"platforms":{"acme":{}}}`), 0o600))
	return server, id, dir, idConfig
}

// router starts a stdio router subprocess wired to the stack (sharing its registry), as
// Codex or Claude Code would; extraEnv may arm a failpoint.
func (su *suite) router(extraEnv ...string) *mcp.ClientSession {
	su.t.Helper()
	return su.routerWaiting(20*time.Second, extraEnv...)
}

func (su *suite) routerWaiting(wait time.Duration, extraEnv ...string) *mcp.ClientSession {
	su.t.Helper()
	return su.routerFor(su.s.Credentials.AgentToken, wait, nil, extraEnv...)
}

// routerFor starts a stdio router for the agent whose token it is; extraArgs come last (a
// --state of its own, say).
func (su *suite) routerFor(agentToken string, wait time.Duration, extraArgs []string, extraEnv ...string) *mcp.ClientSession {
	su.t.Helper()
	args := append(su.s.RouterArgs("--wait", wait.String(), "--identity-config", filepath.Join(su.s.Config.Dir, "identity.json")), extraArgs...)
	cmd := exec.Command(bin.Path("hubu-unified-mcp"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HUBU_AGENT_TOKEN=" + agentToken}, extraEnv...)
	logf := must(os.OpenFile(filepath.Join(su.s.Config.Dir, "router-stdio.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600))(su.t)
	su.t.Cleanup(func() { logf.Close() })
	cmd.Stderr = logf
	cs := must(mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil))(su.t)
	su.t.Cleanup(func() { cs.Close() })
	return cs
}

// result is a tool result's structured content.
type result map[string]any

func (r result) code() string {
	e, _ := r["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r result) handle() string { s, _ := r["public_handle"].(string); return s }

// call sends tools/call; a protocol error (the router died) is returned, not fatal.
func (su *suite) call(cs *mcp.ClientSession, tool, args string, meta map[string]any) (result, error) {
	return su.callWithin(cs, tool, args, meta, 60*time.Second)
}

func (su *suite) callWithin(cs *mcp.ClientSession, tool, args string, meta map[string]any, bound time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	// The SDK adds its own keys to the _meta map it is given: deliveries of one call made at
	// once must not share one.
	meta = maps.Clone(meta)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: meta})
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(res)
	su.mu.Lock()
	su.texts = append(su.texts, string(raw))
	su.mu.Unlock()
	sc, _ := json.Marshal(res.StructuredContent)
	var r result
	_ = json.Unmarshal(sc, &r)
	return r, nil
}

func (su *suite) mustCall(cs *mcp.ClientSession, tool, args string, meta map[string]any) result {
	su.t.Helper()
	r, err := su.call(cs, tool, args, meta)
	if err != nil {
		su.t.Fatalf("%s: %v", tool, err)
	}
	return r
}

// mustSucceed sends generate_image and fails the test unless it succeeded; what names the call
// in the failure.
func (su *suite) mustSucceed(cs *mcp.ClientSession, args string, meta map[string]any, what string) result {
	su.t.Helper()
	r := su.mustCall(cs, "generate_image", args, meta)
	if r["status"] != "succeeded" {
		su.t.Fatalf("%s: %v", what, r)
	}
	return r
}

// charges is mockflux's ledger.
func (su *suite) charges() bflapi.Charges {
	su.t.Helper()
	resp, err := su.flux.ListChargesWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		su.t.Fatalf("charges: %v", err)
	}
	return *resp.JSON200
}

// authorizations counts the authorization requests Hubu has served since its last start,
// from its Prometheus metrics.
func (su *suite) authorizations() int {
	su.t.Helper()
	return metricSum(su.t, su.s.Hubu.URL(), "hubu_http_requests_total", `route="/v1/authorizations"`)
}

// metricSum adds up the samples of a counter a process at baseURL serves on /metrics, over
// the series whose labels contain every one of labels.
func metricSum(t testing.TB, baseURL, name string, labels ...string) int {
	t.Helper()
	resp := must(http.Get(baseURL + "/metrics"))(t)
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		matches := true
		for _, l := range labels {
			matches = matches && strings.Contains(line, l)
		}
		if matches {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}

// settleAndReconcile is every scenario's closing check. It waits (bounded) until nothing is
// in flight and the three records of money agree (Hubu's captures, Gongbu's executions, the
// provider's charges) with exactly want provider charges and no hold left on a final
// operation; then it looks again after a pause, so that a charge arriving late fails too.
func (su *suite) settleAndReconcile(want int) {
	su.t.Helper()
	check := func() (reconcile.Report, error) {
		r, err := su.reconcileReport()
		switch {
		case err != nil:
			return r, err
		case len(r.Mismatches) > 0:
			return r, fmt.Errorf("%d mismatches", len(r.Mismatches))
		case len(r.InFlight) > 0:
			return r, fmt.Errorf("%d operations in flight", len(r.InFlight))
		case r.Charges != want:
			return r, fmt.Errorf("%d provider charges, want %d", r.Charges, want)
		case r.CapturedMicros != r.ChargedMicros:
			return r, fmt.Errorf("Hubu captured %d micros, the provider charged %d", r.CapturedMicros, r.ChargedMicros)
		}
		return r, nil
	}
	var r reconcile.Report
	if err := poll(60*time.Second, 200*time.Millisecond, func() (err error) { r, err = check(); return err }); err != nil {
		su.t.Fatalf("after 60s: %v\n%s", err, r)
	}
	time.Sleep(time.Second) // an observation window for a late charge, not synchronization
	if r, err := check(); err != nil {
		su.t.Fatalf("a second look after the records agreed: %v\n%s", err, r)
	}
	if out, err := su.reconcile("--require-final"); err != nil {
		su.t.Fatalf("gongbu reconcile --require-final: %v\n%s", err, out)
	}
	if out, err := su.reconcile(append(su.withLedger(), "--require-final")...); err != nil {
		su.t.Fatalf("gongbu reconcile --mock-ledger --require-final: %v\n%s", err, out)
	}
}

// must returns v, failing the test at once when err is set: must(f())(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		noError(t, err)
		return v
	}
}

// noError fails the test at once when err is set.
func noError(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// poll calls f until it returns nil or bound has passed, pausing between calls; it returns
// f's last error.
func poll(bound, pause time.Duration, f func() error) error {
	deadline := time.Now().Add(bound)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
	}
}

// records are Hubu's and Gongbu's records of money, as `gongbu reconcile` reads them.
func (su *suite) records() *reconcile.HTTPRecords {
	su.t.Helper()
	c := su.s.Credentials
	return must(reconcile.NewRecords(su.s.Hubu.URL(), c.GongbuAtHubuToken, su.s.Gongbu.URL(), c.HubuAtGongbuToken,
		&http.Client{Timeout: 10 * time.Second}))(su.t)
}

// reconcileReport compares Hubu's and Gongbu's records with each job at the provider and with
// mockflux's charge ledger, as `gongbu reconcile --mock-ledger` does.
func (su *suite) reconcileReport() (reconcile.Report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	provider, err := flux.NewAdapter(flux.Config{BaseURL: su.s.Flux.URL(), APIKey: su.s.Credentials.FluxKey, Timeout: 10 * time.Second,
		PollingHosts: strings.Split(su.s.FluxPollingHosts(), ",")})
	if err != nil {
		return reconcile.Report{}, err
	}
	ledger, err := reconcile.NewMockLedger(su.s.Flux.URL(), &http.Client{Timeout: 10 * time.Second})
	if err != nil {
		return reconcile.Report{}, err
	}
	return reconcile.Run(ctx, su.records(), reconcile.Options{Provider: provider, Ledger: ledger})
}

// reconcile runs the real `gongbu reconcile` in its production form: the records against each
// job at the provider, no ledger unless extra asks for mockflux's (withLedger).
func (su *suite) reconcile(extra ...string) (string, error) {
	c := su.s.Credentials
	args := append([]string{"reconcile", "--hubu-url", su.s.Hubu.URL(), "--hubu-token", c.GongbuAtHubuToken,
		"--gongbu-url", su.s.Gongbu.URL(), "--service-token", c.HubuAtGongbuToken,
		"--flux-url", su.s.Flux.URL(), "--flux-key", c.FluxKey, "--flux-polling-hosts", su.s.FluxPollingHosts()}, extra...)
	cmd := exec.Command(bin.Path("gongbu"), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// withLedger are the arguments that make `gongbu reconcile` compare mockflux's ledger too.
func (su *suite) withLedger() []string { return []string{"--mock-ledger", su.s.Flux.URL()} }

// scanForSecrets fails when any process log or MCP response holds a private operation key
// or a token.
func (su *suite) scanForSecrets() {
	su.t.Helper()
	c := su.s.Credentials
	secrets := append([]string{c.OperatorToken, c.GongbuAtHubuToken, c.HubuAtGongbuToken, c.RouterMCPToken, c.AgentToken, c.FluxKey, c.WebhookKey}, su.extraSecrets...)
	// Every process's log (replicas' too: hubu-2.log, say), then every MCP response.
	logs, _ := filepath.Glob(filepath.Join(su.s.Config.Dir, "*.log"))
	var texts, where []string
	for _, path := range logs {
		_, raw, err := harness.LogLines(path)
		if err != nil {
			su.t.Error(err)
		}
		texts, where = append(texts, raw), append(where, filepath.Base(path))
	}
	su.mu.Lock()
	for i, text := range su.texts {
		texts, where = append(texts, text), append(where, fmt.Sprintf("MCP response %d", i))
	}
	su.mu.Unlock()
	for i, text := range texts {
		if strings.Contains(text, "hubu:operation:v1:") {
			su.t.Errorf("a private operation key appears in %s", where[i])
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				su.t.Errorf("a token appears in %s", where[i])
			}
		}
	}
}

const foxArgs = `{"prompt":"an origami fox","model":"flux-dev","width":1024,"height":1024}`

func codexMeta(id string) map[string]any {
	return map[string]any{"callId": id, "itemId": "item-" + id, "threadId": "thread-e2e-0b7c5d2a", "openai/session": "sess-e2e", "progressToken": 1.0}
}

func TestSuiteEveryHarnessChargedOnce(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	for name, meta := range map[string]map[string]any{
		"codex":       codexMeta("call_codex1Q7mMk4SLFbe4cBEEwr"),
		"claude code": {"claudecode/toolUseId": "toolu_01XYZpSw1H9PAxyEZ5UQKKLs"},
		"envelope":    {"hubu.dev/platform-invocation": map[string]any{"version": 1.0, "platform": "acme", "invocation_id": "inv-7f3a9c2e5b1d4a60"}},
	} {
		su.mustSucceed(cs, foxArgs, meta, name)
	}
	// Gongbu took each hand-off on Hubu's signature and each of the router's long-polls on
	// Hubu's read capability: it read Hubu's keys, and asked Hubu about no decision and no
	// operation's owner.
	hubuServed := func(route string) int {
		return metricSum(t, su.s.Hubu.URL(), "hubu_http_requests_total", `route="`+route+`"`, `method="GET"`)
	}
	if decisions, owners, keys := hubuServed("/v1/decisions/{decision_id}"), hubuServed("/v1/operations/{public_handle}"),
		hubuServed("/v1/decision-keys"); decisions != 0 || owners != 0 || keys < 1 {
		t.Fatalf("Gongbu asked Hubu about %d decisions and %d owners, and read its keys %d times; want 0, 0 and at least 1", decisions, owners, keys)
	}
	su.settleAndReconcile(3)
}

func TestSuiteRedeliveryAndNewCalls(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	first := su.mustSucceed(cs, foxArgs, codexMeta("call_r1EgXkuECOLSl8cDvzKHQU5u"), "first")
	before := su.authorizations()
	if before < 1 {
		t.Fatalf("Hubu counted %d authorizations after a spend: the metric cannot prove that redeliveries stay away", before)
	}
	reordered := `{"width":1024, "height":1024, "prompt":"an origami fox", "model":"flux-dev"}`
	for _, args := range []string{foxArgs, reordered} {
		again := su.mustCall(cs, "generate_image", args, codexMeta("call_r1EgXkuECOLSl8cDvzKHQU5u"))
		if again["replayed"] != true || again.handle() != first.handle() {
			t.Fatalf("redelivery: %v", again)
		}
	}
	// A second router process on the same registry also recognises it.
	if again := su.mustCall(su.router(), "generate_image", foxArgs, codexMeta("call_r1EgXkuECOLSl8cDvzKHQU5u")); again["replayed"] != true {
		t.Fatalf("redelivery through another router: %v", again)
	}
	if after := su.authorizations(); after != before {
		t.Fatalf("redeliveries reached Hubu: %d authorizations, want %d", after, before)
	}
	if n := su.charges().Count; n != 1 {
		t.Fatalf("%d charges after redeliveries", n)
	}
	if r := su.mustCall(cs, "generate_image", foxArgs, codexMeta("call_r2SC98iSYjStjFbImSym16zu")); r["status"] != "succeeded" || r.handle() == first.handle() {
		t.Fatalf("a new call with the same arguments: %v", r)
	}
	if r := su.mustCall(cs, "generate_image", `{"prompt":"a paper crane","model":"flux-dev","width":1024,"height":1024}`, codexMeta("call_r1EgXkuECOLSl8cDvzKHQU5u")); r.code() != "call_reused_for_different_request" {
		t.Fatalf("the same call id, other arguments: %v", r)
	}
	chat := map[string]any{"openai/session": "sess-1", "openai/subject": "u", "openai/organization": "o", "openai/locale": "en-US", "timezone": "UTC"}
	r := su.mustCall(cs, "generate_image", foxArgs, chat)
	if msg, _ := r["message"].(string); r.code() != "identity_required" ||
		!strings.Contains(msg, "Hubu spend tools require supported trusted identity from Codex, Claude Code, or the Hubu platform-invocation envelope") {
		t.Fatalf("ChatGPT chat: %v", r)
	}
	su.settleAndReconcile(2)
}

// deliverConcurrently sends one tools/call per meta at once and returns every result; a
// protocol error fails the test after all have answered.
func (su *suite) deliverConcurrently(cs *mcp.ClientSession, metas []map[string]any) []result {
	su.t.Helper()
	results := make([]result, len(metas))
	errs := make([]error, len(metas))
	var wg sync.WaitGroup
	for i, meta := range metas {
		wg.Go(func() { results[i], errs[i] = su.call(cs, "generate_image", foxArgs, meta) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			su.t.Fatalf("delivery %d: %v", i, err)
		}
	}
	return results
}

func TestSuiteConcurrency(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	burst := make([]map[string]any, 50)
	for i := range burst {
		burst[i] = codexMeta("call_burst4oCn6RUIG96vz1F0HOI")
	}
	results := su.deliverConcurrently(cs, burst)
	for i, r := range results {
		if r["status"] != "succeeded" || r.handle() == "" || r.handle() != results[0].handle() {
			t.Fatalf("delivery %d of one call: %v (the first answered %v)", i, r, results[0])
		}
	}
	su.settleAndReconcile(1)
	distinct := make([]map[string]any, 30)
	for i := range distinct {
		distinct[i] = codexMeta(fmt.Sprintf("call_distinctlMCS2Pg2f0J%02d", i))
	}
	handles := map[string]bool{}
	for i, r := range su.deliverConcurrently(cs, distinct) {
		if r["status"] != "succeeded" || r.handle() == "" || handles[r.handle()] || r.handle() == results[0].handle() {
			t.Fatalf("distinct call %d: %v", i, r)
		}
		handles[r.handle()] = true
	}
	su.settleAndReconcile(31)
}

func TestSuiteApproval(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	ultra := `{"prompt":"a cathedral of paper","model":"flux-pro-1.1-ultra","aspect_ratio":"16:9"}`
	held := su.mustCall(cs, "generate_image", ultra, codexMeta("call_bigv9JUqrQ1pHBTXkF8mF1vn"))
	if held.code() != "approval_required" {
		t.Fatalf("above the auto-approve limit: %v", held)
	}
	if again := su.mustCall(cs, "generate_image", ultra, codexMeta("call_bigv9JUqrQ1pHBTXkF8mF1vn")); again.code() != "approval_required" {
		t.Fatalf("redelivery while held: %v", again)
	}
	handle := held.handle()
	if r := su.mustCall(cs, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, handle), nil); r.code() != "approval_required" {
		t.Fatalf("resume before approval: %v", r)
	}
	if n := su.charges().Count; n != 0 {
		t.Fatal("a held spend was charged")
	}
	su.hubuctlOK(t, "approve", handle)
	if r := su.mustCall(cs, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, handle), nil); r["status"] != "succeeded" {
		t.Fatalf("resume after approval: %v", r)
	}
	su.mustCall(cs, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, handle), nil)
	su.mustCall(cs, "generate_image", ultra, codexMeta("call_bigv9JUqrQ1pHBTXkF8mF1vn"))
	su.settleAndReconcile(1)
	if total := su.charges().TotalMicros; total != 60_000 {
		t.Fatalf("charged %d micros, want the one 60000", total)
	}
}

// The router crashes after recording a call, or after Hubu answered but before it recorded
// the answer; the harness starts a new router and redelivers: one charge.
func TestSuiteRouterCrashes(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	points := []string{"router-after-registry-insert", "router-after-backend-answer"}
	for i, fp := range points {
		id := fmt.Sprintf("call_crash9UuUYWRLRlbHUPqoFE%d", i)
		crashing := su.router("HUBU_FAILPOINTS=" + fp)
		if r, err := su.call(crashing, "generate_image", foxArgs, codexMeta(id)); err == nil {
			t.Fatalf("%s: the router answered instead of crashing: %v", fp, r)
		}
		su.requireFailpointIn(filepath.Join(su.s.Config.Dir, "router-stdio.log"), fp)
		su.mustSucceed(su.router(), foxArgs, codexMeta(id), fp+": redelivery after the crash")
		su.settleAndReconcile(i + 1)
	}
}

// crashAt restarts a service with a failpoint armed, sends one call through a router, and
// waits for the service to die there; then it restarts the service without the failpoint.
func (su *suite) crashAt(p *harness.Process, point, callID string) {
	su.t.Helper()
	noError(su.t, p.Restart(context.Background(), false, "HUBU_FAILPOINTS="+point))
	cs := su.routerWaiting(2 * time.Second)
	r, err := su.call(cs, "generate_image", foxArgs, codexMeta(callID))
	if exitErr := p.WaitExit(30 * time.Second); exitErr == nil || !strings.Contains(exitErr.Error(), "killed") {
		su.t.Fatalf("%s: %s did not crash at the failpoint (%v); the call answered %v %v", point, p.Name, exitErr, r, err)
	}
	su.requireFailpointIn(p.LogPath, point)
	noError(su.t, p.Restart(context.Background(), false))
}

// requireFailpointIn fails unless the log says the process died at point: a process killed
// anywhere else (a moved or dead failpoint) must not pass for the scenario.
func (su *suite) requireFailpointIn(logPath, point string) {
	su.t.Helper()
	lines, _, err := harness.LogLines(logPath)
	if err != nil {
		su.t.Fatal(err)
	}
	for _, l := range lines {
		if l["msg"] == "failpoint reached; crashing" && l["failpoint"] == point {
			return
		}
	}
	su.t.Fatalf("%s does not say the process reached the failpoint %s", filepath.Base(logPath), point)
}

// Hubu or Gongbu crashes at each failpoint; after its restart the same call is delivered
// again and is charged exactly once. With a provider that ignores idempotency keys, a crash
// of Gongbu between recording a submission and recording its answer leaves real doubt: the
// execution is indeterminate (never resubmitted blindly) until an operator resolves it with
// what the provider's own records say. Every other crash is no evidence of a provider call:
// the decision is submitted once.
func TestSuiteServiceCrashes(t *testing.T) {
	t.Parallel()
	hubu := func(s *harness.Stack) *harness.Process { return s.Hubu }
	gongbu := func(s *harness.Stack) *harness.Process { return s.Gongbu }
	for _, c := range []struct {
		point   string
		process func(*harness.Stack) *harness.Process
		// without idempotency keys: the provider charges once the crash is over (-1: the
		// execution is indeterminate, with this many charges: 0 or 1)
		doubtCharges int
	}{
		{"hubu-after-authorize-commit", hubu, -1},
		{"hubu-before-hand-off", hubu, -1},
		{"hubu-after-gongbu-answer", hubu, -1},
		{"gongbu-after-submitting", gongbu, 0},
		{"gongbu-after-provider-answer", gongbu, 1},
	} {
		for _, idempotent := range []bool{true, false} {
			name := c.point + map[bool]string{true: "/idempotent", false: "/keys-ignored"}[idempotent]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				su := newSuiteWith(t, idempotent)
				call := "call_" + strings.ReplaceAll(name, "/", "_")
				su.crashAt(c.process(su.s), c.point, call)
				r := su.mustCall(su.router(), "generate_image", foxArgs, codexMeta(call))
				if idempotent || c.doubtCharges < 0 {
					if r["status"] != "succeeded" {
						t.Fatalf("after the restart: %v", r)
					}
					su.settleAndReconcile(1)
					return
				}
				if r["status"] == "succeeded" {
					t.Fatalf("after the restart: %v, want the execution indeterminate", r)
				}
				su.resolveIndeterminate(r.handle(), c.doubtCharges)
				su.settleAndReconcile(c.doubtCharges)
			})
		}
	}
}

// resolveIndeterminate waits (bounded) until the one execution of handle is indeterminate and
// the provider has exactly charges charges, then resolves it as an operator would after reading
// the provider's records: `gongbu resolve` with what was charged.
func (su *suite) resolveIndeterminate(handle string, charges int) {
	su.t.Helper()
	var r reconcile.Report
	err := poll(60*time.Second, 200*time.Millisecond, func() (err error) {
		if r, err = su.reconcileReport(); err == nil && !(len(r.Mismatches) == 1 && strings.Contains(r.Mismatches[0], "is indeterminate at Gongbu") &&
			strings.Contains(r.Mismatches[0], handle) && r.Charges == charges) {
			err = fmt.Errorf("%d mismatches, %d charges", len(r.Mismatches), r.Charges)
		}
		return err
	})
	if err != nil {
		su.t.Fatalf("after 60s, not one indeterminate execution with %d charges: %v\n%s", charges, err, r)
	}
	verdict := []string{"--not-charged"}
	if charges > 0 {
		verdict = []string{"--charged-micros", "25000"}
	}
	gongbuResolve(su.t, su.s.GongbuDBURL, strings.Fields(strings.TrimPrefix(r.Mismatches[0], "decision "))[0], verdict...)
}

// gongbuResolve runs the real `gongbu resolve` against Gongbu's database, as an operator does
// with the verdict read from the provider's records, and returns what it printed.
func gongbuResolve(t *testing.T, dbURL, decision string, verdict ...string) string {
	t.Helper()
	cmd := exec.Command(bin.Path("gongbu"), append([]string{"resolve", "--decision", decision}, verdict...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GONGBU_DATABASE_URL=" + dbURL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gongbu resolve: %v\n%s", err, out)
	}
	return string(out)
}

// A provider that honours idempotency keys charges and then drops the connection, or answers
// 500: Gongbu resubmits under the same key and the provider answers with the first job. The
// armed fault must have fired. (Against one that ignores keys, as BFL, the same faults make
// the execution indeterminate: TestChargeThenNoAnswer.)
func TestSuiteProviderFaults(t *testing.T) {
	t.Parallel()
	for _, kind := range []bflapi.FaultKind{bflapi.FaultKindChargeThenDrop, bflapi.FaultKindChargeThen500} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			su := newSuiteWith(t, true)
			one := 1
			if r, err := su.flux.ArmFaultWithResponse(context.Background(), bflapi.FaultRequest{Kind: kind, Count: &one}); err != nil || r.StatusCode() != http.StatusOK {
				t.Fatalf("arm: %v", err)
			}
			r := su.mustCall(su.router(), "generate_image", foxArgs, codexMeta("call_"+string(kind)))
			if r["status"] != "succeeded" && r["status"] != "running" {
				t.Fatalf("through the fault: %v", r)
			}
			su.settleAndReconcile(1)
			faults, err := su.flux.GetFaultsWithResponse(context.Background())
			if err != nil || faults.JSON200 == nil || len(faults.JSON200.Active) != 0 {
				t.Fatalf("the armed %s fault was not consumed: %v %+v", kind, err, faults.JSON200)
			}
		})
	}
}

// make demo, against a running stack: every step answers as the README says.
func TestSuiteDemo(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	envFile := filepath.Join(su.s.Config.Dir, "stack.env")
	noError(t, su.s.WriteEnvFile(envFile))
	png := filepath.Join(t.TempDir(), "demo.png")
	out, err := exec.Command(bin.Path("hubu-demo"), "--env", envFile, "--out", png).CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"0 -> 1", "1 -> 1  (replayed)", "1 -> 2", "identity_required", "approval_required",
		"set -a; . " + envFile + "; set +a", "/hubuctl approve hubu:public-operation:v1:"} { // TestQuickStart runs these lines
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Fatalf("no image saved: %v", err)
	}
	su.settleAndReconcile(2)
}
