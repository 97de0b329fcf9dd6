package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/proto/bflapi"
)

// The alerting rules of deploy/prometheus/alerts.yaml, run by a real Prometheus against a real
// stack: each fault the runbook names makes its alert fire, and the alerts of faults that did
// not happen stay quiet. The rules' `for:` are cut to 0s, so a condition fires at the next
// evaluation (every second).
func TestAlerts(t *testing.T) {
	t.Parallel()
	promtoolBin := proctest.Tool(t, "HUBU_PROMTOOL", "promtool")
	rules := filepath.Join("..", "deploy", "prometheus", "alerts.yaml")
	if out, err := exec.Command(promtoolBin, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	su := newSuiteWith(t, false) // the provider ignores idempotency keys: a lost submission is indeterminate
	prom := startPrometheus(t, su.s, rules)
	prom.waitTargetsUp(t, 4)
	prom.waitEvaluated(t, 3)
	if firing := prom.firing(t); len(firing) > 0 {
		t.Fatalf("alerts fire on a healthy stack: %v", firing)
	}

	// A submission charged and answered with a 500, which Gongbu may not resend: indeterminate.
	one := 1
	if r, err := su.flux.ArmFaultWithResponse(context.Background(), bflapi.FaultRequest{Kind: bflapi.FaultKindChargeThen500, Count: &one}); err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("arm charge_then_500: %v", err)
	}
	stdio := su.routerWaiting(2 * time.Second)
	if _, err := su.callWithin(stdio, "generate_image", foxArgs, codexMeta("call_alerts_indeterminate"), 30*time.Second); err != nil {
		t.Fatalf("the call through the fault: %v", err)
	}
	// Above the auto-approve limit: held for a human.
	if r := su.mustCall(stdio, "generate_image", `{"prompt":"an origami fox","model":"flux-pro-1.1-ultra","aspect_ratio":"16:9"}`,
		codexMeta("call_alerts_held")); r.code() != "approval_required" {
		t.Fatalf("the call above the approval limit: %v", r)
	}
	// A price below the provider's: it states a cost above the hold, which is captured instead.
	if _, err := su.hubuctl("prices", "set", "--provider", "bfl", "--model", "flux-pro-1.1", "--size", "*", "--amount-micros", "10000"); err != nil {
		t.Fatalf("lower a price: %v", err)
	}
	su.mustSucceed(stdio, `{"prompt":"an origami fox","model":"flux-pro-1.1"}`, codexMeta("call_alerts_cost_above_hold"), "a spend priced below the provider")
	// No trusted identity: the router refuses the call.
	if r := su.mustCall(su.httpRouter(), "generate_image", foxArgs, nil); r.code() != "identity_required" {
		t.Fatalf("the call without an identity: %v", r)
	}
	// Wrong tokens, again and again as a misconfigured client sends them: a rate needs a
	// counter that grows while Prometheus watches.
	badTokens := func() {
		for _, u := range []string{su.s.Hubu.URL() + "/v1/capabilities", su.s.Gongbu.URL() + "/v1/executions/" + "00000000-0000-4000-8000-000000000000"} {
			resp := must((&http.Client{Transport: harness.Bearer("hubu_agent_not-a-real-token")}).Get(u))(t)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Fatalf("GET %s with a wrong token: %d, want 401 or 403", u, resp.StatusCode)
			}
		}
	}
	prom.waitFiring(t, badTokens,
		"HubuIndeterminateExecutions", "ProviderErrors", "HubuApprovalsWaiting", "RouterRefusingCalls",
		"HubuBadCredentials", "GongbuBadCredentials", "HubuProviderCostAboveHold")

	// The router serves /metrics without its token, so it must show nothing that identifies a
	// call or opens a door, after it has served an identified spend.
	su.mustSucceed(su.httpRouter(), foxArgs, codexMeta("call_alerts_through_http_01"), "a spend through the HTTP router")
	resp := must(http.Get(su.s.Router.URL() + "/metrics"))(t)
	body := string(must(io.ReadAll(resp.Body))(t))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `router_tool_calls_total{resolution="refused",tool="generate_image"} 1`) ||
		!strings.Contains(body, `router_tool_calls_total{resolution="new",tool="generate_image"} 1`) {
		t.Fatalf("the router's /metrics: %d\n%s", resp.StatusCode, body)
	}
	for _, secret := range []string{su.s.Credentials.RouterMCPToken, su.s.Credentials.AgentToken, "call_alerts_", "hubu:public-operation:", "hubu:operation:"} {
		if strings.Contains(body, secret) {
			t.Fatalf("the router's /metrics shows %.16s…", secret)
		}
	}

	// Gongbu goes away: its target is down, Hubu's hand-offs fail, and the decision stays
	// dispatching until Hubu's re-sends (every second here) count 5 failures.
	noError(t, su.s.Gongbu.Stop(15*time.Second))
	if _, err := su.callWithin(stdio, "generate_image", foxArgs, codexMeta("call_alerts_no_gongbu"), 30*time.Second); err != nil {
		t.Fatalf("the call while Gongbu is down: %v", err)
	}
	prom.waitFiring(t, nil, "TargetDown", "HubuHandOffsFailing", "HubuDecisionsStuckDispatching")

	// What did not happen raises nothing.
	firing := prom.firing(t)
	for _, quiet := range []string{"HubuServerErrors", "GongbuServerErrors", "GongbuRefusingHandOffs", "HubuSettleReleaseConflicts",
		"GongbuOutcomesUnreported", "GongbuExecutionsStuck", "RouterRegistryUnavailable", "DatabasePoolSaturated", "StateMetricsMissing"} {
		if slices.Contains(firing, quiet) {
			t.Errorf("%s fires, though nothing caused it (firing: %v)", quiet, firing)
		}
	}
	if down := prom.firingWith(t, "TargetDown", "job"); !slices.Equal(down, []string{"gongbu"}) {
		t.Errorf("TargetDown fires for %v, want gongbu alone", down)
	}
}

// promServer is a Prometheus server a test started.
type promServer struct {
	proc *harness.Process
	api  string
}

// forClause is a rule's `for:` line.
var forClause = regexp.MustCompile(`(?m)^(\s+)for: .*$`)

// startPrometheus starts Prometheus on a free loopback port, scraping the stack's four
// processes every second and evaluating rules (with no `for:` wait) every second, with its
// storage in a temporary directory; it stops when the test ends.
func startPrometheus(t *testing.T, s *harness.Stack, rules string) *promServer {
	t.Helper()
	dir := t.TempDir()
	text := string(must(os.ReadFile(rules))(t))
	if !forClause.MatchString(text) {
		t.Fatalf("%s has no for: clause to cut", rules)
	}
	noError(t, os.WriteFile(filepath.Join(dir, "alerts.yaml"), []byte(forClause.ReplaceAllString(text, "${1}for: 0s")), 0o600))
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files: [alerts.yaml]\nscrape_configs:\n")
	for _, p := range []*harness.Process{s.Hubu, s.Gongbu, s.Flux, s.Router} {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", p.Name, p.Addr)
	}
	noError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600))
	addr := must(harness.FreeAddr())(t)
	proc := &harness.Process{Name: "prometheus", Path: proctest.Tool(t, "HUBU_PROMETHEUS", "prometheus"), Addr: addr, LogPath: filepath.Join(s.Config.Dir, "prometheus.log"),
		Args: []string{"--config.file=" + filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr}}
	noError(t, proc.Start())
	t.Cleanup(func() { _ = proc.Stop(15 * time.Second) })
	p := &promServer{proc: proc, api: proc.URL() + "/api/v1/"}
	err := poll(30*time.Second, 200*time.Millisecond, func() error {
		resp, err := http.Get(proc.URL() + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %d", resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Prometheus is not ready after 30s: %v\n%s", err, proc.Log())
	}
	return p
}

// get decodes the data of a Prometheus API answer into v.
func (p *promServer) get(path string, v any) error {
	resp, err := http.Get(p.api + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, v)
}

// waitTargetsUp waits (bounded) until Prometheus scraped n targets, all up.
func (p *promServer) waitTargetsUp(t *testing.T, n int) {
	t.Helper()
	err := poll(30*time.Second, 200*time.Millisecond, func() error {
		var data struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := p.get("targets", &data); err != nil {
			return err
		}
		up := 0
		for _, tg := range data.ActiveTargets {
			if tg.Health == "up" {
				up++
			}
		}
		if up != n {
			return fmt.Errorf("%d of %d targets up: %+v", up, n, data.ActiveTargets)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after 30s: %v", err)
	}
}

// waitEvaluated waits (bounded) until Prometheus has evaluated its rules n more times, with
// no rule failing.
func (p *promServer) waitEvaluated(t *testing.T, n int) {
	t.Helper()
	var first time.Time
	err := poll(30*time.Second, 200*time.Millisecond, func() error {
		var data struct {
			Groups []struct {
				LastEvaluation time.Time `json:"lastEvaluation"`
				Rules          []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := p.get("rules", &data); err != nil {
			return err
		}
		if len(data.Groups) == 0 {
			return fmt.Errorf("no rule groups loaded")
		}
		oldest := data.Groups[0].LastEvaluation
		for _, g := range data.Groups {
			if g.LastEvaluation.Before(oldest) {
				oldest = g.LastEvaluation
			}
			for _, r := range g.Rules {
				if r.Health == "err" {
					t.Fatalf("rule %s fails: %s", r.Name, r.LastError)
				}
			}
		}
		if first.IsZero() {
			first = oldest
		}
		if oldest.Sub(first) < time.Duration(n)*time.Second {
			return fmt.Errorf("rules evaluated until %v, started at %v", oldest, first)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after 30s: %v", err)
	}
}

type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (p *promServer) alerts(t *testing.T) []alert {
	t.Helper()
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	noError(t, p.get("alerts", &data))
	return data.Alerts
}

// firing is the names of the alerts firing, sorted, each once.
func (p *promServer) firing(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, a := range p.alerts(t) {
		if a.State == "firing" {
			names = append(names, a.Labels["alertname"])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// firingWith is the values of label of the firing alerts named name, sorted.
func (p *promServer) firingWith(t *testing.T, name, label string) []string {
	t.Helper()
	var values []string
	for _, a := range p.alerts(t) {
		if a.State == "firing" && a.Labels["alertname"] == name {
			values = append(values, a.Labels[label])
		}
	}
	slices.Sort(values)
	return values
}

// waitFiring waits (bounded) until every alert named fires, calling cause (when not nil)
// before each look.
func (p *promServer) waitFiring(t *testing.T, cause func(), names ...string) {
	t.Helper()
	var missing []string
	err := poll(60*time.Second, 500*time.Millisecond, func() error {
		if cause != nil {
			cause()
		}
		firing := p.firing(t)
		missing = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(firing, n) })
		if len(missing) > 0 {
			return fmt.Errorf("not firing: %v (firing: %v)", missing, firing)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after 60s: %v", err)
	}
}
