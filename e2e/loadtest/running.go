package loadtest

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/hubuapi"
)

// target is the stack the latency and sessions scenarios go through: one the load test
// started (stack.Start), or one already running that `make up` described in its env file.
type target struct {
	routerMCPURL, routerToken string
	hubuURL, fluxURL          string
	// The addresses each service listens on (host:port), to find its process by.
	router, hubu, gongbu, flux string
	// floorDir receives the contract floor's SQLite file: beside the router's registry.
	floorDir string
}

// ownTarget is the stack the load test started.
func ownTarget(s *stack.Stack) *target {
	return &target{
		routerMCPURL: s.Router.URL() + "/mcp", routerToken: s.Credentials.RouterMCPToken,
		hubuURL: s.Hubu.URL(), fluxURL: s.Flux.URL(),
		router: s.Router.Addr, hubu: s.Hubu.Addr, gongbu: s.Gongbu.Addr, flux: s.Flux.Addr,
		floorDir: s.Config.Dir,
	}
}

// ParseEnvFile reads the shell KEY='value' lines stack.WriteEnvFile writes (.hubu/stack.env),
// undoing its quoting: a value is single-quoted, and a quote within it closes the quotes, is
// escaped with a backslash and reopens them. Blank lines and # comments are skipped, and a
// leading "export " is allowed. It reads what a POSIX shell would make of each line's one word
// after the =: quoted and backslash-escaped parts and plain characters; anything else (a second
// word, a $ expansion) is an error naming the line.
func ParseEnvFile(text string) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, word, ok := strings.Cut(line, "=")
		if !ok || !validEnvKey(key) {
			return nil, fmt.Errorf("line %d: not a KEY=value line", n)
		}
		value, err := shellWord(word)
		if err != nil {
			return nil, fmt.Errorf("line %d (%s): %v", n, key, err)
		}
		env[key] = value
	}
	return env, sc.Err()
}

func validEnvKey(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	return strings.Trim(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == ""
}

// shellWord is the value of one shell word made of single-quoted parts, backslash-escaped
// characters and plain ones.
func shellWord(w string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c == '\'':
			end := strings.IndexByte(w[i+1:], '\'')
			if end < 0 {
				return "", errors.New("a quote that is never closed")
			}
			b.WriteString(w[i+1 : i+1+end])
			i += end + 1
		case c == '\\':
			if i+1 == len(w) {
				return "", errors.New("a backslash at the end")
			}
			i++
			b.WriteByte(w[i])
		case strings.IndexByte(" \t\"$`;&|<>()", c) >= 0:
			return "", fmt.Errorf("unquoted %q: not one word as make up writes it", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// runningStack is a stack `make up` started, as its env file describes it.
type runningStack struct {
	file string
	env  map[string]string
	*target
	operatorToken, agentToken string
}

// loadRunningStack reads the env file and checks that it names what the load test needs. A
// stack without mockflux spends on BFL's API, with real money: it is refused.
func loadRunningStack(path string) (*runningStack, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--stack: %v (make up writes it once the stack is healthy)", err)
	}
	env, err := ParseEnvFile(string(b))
	if err != nil {
		return nil, fmt.Errorf("--stack %s: %v", path, err)
	}
	for _, k := range []string{"HUBU_URL", "GONGBU_URL", "ROUTER_MCP_URL", "ROUTER_MCP_TOKEN", "HUBU_APPROVER_TOKEN", "HUBU_AGENT_TOKEN"} {
		if env[k] == "" {
			return nil, fmt.Errorf("--stack %s: no %s in it: not an env file make up wrote", path, k)
		}
	}
	if _, present := env["MOCKFLUX_URL"]; !present {
		return nil, fmt.Errorf("--stack %s: no MOCKFLUX_URL in it: not an env file make up wrote", path)
	}
	if env["MOCKFLUX_URL"] == "" {
		return nil, fmt.Errorf("--stack %s: the stack spends on BFL's API (MOCKFLUX_URL is empty): a load test would spend real money; run it against a stack on mockflux (make up without BFL_API_KEY)", path)
	}
	rs := &runningStack{file: path, env: env, operatorToken: env["HUBU_APPROVER_TOKEN"], agentToken: env["HUBU_AGENT_TOKEN"],
		target: &target{routerMCPURL: env["ROUTER_MCP_URL"], routerToken: env["ROUTER_MCP_TOKEN"], hubuURL: env["HUBU_URL"], fluxURL: env["MOCKFLUX_URL"]}}
	for _, a := range []struct {
		key  string
		into *string
	}{{"ROUTER_MCP_URL", &rs.router}, {"HUBU_URL", &rs.hubu}, {"GONGBU_URL", &rs.gongbu}, {"MOCKFLUX_URL", &rs.flux}} {
		if *a.into, err = listenAddr(env[a.key]); err != nil {
			return nil, fmt.Errorf("--stack %s: %s: %v", path, a.key, err)
		}
	}
	// The router's registry is in the stack's state directory, where make up writes the file.
	rs.floorDir = filepath.Dir(path)
	return rs, nil
}

// listenAddr is the host:port a service at base URL u listens on, as /proc/net/tcp shows it
// (localhost is 127.0.0.1).
func listenAddr(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	host, port := p.Hostname(), p.Port()
	if host == "" {
		return "", fmt.Errorf("no host in %q", u)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[p.Scheme]
	}
	return net.JoinHostPort(host, port), nil
}

// StackReport says what the run went through when it did not start its stack itself: the
// running stack's env file, and how its settings differ from the stack the load test starts.
type StackReport struct {
	File string `json:"file"`
	// Settings are the stack's settings that bear on the figures, each beside the benchmark's
	// own; Differs marks those that are not the same.
	Settings []StackSetting `json:"settings"`
	// Postgres says whose Postgres the contract floor's commits and the Postgres CPU are of.
	Postgres string `json:"postgres"`
	// DemoAgent says what became of the demo agent's policy and budget.
	DemoAgent string `json:"demo_agent,omitempty"`
}

// StackSetting is one setting of the running stack beside the benchmark's own stack's.
type StackSetting struct {
	Setting   string `json:"setting"`
	Stack     string `json:"stack"`
	Benchmark string `json:"benchmark"`
	Differs   bool   `json:"differs"`
}

// write prints the block at the top of the text report: which stack, how it differs from
// the benchmark's own, whose Postgres, and what became of the demo agent.
func (r *StackReport) write(w io.Writer) {
	diff := r.Differing()
	if len(diff) == 0 {
		fmt.Fprintf(w, "\nagainst a running stack: %s; differs from the benchmark's own stack: in none of the settings compared\n", r.File)
	} else {
		fmt.Fprintf(w, "\nagainst a running stack: %s; differs from the benchmark's own stack:\n", r.File)
		for _, s := range diff {
			fmt.Fprintf(w, "  %s: %s (the benchmark's own: %s)\n", s.Setting, s.Stack, s.Benchmark)
		}
	}
	same := make([]string, 0, len(r.Settings))
	for _, s := range r.Settings {
		if !s.Differs {
			same = append(same, s.Setting+" "+s.Stack)
		}
	}
	if len(same) > 0 && len(diff) > 0 {
		fmt.Fprintf(w, "  the same: %s\n", strings.Join(same, ", "))
	}
	fmt.Fprintf(w, "  Postgres: %s\n", r.Postgres)
	if r.DemoAgent != "" {
		fmt.Fprintf(w, "  demo agent: %s\n", r.DemoAgent)
	}
}

// Differing lists the settings that differ from the benchmark's own stack.
func (r *StackReport) Differing() []StackSetting {
	var out []StackSetting
	for _, s := range r.Settings {
		if s.Differs {
			out = append(out, s)
		}
	}
	return out
}

// The benchmark's own stack's mockflux, for the comparison: what runThroughRouter starts.
const (
	benchmarkPendingPolls = "0"
	mockfluxPendingPolls  = "1" // mockflux's default (--pending-polls)
)

// stackSettings reads the running stack's settings from its processes (found by the ports
// they listen on): each Go service's GOMAXPROCS, mockflux's pending polls and render time, and
// whether mockflux honours idempotency keys and Gongbu relies on them. cfg holds the
// benchmark's own values (its defaults: --stack takes none of them).
func stackSettings(cfg Config, t *target) []StackSetting {
	var out []StackSetting
	add := func(setting, stack, benchmark string) {
		out = append(out, StackSetting{Setting: setting, Stack: stack, Benchmark: benchmark, Differs: stack != benchmark})
	}
	benchProcs := "default"
	if cfg.ServiceProcs > 0 {
		benchProcs = strconv.Itoa(cfg.ServiceProcs)
	}
	pids := map[string]int{}
	for _, p := range []struct{ name, addr string }{{"router", t.router}, {"hubu", t.hubu}, {"gongbu", t.gongbu}, {"mockflux", t.flux}} {
		pid, err := pidListening(p.addr)
		if err != nil {
			add(p.name+" GOMAXPROCS", "unknown: "+err.Error(), benchProcs)
			continue
		}
		pids[p.name] = pid
		add(p.name+" GOMAXPROCS", gomaxprocsOf(pid), benchProcs)
	}
	flux, ok := pids["mockflux"]
	if ok {
		add("mockflux pending polls", processSetting(flux, "pending-polls", "MOCKFLUX_PENDING_POLLS", mockfluxPendingPolls, false), benchmarkPendingPolls)
		add("mockflux render time", durationSetting(processSetting(flux, "render-time", "MOCKFLUX_RENDER_TIME", "0s", false)), cfg.RenderTime.String())
		add("mockflux honours idempotency keys", processSetting(flux, "honour-idempotency", "MOCKFLUX_HONOUR_IDEMPOTENCY", "false", true),
			strconv.FormatBool(!cfg.ProviderIgnoresKeys))
	}
	if pid, ok := pids["gongbu"]; ok {
		add("Gongbu relies on idempotency keys", processSetting(pid, "flux-idempotent", "GONGBU_FLUX_IDEMPOTENT", "false", true),
			strconv.FormatBool(!cfg.ProviderIgnoresKeys))
	}
	return out
}

// durationSetting writes a duration as time.Duration does, so that 0 and 0s compare equal.
func durationSetting(v string) string {
	if d, err := time.ParseDuration(v); err == nil {
		return d.String()
	}
	return v
}

// processSetting is the value process pid runs with for a setting of kit/command's kind:
// flag --name on its command line (/proc/<pid>/cmdline), else the variable env in its
// environment (/proc/<pid>/environ), else def. A boolean flag given alone is true.
func processSetting(pid int, name, env, def string, boolean bool) string {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "unknown: " + err.Error()
	}
	if v, ok := flagValue(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), name, boolean); ok {
		return v
	}
	v, err := environValue(pid, env)
	switch {
	case err != nil:
		return "unknown: " + err.Error()
	case v != "":
		if boolean {
			if b, err := strconv.ParseBool(v); err == nil {
				return strconv.FormatBool(b)
			}
		}
		return v
	}
	return def
}

// flagValue finds flag name among a command line's arguments as Go's flag package reads them
// (-name or --name, =value or the next argument; a boolean takes only =value), the last one
// winning; it stops at "--" or the first argument that is not a flag after the subcommand.
func flagValue(args []string, name string, boolean bool) (string, bool) {
	var value string
	found := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue // the program's subcommand (serve), or another flag's value
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		k, v, hasValue := strings.Cut(a, "=")
		if k != name {
			continue
		}
		switch {
		case hasValue:
			value = v
		case boolean:
			value = "true"
		case i+1 < len(args):
			i++
			value = args[i]
		default:
			continue
		}
		if boolean {
			if b, err := strconv.ParseBool(value); err == nil {
				value = strconv.FormatBool(b)
			}
		}
		found = true
	}
	return value, found
}

// demoAgent is the agent the running stack's router acts for, and its policy before the run.
type demoAgent struct {
	id     hubuapi.AgentID
	name   string
	policy hubuapi.Policy
}

// agentToken is the token the router acts with: HUBU_AGENT_TOKEN in the router's own
// environment, which is the agent every spend of the run is made for; else the env file's.
func (rs *runningStack) routerAgentToken() string {
	if pid, err := pidListening(rs.router); err == nil {
		if v, err := environValue(pid, "HUBU_AGENT_TOKEN"); err == nil && v != "" {
			return v
		}
	}
	return rs.agentToken
}

// raiseDemoAgent finds the agent the router acts for (Hubu's capabilities for its token),
// keeps its policy and raises its budget as the load test's own stack does.
func (rs *runningStack) raiseDemoAgent(ctx context.Context) (*demoAgent, error) {
	agent, err := hubuapi.NewClientWithResponses(rs.hubuURL, hubuapi.WithRequestEditorFn(withBearer(rs.routerAgentToken())))
	if err != nil {
		return nil, err
	}
	caps, err := agent.GetCapabilitiesWithResponse(ctx)
	if err != nil {
		return nil, fmt.Errorf("find the demo agent (GET /v1/capabilities): %v", err)
	}
	if caps.JSON200 == nil {
		return nil, fmt.Errorf("find the demo agent (GET /v1/capabilities): HTTP %d: %s", caps.StatusCode(), caps.Body)
	}
	op, err := operatorClient(rs.hubuURL, rs.operatorToken)
	if err != nil {
		return nil, err
	}
	got, err := op.GetAgentWithResponse(ctx, caps.JSON200.AgentId)
	if err != nil {
		return nil, fmt.Errorf("read the demo agent's policy: %v", err)
	}
	if got.JSON200 == nil {
		return nil, fmt.Errorf("read the demo agent's policy: HTTP %d: %s", got.StatusCode(), got.Body)
	}
	a := &demoAgent{id: got.JSON200.Id, name: got.JSON200.Name, policy: got.JSON200.Policy}
	if err := setPolicy(ctx, op, a.id, generousPolicy()); err != nil {
		return nil, fmt.Errorf("raise the demo agent's budget: %v", err)
	}
	return a, nil
}

// restore puts the agent's policy back as it was before the run, and says how much of its
// budget the period has used (the run's spends count in it).
func (rs *runningStack) restore(ctx context.Context, a *demoAgent) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	op, err := operatorClient(rs.hubuURL, rs.operatorToken)
	if err != nil {
		return "", err
	}
	if err := setPolicy(ctx, op, a.id, a.policy); err != nil {
		return "", err
	}
	said := fmt.Sprintf("agent %s (%s): its policy was raised for the run and restored after it", a.name, a.id)
	agent, err := hubuapi.NewClientWithResponses(rs.hubuURL, hubuapi.WithRequestEditorFn(withBearer(rs.routerAgentToken())))
	if err != nil {
		return said, nil
	}
	if caps, err := agent.GetCapabilitiesWithResponse(ctx); err == nil && caps.JSON200 != nil {
		b := caps.JSON200.Budget
		said += fmt.Sprintf("; the run's spends count in its budget: %s of %s used this %s", dollars(b.UsedMicros), dollars(b.LimitMicros), b.Period)
		if b.RemainingMicros <= 0 {
			said += " (none left: it is refused until the period ends, or raise its policy)"
		}
	}
	return said, nil
}

func setPolicy(ctx context.Context, op *hubuapi.ClientWithResponses, id hubuapi.AgentID, p hubuapi.Policy) error {
	resp, err := op.SetAgentPolicyWithResponse(ctx, id, p)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode(), resp.Body)
	}
	return nil
}

func dollars(micros int64) string { return fmt.Sprintf("$%.2f", float64(micros)/1e6) }

// runAgainstStack runs the latency and sessions scenarios through the running stack of
// cfg.Stack, with its demo agent's budget raised for the run and its policy restored after it,
// whatever happened. restoreErr is a policy that could not be restored.
func runAgainstStack(ctx context.Context, cfg Config, rep *Report) (runErr, restoreErr error) {
	rs, err := loadRunningStack(cfg.Stack)
	if err != nil {
		return err, nil
	}
	rep.Stack = &StackReport{File: cfg.Stack, Settings: stackSettings(cfg, rs.target), Postgres: postgresNote(cfg, rs)}
	cfg.say("against the running stack of %s (router %s)", cfg.Stack, rs.routerMCPURL)
	a, err := rs.raiseDemoAgent(ctx)
	if err != nil {
		return err, nil
	}
	cfg.say("raised the budget of the demo agent %s (%s) for the run; its policy is restored at the end", a.name, a.id)
	defer func() {
		said, err := rs.restore(ctx, a)
		if err != nil {
			restoreErr = fmt.Errorf("could not restore the policy of the demo agent %s (%s): %v; set it again with hubuctl", a.name, a.id, err)
			rep.Stack.DemoAgent = restoreErr.Error()
			cfg.say("%v", restoreErr)
			return
		}
		rep.Stack.DemoAgent = said
		cfg.say("restored the policy of the demo agent %s", a.name)
	}()
	return runScenarios(ctx, cfg, rs.target, rep, true), nil
}

// postgresNote says whose Postgres the Postgres figures are of: the server of --database-url,
// and whether the stack's Hubu uses that one (its environment says, when it can be read).
func postgresNote(cfg Config, rs *runningStack) string {
	server := serverAddr(cfg.ServerURL)
	note := fmt.Sprintf("the contract floor's Postgres commits and the Postgres CPU are of the server of --database-url (%s)", cmp.Or(server, "a Unix socket"))
	pid, err := pidListening(rs.hubu)
	if err != nil {
		return note
	}
	dbURL, err := environValue(pid, "HUBU_DATABASE_URL")
	if err != nil || dbURL == "" {
		return note + "; whether the stack's Hubu uses it is not known"
	}
	if used := serverAddr(dbURL); used != server {
		return note + fmt.Sprintf(", not the stack's (its Hubu uses %s): they are not the stack's Postgres", cmp.Or(used, "a Unix socket"))
	}
	return note + ", which the stack's Hubu uses too"
}

// fluxClient is the generated client of the target's mockflux.
func (t *target) fluxClient() (*bflapi.ClientWithResponses, error) {
	return bflapi.NewClientWithResponses(t.fluxURL)
}
