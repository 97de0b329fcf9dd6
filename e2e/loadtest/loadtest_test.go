package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"hubu.dev/hubu/e2e/loadtest"
	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/sql/sqltest"
)

// bin holds the stack's binaries, built once for this package's tests.
var bin stack.Binaries

func TestMain(m *testing.M) { stack.TestMain(m, "../..", false, &bin) }

// TestSmoke runs the whole load test at tiny sizes and checks that every figure is there and
// every spend went right. It asserts no timing: the sizes are too small for the figures to
// mean anything, and the machines too noisy.
func TestSmoke(t *testing.T) {
	server := sqltest.ServerURL(t)
	name := "loadtest_smoke_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	const renderTime = 50 * time.Millisecond
	env := map[string]string{"HUBU_LOADTEST_DATABASE_URL": server, "HUBU_LOADTEST_RENDER_TIME": renderTime.String()}
	rep, out := runLoadtest(t, env, 3*time.Minute,
		"--n", "3", "--sessions", "2", "--spends", "2", "--clients", "2", "--agents", "2", "--duration", "1s",
		"--pgbench-scale", "1", "--service-procs", "1", "--name", name, "--json", jsonPath)
	if rep.Failed() {
		t.Fatalf("a correctness check failed:\n%s", out.String())
	}

	l := rep.Latency
	if l == nil {
		t.Fatal("no latency scenario in the report")
	}
	for what, d := range map[string]loadtest.Dist{"tools/list": l.ToolsList, "new spend": l.Spend, "redelivery": l.Redelivery, "spend overhead": l.Overhead} {
		positiveDist(t, "latency: "+what, d, 3)
	}
	if l.Charges != 3 || l.Errors.Count != 0 {
		t.Errorf("latency: %d charges and %d errors, want 3 and 0", l.Charges, l.Errors.Count)
	}
	if !l.SpendOverFloor.Valid || l.SpendOverFloor.Value <= 0 || !l.RedeliveryOverFloor.Valid || l.RedeliveryOverFloor.Value <= 0 {
		t.Errorf("latency: ratios %v and %v", l.SpendOverFloor, l.RedeliveryOverFloor)
	}
	// The contract floor's parts were each timed once per round, and it is their sum as the
	// report says it is.
	f := l.ContractFloor
	if f == nil {
		t.Fatalf("latency: no contract floor: %s", l.ContractFloorError)
	}
	for what, d := range map[string]loadtest.Dist{"HTTP round trip": f.HTTP, "Postgres commit": f.PostgresCommit, "SQLite commit": f.SQLiteCommit} {
		positiveDist(t, "contract floor: "+what, d, 3)
	}
	if want := l.ToolsList.P50 + 4*f.HTTP.P50 + 2*f.PostgresCommit.P50 + f.SQLiteCommit.P50; f.Floor != want {
		t.Errorf("latency: contract floor %s, want %s", f.Floor, want)
	}
	if !f.SpendOverFloor.Valid || f.SpendOverFloor.Value <= 0 || !f.FloorOverTransport.Valid || f.FloorOverTransport.Value <= 1 ||
		!strings.Contains(out.String(), "new spend ÷ contract floor") {
		t.Errorf("latency: contract floor ratios %v and %v:\n%s", f.SpendOverFloor, f.FloorOverTransport, out.String())
	}
	// mockflux makes a job Ready exactly its render time after the submit: each spend was
	// matched with its own charge, and the setting reached mockflux.
	if l.OverheadBasis != "provider" || l.ProviderTime == nil || time.Duration(l.ProviderTime.Min) != renderTime || time.Duration(l.ProviderTime.Max) != renderTime {
		t.Errorf("latency: overhead basis %q, provider time %+v, want exactly %s for every spend", l.OverheadBasis, l.ProviderTime, renderTime)
	}

	// Every process of the stack was found and read; Postgres may run as a user whose
	// processes this one cannot look into, and then only says so.
	cpu, all := map[string]loadtest.ProcessCPU{}, time.Duration(0)
	for _, c := range l.CPU {
		cpu[c.Process] = c
		all += time.Duration(c.PerRound)
	}
	for _, name := range []string{"router", "hubu", "gongbu", "mockflux", "postgres", "load generator"} {
		if c, ok := cpu[name]; !ok || (c.Err != "" && name != "postgres") {
			t.Errorf("latency: CPU of %s: %+v", name, c)
		}
	}
	for _, name := range []string{"router", "hubu", "gongbu", "mockflux"} { // --service-procs 1 reached each
		if c := cpu[name]; c.GOMAXPROCS != "1" {
			t.Errorf("latency: %s runs with GOMAXPROCS %q, want 1", name, c.GOMAXPROCS)
		}
	}
	if all <= 0 || !strings.Contains(out.String(), "CPU time per round") {
		t.Errorf("latency: no CPU time measured (%s in all):\n%s", all, out.String())
	}

	h := rep.Hubu
	if h == nil {
		t.Fatal("no hubu scenario in the report")
	}
	for what, tp := range map[string]*loadtest.Throughput{"spread": h.Spread, "hot agent": h.Hot} {
		if tp.Succeeded == 0 || tp.Errors.Count != 0 || tp.PerSecond <= 0 {
			t.Errorf("hubu %s: %d succeeded, %d errors, %f/s", what, tp.Succeeded, tp.Errors.Count, tp.PerSecond)
		}
		positiveDist(t, "hubu "+what, tp.Latency, tp.Succeeded)
	}
	if _, err := exec.LookPath("pgbench"); err == nil {
		if p := h.Pgbench; p == nil || p.AtClients.TPS <= 0 || p.AtOne.TPS <= 0 || p.AtClients.Clients != 2 {
			t.Errorf("pgbench: %+v (skipped: %q)", p, h.PgbenchSkipped)
		}
		if !h.SpreadOverPgbench.Valid || h.SpreadOverPgbench.Value <= 0 || !h.HotOverPgbench1.Valid || h.HotOverPgbench1.Value <= 0 {
			t.Errorf("hubu: ratios %v and %v", h.SpreadOverPgbench, h.HotOverPgbench1)
		}
	} else if h.PgbenchSkipped == "" || h.Pgbench != nil {
		t.Errorf("pgbench is missing but the report does not say so: %+v", h)
	}

	s := rep.Sessions
	if s == nil {
		t.Fatal("no sessions scenario in the report")
	}
	if s.Succeeded != 4 || s.ChargesMade != 4 || s.ChargesExpected != 4 || s.Errors.Count != 0 || s.PerSecond <= 0 {
		t.Errorf("sessions: %+v", s)
	}
	positiveDist(t, "sessions", s.Latency, 4)
	if len(s.Memory) != 3 {
		t.Fatalf("sessions: memory of %d services, want router, hubu and gongbu", len(s.Memory))
	}
	pids := map[int]bool{}
	for _, m := range s.Memory {
		if m.Err != "" || m.Pid <= 0 || m.PeakBytes <= 0 || m.CurrentBytes <= 0 || m.CurrentBytes > m.PeakBytes || m.BinaryBytes <= 0 || m.BinaryBytes > m.CurrentBytes {
			t.Errorf("sessions: memory of %s: %+v", m.Service, m)
		}
		pids[m.Pid] = true
	}
	if len(pids) != 3 {
		t.Errorf("sessions: the three services' memory was read from %d processes", len(pids))
	}
	// The CPU time of every process over the scenario, per spend: each was found and read
	// (Postgres perhaps not, as above), and the shares of those read add up to about one.
	var sum, share float64
	sessCPU := map[string]loadtest.SpendCPU{}
	for _, c := range s.CPU {
		sessCPU[c.Process] = c
		sum += float64(c.PerSpend)
		share += c.Share
	}
	for _, name := range []string{"router", "hubu", "gongbu", "mockflux", "postgres", "load generator"} {
		if c, ok := sessCPU[name]; !ok || (c.Err != "" && name != "postgres") {
			t.Errorf("sessions: CPU of %s: %+v", name, c)
		}
	}
	if s.CPUPerSpend <= 0 || float64(s.CPUPerSpend)-sum > float64(len(s.CPU)) || share < 0.99 || share > 1.01 {
		t.Errorf("sessions: CPU per spend %s (the processes' sum %v ns), shares adding up to %f", s.CPUPerSpend, sum, share)
	}

	text := out.String()
	for _, want := range []string{"1. latency", "2. hubu", "3. sessions", "charges at mockflux *", "router peak RSS", "≤ 60.0 MB", "hot agent ÷ pgbench -N -c 1",
		"new spend ÷ contract floor, p50", "new spend ÷ transport floor, p50", "CPU time per spend", "CPU per spend, all processes", "compare across runs"} {
		if !strings.Contains(text, want) {
			t.Errorf("the printed report has no %q:\n%s", want, text)
		}
	}
	var fromJSON struct {
		Latency struct {
			Spend struct {
				Samples []float64 `json:"samples_ms"`
			} `json:"spend"`
		} `json:"latency"`
		Sessions struct {
			ChargesMade int `json:"charges_made"`
			CPU         []struct {
				Process  string  `json:"process"`
				PerSpend float64 `json:"per_spend_ms"`
			} `json:"cpu_per_spend"`
			CPUPerSpend float64 `json:"cpu_per_spend_all_ms"`
		} `json:"sessions"`
		Checks []loadtest.Check `json:"checks"`
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatalf("the JSON report: %v", err)
	}
	if len(fromJSON.Latency.Spend.Samples) != 3 || fromJSON.Sessions.ChargesMade != 4 || len(fromJSON.Checks) != len(rep.Checks) ||
		len(fromJSON.Sessions.CPU) != len(s.CPU) || fromJSON.Sessions.CPUPerSpend <= 0 {
		t.Errorf("the JSON report lacks figures: %s", raw)
	}

	// Every database the run made is gone.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE strpos(datname, $1) > 0", name)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("databases left behind: %v", left)
	}
}

// TestPathSmoke runs the path scenario at a tiny size: every traced spend's trace arrives,
// and the steps of the spend path are there, in the order they start.
func TestPathSmoke(t *testing.T) {
	server := sqltest.ServerURL(t)
	name := "loadtest_path_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	env := map[string]string{"HUBU_LOADTEST_DATABASE_URL": server}
	rep, out := runLoadtest(t, env, 2*time.Minute, "--scenarios", "path", "--path-spends", "3", "--name", name)
	p := rep.Path
	if rep.Failed() || p == nil || p.Errors.Count != 0 || p.Traced != 3 {
		t.Fatalf("path: %+v\n%s", p, out.String())
	}
	positiveDist(t, "path: the whole call", p.Total, 3)
	want := []string{
		"hubu-unified-mcp tools/call generate_image", "hubu POST /v1/authorizations", "gongbu POST /v1/executions",
		"gongbu gongbu.submit", "mockflux POST /v1/{model}", "gongbu gongbu.poll", "gongbu gongbu.report",
		"hubu POST /v1/decisions/{decision_id}/settle",
	}
	found := map[string]bool{}
	for i, st := range p.Steps {
		if st.Occurrence == 1 && st.In == 3 {
			found[st.Service+" "+st.Name] = true
		}
		if i > 0 && st.StartP50 < p.Steps[i-1].StartP50 {
			t.Errorf("step %d (%s) starts before the one listed above it", i, st.Name)
		}
	}
	for _, w := range want {
		if !found[w] {
			t.Errorf("no step %q in every trace:\n%s", w, out.String())
		}
	}
	if !strings.Contains(out.String(), "4. path") {
		t.Errorf("the printed report has no path section:\n%s", out.String())
	}
}

// runLoadtest runs the load test with args and the variables env, on the binaries TestMain
// built, within timeout; it returns the report and what the run printed.
func runLoadtest(t *testing.T, env map[string]string, timeout time.Duration, args ...string) (*loadtest.Report, *bytes.Buffer) {
	t.Helper()
	cfg, err := loadtest.ParseArgs(args, func(k string) string { return env[k] }, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bin = bin
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	rep, err := loadtest.Run(ctx, cfg, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return rep, &out
}

// positiveDist fails the test unless d has n samples, every one positive.
func positiveDist(t *testing.T, what string, d loadtest.Dist, n int) {
	t.Helper()
	if d.N != n || len(d.Samples) != n {
		t.Errorf("%s: %d samples, want %d", what, d.N, n)
		return
	}
	for _, s := range d.Samples {
		if s <= 0 {
			t.Errorf("%s: a sample of %s", what, s)
		}
	}
	if d.Min <= 0 || d.P50 < d.Min || d.P95 < d.P50 || d.P99 < d.P95 || d.Max < d.P99 {
		t.Errorf("%s: percentiles out of order: %+v", what, d)
	}
}

// TestAgainstRunningStack runs the latency and sessions scenarios at tiny sizes through a stack
// started as make up starts it, from the env file it writes (--stack), while another client
// spends at its mockflux: every figure is there, every spend went right and only the run's
// charges were counted, the report names the settings that differ from the benchmark's own
// stack, and the demo agent's policy is as it was before the run.
func TestAgainstRunningStack(t *testing.T) {
	server := sqltest.ServerURL(t)
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	hubuDB, gongbuDB := "hubu_ltstack_"+suffix, "gongbu_ltstack_"+suffix
	t.Cleanup(func() { _ = stack.DropDatabases(context.Background(), server, hubuDB, gongbuDB) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := stack.Start(ctx, bin, stack.Config{Dir: dir, ServerURL: server, HubuDB: hubuDB, GongbuDB: gongbuDB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	envPath := filepath.Join(dir, "stack.env")
	if err := s.WriteEnvFile(envPath); err != nil {
		t.Fatal(err)
	}
	op, err := hubuapi.NewClientWithResponses(s.Hubu.URL(), hubuapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+s.Credentials.OperatorToken)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	agentID := uuid.MustParse(s.Credentials.AgentID)
	policy := func() hubuapi.Policy {
		t.Helper()
		resp, err := op.GetAgentWithResponse(ctx, agentID)
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("the demo agent: %v %v", err, resp)
		}
		return resp.JSON200.Policy
	}
	before := policy()

	// Another client of the same mockflux, before and during the run.
	other := func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.Flux.URL()+"/v1/flux-2-klein-4b",
			strings.NewReader(`{"prompt": "someone else's image", "width": 512, "height": 512}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-key", "someone-else")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("another client's submit: %v", err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("another client's submit: HTTP %d", resp.StatusCode)
		}
	}
	other()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			time.Sleep(300 * time.Millisecond)
			other()
		}
	}()

	env := map[string]string{"HUBU_LOADTEST_DATABASE_URL": server, "HUBU_LOADTEST_STACK": envPath}
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	rep, out := runLoadtest(t, env, 2*time.Minute, "--n", "3", "--sessions", "2", "--spends", "2", "--name", "ltstack_"+suffix, "--json", jsonPath)
	<-done
	text := out.String()
	t.Logf("the report:\n%s", text)
	if rep.Failed() {
		t.Fatalf("a correctness check failed:\n%s", text)
	}
	if rep.Hubu != nil || rep.Path != nil {
		t.Errorf("the hubu or path scenario ran against a running stack:\n%s", text)
	}
	l := rep.Latency
	if l == nil {
		t.Fatalf("no latency scenario:\n%s", text)
	}
	for what, d := range map[string]loadtest.Dist{"tools/list": l.ToolsList, "new spend": l.Spend, "redelivery": l.Redelivery, "spend overhead": l.Overhead} {
		positiveDist(t, "latency: "+what, d, 3)
	}
	if l.Charges != 3 || l.Errors.Count != 0 || !l.OwnChargesOnly || l.ContractFloor == nil {
		t.Errorf("latency: %d charges, %d errors, own charges only %v, contract floor %v (%s)", l.Charges, l.Errors.Count, l.OwnChargesOnly, l.ContractFloor, l.ContractFloorError)
	}
	cpu := map[string]loadtest.ProcessCPU{}
	for _, c := range l.CPU {
		cpu[c.Process] = c
	}
	for _, name := range []string{"router", "hubu", "gongbu", "mockflux"} {
		if c, ok := cpu[name]; !ok || c.Err != "" || c.GOMAXPROCS != "default" {
			t.Errorf("latency: CPU of the stack's %s: %+v", name, c)
		}
	}
	sess := rep.Sessions
	if sess == nil || sess.Succeeded != 4 || sess.ChargesMade != 4 || sess.Errors.Count != 0 || !sess.OwnChargesOnly {
		t.Fatalf("sessions: %+v\n%s", sess, text)
	}
	for _, m := range sess.Memory {
		if m.Err != "" || m.PeakBytes <= 0 {
			t.Errorf("sessions: memory of the stack's %s: %+v", m.Service, m)
		}
	}
	if sess.CPUPerSpend <= 0 {
		t.Errorf("sessions: no CPU per spend: %+v", sess.CPU)
	}
	// Through a running stack, the sessions scenario is held to make up's targets.
	for _, want := range []string{"≥ 100 (through a running stack)", "≤ 3s (through a running stack)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the printed report has no %q:\n%s", want, text)
		}
	}

	// The settings make up runs with that the benchmark's own stack does not.
	st := rep.Stack
	if st == nil || st.File != envPath {
		t.Fatalf("the report names no running stack: %+v", st)
	}
	differs := map[string]loadtest.StackSetting{}
	for _, d := range st.Differing() {
		differs[d.Setting] = d
	}
	for setting, want := range map[string]string{
		"router GOMAXPROCS": "default", "hubu GOMAXPROCS": "default", "gongbu GOMAXPROCS": "default", "mockflux GOMAXPROCS": "default",
		"mockflux pending polls": "1", "mockflux honours idempotency keys": "false", "Gongbu relies on idempotency keys": "false",
	} {
		if d, ok := differs[setting]; !ok || d.Stack != want {
			t.Errorf("the report does not name %s = %s as differing: %+v", setting, want, st.Settings)
		}
		if !strings.Contains(text, setting+": "+want) {
			t.Errorf("the printed report does not name %s:\n%s", setting, text)
		}
	}
	if _, ok := differs["mockflux render time"]; ok {
		t.Errorf("the render time differs from 0s: %+v", st.Settings)
	}
	if !strings.Contains(text, "against a running stack: "+envPath) || !strings.Contains(st.Postgres, "which the stack's Hubu uses too") ||
		!strings.Contains(st.DemoAgent, "restored") {
		t.Errorf("the report's stack block: %+v\n%s", st, text)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON struct {
		Stack *loadtest.StackReport `json:"stack"`
	}
	if err := json.Unmarshal(raw, &fromJSON); err != nil || fromJSON.Stack == nil || len(fromJSON.Stack.Differing()) != len(differs) {
		t.Errorf("the JSON report's stack: %v %+v", err, fromJSON.Stack)
	}

	if after := policy(); !reflect.DeepEqual(after, before) {
		t.Errorf("the demo agent's policy after the run:\n%+v\nwant, as before it:\n%+v", after, before)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".loadtest-floor-*")); len(left) > 0 {
		t.Errorf("the contract floor's SQLite file is left in the stack's directory: %v", left)
	}
}
