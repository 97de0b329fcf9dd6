package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
}

func newSuite(t *testing.T) *suite {
	t.Helper()
	ctx := context.Background()
	server := sqltest.ServerURL(t)
	id := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	dir := t.TempDir()
	idConfig := filepath.Join(dir, "identity.json")
	if err := os.WriteFile(idConfig, []byte(`{"platforms":{"acme":{}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := harness.Start(ctx, bin, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_e2e_" + id, GongbuDB: "gongbu_e2e_" + id, FluxIdempotent: true,
		Env: map[string][]string{
			"router": {"ROUTER_IDENTITY_CONFIG=" + idConfig},
			// Short leases and retries, so recoveries happen within a test's time.
			"gongbu": {"GONGBU_LEASE=1s"},
			"hubu":   {"HUBU_RETRY_AFTER=1s"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	su := &suite{t: t, s: s}
	t.Cleanup(func() {
		s.Stop()
		su.scanForSecrets()
		_ = harness.DropDatabases(context.Background(), server, "hubu_e2e_"+id, "gongbu_e2e_"+id)
	})
	su.flux, _ = bflapi.NewClientWithResponses(s.Flux.URL())
	return su
}

// router starts a stdio router subprocess wired to the stack (sharing its registry), as
// Codex or Claude Code would; extraEnv may arm a failpoint.
func (su *suite) router(extraEnv ...string) *mcp.ClientSession {
	su.t.Helper()
	return su.routerWaiting(20*time.Second, extraEnv...)
}

// routerWaiting is router with another --wait.
func (su *suite) routerWaiting(wait time.Duration, extraEnv ...string) *mcp.ClientSession {
	su.t.Helper()
	args := append(su.s.RouterArgs(), "--wait", wait.String(), "--identity-config", filepath.Join(su.s.Config.Dir, "identity.json"))
	cmd := exec.Command(bin.Path("hubu-unified-mcp"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HUBU_AGENT_TOKEN=" + su.s.Credentials.AgentToken}, extraEnv...)
	logf, err := os.OpenFile(filepath.Join(su.s.Config.Dir, "router-stdio.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		su.t.Fatal(err)
	}
	su.t.Cleanup(func() { logf.Close() })
	cmd.Stderr = logf
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		su.t.Fatal(err)
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
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

// charges is mockflux's ledger: how many charges and their total.
func (su *suite) charges() (int, int64) {
	su.t.Helper()
	resp, err := su.flux.ListChargesWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		su.t.Fatalf("charges: %v", err)
	}
	return resp.JSON200.Count, resp.JSON200.TotalMicros
}

// authorizations counts the authorization requests Hubu has served since its last start,
// from its Prometheus metrics.
func (su *suite) authorizations() int {
	su.t.Helper()
	resp, err := http.Get(su.s.Hubu.URL() + "/metrics")
	if err != nil {
		su.t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "hubu_http_requests_total{") && strings.Contains(line, `route="/v1/authorizations"`) {
			f := strings.Fields(line)
			v, _ := strconv.Atoi(f[len(f)-1])
			n += v
		}
	}
	return n
}

// waitCharges waits (bounded) until mockflux has want charges and Hubu has settled them,
// then checks the three records agree.
func (su *suite) settleAndReconcile(want int) {
	su.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, _ := su.charges()
		out, err := su.reconcile()
		if n == want && err == nil {
			return
		}
		if time.Now().After(deadline) {
			su.t.Fatalf("after 60s: %d charges (want %d); reconcile: %v\n%s", n, want, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (su *suite) reconcile() (string, error) {
	c := su.s.Credentials
	cmd := exec.Command(bin.Path("gongbu"), "reconcile", "--hubu-url", su.s.Hubu.URL(), "--hubu-token", c.GongbuAtHubuToken,
		"--gongbu-url", su.s.Gongbu.URL(), "--service-token", c.HubuAtGongbuToken, "--flux-url", su.s.Flux.URL())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// scanForSecrets fails when any process log or MCP response holds a private operation key
// or a token.
func (su *suite) scanForSecrets() {
	su.t.Helper()
	c := su.s.Credentials
	secrets := []string{c.OperatorToken, c.GongbuAtHubuToken, c.HubuAtGongbuToken, c.RouterMCPToken, c.AgentToken, c.FluxKey}
	var texts []string
	for _, name := range []string{"hubu", "gongbu", "mockflux", "router", "router-stdio"} {
		_, raw, err := harness.LogLines(filepath.Join(su.s.Config.Dir, name+".log"))
		if err != nil {
			su.t.Error(err)
		}
		texts = append(texts, raw)
	}
	su.mu.Lock()
	texts = append(texts, su.texts...)
	su.mu.Unlock()
	for i, text := range texts {
		if strings.Contains(text, "hubu:operation:v1:") {
			su.t.Errorf("a private operation key appears in %s", describe(i))
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				su.t.Errorf("a token appears in %s", describe(i))
			}
		}
	}
}

func describe(i int) string {
	names := []string{"hubu.log", "gongbu.log", "mockflux.log", "router.log", "router-stdio.log"}
	if i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("MCP response %d", i-len(names))
}

const foxArgs = `{"prompt":"an origami fox","model":"flux-dev","width":1024,"height":1024}`

func codexMeta(id string) map[string]any {
	return map[string]any{"callId": id, "itemId": "item-" + id, "openai/session": "sess-e2e", "progressToken": 1.0}
}

func TestSuiteEveryHarnessChargedOnce(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	for name, meta := range map[string]map[string]any{
		"codex":       codexMeta("call_codex_1"),
		"claude code": {"claudecode/toolUseId": "toolu_01XYZ"},
		"envelope":    {"hubu.dev/platform-invocation": map[string]any{"version": 1.0, "platform": "acme", "invocation_id": "inv-1"}},
	} {
		if r := su.mustCall(cs, "generate_image", foxArgs, meta); r["status"] != "succeeded" {
			t.Fatalf("%s: %v", name, r)
		}
	}
	su.settleAndReconcile(3)
}

func TestSuiteRedeliveryAndNewCalls(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	first := su.mustCall(cs, "generate_image", foxArgs, codexMeta("call_r1"))
	if first["status"] != "succeeded" {
		t.Fatalf("first: %v", first)
	}
	before := su.authorizations()
	reordered := `{"width":1024, "height":1024, "prompt":"an origami fox", "model":"flux-dev"}`
	for _, args := range []string{foxArgs, reordered} {
		again := su.mustCall(cs, "generate_image", args, codexMeta("call_r1"))
		if again["replayed"] != true || again.handle() != first.handle() {
			t.Fatalf("redelivery: %v", again)
		}
	}
	// A second router process on the same registry also recognises it.
	if again := su.mustCall(su.router(), "generate_image", foxArgs, codexMeta("call_r1")); again["replayed"] != true {
		t.Fatalf("redelivery through another router: %v", again)
	}
	if after := su.authorizations(); after != before {
		t.Fatalf("redeliveries reached Hubu: %d authorizations, want %d", after, before)
	}
	if n, _ := su.charges(); n != 1 {
		t.Fatalf("%d charges after redeliveries", n)
	}
	if r := su.mustCall(cs, "generate_image", foxArgs, codexMeta("call_r2")); r["status"] != "succeeded" || r.handle() == first.handle() {
		t.Fatalf("a new call with the same arguments: %v", r)
	}
	if r := su.mustCall(cs, "generate_image", `{"prompt":"a paper crane","model":"flux-dev","width":1024,"height":1024}`, codexMeta("call_r1")); r.code() != "call_reused_for_different_request" {
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

func TestSuiteConcurrency(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			su.mustCall(cs, "generate_image", foxArgs, codexMeta("call_burst"))
		}()
	}
	wg.Wait()
	su.settleAndReconcile(1)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			su.mustCall(cs, "generate_image", foxArgs, codexMeta(fmt.Sprintf("call_distinct_%d", i)))
		}()
	}
	wg.Wait()
	su.settleAndReconcile(31)
}

func TestSuiteApproval(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	ultra := `{"prompt":"a cathedral of paper","model":"flux-pro-1.1-ultra","width":1024,"height":1024}`
	held := su.mustCall(cs, "generate_image", ultra, codexMeta("call_big"))
	if held.code() != "approval_required" {
		t.Fatalf("above the auto-approve limit: %v", held)
	}
	if again := su.mustCall(cs, "generate_image", ultra, codexMeta("call_big")); again.code() != "approval_required" {
		t.Fatalf("redelivery while held: %v", again)
	}
	handle := held.handle()
	if r := su.mustCall(cs, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, handle), nil); r.code() != "approval_required" {
		t.Fatalf("resume before approval: %v", r)
	}
	if n, _ := su.charges(); n != 0 {
		t.Fatal("a held spend was charged")
	}
	approve := exec.Command(bin.Path("hubuctl"), "approve", handle)
	approve.Env = append([]string{"PATH=" + os.Getenv("PATH")}, su.s.HubuctlEnv()...)
	if out, err := approve.CombinedOutput(); err != nil {
		t.Fatalf("hubuctl approve: %v %s", err, out)
	}
	if r := su.mustCall(cs, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, handle), nil); r["status"] != "succeeded" {
		t.Fatalf("resume after approval: %v", r)
	}
	su.mustCall(cs, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, handle), nil)
	su.mustCall(cs, "generate_image", ultra, codexMeta("call_big"))
	su.settleAndReconcile(1)
	if _, total := su.charges(); total != 60_000 {
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
		id := fmt.Sprintf("call_crash_%d", i)
		crashing := su.router("HUBU_FAILPOINTS=" + fp)
		if r, err := su.call(crashing, "generate_image", foxArgs, codexMeta(id)); err == nil {
			t.Fatalf("%s: the router answered instead of crashing: %v", fp, r)
		}
		r := su.mustCall(su.router(), "generate_image", foxArgs, codexMeta(id))
		if r["status"] != "succeeded" {
			t.Fatalf("%s: redelivery after the crash: %v", fp, r)
		}
		su.settleAndReconcile(i + 1)
	}
}

// crashAt restarts a service with a failpoint armed, sends one call through a router, and
// waits for the service to die there; then it restarts the service without the failpoint.
func (su *suite) crashAt(p *harness.Process, point, callID string) {
	su.t.Helper()
	if err := p.Restart(context.Background(), false, "HUBU_FAILPOINTS="+point); err != nil {
		su.t.Fatal(err)
	}
	cs := su.routerWaiting(2 * time.Second)
	r, err := su.call(cs, "generate_image", foxArgs, codexMeta(callID))
	if exitErr := p.WaitExit(30 * time.Second); exitErr == nil || !strings.Contains(exitErr.Error(), "killed") {
		su.t.Fatalf("%s: %s did not crash at the failpoint (%v); the call answered %v %v", point, p.Name, exitErr, r, err)
	}
	if err := p.Start(); err != nil {
		su.t.Fatal(err)
	}
	if err := p.WaitHealthy(context.Background(), 30*time.Second); err != nil {
		su.t.Fatal(err)
	}
}

// Hubu or Gongbu crashes at each failpoint; after its restart the same call is delivered
// again and is charged exactly once.
func TestSuiteServiceCrashes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		point   string
		process func(*harness.Stack) *harness.Process
	}{
		{"hubu-after-authorize-commit", func(s *harness.Stack) *harness.Process { return s.Hubu }},
		{"hubu-after-gongbu-answer", func(s *harness.Stack) *harness.Process { return s.Hubu }},
		{"gongbu-after-submitting", func(s *harness.Stack) *harness.Process { return s.Gongbu }},
		{"gongbu-after-provider-answer", func(s *harness.Stack) *harness.Process { return s.Gongbu }},
	} {
		t.Run(c.point, func(t *testing.T) {
			t.Parallel()
			su := newSuite(t)
			su.crashAt(c.process(su.s), c.point, "call_"+c.point)
			r := su.mustCall(su.router(), "generate_image", foxArgs, codexMeta("call_"+c.point))
			if r["status"] != "succeeded" {
				t.Fatalf("after the restart: %v", r)
			}
			su.settleAndReconcile(1)
		})
	}
}

// mockflux charges and then drops the connection, or answers 500: Gongbu resubmits under the
// same key and mockflux answers with the first job.
func TestSuiteProviderFaults(t *testing.T) {
	t.Parallel()
	for _, kind := range []bflapi.FaultKind{bflapi.ChargeThenDrop, bflapi.ChargeThen500} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			su := newSuite(t)
			one := 1
			if r, err := su.flux.ArmFaultWithResponse(context.Background(), bflapi.FaultRequest{Kind: kind, Count: &one}); err != nil || r.StatusCode() != http.StatusOK {
				t.Fatalf("arm: %v", err)
			}
			r := su.mustCall(su.router(), "generate_image", foxArgs, codexMeta("call_"+string(kind)))
			if r["status"] != "succeeded" && r["status"] != "running" {
				t.Fatalf("through the fault: %v", r)
			}
			su.settleAndReconcile(1)
		})
	}
}

// make demo, against a running stack: every step answers as the README says.
func TestSuiteDemo(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	envFile := filepath.Join(su.s.Config.Dir, "stack.env")
	if err := su.s.WriteEnvFile(envFile); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(t.TempDir(), "demo.png")
	cmd := exec.Command(bin.Path("hubu-demo"), "--env", envFile, "--out", png)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"0 -> 1", "1 -> 1  (replayed)", "1 -> 2", "identity_required", "approval_required", "$HUBUCTL_CMD approve"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Fatalf("no image saved: %v", err)
	}
	su.settleAndReconcile(2)
}
